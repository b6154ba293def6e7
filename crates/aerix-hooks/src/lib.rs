//! Claude Code's hooks contract, as aerix runs it: the hook files (Claude Code's settings shape,
//! `{"hooks": {"<Event>": [{"matcher": ..., "hooks": [{"type": "command", ...}]}]}}`), matchers,
//! running a handler (`sh -c`, the event's JSON on stdin, `CLAUDE_PROJECT_DIR`, its own process
//! group, the timeout or the caller's cancel then `TERM` and `KILL`), and what its exit status
//! and output mean.
//!
//! aerix fires the session events (`SessionStart`, `InstructionsLoaded`, `UserPromptSubmit`,
//! `Notification`, `SessionEnd`), the tool events (`PreToolUse`, `PostToolUse`,
//! `PostToolUseFailure`), `Stop`, the compaction events (`PreCompact`, `PostCompact` and aerix's
//! own `ContextCompact`), delegation's (`SubagentStart`, `SubagentStop`, and aerix's own
//! `AgentSpawn` and `Verify`), the worktree events (`WorktreeCreate`, `WorktreeRemove`) and
//! aerix's own `RouteDecision`; Claude Code's other names
//! ([`NEVER_FIRED`]) are read and never fired. The caller presents aerix's tool calls as Claude
//! Code presents its own (`aerix-claude`).
//! This crate knows nothing of agents, contexts, the pool or the session log: the caller turns
//! a [`Fired`] into segments, events and exit statuses.

mod config;
mod fire;
mod matcher;
mod output;
mod process;

use std::path::PathBuf;
use std::time::Duration;

pub use config::{ClaudeSettings, FileRead, HookFiles, Hooks, Loaded, join, read};
pub use fire::{
    Blocked, CompactTrigger, EndReason, Fire, Fired, Session, StartSource, Subagent, ToolCall,
};
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
    /// Before a tool call runs; a deny refuses it, `updatedInput` replaces its input.
    PreToolUse,
    /// After a tool call that succeeded.
    PostToolUse,
    /// After a tool call that failed (its result an error).
    PostToolUseFailure,
    /// The root's final; a block continues it.
    Stop,
    /// After routing: the route and its scores (aerix's own event).
    RouteDecision,
    /// A line for the user: a startup note, a hook that failed or timed out.
    Notification,
    /// Once per instruction file loaded at the start.
    InstructionsLoaded,
    /// Before a compaction pass; a block skips the pass.
    PreCompact,
    /// After a compaction pass (aerix's own event).
    ContextCompact,
    /// After a compaction pass, as Claude Code names it.
    PostCompact,
    /// An `agent` call spawns an implementer or a verifier (aerix's own event).
    AgentSpawn,
    /// Before a subagent runs.
    SubagentStart,
    /// A subagent's final; a block continues it.
    SubagentStop,
    /// A verifier starts on an implementer's work (aerix's own event).
    Verify,
    /// Before a piece's attempt gets its worktree: a handler's stdout may name where.
    WorktreeCreate,
    /// After an attempt's worktree is removed.
    WorktreeRemove,
}

impl HookEvent {
    pub const ALL: [HookEvent; 19] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::SessionEnd,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::Stop,
        HookEvent::RouteDecision,
        HookEvent::Notification,
        HookEvent::InstructionsLoaded,
        HookEvent::PreCompact,
        HookEvent::ContextCompact,
        HookEvent::PostCompact,
        HookEvent::AgentSpawn,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::Verify,
        HookEvent::WorktreeCreate,
        HookEvent::WorktreeRemove,
    ];

    /// Claude Code's name, which hook files and `hook_event_name` use.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::Stop => "Stop",
            HookEvent::RouteDecision => "RouteDecision",
            HookEvent::Notification => "Notification",
            HookEvent::InstructionsLoaded => "InstructionsLoaded",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::ContextCompact => "ContextCompact",
            HookEvent::PostCompact => "PostCompact",
            HookEvent::AgentSpawn => "AgentSpawn",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::Verify => "Verify",
            HookEvent::WorktreeCreate => "WorktreeCreate",
            HookEvent::WorktreeRemove => "WorktreeRemove",
        }
    }

    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.name() == name)
    }

    /// A handler's timeout when its file gives none (the spec's bounds table).
    pub fn default_timeout(self) -> Duration {
        match self {
            HookEvent::UserPromptSubmit | HookEvent::SessionEnd => Duration::from_secs(30),
            _ => Duration::from_secs(600),
        }
    }

    /// The longest a handler may run whatever its file says: the end of a run does not wait
    /// on a `SessionEnd` hook for more than 30 s.
    pub fn max_timeout(self) -> Option<Duration> {
        match self {
            HookEvent::SessionEnd => Some(Duration::from_secs(30)),
            _ => None,
        }
    }

    /// Whether a group's `matcher` applies (UserPromptSubmit, Stop, ContextCompact, Verify and
    /// the worktree events take none). The tool events match the tool's name (Claude Code's and aerix's), the
    /// subagent events and AgentSpawn the agent type.
    fn takes_matcher(self) -> bool {
        !matches!(
            self,
            HookEvent::UserPromptSubmit
                | HookEvent::Stop
                | HookEvent::ContextCompact
                | HookEvent::Verify
                | HookEvent::WorktreeCreate
                | HookEvent::WorktreeRemove
        )
    }

    /// Whether exit 2 or `decision: "block"` blocks what fired it (on the tool results: the
    /// reason is shown to the model).
    fn blocks(self) -> bool {
        matches!(
            self,
            HookEvent::UserPromptSubmit
                | HookEvent::PreCompact
                | HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::Stop
                | HookEvent::SubagentStop
        )
    }
}

/// Claude Code's other event names (late 2026): accepted in a hook file, never fired by aerix
/// (it has no moment for them); their hooks are named in one line.
pub const NEVER_FIRED: &[&str] = &[
    "PostToolBatch",
    "PermissionRequest",
    "PermissionDenied",
    "UserPromptExpansion",
    "StopFailure",
    "MessageDisplay",
    "Elicitation",
    "ElicitationResult",
    "TeammateIdle",
    "TaskCreated",
    "TaskCompleted",
    "Setup",
    "CwdChanged",
    "FileChanged",
    "ConfigChange",
    "DirectoryAdded",
    "PreModelSwitch",
    "PostModelSwitch",
];

/// A hook file that cannot be used; its hooks are not run.
#[derive(Debug, thiserror::Error)]
pub enum HooksError {
    #[error("{}: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
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
    /// It blocked the action (exit 2, `decision: "block"`, a PreToolUse deny or ask) or ended
    /// the agent (`continue: false`).
    pub blocked: bool,
}
