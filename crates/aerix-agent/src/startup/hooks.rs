//! The session hooks' startup events and each request's `UserPromptSubmit`, and what their
//! answers do (docs/configuration.md, "The events aerix fires"): the same in both front ends.

use std::path::Path;

use crate::runtime::Sink;
use aerix_config::InstructionFile;
use aerix_hooks::{Blocked, Fire, StartSource};
use aerix_session::Log;
use aerix_tools::Cancel;

use crate::hooks::SessionHooks;

/// Why a startup step or a prompt's submission ended the run (or the request) before the
/// root ran.
#[derive(Debug)]
#[must_use]
pub enum Stop {
    /// A signal (or the user) cancelled it while a hook ran.
    Cancelled,
    /// A hook's `continue: false`, or a prompt a hook blocked: outcome `killed`, status 3.
    Killed(String),
}

fn ended(event: &str, stop: &Blocked) -> Stop {
    Stop::Killed(format!("{event} hook (`{}`) ended the run: {}", stop.command, stop.reason))
}

/// What the session's hooks are told of it, for its log at `log` (their inputs name its
/// files).
pub fn hook_session(
    log: &Log,
    cwd: &Path,
    root: &Path,
    mode: aerix_permissions::Mode,
) -> aerix_hooks::Session {
    aerix_hooks::Session {
        id: log.id().to_owned(),
        transcript_path: aerix_claude::transcript_path(log.path()),
        subagents_dir: aerix_claude::subagents_dir(log.path()),
        cwd: cwd.to_owned(),
        project_dir: root.to_owned(),
        spool_dir: log.spool_dir(),
        permission_mode: mode.as_str().to_owned(),
    }
}

/// `SessionStart`, then `InstructionsLoaded` per instruction file (read before the pool; their
/// hooks fire once a session has started; only the project's files are read: `memory_type` is
/// `Project`), then a `Notification` per startup note. `SessionStart`'s context, for the root's
/// pinned `# Hook context` segment; a `continue: false` of either ends the run (status 3).
pub fn session_start(
    hooks: &SessionHooks,
    resumed: bool,
    instructions: &[InstructionFile],
    notes: &[String],
    cancel: &Cancel,
    sink: &mut dyn Sink,
) -> Result<Option<String>, Stop> {
    let source = if resumed { StartSource::Resume } else { StartSource::Startup };
    let started = hooks.fire(Fire::SessionStart(source), cancel, sink);
    if cancel.is_cancelled() {
        return Err(Stop::Cancelled);
    }
    if let Some(stop) = &started.stop {
        return Err(ended("a SessionStart", stop));
    }
    for file in instructions {
        let fire = Fire::InstructionsLoaded {
            file_path: &file.path,
            memory_type: "Project",
            load_reason: "session_start",
        };
        let loaded = hooks.fire(fire, cancel, sink);
        if cancel.is_cancelled() {
            return Err(Stop::Cancelled);
        }
        if let Some(stop) = &loaded.stop {
            return Err(ended("an InstructionsLoaded", stop));
        }
    }
    hooks.notify(notes, "startup_note", cancel, sink);
    if cancel.is_cancelled() {
        return Err(Stop::Cancelled);
    }
    Ok(started.context)
}

/// `UserPromptSubmit` on the (skill-expanded) prompt: its context, appended to the prompt; a
/// block or a `continue: false` ends the request (status 3).
pub fn prompt_submit(
    hooks: &SessionHooks,
    prompt: &str,
    cancel: &Cancel,
    sink: &mut dyn Sink,
) -> Result<Option<String>, Stop> {
    let submitted = hooks.fire(Fire::UserPromptSubmit { prompt }, cancel, sink);
    if cancel.is_cancelled() {
        return Err(Stop::Cancelled);
    }
    if let Some(stop) = &submitted.stop {
        return Err(ended("a UserPromptSubmit", stop));
    }
    if let Some(block) = &submitted.block {
        return Err(Stop::Killed(format!(
            "the prompt was blocked by a UserPromptSubmit hook (`{}`): {}",
            block.command, block.reason
        )));
    }
    Ok(submitted.context)
}
