//! One request of the screen: its runtime on a thread of its own, its sinks and gates.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use aerix_core::{
    Answering, AskAnswer as Answered, AskGate, CoreError, Live, PlanDecision, PlanGate, Sink,
};
use aerix_request::{Request, Root, Start, run_request};
use aerix_session::{Event, Log, Outcome};
use aerix_tools::Cancel;
use aerix_tui::{AskAnswer, Feed, Gate, Level, Note, PlanAnswer};
use tokio::sync::mpsc::UnboundedSender;

use super::{Answer, Ended, Msg, Session};
use crate::attach::SessionBranch;
use crate::bridge;
use crate::hooks::AgentHooks;
use crate::startup::{self, Stop};

/// One request on a thread of its own, driven by the process's tokio runtime.
#[allow(clippy::too_many_arguments, reason = "the session's parts a request takes and gives back")]
pub(super) fn spawn_request(
    session: Arc<Session>,
    client: caldrix_client::Client,
    log: Log,
    root: Option<Root>,
    prompt: String,
    nth: u32,
    cancel: Cancel,
    tx: UnboundedSender<Msg>,
) {
    let handle = tokio::runtime::Handle::current();
    std::thread::spawn(move || {
        let ended =
            handle.block_on(request(&session, client, log, root, prompt, nth, cancel, tx.clone()));
        let _ = tx.send(Msg::Ended(Box::new(ended)));
    });
}

