//! Plugins in Claude Code's layout: a directory with an optional `.claude-plugin/plugin.json`
//! (only `name` is read; without it the directory's name), `skills/`, `commands/`, `agents/`
//! and `hooks/hooks.json`. Which load: the names in aerix's `plugins.enabled` (found in
//! aerix's plugin directories, or `name@marketplace` among Claude Code's installed plugins),
//! and, unless `plugins.claude_code = false`, the plugins Claude Code's settings enable
//! (`enabledPlugins`), found through `~/.claude/plugins/installed_plugins.json`. A plugin that
//! cannot be used is one note and is skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::load::MAX_ENTRIES;

/// Where plugins come from and which are enabled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    /// Directories holding plugin directories, the first winning a name.
    pub dirs: Vec<PathBuf>,
    /// aerix's `plugins.enabled`, in order.
    pub enabled: Vec<String>,
    /// Where an aerix plugin's `CLAUDE_PLUGIN_DATA` directories go.
    pub data: Option<PathBuf>,
    /// Claude Code's installed plugins; `None`: not read.
    pub claude: Option<ClaudeCode>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaudeCode {
    /// `~/.claude`: `plugins/installed_plugins.json`, `plugins/data/<id>/`.
    pub home: PathBuf,
    /// The settings files whose `enabledPlugins` count, a later one winning a key.
    pub settings: Vec<PathBuf>,
    /// The project root, to prefer a project-scoped install of it.
    pub project: PathBuf,
}

impl Sources {
    /// `<root>/.aerix/plugins/` then `$XDG_CONFIG_HOME/aerix/plugins/`; with `claude_code`,
    /// Claude Code's `~/.claude/settings.json`, `<root>/.claude/settings.json` and
    /// `<root>/.claude/settings.local.json`.
    pub fn standard(
        env: &aerix_config::Env,
        root: &Path,
        enabled: &[String],
        claude_code: bool,
    ) -> Sources {
        let mut dirs = vec![root.join(".aerix/plugins")];
        dirs.extend(env.config_home().map(|c| c.join("aerix/plugins")));
        let claude = env.home.as_ref().filter(|_| claude_code).map(|home| ClaudeCode {
            home: home.join(".claude"),
            settings: vec![
                home.join(".claude/settings.json"),
                root.join(".claude/settings.json"),
                root.join(".claude/settings.local.json"),
            ],
            project: root.to_owned(),
        });
        Sources {
            dirs,
            enabled: enabled.to_vec(),
            data: env.data_home().map(|d| d.join("aerix/plugins/data")),
            claude,
        }
    }
}

/// One enabled plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plugin {
    /// The namespace of its skills and agents (`name:skill`).
    pub name: String,
    /// As enabled: `name`, or Claude Code's `name@marketplace`.
    pub id: String,
    /// `CLAUDE_PLUGIN_ROOT`.
    pub root: PathBuf,
    /// `CLAUDE_PLUGIN_DATA` (created when its hooks run, not here).
    pub data: Option<PathBuf>,
}

impl Plugin {
    pub fn agents_dir(&self) -> PathBuf {
        self.root.join("agents")
    }

    pub fn hooks_file(&self) -> PathBuf {
        self.root.join("hooks/hooks.json")
    }

    /// The environment its hook handlers run with.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![("CLAUDE_PLUGIN_ROOT".to_owned(), self.root.display().to_string())];
        if let Some(data) = &self.data {
            env.push(("CLAUDE_PLUGIN_DATA".to_owned(), data.display().to_string()));
        }
        env
    }
}

#[derive(Clone, Debug, Default)]
pub struct Loaded {
    pub plugins: Vec<Plugin>,
    pub notes: Vec<String>,
}

