//! `ai-memory hook <event>`: read the harness's hook JSON on stdin, report the event to the
//! server (or, when none is running, to the data directory directly), print what the harness
//! expects. A hook never blocks its harness: problems go to stderr and the exit status is 0.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use ai_memory_core::Identity;
use ai_memory_server::HookEvent;
use ai_memory_server::hook::tool::{changed_files, relative_to};
use ai_memory_server::hook::{HookInput, HookKind, session_start_output};
use anyhow::{Context, bail};

/// The most a hook reads from stdin.
const MAX_INPUT: u64 = 4 * 1024 * 1024;
/// How long a hook waits for the server.
const SERVER_TIMEOUT: Duration = Duration::from_secs(5);

pub const HARNESSES: &[&str] = &["claude-code", "codex", "opencode", "aerix", "kimi-code"];

pub fn run(data_dir: Option<PathBuf>, event: &str, harness: &str) -> ExitCode {
    match try_run(data_dir, event, harness) {
        Ok(out) => out!("{out}"),
        Err(e) => eprintln!("ai-memory hook {event}: {e:#}"),
    }
    ExitCode::SUCCESS
}

fn try_run(data_dir: Option<PathBuf>, event: &str, harness: &str) -> anyhow::Result<String> {
    let kind = HookKind::parse(event).with_context(|| {
        format!(
            "unknown event `{event}`: use session-start, prompt-submit, tool-use or session-end"
        )
    })?;
    if !HARNESSES.contains(&harness) {
        bail!("unknown harness `{harness}`: use {}", HARNESSES.join(", "));
    }
    let mut stdin = String::new();
    std::io::stdin().take(MAX_INPUT).read_to_string(&mut stdin)?;
    let input = HookInput::parse(&stdin, kind)?;
    let cwd = match &input.cwd {
        Some(c) => PathBuf::from(c),
        None => std::env::current_dir()?,
    };
    let id = Identity::of(&cwd)?;
    // A tool event matters only for the files an edit or write tool names (its input; the
    // output is never read): any other tool call ends here, without reaching the server.
    let changed: Vec<String> = match (&input.tool_name, &input.tool_input) {
        (Some(tool), Some(tool_input)) if kind == HookKind::ToolUse => {
            changed_files(tool, tool_input).iter().map(|p| relative_to(p, &id.root, &cwd)).collect()
        }
        _ => Vec::new(),
    };
    if kind == HookKind::ToolUse && changed.is_empty() {
        return Ok(String::new());
    }
    let event = HookEvent {
        harness: harness.to_owned(),
        session_id: input.session_id.clone(),
        workspace: id.workspace.to_string(),
        project: id.project.to_string(),
        prompt: input.prompt.clone(),
        contribute: id.contribute,
        consume: id.consume,
        files: if kind == HookKind::SessionStart { root_files(&id.root) } else { Vec::new() },
        changed,
    };
    let dir = crate::data_dir(data_dir)?;
    let settings = crate::settings(&dir)?;
    let token = std::env::var("AI_MEMORY_TOKEN")
        .ok()
        .or_else(|| Some(settings.server.root_token.clone()).filter(|t| !t.is_empty()));
    let answer = match post(&settings.server.bind, kind, &event, token.as_deref())? {
        Some(answer) => answer,
        None => {
            // No server: the data directory directly (git and SQLite take concurrent writers).
            let memory = ai_memory_server::Memory::open(&dir, settings)?;
            let who = memory
                .authenticate(token.as_deref())?
                .context("a valid API key is required (AI_MEMORY_TOKEN)")?;
            let answer = ai_memory_server::run_hook(&memory, who, kind, &event)?;
            if kind == HookKind::SessionEnd {
                // No server to run the profile's pass a few seconds later: a detached process
                // runs it, so the harness does not wait.
                spawn_pass(&dir);
            }
            answer
        }
    };
    let context = answer["context"].as_str().unwrap_or_default();
    Ok(match (kind, harness) {
        // Kimi Code gets the context with the session's first prompt, as plain text (what its
        // prompt hook adds to the context), and nothing at session start.
        (HookKind::SessionStart, ai_memory_server::hook::KIMI_CODE) => String::new(),
        (HookKind::SessionStart, _) => session_start_output(context),
        (HookKind::PromptSubmit, ai_memory_server::hook::KIMI_CODE) => context.to_owned(),
        _ => String::new(),
    })
}

/// `ai-memory --data-dir DIR profile pass` in its own process group, detached; a failure to
/// start it is one stderr line (the next session end or server start runs the pass).
fn spawn_pass(dir: &std::path::Path) {
    use std::os::unix::process::CommandExt;
    let spawned = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .arg("--data-dir")
            .arg(dir)
            .args(["profile", "pass"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
    });
    if let Err(e) = spawned {
        eprintln!("ai-memory hook session-end: cannot start the profile pass: {e}");
    }
}

/// Folders that hold other people's code or build output, not the project's stack.
const SKIPPED_DIRS: &[&str] = &["node_modules", "target", "vendor", "dist", "build", "venv"];

/// File names at the project root and one folder down (at most `MAX_EVENT_FILES`): what the
/// server detects the project's stacks from (`Cargo.toml`, `src/main.rs`).
fn root_files(root: &std::path::Path) -> Vec<String> {
    let max = ai_memory_server::MAX_EVENT_FILES;
    let mut out = Vec::new();
    let visible = |e: &std::fs::DirEntry| {
        let name = e.file_name().to_string_lossy().into_owned();
        (!name.starts_with('.')).then_some(name)
    };
    let Ok(top) = std::fs::read_dir(root) else { return out };
    let mut dirs = Vec::new();
    for entry in top.flatten() {
        let Some(name) = visible(&entry) else { continue };
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if !SKIPPED_DIRS.contains(&name.as_str()) {
                dirs.push((name, entry.path()));
            }
        } else {
            out.push(name);
        }
    }
    dirs.sort();
    for (name, path) in dirs {
        let Ok(inner) = std::fs::read_dir(&path) else { continue };
        for entry in inner.flatten() {
            if out.len() >= max {
                return out;
            }
            if let Some(file) =
                visible(&entry).filter(|_| entry.file_type().is_ok_and(|t| t.is_file()))
            {
                out.push(format!("{name}/{file}"));
            }
        }
    }
    out.truncate(max);
    out
}

/// Posts the event to the server; `None` when no server listens there.
fn post(
    bind: &str,
    kind: HookKind,
    event: &HookEvent,
    token: Option<&str>,
) -> anyhow::Result<Option<serde_json::Value>> {
    let url = format!("http://{bind}/hooks/{}", kind.arg());
    let mut request =
        ureq::post(&url).timeout(SERVER_TIMEOUT).set("Content-Type", "application/json");
    if let Some(t) = token {
        request = request.set("Authorization", &format!("Bearer {t}"));
    }
    match request.send_string(&serde_json::to_string(event)?) {
        Ok(response) => Ok(Some(serde_json::from_str(&response.into_string()?)?)),
        Err(ureq::Error::Status(code, response)) => {
            let body = response.into_string().unwrap_or_default();
            bail!("the server at {bind} answered {code}: {body}")
        }
        Err(ureq::Error::Transport(t)) if t.kind() == ureq::ErrorKind::ConnectionFailed => Ok(None),
        Err(e) => Err(e.into()),
    }
}