#[allow(clippy::too_many_arguments, reason = "the session's parts a request takes and gives back")]
async fn request(
    session: &Session,
    mut client: caldrix_client::Client,
    log: Log,
    root: Option<Root>,
    prompt: String,
    nth: u32,
    cancel: Cancel,
    tx: UnboundedSender<Msg>,
) -> Ended {
    let resumed = session.resumed || nth > 0;
    let mut sink = ScreenSink { log, tx: tx.clone() };
    // A request that ends before its root ran lets a live root go with it.
    let failed = |client, sink: ScreenSink, outcome, error: String| Ended {
        client,
        log: sink.log,
        outcome,
        answer: None,
        error: Some(error),
        root: None,
    };
    // The root the last request left, live in the pool; from the log (as `--continue` rebuilds
    // it) only for the first request of a resumed session, or after a failed or cancelled one.
    let number = session.first_request + nth;
    let start = match root {
        None if !resumed => Start::Fresh,
        root => match Start::next(root, sink.log.path()) {
            Ok(start) => start,
            Err(e) => {
                return failed(client, sink, Outcome::Failed, format!("the session log: {e}"));
            }
        },
    };
    let settings = &*session.settings;
    sink.event(Event::SessionStart {
        session: sink.log.id().to_owned(),
        project: session.project.clone(),
        cwd: session.cwd.display().to_string(),
        model: settings.main.model.clone(),
        decision: settings.decision.as_ref().map(|d| d.model.clone()),
        prompt: prompt.clone(),
        resumed: !matches!(start, Start::Fresh),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        profile: session.profile.as_ref().map(|p| p.0.clone()),
        profile_branch: session.profile.as_ref().map(|p| p.1.clone()),
        profile_commit: session.profile.as_ref().map(|p| p.2.clone()),
        // The diff line's base: one commit for both.
        start_commit: session.base.as_ref().and_then(|b| b.base.clone()),
    });
    // The working tree before this request, for `aerix rewind` (the startup's snapshot serves
    // the first request; a later one takes its own).
    let base = if nth == 0 { session.base.as_ref().and_then(|b| b.base.as_deref()) } else { None };
    let id = sink.log.id().to_owned();
    sink.event(crate::checkpoint::take(&session.cwd, &id, number, base));
    // The session's first request makes its profile branch.
    if nth == 0
        && let Some(line) = session.branch.as_ref().and_then(SessionBranch::make)
    {
        let _ = tx.send(Msg::Feed(Feed::Note(Note { level: Level::Warning, text: line })));
    }
    let early = std::mem::take(
        &mut *session.early.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    for event in early {
        let _ = sink.log.append(&event);
    }
    let expanded = match session.skills.expand_prompt(&prompt) {
        Ok(Some(expanded)) => expanded,
        Ok(None) => prompt.clone(),
        Err(e) => {
            start.release(&mut client).await;
            return failed(client, sink, Outcome::Failed, e.to_string());
        }
    };
    let prompt_context = match startup::prompt_submit(&session.hooks, &expanded, &cancel, &mut sink)
    {
        Ok(context) => context,
        Err(stop) => {
            start.release(&mut client).await;
            return match stop {
                Stop::Cancelled => Ended {
                    client,
                    log: sink.log,
                    outcome: Outcome::Cancelled,
                    answer: None,
                    error: None,
                    root: None,
                },
                Stop::Killed(reason) => failed(client, sink, Outcome::Killed, reason),
            };
        }
    };
    let prompts = Arc::clone(&session.prompts);
    let request = Request {
        prompt: expanded,
        instructions: session.instructions.clone(),
        hook_context: session.hook_context.clone(),
        prompt_context,
        main: session.main.alias.clone(),
        window: session.main.window,
        json: session.main.json,
        decision: session.decision.clone(),
        max_turns: session.max_turns,
        start,
    };
    let agent_hooks = AgentHooks {
        hooks: Arc::clone(&session.hooks),
        log: sink.log.try_clone().ok().map(Mutex::new),
        cancel: cancel.clone(),
        quiet: true,
    };
    let gates =
        ScreenGates { tx: tx.clone(), cancel: cancel.clone(), one: tokio::sync::Mutex::new(()) };
    let notes = tx.clone();
    let failed = move |line: String| {
        let _ = notes.send(Msg::Feed(Feed::Note(Note { level: Level::Warning, text: line })));
    };
    let rules =
        bridge::Rules { permissions: Arc::clone(&session.permissions), failed: Box::new(failed) };
    let agents = bridge::Agents(Arc::clone(&session.agents));
    let skills = bridge::SkillSet(Arc::clone(&session.skills));
    let gates = Arc::new(gates);
    let mut runtime = bridge::runtime(
        &mut client,
        &mut sink,
        settings,
        prompts,
        bridge::Place {
            cwd: &session.cwd,
            additional: session.permissions.additional_directories(),
            worktrees: session.worktrees.as_ref(),
            checks: &session.checks,
        },
        cancel.clone(),
    )
    .with_members(session.members.clone())
    .with_hooks(Arc::new(agent_hooks))
    .with_definitions(Arc::new(agents))
    .with_skills(Arc::new(skills))
    .with_external(Arc::clone(&session.mcp) as Arc<dyn aerix_core::ExternalTools>)
    .with_gates(Arc::clone(&gates) as Arc<dyn aerix_core::PlanGate>, gates)
    .with_permissions(Arc::new(rules));
    let result = run_request(&mut runtime, request).await;
    drop(runtime);
    let (outcome, answer, error, root) = match result {
        Ok(end) => (end.end.outcome, end.end.final_text, end.end.reason, end.root),
        Err(CoreError::Cancelled) => (Outcome::Cancelled, None, None, None),
        Err(CoreError::Killed(reason)) => (Outcome::Killed, None, Some(reason), None),
        Err(e) => (Outcome::Failed, None, Some(e.to_string()), None),
    };
    Ended { client, log: sink.log, outcome, answer, error, root }
}

/// A request's events: to the session log, and to the screen.
struct ScreenSink {
    log: Log,
    tx: UnboundedSender<Msg>,
}

impl Sink for ScreenSink {
    fn event(&mut self, event: Event) {
        let _ = self.log.append(&event);
        let _ = self.tx.send(Msg::Feed(Feed::Event(event)));
    }

    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf> {
        self.log.spool(name, text).ok()
    }

    fn spool_dir(&self) -> Option<PathBuf> {
        Some(self.log.spool_dir())
    }

    fn live(&mut self, agent: &str, live: Live) {
        let agent = agent.to_owned();
        let feed = match live {
            Live::Generating => Feed::Generating { agent },
            Live::Streamed => Feed::Streamed { agent },
            Live::Generated => Feed::Generated { agent },
        };
        let _ = self.tx.send(Msg::Feed(feed));
    }
}

/// The session's own hook runs, outside a request: to the log only.
pub(super) struct LogSink {
    pub(super) log: Log,
}

impl Sink for LogSink {
    fn event(&mut self, event: Event) {
        let _ = self.log.append(&event);
    }

    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf> {
        self.log.spool(name, text).ok()
    }

    fn spool_dir(&self) -> Option<PathBuf> {
        Some(self.log.spool_dir())
    }
}

/// The startup's hook runs, kept until the session's first `session.start` is written.
pub(super) struct BufferSink(pub(super) Vec<Event>);

impl Sink for BufferSink {
    fn event(&mut self, event: Event) {
        self.0.push(event);
    }

    fn spool(&mut self, _: &str, _: &str) -> Option<PathBuf> {
        None
    }
}

/// The gates, answered on the screen: the agent's task awaits the answer (or the cancel flag),
/// holding no thread. One at a time: the screen shows one gate, and pieces running together
/// may each ask.
struct ScreenGates {
    tx: UnboundedSender<Msg>,
    cancel: Cancel,
    one: tokio::sync::Mutex<()>,
}

impl ScreenGates {
    async fn wait(&self, gate: Gate) -> Option<Answer> {
        let _one = self.one.lock().await;
        if self.cancel.is_cancelled() {
            return None;
        }
        let (send, answer) = tokio::sync::oneshot::channel();
        self.tx.send(Msg::Gate(gate, send)).ok()?;
        tokio::select! {
            answer = answer => answer.ok(),
            () = aerix_core::cancelled(&self.cancel) => None,
        }
    }
}

impl PlanGate for ScreenGates {
    fn plan<'a>(&'a self, agent: &'a str, text: &'a str) -> Answering<'a, PlanDecision> {
        Box::pin(async move {
            match self.wait(Gate::Plan { agent: agent.to_owned(), text: text.to_owned() }).await {
                Some(Answer::Plan(PlanAnswer::Accept)) => PlanDecision::Accept,
                Some(Answer::Plan(PlanAnswer::Edited(text))) => PlanDecision::Replace(text),
                _ => PlanDecision::Abort,
            }
        })
    }
}

