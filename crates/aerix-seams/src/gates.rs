//! What the runtime asks of the user, when there is one to ask: the root's first plan write of
//! a request, a `PreToolUse` hook's `ask`, and a call the permission rules ask about. The runtime knows no screen: the binary answers
//! through these traits (the interactive screen asks; headless accepts the plan and denies the
//! ask), tests with scripts.

use serde_json::Value;

/// The root's first `plan` write of a request, before it is saved.
pub trait PlanGate: Send + Sync {
    /// Called on the agent's task; an implementation that waits on the user blocks it (the
    /// runtime is multi-threaded), and should give up when the request is cancelled.
    fn plan(&self, agent: &str, text: &str) -> PlanDecision;
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanDecision {
    Accept,
    /// The plan as the user edited it, saved instead.
    Replace(String),
    /// The request ends, cancelled.
    Abort,
}

/// The user's answer to a permission prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AskAnswer {
    Once,
    /// Once, and "always for this project" (`Permissions::remember`).
    Always,
    /// Refused, with the reason the model reads.
    Deny(String),
}

/// A `PreToolUse` hook asked to confirm a call (and none denied it), or the permission rules
/// ask about it.
pub trait AskGate: Send + Sync {
    /// `Ok(())` runs the call; `Err(reason)` refuses it with `refused: <reason>`.
    fn ask(&self, agent: &str, tool: &str, input: &Value, reason: &str) -> Result<(), String>;

    /// The permission rules ask (`always`: "always for this project" may be answered). By
    /// default asked as a hook's ask is, without that choice.
    fn ask_permission(
        &self,
        agent: &str,
        tool: &str,
        input: &Value,
        reason: &str,
        always: bool,
    ) -> AskAnswer {
        let _ = always;
        match self.ask(agent, tool, input, reason) {
            Ok(()) => AskAnswer::Once,
            Err(why) => AskAnswer::Deny(why),
        }
    }
}

/// Accepts every plan (headless runs, tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct AcceptPlans;

impl PlanGate for AcceptPlans {
    fn plan(&self, _: &str, _: &str) -> PlanDecision {
        PlanDecision::Accept
    }
}

/// Denies every ask: no one is there to answer (headless runs).
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyAsks;

impl AskGate for DenyAsks {
    fn ask(&self, _: &str, _: &str, _: &Value, reason: &str) -> Result<(), String> {
        Err(format!(
            "a PreToolUse hook asks to confirm this call, which a headless run cannot: {reason}"
        ))
    }

    fn ask_permission(&self, _: &str, _: &str, _: &Value, reason: &str, _: bool) -> AskAnswer {
        AskAnswer::Deny(format!("{reason}, and no one can be asked"))
    }
}

pub static ACCEPT_PLANS: AcceptPlans = AcceptPlans;
pub static DENY_ASKS: DenyAsks = DenyAsks;
