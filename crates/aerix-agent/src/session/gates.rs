//! The gates of a front end that can ask (the screen, an ACP client): each question is an
//! [`Out::Ask`] with its reply channel; the agent's task awaits the reply or the request's
//! cancel flag. One at a time: a front end shows one question, and pieces running together
//! may each ask.

use crate::runtime::{Answering, AskAnswer, AskGate, PlanDecision, PlanGate};
use aerix_tools::Cancel;
use tokio::sync::mpsc::UnboundedSender;

use super::{Ask, Out, Reply};

pub struct Asking {
    pub outs: UnboundedSender<Out>,
    pub cancel: Cancel,
    pub one: tokio::sync::Mutex<()>,
}

impl Asking {
    async fn wait(&self, ask: Ask) -> Option<Reply> {
        let _one = self.one.lock().await;
        if self.cancel.is_cancelled() {
            return None;
        }
        let (send, reply) = tokio::sync::oneshot::channel();
        self.outs.send(Out::Ask(ask, send)).ok()?;
        tokio::select! {
            reply = reply => reply.ok(),
            () = crate::runtime::cancelled(&self.cancel) => None,
        }
    }
}

/// The call as a question (its input cut to 200 characters is the front end's to do); `hook`:
/// a `PreToolUse` hook asks it.
fn question(
    (agent, call): (&str, &str),
    tool: &str,
    input: &serde_json::Value,
    reason: String,
    (always, hook): (bool, bool),
) -> Ask {
    Ask::Call {
        agent: agent.to_owned(),
        call: call.to_owned(),
        tool: tool.to_owned(),
        input: input.clone(),
        reason,
        always,
        hook,
    }
}

impl PlanGate for Asking {
    fn plan<'a>(&'a self, agent: &'a str, text: &'a str) -> Answering<'a, PlanDecision> {
        Box::pin(async move {
            let ask = Ask::Plan { agent: agent.to_owned(), text: text.to_owned() };
            match self.wait(ask).await {
                Some(Reply::Accept) => PlanDecision::Accept,
                Some(Reply::Edited(text)) => PlanDecision::Replace(text),
                _ => PlanDecision::Abort,
            }
        })
    }
}

impl AskGate for Asking {
    fn ask<'a>(
        &'a self,
        agent: &'a str,
        call: &'a str,
        tool: &'a str,
        input: &'a serde_json::Value,
        reason: &'a str,
    ) -> Answering<'a, Result<(), String>> {
        Box::pin(async move {
            let why = format!("a PreToolUse hook asks: {reason}");
            let ask = question((agent, call), tool, input, why, (false, true));
            match self.wait(ask).await {
                Some(Reply::Once | Reply::Always) => Ok(()),
                _ => {
                    Err(format!("the user denied the call a PreToolUse hook asked about: {reason}"))
                }
            }
        })
    }

    fn ask_permission<'a>(
        &'a self,
        agent: &'a str,
        call: &'a str,
        tool: &'a str,
        input: &'a serde_json::Value,
        reason: &'a str,
        always: bool,
    ) -> Answering<'a, AskAnswer> {
        Box::pin(async move {
            let ask = question((agent, call), tool, input, reason.to_owned(), (always, false));
            match self.wait(ask).await {
                Some(Reply::Once) => AskAnswer::Once,
                Some(Reply::Always) if always => AskAnswer::Always,
                // "Always" where it was not offered counts once.
                Some(Reply::Always) => AskAnswer::Once,
                _ => AskAnswer::Deny(format!("denied by the user ({reason})")),
            }
        })
    }
}
