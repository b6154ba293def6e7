//! What the runtime asks of the user, when there is one to ask: the root's first plan write of
//! a request, a `PreToolUse` hook's `ask`, and a call the permission rules ask about. The
//! runtime knows no screen: the session answers through these traits (the interactive screen
//! asks; headless accepts the plan and denies the ask), tests with scripts. Asking is async:
//! the agent's task waits for the answer without holding a thread.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

/// An answer, later.
pub type Answering<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The root's first `plan` write of a request, before it is saved.
pub trait PlanGate: Send + Sync {
    /// Resolves when the user answers; an implementation gives up (`Abort`) when the request
    /// is cancelled.
    fn plan<'a>(&'a self, agent: &'a str, text: &'a str) -> Answering<'a, PlanDecision>;
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
    /// `Ok(())` runs the call; `Err(reason)` refuses it with `refused: <reason>`. `call` is
    /// the call's id in its agent (`c3`).
    fn ask<'a>(
        &'a self,
        agent: &'a str,
        call: &'a str,
        tool: &'a str,
        input: &'a Value,
        reason: &'a str,
    ) -> Answering<'a, Result<(), String>>;

    /// The permission rules ask (`always`: "always for this project" may be answered). By
    /// default asked as a hook's ask is, without that choice.
    fn ask_permission<'a>(
        &'a self,
        agent: &'a str,
        call: &'a str,
        tool: &'a str,
        input: &'a Value,
        reason: &'a str,
        always: bool,
    ) -> Answering<'a, AskAnswer> {
        let _ = always;
        Box::pin(async move {
            match self.ask(agent, call, tool, input, reason).await {
                Ok(()) => AskAnswer::Once,
                Err(why) => AskAnswer::Deny(why),
            }
        })
    }
}

/// Accepts every plan (headless runs, tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct AcceptPlans;

impl PlanGate for AcceptPlans {
    fn plan<'a>(&'a self, _: &'a str, _: &'a str) -> Answering<'a, PlanDecision> {
        Box::pin(async { PlanDecision::Accept })
    }
}

/// Denies every ask: no one is there to answer (headless runs).
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyAsks;

impl AskGate for DenyAsks {
    fn ask<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
        _: &'a Value,
        reason: &'a str,
    ) -> Answering<'a, Result<(), String>> {
        let why = format!(
            "a PreToolUse hook asks to confirm this call, which a headless run cannot: {reason}"
        );
        Box::pin(async move { Err(why) })
    }

    fn ask_permission<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
        _: &'a Value,
        reason: &'a str,
        _: bool,
    ) -> Answering<'a, AskAnswer> {
        let why = format!("{reason}, and no one can be asked");
        Box::pin(async move { AskAnswer::Deny(why) })
    }
}

pub static ACCEPT_PLANS: AcceptPlans = AcceptPlans;
pub static DENY_ASKS: DenyAsks = DenyAsks;