/// The enabled plugins, aerix's list first, then Claude Code's (by key); a second plugin of a
/// name is a note and is skipped.
pub fn discover(sources: &Sources) -> Loaded {
    let mut out = Loaded::default();
    let installed = sources.claude.as_ref().map(|c| installed(c, &mut out.notes));
    let mut wanted: Vec<String> = Vec::new();
    let claude = sources.claude.as_ref().map(|c| claude_enabled(c, &mut out.notes));
    for id in sources.enabled.iter().chain(claude.iter().flatten()) {
        if !wanted.contains(id) {
            wanted.push(id.clone());
        }
    }
    let mut local: Option<Scanned> = None;
    for id in wanted {
        let found = if id.contains('@') {
            let (Some(claude), Some(installed)) = (&sources.claude, &installed) else {
                out.notes.push(format!(
                    "plugins: `{id}` is enabled, but Claude Code's plugins are not read (`plugins.claude_code`); skipped"
                ));
                continue;
            };
            match installed.get(&id) {
                Some(root) => {
                    let data = claude.home.join("plugins/data").join(data_id(&id));
                    read_plugin(root).map(|name| (name, root.clone(), Some(data)))
                }
                None => Err(format!(
                    "`{id}` is enabled, but {} does not list it (install it with Claude Code)",
                    claude.home.join("plugins/installed_plugins.json").display()
                )),
            }
        } else {
            let scanned = local.get_or_insert_with(|| scan(&sources.dirs));
            match scanned.by_name.get(&id) {
                Some(root) => {
                    let data = sources.data.as_ref().map(|d| d.join(data_id(&id)));
                    Ok((id.clone(), root.clone(), data))
                }
                None => Err(match scanned.broken.get(&id) {
                    Some(why) => why.clone(),
                    None => format!(
                        "`{id}` is enabled, but no plugin of that name is in {}",
                        sources
                            .dirs
                            .iter()
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                }),
            }
        };
        match found {
            Ok((name, root, data)) => {
                if let Some(first) = out.plugins.iter().find(|p| p.name == name) {
                    out.notes.push(format!(
                        "plugins: {}: a plugin named `{name}` is already loaded from {}; skipped",
                        root.display(),
                        first.root.display()
                    ));
                    continue;
                }
                out.plugins.push(Plugin { name, id, root, data });
            }
            Err(why) => out.notes.push(format!("plugins: {why}; skipped")),
        }
    }
    out
}

/// The plugins of aerix's directories by name, and why a directory could not be used (by its
/// directory name).
#[derive(Default)]
struct Scanned {
    by_name: BTreeMap<String, PathBuf>,
    broken: BTreeMap<String, String>,
}

fn scan(dirs: &[PathBuf]) -> Scanned {
    let mut out = Scanned::default();
    for dir in dirs {
        let Ok(read) = std::fs::read_dir(dir) else { continue };
        let mut paths: Vec<PathBuf> = read.flatten().take(MAX_ENTRIES).map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            if !std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            let dir_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            match read_plugin(&path) {
                Ok(name) => {
                    out.by_name.entry(name).or_insert(path);
                }
                Err(why) => {
                    if let Some(dir_name) = dir_name {
                        out.broken.entry(dir_name).or_insert(why);
                    }
                }
            }
        }
    }
    out
}

/// A plugin directory's name: `plugin.json`'s `name`, else the directory's. Why it cannot be
/// used otherwise (the text names the file).
pub fn read_plugin(root: &Path) -> Result<String, String> {
    if let Err(e) = std::fs::read_dir(root) {
        return Err(format!("{}: {e}", root.display()));
    }
    let manifest = root.join(".claude-plugin/plugin.json");
    let dir_name =
        || root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let text = match std::fs::read_to_string(&manifest) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return checked(dir_name(), root),
        Err(e) => return Err(format!("{}: {e}", manifest.display())),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not valid JSON ({e})", manifest.display()))?;
    match value.get("name") {
        _ if !value.is_object() => Err(format!("{}: not a JSON object", manifest.display())),
        None | Some(Value::Null) => checked(dir_name(), root),
        Some(Value::String(name)) => checked(name.trim().to_owned(), &manifest),
        Some(_) => Err(format!("{}: `name` is not a string", manifest.display())),
    }
}

/// A plugin name is one skill-name component: it namespaces `plugin:skill`.
fn checked(name: String, source: &Path) -> Result<String, String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(name)
    } else {
        Err(format!(
            "{}: `{name}` is not a plugin name (letters, digits, `-`, `_`, `.`)",
            source.display()
        ))
    }
}

/// Claude Code's data directory name for an id: every character but letters, digits, `_` and
/// `-` becomes `-`.
fn data_id(id: &str) -> String {
    id.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' })
        .collect()
}

/// The keys set `true` in the files' `enabledPlugins`, a later file winning a key.
fn claude_enabled(claude: &ClaudeCode, notes: &mut Vec<String>) -> Vec<String> {
    let mut enabled: BTreeMap<String, bool> = BTreeMap::new();
    for path in &claude.settings {
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        let value: Value = match serde_json::from_str(&text) {
            Ok(value) => value,
            Err(e) => {
                notes.push(format!(
                    "plugins: {}: not valid JSON ({e}); its `enabledPlugins` are not read",
                    path.display()
                ));
                continue;
            }
        };
        match value.get("enabledPlugins") {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (id, on) in map {
                    match on {
                        Value::Bool(on) => {
                            enabled.insert(id.clone(), *on);
                        }
                        _ => notes.push(format!(
                            "plugins: {}: `enabledPlugins.{id}` is not true or false; ignored",
                            path.display()
                        )),
                    }
                }
            }
            Some(_) => notes.push(format!(
                "plugins: {}: `enabledPlugins` is not an object; ignored",
                path.display()
            )),
        }
    }
    enabled.into_iter().filter(|(_, on)| *on).map(|(id, _)| id).collect()
}

