//! `ai-memory install <harness>`: register the hooks and the MCP server in a harness's own
//! configuration. Idempotent (a second run changes nothing), a backup of every file it changes
//! first (under the data directory), and a hook command that never changes between releases
//! (`ai-memory hook <event> --harness <name>`, found on PATH), so a harness that trusts hooks
//! by their command string (Codex) keeps trusting it after an upgrade.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// The events each harness gets, with its own event names.
const CLAUDE_EVENTS: &[(&str, &str)] = &[
    ("SessionStart", "session-start"),
    ("UserPromptSubmit", "prompt-submit"),
    ("SessionEnd", "session-end"),
];
/// Codex has no session-end event.
const CODEX_EVENTS: &[(&str, &str)] =
    &[("SessionStart", "session-start"), ("UserPromptSubmit", "prompt-submit")];

/// The tool hook: the files an edit or write tool names go into the session's handoff.
const TOOL_EVENT: (&str, &str) = ("PostToolUse", "tool-use");
/// Claude Code's edit and write tools (aerix's `write` and `edit` match them too): other tool
/// calls do not start a hook at all. Codex's hook gets every tool (its patches come through
/// `apply_patch` or a shell call), and the hook client drops the ones naming no file.
const EDIT_TOOLS: &str = "Write|Edit|MultiEdit|NotebookEdit";

pub fn hook_command(event: &str, harness: &str) -> String {
    format!("ai-memory hook {event} --harness {harness}")
}

/// One file an install writes.
struct Edit {
    path: PathBuf,
    new: String,
}

fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from).context("HOME is not set")
}

fn config_home() -> anyhow::Result<PathBuf> {
    match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(x) => Ok(PathBuf::from(x)),
        None => Ok(home()?.join(".config")),
    }
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(json!({})),
        Ok(text) => {
            let v: Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not valid JSON; fix it first", path.display()))?;
            if !v.is_object() {
                bail!("{} does not hold a JSON object", path.display());
            }
            Ok(v)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Adds a command handler for each event to a Claude Code shaped `hooks` object, unless one
/// with the same command is there.
fn add_hooks(root: &mut Value, events: &[(&str, &str)], harness: &str) {
    for (name, event) in events {
        add_hook(root, name, event, harness, None);
    }
}

/// Adds one command handler (with a matcher, for a tool event), unless one with the same
/// command is there.
fn add_hook(root: &mut Value, name: &str, event: &str, harness: &str, matcher: Option<&str>) {
    let hooks = root.as_object_mut().map(|o| o.entry("hooks").or_insert_with(|| json!({})));
    let Some(Value::Object(hooks)) = hooks else { return };
    let command = hook_command(event, harness);
    let groups = hooks.entry(name.to_string()).or_insert_with(|| json!([]));
    let Value::Array(groups) = groups else { return };
    let present = groups.iter().any(|g| {
        g["hooks"].as_array().is_some_and(|hs| hs.iter().any(|h| h["command"] == command.as_str()))
    });
    if !present {
        let mut group =
            json!({ "hooks": [{ "type": "command", "command": command, "timeout": 30 }] });
        if let Some(m) = matcher {
            group["matcher"] = json!(m);
        }
        groups.push(group);
    }
}

fn json_edit(path: PathBuf, f: impl FnOnce(&mut Value)) -> anyhow::Result<Edit> {
    let mut v = read_json(&path)?;
    f(&mut v);
    Ok(Edit { new: format!("{}\n", serde_json::to_string_pretty(&v)?), path })
}

const STDIO_ARGS: [&str; 1] = ["mcp"];

fn claude_code() -> anyhow::Result<Vec<Edit>> {
    let home = home()?;
    Ok(vec![
        json_edit(home.join(".claude/settings.json"), |v| {
            add_hooks(v, CLAUDE_EVENTS, "claude-code");
            add_hook(v, TOOL_EVENT.0, TOOL_EVENT.1, "claude-code", Some(EDIT_TOOLS));
        })?,
        json_edit(home.join(".claude.json"), |v| {
            if let Some(o) = v.as_object_mut() {
                let servers = o.entry("mcpServers").or_insert_with(|| json!({}));
                if let Some(s) = servers.as_object_mut() {
                    s.insert(
                        "ai-memory".into(),
                        json!({ "type": "stdio", "command": "ai-memory", "args": STDIO_ARGS }),
                    );
                }
            }
        })?,
    ])
}

/// A harness's directory (`$VAR`, else `~/DEFAULT`), its `config.toml` path and that file
/// parsed (empty when it does not exist yet).
fn toml_config(
    var: &str,
    default: &str,
) -> anyhow::Result<(PathBuf, PathBuf, toml_edit::DocumentMut)> {
    let dir = match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => home()?.join(default),
    };
    let config = dir.join("config.toml");
    let text = match std::fs::read_to_string(&config) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", config.display())),
    };
    let doc = text
        .parse()
        .with_context(|| format!("{} is not valid TOML; fix it first", config.display()))?;
    Ok((dir, config, doc))
}

