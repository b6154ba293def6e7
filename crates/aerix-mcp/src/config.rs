//! Where servers are declared: aerix's `[mcp.servers.<name>]` (the settings, already trust-
//! gated by `aerix-config`), Claude Code's `.mcp.json` at the project root (the repository's:
//! started only when trusted) and `~/.claude.json` (`mcpServers` and
//! `projects.<root>.mcpServers`: the user's own file). `${VAR}` and `${VAR:-default}` in a
//! value are expanded from the environment, as Claude Code does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aerix_config::McpServer;
use serde_json::Value;

/// How a server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio { command: String, args: Vec<String>, env: BTreeMap<String, String> },
    Http { url: String, headers: BTreeMap<String, String> },
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }

    /// What it runs or reaches, one line (the trust survey's item).
    pub fn describe(&self) -> String {
        match self {
            Transport::Stdio { command, args, .. } => {
                std::iter::once(command).chain(args).cloned().collect::<Vec<_>>().join(" ")
            }
            Transport::Http { url, .. } => url.clone(),
        }
    }

    /// `describe` with the environment or headers as the file writes them (unexpanded): what
    /// a trust covers, so a changed `LD_PRELOAD` or header asks again.
    pub fn consent(&self) -> String {
        let pairs: Vec<String> = match self {
            Transport::Stdio { env, .. } => env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            Transport::Http { headers, .. } => {
                headers.iter().map(|(k, v)| format!("{k}: {v}")).collect()
            }
        };
        if pairs.is_empty() {
            self.describe()
        } else {
            format!("{} ({})", self.describe(), pairs.join(", "))
        }
    }
}

/// One declared server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub name: String,
    /// The file that declares it.
    pub source: PathBuf,
    /// A repository's file brought it: it starts only once the project is trusted.
    pub project: bool,
    pub transport: Transport,
}

/// What was declared, and a note for each entry that could not be read.
#[derive(Debug, Default)]
pub struct Declared {
    pub specs: Vec<Spec>,
    pub notes: Vec<String>,
}

/// The servers of every source; a later source's server of the same name replaces an earlier
/// one (`~/.claude.json`, then its project entry, then `.mcp.json`, then aerix's settings).
/// `settings` are `(file, servers)` as the settings files declare them (the user's first).
pub fn declared(
    home: Option<&Path>,
    root: &Path,
    settings: &[(PathBuf, bool, BTreeMap<String, McpServer>)],
) -> Declared {
    let mut out = Declared::default();
    if let Some(home) = home {
        let path = home.join(".claude.json");
        if let Some(json) = read_json(&path, &mut out.notes) {
            claude_servers(&path, &json["mcpServers"], false, &mut out);
            let key = root.display().to_string();
            claude_servers(&path, &json["projects"][&key]["mcpServers"], false, &mut out);
        }
    }
    let path = root.join(".mcp.json");
    if let Some(json) = read_json(&path, &mut out.notes) {
        claude_servers(&path, &json["mcpServers"], true, &mut out);
    }
    for (path, project, servers) in settings {
        for (name, server) in servers {
            let transport = match (&server.command, &server.url) {
                (Some(command), _) => Transport::Stdio {
                    command: command.clone(),
                    args: server.args.clone(),
                    env: server.env.clone(),
                },
                (None, Some(url)) => {
                    Transport::Http { url: url.clone(), headers: server.headers.clone() }
                }
                (None, None) => continue,
            };
            add(
                &mut out,
                Spec { name: name.clone(), source: path.clone(), project: *project, transport },
            );
        }
    }
    out
}

fn add(out: &mut Declared, spec: Spec) {
    out.specs.retain(|s| s.name != spec.name);
    out.specs.push(spec);
}

/// A JSON file that exists, or `None` (a broken one with a note).
fn read_json(path: &Path, notes: &mut Vec<String>) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    match serde_json::from_str(&text) {
        Ok(json) => Some(json),
        Err(e) => {
            notes.push(format!(
                "mcp: {} is not JSON ({e}); its servers are not started",
                path.display()
            ));
            None
        }
    }
}

