//! `aerix import claude [--project DIR]`: the project's Claude Code sessions
//! (`~/.claude/projects/<dir>/*.jsonl`) copied into its session store, tagged `claude-code`.
//! Each file is one line on stdout: what was imported, what was skipped and why.

use std::path::{Path, PathBuf};

use aerix_claude::import::{MAX_FILE_BYTES, read};
use aerix_session::{IndexEntry, Store};

use crate::exit::Exit;

pub const TAG: &str = "claude-code";

/// Claude Code's directory name for a working directory: every character that is not an ASCII
/// letter or digit becomes `-`.
pub fn claude_dir_name(dir: &Path) -> String {
    dir.display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

pub fn claude(data: &Path, home: &Path, project: &Path) -> anyhow::Result<Exit> {
    let project = project
        .canonicalize()
        .map_err(|e| Exit::Usage.with(format!("--project {}: {e}", project.display())))?;
    let dir = home.join(".claude/projects").join(claude_dir_name(&project));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!(
            "no Claude Code sessions for {}: {} does not exist",
            project.display(),
            dir.display()
        );
        return Ok(Exit::Done);
    };
    let mut mains = Vec::new();
    let mut loose_agents = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !path.is_file() || !name.ends_with(".jsonl") {
            continue;
        }
        if name.starts_with("agent-") {
            loose_agents.push(path);
        } else {
            mains.push(path);
        }
    }
    mains.sort();
    loose_agents.sort();
    if mains.is_empty() {
        println!("no Claude Code sessions in {}", dir.display());
        return Ok(Exit::Done);
    }
    let store = Store::new(data);
    let key = aerix_session::project_key(&aerix_config::project_root(&project));
    let mut failed = false;
    for main in &mains {
        match import_one(&store, &key, main, &loose_agents) {
            Ok(line) => println!("{line}"),
            Err(line) => {
                failed = true;
                println!("{line}");
            }
        }
    }
    Ok(if failed { Exit::Failed } else { Exit::Done })
}

/// A file too large to read is refused by name.
fn bounded_read(path: &Path) -> Result<Vec<u8>, String> {
    let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if size > MAX_FILE_BYTES {
        return Err(format!("{size} bytes, over the {} MiB bound", MAX_FILE_BYTES >> 20));
    }
    std::fs::read(path).map_err(|e| e.to_string())
}

/// Imports one session: the line saying what it did (or why there was nothing to import), or
/// (`Err`) the line saying why it could not.
fn import_one(store: &Store, key: &str, main: &Path, loose: &[PathBuf]) -> Result<String, String> {
    let name = main.display();
    let stem = main.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let bytes = bounded_read(main).map_err(|e| format!("refused {name}: {e}"))?;
    // Its subagents: `<session>/subagents/agent-*.jsonl`, and (older) `agent-*.jsonl` beside
    // it whose lines name this session.
    let mut subagents: Vec<(String, Vec<u8>)> = Vec::new();
    let mut notes = Vec::new();
    let nested = main.with_extension("").join("subagents");
    let mut nested_files: Vec<PathBuf> = std::fs::read_dir(&nested)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    nested_files.sort();
    for path in nested_files.iter().chain(loose) {
        let Some(file_name) = agent_file(path) else { continue };
        match bounded_read(path) {
            Ok(bytes) => {
                if nested_files.contains(path) || names_session(&bytes, &stem) {
                    subagents.push((file_name.to_owned(), bytes));
                }
            }
            Err(e) => notes.push(format!("subagent {} refused: {e}", path.display())),
        }
    }
    let mut imported = read(&bytes, &subagents);
    if imported.events.is_empty() {
        let skipped = imported.report.skipped();
        return Ok(format!(
            "skipped {name}: no user or assistant message on its main line{}",
            if skipped.is_empty() { String::new() } else { format!("; {skipped}") }
        ));
    }
    let created = imported.first_ts.clone().unwrap_or_else(aerix_session::now_rfc3339);
    let entry = IndexEntry {
        id: String::new(),
        created: created.clone(),
        updated: imported.last_ts.clone().unwrap_or(created),
        cwd: imported.cwd.clone().unwrap_or_default(),
        model: imported.model.clone().unwrap_or_default(),
        title: imported.title.lines().next().unwrap_or("").chars().take(80).collect(),
        requests: imported.prompts,
        outcome: None,
        tag: Some(TAG.to_owned()),
        origin: Some(stem.clone()),
    };
    let mut files = vec![(".claude.jsonl".to_owned(), bytes.clone())];
    for (file_name, bytes) in &subagents {
        files.push((format!("/subagents/{file_name}"), bytes.clone()));
    }
    let events = |id: &str| {
        imported.assign(id, key);
        std::mem::take(&mut imported.events)
    };
    let done =
        store.import(key, entry, events, &files).map_err(|e| format!("failed {name}: {e}"))?;
    let report = &imported.report;
    let what = match (done.replaced, done.unchanged) {
        (true, true) => "unchanged",
        (true, false) => "re-imported",
        _ => "imported",
    };
    let mut line = format!(
        "{what} {name} as {} ({} of {} lines: {} prompt(s), {} subagent(s))",
        done.id, report.converted, report.lines, imported.prompts, report.subagents
    );
    let skipped = report.skipped();
    if !skipped.is_empty() {
        line.push_str(&format!("; skipped: {skipped}"));
    }
    for note in notes {
        line.push_str(&format!("; {note}"));
    }
    Ok(line)
}

/// `agent-<id>.jsonl` (the id letters, digits, `-` and `_`): a subagent's file name.
fn agent_file(path: &Path) -> Option<&str> {
    let name = path.file_name()?.to_str()?;
    let id = name.strip_prefix("agent-")?.strip_suffix(".jsonl")?;
    let ok = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c));
    ok.then_some(name)
}

/// Whether a loose `agent-*.jsonl` belongs to `session` (its first line that says so).
fn names_session(bytes: &[u8], session: &str) -> bool {
    bytes.split(|b| *b == b'\n').find_map(|line| {
        let value: serde_json::Value = serde_json::from_slice(line).ok()?;
        value.get("sessionId")?.as_str().map(|s| s == session)
    }) == Some(true)
}