fn codex() -> anyhow::Result<Vec<Edit>> {
    let (dir, config, mut doc) = toml_config("CODEX_HOME", ".codex")?;
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        toml_edit::Item::Table(t)
    });
    let Some(servers) = servers.as_table_mut() else {
        bail!("{}: `mcp_servers` is not a table", config.display())
    };
    let mut server = toml_edit::Table::new();
    server.insert("command", toml_edit::value("ai-memory"));
    let mut args = toml_edit::Array::new();
    args.push("mcp");
    server.insert("args", toml_edit::value(args));
    let same = servers.get("ai-memory").and_then(|s| s.as_table()).is_some_and(|t| {
        t.get("command").and_then(|c| c.as_str()) == Some("ai-memory")
            && t.get("args")
                .and_then(|a| a.as_array())
                .is_some_and(|a| a.iter().map(|v| v.as_str()).eq([Some("mcp")]))
    });
    if !same {
        servers.insert("ai-memory", toml_edit::Item::Table(server));
    }
    Ok(vec![
        Edit { path: config, new: doc.to_string() },
        json_edit(dir.join("hooks.json"), |v| {
            add_hooks(v, CODEX_EVENTS, "codex");
            add_hook(v, TOOL_EVENT.0, TOOL_EVENT.1, "codex", None);
        })?,
    ])
}

/// The OpenCode plugin: OpenCode's plugins observe session events, and only the system-prompt
/// transform can add context, so the plugin keeps each session's start context and adds it
/// there.
pub const OPENCODE_PLUGIN: &str = r#"// ai-memory for OpenCode, written by `ai-memory install opencode`. Edits are overwritten.
const hook = async ($, event, payload) => {
  try {
    const input = new Response(JSON.stringify(payload));
    const out = await $`ai-memory hook ${event} --harness opencode < ${input}`.quiet().nothrow().text();
    return out.trim() ? JSON.parse(out) : null;
  } catch {
    return null;
  }
};

export const AiMemory = async ({ $, directory }) => {
  const contexts = new Map();
  const calls = new Map();
  return {
    event: async ({ event }) => {
      const id = event.properties?.info?.id ?? event.properties?.sessionID;
      if (!id) return;
      if (event.type === "session.created") {
        const out = await hook($, "session-start", { session_id: id, cwd: directory, hook_event_name: "SessionStart", source: "startup" });
        const context = out?.hookSpecificOutput?.additionalContext;
        if (context) contexts.set(id, context);
      } else if (event.type === "session.deleted") {
        contexts.delete(id);
        await hook($, "session-end", { session_id: id, cwd: directory, hook_event_name: "SessionEnd", reason: "deleted" });
      }
    },
    // The files an edit or write tool names (its arguments, never its output), after it ran.
    "tool.execute.before": async (input, output) => {
      if (/write|edit|patch/i.test(input.tool)) calls.set(input.callID, output.args);
    },
    "tool.execute.after": async (input) => {
      const args = input.args ?? calls.get(input.callID);
      calls.delete(input.callID);
      if (args) await hook($, "tool-use", { session_id: input.sessionID, cwd: directory, hook_event_name: "PostToolUse", tool_name: input.tool, tool_input: args });
    },
    "chat.message": async (input, output) => {
      const prompt = (output.parts ?? []).filter((p) => p.type === "text" && !p.synthetic).map((p) => p.text).join("\n");
      if (prompt) await hook($, "prompt-submit", { session_id: input.sessionID, cwd: directory, hook_event_name: "UserPromptSubmit", prompt });
    },
    "experimental.chat.system.transform": async (input, output) => {
      const context = contexts.get(input.sessionID);
      if (context) output.system.push(context);
    },
  };
};
"#;

fn opencode() -> anyhow::Result<Vec<Edit>> {
    let dir = config_home()?.join("opencode");
    Ok(vec![
        json_edit(dir.join("opencode.json"), |v| {
            if let Some(o) = v.as_object_mut() {
                let mcp = o.entry("mcp").or_insert_with(|| json!({}));
                if let Some(m) = mcp.as_object_mut() {
                    m.insert("ai-memory".into(), json!({ "type": "local", "command": ["ai-memory", "mcp"], "enabled": true }));
                }
            }
        })?,
        Edit { path: dir.join("plugins/ai-memory.js"), new: OPENCODE_PLUGIN.to_owned() },
    ])
}