/// Claude Code's `mcpServers` object.
fn claude_servers(path: &Path, servers: &Value, project: bool, out: &mut Declared) {
    let Some(servers) = servers.as_object() else { return };
    for (name, entry) in servers {
        match claude_transport(entry) {
            Ok(transport) if valid_name(name) => {
                add(out, Spec { name: name.clone(), source: path.to_owned(), project, transport });
            }
            Ok(_) => out.notes.push(format!(
                "mcp: server `{name}` of {}: a name has letters, digits, `-` and `_`, no `__`",
                path.display()
            )),
            Err(why) => out
                .notes
                .push(format!("mcp: server `{name}` of {}: {why}; not started", path.display())),
        }
    }
}

/// A server's name as tool names carry it.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains("__")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn strings(value: &Value) -> Result<BTreeMap<String, String>, String> {
    let Some(map) = value.as_object() else {
        return if value.is_null() { Ok(BTreeMap::new()) } else { Err("not an object".into()) };
    };
    map.iter()
        .map(|(k, v)| match v.as_str() {
            Some(s) => Ok((k.clone(), s.to_owned())),
            None => Err(format!("`{k}` is not a string")),
        })
        .collect()
}

fn claude_transport(entry: &Value) -> Result<Transport, String> {
    let kind = entry["type"].as_str().unwrap_or("stdio");
    match kind {
        "stdio" => {
            let command = entry["command"].as_str().ok_or("no `command`")?.to_owned();
            let args = match &entry["args"] {
                Value::Null => Vec::new(),
                Value::Array(a) => a
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned).ok_or("`args` holds a non-string"))
                    .collect::<Result<_, _>>()?,
                _ => return Err("`args` is not a list".into()),
            };
            let env = strings(&entry["env"]).map_err(|e| format!("`env`: {e}"))?;
            Ok(Transport::Stdio { command, args, env })
        }
        "http" => {
            let url = entry["url"].as_str().ok_or("no `url`")?.to_owned();
            let headers = strings(&entry["headers"]).map_err(|e| format!("`headers`: {e}"))?;
            Ok(Transport::Http { url, headers })
        }
        other => Err(format!("transport `{other}` is not supported (stdio and http are)")),
    }
}

/// `${VAR}` and `${VAR:-default}` expanded by `lookup`; an unset variable without a default
/// is an error naming it (Claude Code refuses to start such a server too).
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("`{text}` has an unclosed `${{`"));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (lookup(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(format!("environment variable `{name}` is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_expand_with_defaults_and_an_unset_one_is_named() {
        let lookup = |name: &str| (name == "TOKEN").then(|| "abc".to_owned());
        assert_eq!(expand("Bearer ${TOKEN}", &lookup).unwrap(), "Bearer abc");
        assert_eq!(expand("${PORT:-8080}/x", &lookup).unwrap(), "8080/x");
        assert!(expand("${NOPE}", &lookup).unwrap_err().contains("`NOPE`"));
    }

    #[test]
    fn sources_layer_and_the_project_file_is_marked() {
        let dir = std::env::temp_dir().join(format!("aerix-mcp-config-{}", std::process::id()));
        let (home, root) = (dir.join("home"), dir.join("repo"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        let claude = serde_json::json!({
            "mcpServers": {"a": {"command": "a-user"}, "bad": {"type": "sse", "url": "x"}},
            "projects": {root.display().to_string(): {"mcpServers": {"b": {"command": "b"}}}},
        });
        std::fs::write(home.join(".claude.json"), claude.to_string()).unwrap();
        std::fs::write(
            root.join(".mcp.json"),
            r#"{"mcpServers": {"a": {"command": "a-project", "args": ["x"]}, "h": {"type": "http", "url": "http://h/mcp", "headers": {"Authorization": "Bearer ${T}"}}}}"#,
        )
        .unwrap();
        let d = declared(Some(&home), &root, &[]);
        let names: Vec<(&str, bool)> =
            d.specs.iter().map(|s| (s.name.as_str(), s.project)).collect();
        assert_eq!(names, [("b", false), ("a", true), ("h", true)]);
        assert_eq!(d.specs[1].transport.describe(), "a-project x");
        let http = &d.specs[2].transport;
        assert_eq!(http.consent(), "http://h/mcp (Authorization: Bearer ${T})");
        assert!(d.notes.iter().any(|n| n.contains("`bad`") && n.contains("sse")), "{:?}", d.notes);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