impl AskGate for ScreenGates {
    fn ask<'a>(
        &'a self,
        agent: &'a str,
        tool: &'a str,
        input: &'a serde_json::Value,
        reason: &'a str,
    ) -> Answering<'a, Result<(), String>> {
        Box::pin(async move {
            let reason_line = format!("a PreToolUse hook asks: {reason}");
            match self.wait(ask_gate(agent, tool, input, reason_line, false)).await {
                Some(Answer::Ask(AskAnswer::Once | AskAnswer::Always)) => Ok(()),
                _ => {
                    Err(format!("the user denied the call a PreToolUse hook asked about: {reason}"))
                }
            }
        })
    }

    fn ask_permission<'a>(
        &'a self,
        agent: &'a str,
        tool: &'a str,
        input: &'a serde_json::Value,
        reason: &'a str,
        always: bool,
    ) -> Answering<'a, Answered> {
        Box::pin(async move {
            match self.wait(ask_gate(agent, tool, input, reason.to_owned(), always)).await {
                Some(Answer::Ask(AskAnswer::Once)) => Answered::Once,
                Some(Answer::Ask(AskAnswer::Always)) if always => Answered::Always,
                // "Always" where it was not offered counts once.
                Some(Answer::Ask(AskAnswer::Always)) => Answered::Once,
                _ => Answered::Deny(format!("denied by the user ({reason})")),
            }
        })
    }
}

/// The gate the screen shows: the call (its input cut to 200 characters) and the reason.
fn ask_gate(
    agent: &str,
    tool: &str,
    input: &serde_json::Value,
    reason: String,
    always: bool,
) -> Gate {
    let input = input.to_string().chars().take(200).collect();
    Gate::Ask { agent: agent.to_owned(), tool: tool.to_owned(), input, reason, always }
}