/// aerix takes hooks in Claude Code's shape; ai-memory's go in their own file beside aerix's
/// `settings.toml`, where the MCP server goes in as `[mcp.servers.ai-memory]` (the file's other
/// content kept as it is).
fn aerix() -> anyhow::Result<Vec<Edit>> {
    let dir = config_home()?.join("aerix");
    let settings = dir.join("settings.toml");
    let text = match std::fs::read_to_string(&settings) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", settings.display())),
    };
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not valid TOML; fix it first", settings.display()))?;
    let implicit = || {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        toml_edit::Item::Table(t)
    };
    let Some(mcp) = doc.entry("mcp").or_insert_with(implicit).as_table_mut() else {
        bail!("{}: `mcp` is not a table", settings.display())
    };
    let Some(servers) = mcp.entry("servers").or_insert_with(implicit).as_table_mut() else {
        bail!("{}: `mcp.servers` is not a table", settings.display())
    };
    let same = servers.get("ai-memory").and_then(|s| s.as_table()).is_some_and(|t| {
        t.get("command").and_then(|c| c.as_str()) == Some("ai-memory")
            && t.get("args")
                .and_then(|a| a.as_array())
                .is_some_and(|a| a.iter().map(|v| v.as_str()).eq(STDIO_ARGS.map(Some)))
    });
    if !same {
        let mut server = toml_edit::Table::new();
        server.insert("command", toml_edit::value("ai-memory"));
        server
            .insert("args", toml_edit::value(STDIO_ARGS.into_iter().collect::<toml_edit::Array>()));
        servers.insert("ai-memory", toml_edit::Item::Table(server));
    }
    Ok(vec![
        Edit { path: settings, new: doc.to_string() },
        json_edit(dir.join("hooks.json"), |v| {
            add_hooks(v, CLAUDE_EVENTS, "aerix");
            add_hook(v, TOOL_EVENT.0, TOOL_EVENT.1, "aerix", Some(EDIT_TOOLS));
        })?,
    ])
}

/// Kimi Code: `[[hooks]]` tables in `$KIMI_CODE_HOME/config.toml` (default `~/.kimi-code`;
/// each table takes only `event`, `matcher`, `command` and `timeout`, and any other key fails
/// the whole file, so none is added), and the MCP server in `mcp.json` beside it.
fn kimi_code() -> anyhow::Result<Vec<Edit>> {
    let (dir, config, mut doc) = toml_config("KIMI_CODE_HOME", ".kimi-code")?;
    let hooks = doc
        .entry("hooks")
        .or_insert_with(|| toml_edit::Item::ArrayOfTables(toml_edit::ArrayOfTables::new()));
    let Some(hooks) = hooks.as_array_of_tables_mut() else {
        bail!("{}: `hooks` is not an array of tables (`[[hooks]]`)", config.display())
    };
    for (event, arg) in CLAUDE_EVENTS {
        let command = hook_command(arg, "kimi-code");
        if hooks.iter().any(|t| t.get("command").and_then(|c| c.as_str()) == Some(command.as_str()))
        {
            continue;
        }
        let mut table = toml_edit::Table::new();
        table.insert("event", toml_edit::value(*event));
        table.insert("command", toml_edit::value(command));
        table.insert("timeout", toml_edit::value(30));
        hooks.push(table);
    }
    Ok(vec![
        Edit { path: config, new: doc.to_string() },
        json_edit(dir.join("mcp.json"), |v| {
            if let Some(o) = v.as_object_mut() {
                let servers = o.entry("mcpServers").or_insert_with(|| json!({}));
                if let Some(s) = servers.as_object_mut() {
                    s.insert(
                        "ai-memory".into(),
                        json!({ "command": "ai-memory", "args": STDIO_ARGS }),
                    );
                }
            }
        })?,
    ])
}

/// Writes the harness's configuration; returns one line per file: changed (with its backup),
/// or unchanged.
pub fn install(data_dir: &Path, harness: &str, dry_run: bool) -> anyhow::Result<Vec<String>> {
    let edits = match harness {
        "claude-code" => claude_code()?,
        "codex" => codex()?,
        "opencode" => opencode()?,
        "aerix" => aerix()?,
        "kimi-code" => kimi_code()?,
        other => bail!("unknown harness `{other}`: use {}", crate::hook::HARNESSES.join(", ")),
    };
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut lines = Vec::new();
    for edit in edits {
        let old = std::fs::read_to_string(&edit.path).ok();
        if old.as_deref() == Some(edit.new.as_str()) {
            lines.push(format!("unchanged {}", edit.path.display()));
            continue;
        }
        if dry_run {
            lines.push(format!("would write {}:\n{}", edit.path.display(), edit.new));
            continue;
        }
        let mut line = format!("wrote {}", edit.path.display());
        if let Some(old) = old {
            let name = edit.path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
            let backup =
                data_dir.join("backups/install").join(harness).join(format!("{stamp}-{name}"));
            if let Some(dir) = backup.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&backup, old)
                .with_context(|| format!("backing up to {}", backup.display()))?;
            line.push_str(&format!(" (backup: {})", backup.display()));
        }
        if let Some(dir) = edit.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = edit.path.with_extension("ai-memory-tmp");
        std::fs::write(&tmp, &edit.new)?;
        std::fs::rename(&tmp, &edit.path)?;
        lines.push(line);
    }
    Ok(lines)
}
