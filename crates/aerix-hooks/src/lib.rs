//! Claude Code's hooks contract, as aerix runs it: the hook files (Claude Code's settings shape,
//! `{"hooks": {"<Event>": [{"matcher": ..., "hooks": [{"type": "command", ...}]}]}}`), matchers,
//! running a handler (`sh -c`, the event's JSON on stdin, `CLAUDE_PROJECT_DIR`, its own process
//! group, the timeout or the caller's cancel then `TERM` and `KILL`), and what its exit status
//! and output mean.
//!
//! Today aerix fires the session events (`SessionStart`, `UserPromptSubmit`, `SessionEnd`) and
//! the compaction events (`PreCompact`, and aerix's own `ContextCompact`), and delegation's
//! (`SubagentStart`, `SubagentStop`, and aerix's own `AgentSpawn` and `Verify`).
//! This crate knows nothing of agents, contexts, the pool or the session log: the caller turns
//! a [`Fired`] into segments, events and exit statuses.

mod config;
mod fire;
mod matcher;
mod output;
mod process;

use std::path::PathBuf;
use std::time::Duration;

pub use config::{HookFiles, Hooks, Loaded, load, load_file};
pub use fire::{Blocked, CompactTrigger, EndReason, Fire, Fired, Session, StartSource};
pub use matcher::Matcher;
pub use process::Ending;

/// Between `TERM` and `KILL` when a handler runs past its timeout or is cancelled.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// Injected text longer than this many characters is saved to a file instead.
pub const MAX_INJECTED_CHARS: usize = 10_000;
/// What the context keeps of such a text.
pub const PREVIEW_CHARS: usize = 2_000;

/// The events aerix fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    SessionEnd,
    /// Before a compaction pass; a block skips the pass.
    PreCompact,
    /// After a compaction pass (aerix's own event).
    ContextCompact,
    /// An `agent` call spawns an implementer or a verifier (aerix's own event).
    AgentSpawn,
    /// Before a subagent runs.
    SubagentStart,
    /// A subagent's final; a block continues it.
    SubagentStop,
    /// A verifier starts on an implementer's work (aerix's own event).
    Verify,
}

impl HookEvent {
    pub const ALL: [HookEvent; 9] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
        HookEvent::ContextCompact,
        HookEvent::AgentSpawn,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::Verify,
    ];

    /// Claude Code's name, which hook files and `hook_event_name` use.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::ContextCompact => "ContextCompact",
            HookEvent::AgentSpawn => "AgentSpawn",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::Verify => "Verify",
        }
    }

    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.name() == name)
    }

    /// A handler's timeout when its file gives none (the spec's bounds table).
    pub fn default_timeout(self) -> Duration {
        match self {
            HookEvent::SessionStart | HookEvent::PreCompact | HookEvent::ContextCompact => {
                Duration::from_secs(600)
            }
            HookEvent::AgentSpawn
            | HookEvent::SubagentStart
            | HookEvent::SubagentStop
            | HookEvent::Verify => Duration::from_secs(600),
            HookEvent::UserPromptSubmit | HookEvent::SessionEnd => Duration::from_secs(30),
        }
    }

    /// The longest a handler may run whatever its file says: the end of a run does not wait
    /// on a `SessionEnd` hook for more than 30 s.
    pub fn max_timeout(self) -> Option<Duration> {
        match self {
            HookEvent::SessionEnd => Some(Duration::from_secs(30)),
            HookEvent::SessionStart
            | HookEvent::UserPromptSubmit
            | HookEvent::PreCompact
            | HookEvent::ContextCompact => None,
            HookEvent::AgentSpawn
            | HookEvent::SubagentStart
            | HookEvent::SubagentStop
            | HookEvent::Verify => None,
        }
    }

    /// Whether a group's `matcher` applies (UserPromptSubmit and ContextCompact take none).
    /// The subagent events and AgentSpawn match the agent type; Verify takes none.
    fn takes_matcher(self) -> bool {
        !matches!(self, HookEvent::UserPromptSubmit | HookEvent::ContextCompact)
            && self != HookEvent::Verify
    }

    /// Whether exit 2 or `decision: "block"` blocks what fired it.
    fn blocks(self) -> bool {
        matches!(self, HookEvent::UserPromptSubmit | HookEvent::PreCompact)
            || self == HookEvent::SubagentStop
    }
}

/// Claude Code events aerix reads in a hook file but does not fire yet.
pub const NOT_FIRED_YET: &[&str] =
    &["PreToolUse", "PostToolUse", "PostToolUseFailure", "Notification", "Stop", "PostCompact"];

/// A hook file that cannot be used; its hooks are not run.
#[derive(Debug, thiserror::Error)]
pub enum HooksError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// One handler's run, for the session log.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub event: HookEvent,
    pub command: String,
    pub ending: Ending,
    pub duration: Duration,
    /// It blocked the action (exit 2, or `decision: "block"`, on `UserPromptSubmit` and
    /// `PreCompact`) or ended the run (`continue: false`).
    pub blocked: bool,
}
