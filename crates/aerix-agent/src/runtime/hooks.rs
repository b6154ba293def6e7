//! The hook events the runtime itself has a moment for (routing, tool calls, an agent's final,
//! compaction, delegation). The runtime knows no hook files or processes: the session implements
//! `RuntimeHooks` over `aerix-hooks`, tests with a recorder, and `NO_HOOKS` fires nothing.

use std::collections::BTreeMap;

use serde_json::Value;

/// An event the runtime fires, with what its input carries beyond the session's fields.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum HookFire<'a> {
    /// After routing, before the root starts.
    RouteDecision {
        agent: &'a str,
        route: &'a str,
        scores: &'a BTreeMap<String, f64>,
        raw: Option<&'a str>,
    },
    /// Before a call runs (`agent_type`: `None` for the root). A block refuses the call;
    /// `updated_input` replaces its input.
    PreToolUse {
        agent: &'a str,
        agent_type: Option<&'a str>,
        call: &'a str,
        tool: &'a str,
        input: &'a Value,
    },
    /// After a call: its result text (`error`: it is an error; `interrupted`: the run was
    /// cancelled meanwhile). A block's reason and the context are appended to the result.
    PostToolUse {
        agent: &'a str,
        agent_type: Option<&'a str>,
        call: &'a str,
        tool: &'a str,
        input: &'a Value,
        result: &'a str,
        error: bool,
        interrupted: bool,
    },
    /// The root's final; a block continues it (`active`: a Stop hook continued it before).
    Stop { agent: &'a str, last_message: &'a str, active: bool },
    /// After a compaction pass, as Claude Code names it (besides `ContextCompact`).
    PostCompact { agent: &'a str, trigger: &'a str },
    /// Before a compaction pass; a block skips that pass. `trigger` is `auto` (the runtime's
    /// own pass) or `manual` (the model's `context` call).
    PreCompact { agent: &'a str, trigger: &'a str },
    /// After a compaction pass: the context's tokens before and after, and how many segments
    /// were replaced by markers.
    ContextCompact { agent: &'a str, before: u32, after: u32, compacted: u32 },
    /// A subagent is spawned by `parent` (an `agent` call).
    AgentSpawn { agent: &'a str, parent: &'a str, agent_type: &'a str },
    /// Before an implementer or a verifier runs (`agent_type`: a definition's name,
    /// `implementer` or `verifier`).
    SubagentStart { agent: &'a str, agent_type: &'a str },
    /// A subagent's final; a block continues it.
    SubagentStop { agent: &'a str, agent_type: &'a str, last_message: &'a str, active: bool },
    /// A verifier starts on a piece's implementer's work.
    Verify { agent: &'a str, implementer: &'a str, attempt: u32 },
    /// An attempt (its implementer `agent`) is about to get a worktree `name` of `base`; a
    /// handler's stdout (the reply's `context`) may name the path to make it at.
    WorktreeCreate { agent: &'a str, name: &'a str, base: &'a str },
    /// An attempt's worktree at `path` was removed.
    WorktreeRemove { agent: &'a str, path: &'a str },
}

impl HookFire<'_> {
    /// Claude Code's (or aerix's) name for the event, as hook files write it.
    pub fn name(&self) -> &'static str {
        match self {
            HookFire::RouteDecision { .. } => "RouteDecision",
            HookFire::PreToolUse { .. } => "PreToolUse",
            HookFire::PostToolUse { error: false, .. } => "PostToolUse",
            HookFire::PostToolUse { error: true, .. } => "PostToolUseFailure",
            HookFire::Stop { .. } => "Stop",
            HookFire::PostCompact { .. } => "PostCompact",
            HookFire::PreCompact { .. } => "PreCompact",
            HookFire::ContextCompact { .. } => "ContextCompact",
            HookFire::AgentSpawn { .. } => "AgentSpawn",
            HookFire::SubagentStart { .. } => "SubagentStart",
            HookFire::SubagentStop { .. } => "SubagentStop",
            HookFire::Verify { .. } => "Verify",
            HookFire::WorktreeCreate { .. } => "WorktreeCreate",
            HookFire::WorktreeRemove { .. } => "WorktreeRemove",
        }
    }
}

/// What the handlers of one event said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookReply {
    /// A handler blocked the action (exit 2 or `decision: "block"`; PreToolUse's deny), with
    /// its reason.
    pub block: Option<String>,
    /// PreToolUse: the call's new input, in aerix's terms (checked against its schema).
    pub updated_input: Option<Value>,
    /// `continue: false`: the agent that fired the event ends, with this reason.
    pub stop: Option<String>,
    /// Context for the model (`WorktreeCreate`: the path a handler printed).
    pub context: Option<String>,
    /// PreToolUse: a handler asks the user to confirm the call (its reason); the runtime's
    /// `AskGate` decides. A `block` wins over it.
    pub ask: Option<String>,
}

/// Fires runtime events; called on the agent's task (a handler may block it: implementations
/// run handlers where blocking is allowed).
pub trait RuntimeHooks: Send + Sync {
    fn fire(&self, event: HookFire<'_>) -> HookReply;
}

/// Fires nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHooks;

impl RuntimeHooks for NoHooks {
    fn fire(&self, _: HookFire<'_>) -> HookReply {
        HookReply::default()
    }
}

/// For a `Runtime` whose caller has no hooks.
pub static NO_HOOKS: NoHooks = NoHooks;