/// `installed_plugins.json`'s install paths by `name@marketplace`: an entry of this project
/// first, else the first listed (version 2 lists entries per id; version 1 held one object).
fn installed(claude: &ClaudeCode, notes: &mut Vec<String>) -> BTreeMap<String, PathBuf> {
    let path = claude.home.join("plugins/installed_plugins.json");
    let mut out = BTreeMap::new();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            notes.push(format!(
                "plugins: {}: {e}; Claude Code's plugins are skipped",
                path.display()
            ));
            return out;
        }
    };
    let Some(Value::Object(plugins)) =
        serde_json::from_str::<Value>(&text).ok().and_then(|v| v.get("plugins").cloned())
    else {
        notes.push(format!(
            "plugins: {}: not JSON with a `plugins` object; Claude Code's plugins are skipped",
            path.display()
        ));
        return out;
    };
    let project = claude.project.display().to_string();
    for (id, entries) in plugins {
        let entries = match entries {
            Value::Array(entries) => entries,
            entry @ Value::Object(_) => vec![entry],
            _ => continue,
        };
        let path_of = |e: &Value| e.get("installPath").and_then(Value::as_str).map(PathBuf::from);
        let ours =
            entries.iter().find(|e| e.get("projectPath").and_then(Value::as_str) == Some(&project));
        if let Some(root) = ours.or(entries.first()).and_then(path_of) {
            out.insert(id, root);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn enabled_plugins_load_from_aerix_dirs_and_claude_code_installs() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let dirs = vec![t.join("project"), t.join("user")];
        write(&t.join("project/fmt/.claude-plugin/plugin.json"), r#"{"name": "formatter"}"#);
        write(&t.join("user/lint/skills/x/SKILL.md"), "x");
        write(&t.join("user/broken/.claude-plugin/plugin.json"), "{not json");
        let cache = t.join("claude/plugins/cache/mkt/review/1.0.0");
        write(
            &cache.join(".claude-plugin/plugin.json"),
            r#"{"name": "review", "version": "1.0.0"}"#,
        );
        write(
            &t.join("claude/plugins/installed_plugins.json"),
            &format!(
                r#"{{"version": 2, "plugins": {{"review@mkt": [{{"scope": "user", "installPath": "{}"}}]}}}}"#,
                cache.display()
            ),
        );
        write(
            &t.join("claude/settings.json"),
            r#"{"enabledPlugins": {"review@mkt": true, "off@mkt": false}}"#,
        );
        write(&t.join("local.json"), r#"{"enabledPlugins": {"gone@mkt": true}}"#);
        let sources = Sources {
            dirs,
            enabled: ["formatter", "lint", "broken", "nowhere", "lint"].map(String::from).to_vec(),
            data: Some(t.join("data")),
            claude: Some(ClaudeCode {
                home: t.join("claude"),
                settings: vec![t.join("claude/settings.json"), t.join("local.json")],
                project: t.join("p"),
            }),
        };
        let loaded = discover(&sources);
        let names: Vec<(&str, &str)> =
            loaded.plugins.iter().map(|p| (p.name.as_str(), p.id.as_str())).collect();
        assert_eq!(names, [("formatter", "formatter"), ("lint", "lint"), ("review", "review@mkt")]);
        assert_eq!(loaded.plugins[0].root, t.join("project/fmt"));
        assert_eq!(loaded.plugins[2].data, Some(t.join("claude/plugins/data/review-mkt")));
        let notes = loaded.notes.join("\n");
        assert_eq!(loaded.notes.len(), 3, "{notes}");
        assert!(notes.contains("plugin.json: not valid JSON"), "{notes}");
        assert!(notes.contains("`nowhere` is enabled, but no plugin of that name"), "{notes}");
        assert!(notes.contains("`gone@mkt` is enabled, but"), "{notes}");
    }

    #[test]
    fn a_plugin_s_name_is_its_manifest_s_or_its_directory_s() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        std::fs::create_dir_all(t.join("plain")).unwrap();
        assert_eq!(read_plugin(&t.join("plain")), Ok("plain".to_owned()));
        write(&t.join("odd/.claude-plugin/plugin.json"), r#"{"name": "a b"}"#);
        assert!(read_plugin(&t.join("odd")).unwrap_err().contains("not a plugin name"));
        write(&t.join("num/.claude-plugin/plugin.json"), r#"{"name": 3}"#);
        assert!(read_plugin(&t.join("num")).unwrap_err().contains("`name` is not a string"));
        assert!(read_plugin(&t.join("missing")).is_err());
    }
}
