//! One agent and its turn loop.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use aerix_session::{Event, Outcome, Usage};
use aerix_tools::{Cancel, FileSet, JobEnd, Jobs, ToolError};
use caldrix_proto::{self as proto, Constraint, Generate, Role, StopReason};

use crate::context::{Context, Label, Segment};
use crate::hooks::HookFire;
use crate::repeats::Guard;
use crate::turn::{self, Answer, Body, Call, TURN_RETRIES};
use crate::{CoreError, Runtime, calls, compact, delegate};

/// Hard-limit hits before an agent is killed.
pub const HARD_LIMIT_HITS: u32 = 2;
/// A turn cut to the room left needs at least this many tokens.
pub const MIN_TURN_TOKENS: u32 = 64;
/// How often a final waiting for background jobs looks at them.
const JOB_POLL: Duration = Duration::from_secs(1);

/// How an agent is set up.
#[derive(Clone, Debug)]
pub struct AgentSpec {
    pub id: String,
    pub member: String,
    /// The member's context window.
    pub window: u32,
    /// Whether the member takes the `Json` constraint.
    pub json: bool,
    /// The tools its calls may name.
    pub tools: Vec<String>,
    pub max_turns: u32,
    /// Its place in delegation: the root 0, an implementer or verifier one more than its caller.
    pub depth: u32,
    /// What its `final` holds (a verifier's is a verdict).
    pub answer: Answer,
    /// A subagent's type for hooks (a definition's name, `implementer`, `verifier`); `None`
    /// for the root.
    pub agent_type: Option<String>,
}

/// How an agent ended.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentEnd {
    pub outcome: Outcome,
    pub reason: Option<String>,
    pub final_text: Option<String>,
    pub turns: u32,
}

pub struct Agent {
    pub spec: AgentSpec,
    pub context: Context,
    pub plan: Option<String>,
    pub next_call: u32,
    /// Turns taken in this request (the budget counts these).
    pub turns: u32,
    /// Turns of earlier requests of the session (a resumed root), so ids stay unique.
    pub turn_base: u32,
    pub(crate) jobs: Jobs,
    pub(crate) files: FileSet,
    pub(crate) cancel: Cancel,
    /// This turn's `agent` results, run together after its other calls (`delegate.rs`).
    pub(crate) delegated: HashMap<String, Result<String, ToolError>>,
    /// `Stop`/`SubagentStop` continues taken (at most `delegate::STOP_CONTINUES`).
    pub(crate) stop_continues: u32,
    /// A tool hook's `continue: false`: the agent ends once this turn's calls are cut short.
    hook_stop: Option<String>,
    hard_limit_hits: u32,
    /// The repeat guard (`context.repeat_guard`).
    guard: Guard,
}

impl Agent {
    pub fn new(spec: AgentSpec, context: Context, cwd: &Path, cancel: Cancel) -> Agent {
        Agent {
            spec,
            context,
            plan: None,
            next_call: 0,
            turns: 0,
            turn_base: 0,
            jobs: Jobs::default(),
            files: FileSet::new(cwd),
            cancel,
            delegated: HashMap::new(),
            stop_continues: 0,
            hook_stop: None,
            hard_limit_hits: 0,
            guard: Guard::default(),
        }
    }

    /// A user segment the runtime adds (a note, a job's output).
    /// `{prefix}{n}` for the first n from 1 that no segment of the context holds.
    pub fn fresh_id(&self, prefix: &str) -> String {
        (1..)
            .map(|n| format!("{prefix}{n}"))
            .find(|id| self.context.get(id).is_none())
            .unwrap_or_default()
    }

    pub(crate) async fn add_note(
        &mut self,
        rt: &mut Runtime<'_>,
        label: Label,
        text: String,
    ) -> Result<(), CoreError> {
        let id = self.fresh_id(if label == Label::Job { "job" } else { "n" });
        let segment = Segment { id, role: Role::User, label, text, pinned: false, tokens: 0 };
        self.context.append(rt.client, rt.sink, segment).await
    }

    /// Runs turns until a final, the turn budget, or a named failure. Background jobs still
    /// running at the end are killed.
    pub async fn run(&mut self, rt: &mut Runtime<'_>) -> AgentEnd {
        let end = match self.turn_loop(rt).await {
            Ok(end) => end,
            Err(CoreError::Killed(reason)) => self.end(Outcome::Killed, Some(reason), None),
            Err(CoreError::Cancelled) => {
                self.end(Outcome::Cancelled, Some("cancelled".into()), None)
            }
            Err(e) => self.end(Outcome::Failed, Some(e.to_string()), None),
        };
        for job in self.jobs.kill_all() {
            rt.sink.event(job_ended(&self.spec.id, &job));
        }
        rt.sink.event(Event::AgentEnd {
            agent: self.spec.id.clone(),
            outcome: end.outcome,
            reason: end.reason.clone(),
            final_text: end.final_text.clone(),
            turns: end.turns,
        });
        end
    }

    fn end(
        &self,
        outcome: Outcome,
        reason: Option<String>,
        final_text: Option<String>,
    ) -> AgentEnd {
        AgentEnd { outcome, reason, final_text, turns: self.turns }
    }

    async fn turn_loop(&mut self, rt: &mut Runtime<'_>) -> Result<AgentEnd, CoreError> {
        loop {
            if self.cancel.is_cancelled() {
                return Err(CoreError::Cancelled);
            }
            if self.turns >= self.spec.max_turns {
                return Ok(self.end(
                    Outcome::Budget,
                    Some(format!("the turn budget ran out ({} turns)", self.spec.max_turns)),
                    None,
                ));
            }
            self.deliver_jobs(rt).await?;
            let turn = self.next_turn(rt).await?;
            self.turns += 1;
            rt.stats.turns += 1;
            match turn.body {
                Body::Final(text) => {
                    if self.jobs.running() > 0 && self.wait_for_a_job(rt).await? {
                        continue;
                    }
                    if delegate::stop_continues(self, rt, &text).await? {
                        continue;
                    }
                    return Ok(self.end(Outcome::Done, None, Some(text)));
                }
                Body::Calls(calls) => {
                    // Results go to the pool together (one request), in call order; a
                    // `context` call first sees every earlier result of its turn. On a cancel
                    // the calls not yet run are skipped; the results so far are kept.
                    // `agent` calls run after the others, concurrently (`delegate.rs`).
                    let (calls, pieces) = delegate::set_aside(calls, &self.spec.tools);
                    self.guard.new_turn();
                    let mut results = Vec::new();
                    for call in calls {
                        if self.cancel.is_cancelled() || self.hook_stop.is_some() {
                            break;
                        }
                        if call.tool == "context" {
                            let earlier = std::mem::take(&mut results);
                            compact::append_results(self, rt, earlier).await?;
                        }
                        results.push(self.run_call(rt, call).await);
                    }
                    if !pieces.is_empty() && !self.cancel.is_cancelled() && self.hook_stop.is_none()
                    {
                        // PreToolUse before the pieces run together: a refused one never runs.
                        let mut to_run = Vec::new();
                        for mut call in pieces {
                            match self.pre_tool(rt, &mut call) {
                                Ok(context) => to_run.push((call, context)),
                                Err(refusal) => {
                                    results.push(self.result_segment(rt, &call, refusal, true))
                                }
                            }
                        }
                        let calls: Vec<Call> = to_run.iter().map(|(c, _)| c.clone()).collect();
                        delegate::run_all(self, rt, &calls).await;
                        for (call, context) in to_run {
                            results.push(self.run_checked(rt, call, context).await);
                        }
                        delegate::in_call_order(&mut results);
                    }
                    compact::append_results(self, rt, results).await?;
                    if let Some(reason) = self.hook_stop.take() {
                        return Err(CoreError::Killed(reason));
                    }
                    if let Some(reason) = self.guard.take_stuck() {
                        return Err(CoreError::Failed(reason));
                    }
                }
            }
        }
    }

    /// One turn that parses: re-asked at most `TURN_RETRIES` times when it does not parse or
    /// the token limit cut it.
    async fn next_turn(&mut self, rt: &mut Runtime<'_>) -> Result<turn::Turn, CoreError> {
        let mut retries = 0;
        loop {
            compact::before_turn(self, rt).await?;
            let max_new_tokens = self.turn_tokens(rt)?;
            let segment_id = self.fresh_id("t");
            let generate = Generate {
                context: self.context.id,
                constraint: if self.spec.json {
                    let tools = self.offered_tools(rt);
                    Constraint::Json {
                        schema: rt.schema_for(&tools, self.spec.answer, self.context.ids()),
                    }
                } else {
                    Constraint::None
                },
                max_new_tokens,
                sampling: None,
                logprobs: None,
                append_as: Some(segment_id.clone()),
            };
            let done = rt.generate(&self.spec.id.clone(), generate).await?;
            let text = done.text.clone();
            let segment = Segment {
                id: segment_id.clone(),
                role: Role::Assistant,
                label: Label::Turn,
                text: text.clone(),
                pinned: false,
                tokens: 0,
            };
            self.context.appended_by_pool(rt.client, rt.sink, segment, &done.usage).await?;
            rt.sink.event(Event::Message {
                agent: self.spec.id.clone(),
                role: "assistant".into(),
                turn: Some(self.turn_base + self.turns + 1),
                call: None,
                tool: None,
                input: None,
                text: text.clone(),
                error: None,
                usage: Some(usage(&done.usage)),
                stop: Some(stop_name(done.stop).into()),
            });
            let mut next_call = self.next_call;
            match turn::parse_as(&text, &mut next_call, self.spec.answer) {
                Ok(turn) => {
                    self.next_call = next_call;
                    if turn.changed {
                        self.context
                            .replace(rt.client, rt.sink, &segment_id, turn.to_json(), None, None)
                            .await?;
                    }
                    if !turn.notes.is_empty() {
                        self.add_note(rt, Label::Note, turn.notes.join("\n")).await?;
                    }
                    return Ok(turn);
                }
                Err(error) => {
                    retries += 1;
                    let cut = done.stop == StopReason::MaxTokens;
                    if retries > TURN_RETRIES {
                        let what = if cut { "was cut by the token limit" } else { "did not parse" };
                        return Err(CoreError::Failed(format!(
                            "the turn {what} after {TURN_RETRIES} retries: {error}"
                        )));
                    }
                    if cut {
                        // A cut turn leaves the context; the model is asked again, shorter.
                        self.context.remove(rt.client, rt.sink, &segment_id).await?;
                        self.add_note(
                            rt,
                            Label::Note,
                            format!(
                                "Your last turn reached the limit of {max_new_tokens} tokens before its JSON closed, so it was removed. Answer again, shorter: a brief thought and fewer calls."
                            ),
                        )
                        .await?;
                    } else {
                        self.add_note(rt, Label::Note, format!("[parse error] {error}")).await?;
                    }
                }
            }
        }
    }

    /// `min(max_new_tokens, W / 4)`, cut to the room left on a hard-limit hit.
    fn turn_tokens(&mut self, rt: &Runtime<'_>) -> Result<u32, CoreError> {
        let window = self.spec.window;
        let wanted = rt.settings.context.max_new_tokens.min(window / 4).max(1);
        let room = window.saturating_sub(self.context.total_tokens);
        if room >= wanted {
            return Ok(wanted);
        }
        self.hard_limit_hits += 1;
        if self.hard_limit_hits >= HARD_LIMIT_HITS || room < MIN_TURN_TOKENS {
            return Err(CoreError::Killed(format!(
                "context floor: no room for a turn ({} of {window} tokens used, {room} left)",
                self.context.total_tokens
            )));
        }
        Ok(room)
    }

    /// The tools this turn's schema offers: the agent's, less what the repeat guard takes
    /// out, and none on the budget's last turn under `last_turn_final` (only a final).
    fn offered_tools(&self, rt: &Runtime<'_>) -> Vec<String> {
        let context = &rt.settings.context;
        if context.last_turn_final && self.turns + 1 >= self.spec.max_turns {
            Vec::new()
        } else if context.repeat_guard {
            self.guard.offered(&self.spec.tools, &self.context)
        } else {
            self.spec.tools.clone()
        }
    }

    /// Runs a call and returns its result segment (`[<tool> <id>]` and the text): the repeat
    /// guard's pointer, or `PreToolUse` (a deny is the result `refused: <reason>`), the call
    /// and `PostToolUse`.
    async fn run_call(&mut self, rt: &mut Runtime<'_>, mut call: Call) -> Segment {
        let guard = rt.settings.context.repeat_guard;
        if guard && let Some(pointer) = self.guard.answer(&call, &self.context) {
            return self.result_segment(rt, &call, pointer, false);
        }
        match self.pre_tool(rt, &mut call) {
            Ok(context) => self.run_checked(rt, call, context).await,
            Err(refusal) => self.result_segment(rt, &call, refusal, true),
        }
    }

    /// A call `PreToolUse` let through: run, then `PostToolUse` (or `PostToolUseFailure`).
    async fn run_checked(
        &mut self,
        rt: &mut Runtime<'_>,
        call: Call,
        pre_context: Option<String>,
    ) -> Segment {
        let result = calls::run(self, rt, &call).await;
        if rt.settings.context.repeat_guard {
            self.guard.ran(&call, result.is_ok());
        }
        let (mut text, error) = match result {
            Ok(text) => (text, false),
            Err(e) => (format!("error: {e}"), true),
        };
        let agent_type = self.spec.agent_type.clone();
        let reply = rt.hooks.fire(HookFire::PostToolUse {
            agent: &self.spec.id,
            agent_type: agent_type.as_deref(),
            call: &call.id,
            tool: &call.tool,
            input: &call.input,
            result: &text,
            error,
            interrupted: self.cancel.is_cancelled(),
        });
        let event = if error { "PostToolUseFailure" } else { "PostToolUse" };
        if let Some(reason) = reply.stop {
            self.hook_stop.get_or_insert(format!("a {event} hook ended the agent: {reason}"));
        }
        // What the hooks add is for the model: after the result, marked as theirs.
        for context in pre_context.into_iter().chain(reply.context) {
            text.push_str(&format!("\n\n[hook context] {context}"));
        }
        if let Some(reason) = reply.block {
            text.push_str(&format!("\n\n[{event} hook] {reason}"));
        }
        self.result_segment(rt, &call, text, error)
    }

    /// `PreToolUse` for a call: its context, or the refusal that is its result. An updated
    /// input replaces the call's.
    fn pre_tool(
        &mut self,
        rt: &mut Runtime<'_>,
        call: &mut Call,
    ) -> Result<Option<String>, String> {
        let agent_type = self.spec.agent_type.clone();
        let reply = rt.hooks.fire(HookFire::PreToolUse {
            agent: &self.spec.id,
            agent_type: agent_type.as_deref(),
            call: &call.id,
            tool: &call.tool,
            input: &call.input,
        });
        if let Some(reason) = reply.stop {
            self.hook_stop.get_or_insert(format!("a PreToolUse hook ended the agent: {reason}"));
            return Err(format!("refused: {reason}"));
        }
        if let Some(reason) = reply.block {
            return Err(format!("refused: {reason}"));
        }
        if let Some(reason) = reply.ask
            && let Err(why) = rt.ask_gate.ask(&self.spec.id, &call.tool, &call.input, &reason)
        {
            return Err(format!("refused: {why}"));
        }
        if let Some(input) = reply.updated_input {
            call.input = input;
        }
        Ok(reply.context)
    }

    /// A call's result as its `message` event and segment, cut to its tool's cap.
    fn result_segment(
        &mut self,
        rt: &mut Runtime<'_>,
        call: &Call,
        text: String,
        error: bool,
    ) -> Segment {
        let text = calls::cap(rt, call, text);
        rt.sink.event(Event::Message {
            agent: self.spec.id.clone(),
            role: "tool".into(),
            turn: Some(self.turns),
            call: Some(call.id.clone()),
            tool: Some(call.tool.clone()),
            input: Some(call.input.clone()),
            text: text.clone(),
            error: Some(error),
            usage: None,
            stop: None,
        });
        Segment {
            id: call.id.clone(),
            role: Role::User,
            label: Label::Result,
            text: format!("[{} {}]\n{text}", call.tool, call.id),
            pinned: false,
            tokens: 0,
        }
    }

    /// Appends the output of every job that ended.
    async fn deliver_jobs(&mut self, rt: &mut Runtime<'_>) -> Result<usize, CoreError> {
        let ended = self.jobs.take_finished();
        let n = ended.len();
        for job in ended {
            rt.sink.event(job_ended(&self.spec.id, &job));
            self.add_note(rt, Label::Job, job.text).await?;
        }
        Ok(n)
    }

    /// A final while jobs run: wait for one (up to the latest job's timeout plus 10 s, looking
    /// every second). True when one ended and the agent goes on.
    async fn wait_for_a_job(&mut self, rt: &mut Runtime<'_>) -> Result<bool, CoreError> {
        let deadline = self.jobs.wait_deadline().unwrap_or_else(Instant::now);
        while Instant::now() < deadline {
            if self.cancel.is_cancelled() {
                return Err(CoreError::Cancelled);
            }
            if self.deliver_jobs(rt).await? > 0 {
                return Ok(true);
            }
            tokio::time::sleep(JOB_POLL.min(deadline.saturating_duration_since(Instant::now())))
                .await;
        }
        Ok(self.deliver_jobs(rt).await? > 0)
    }
}

pub(crate) fn job_started(agent: &str, job: &str, command: &str) -> Event {
    Event::Job {
        agent: agent.to_owned(),
        job: job.to_owned(),
        state: "started".to_owned(),
        command: command.to_owned(),
        ending: None,
    }
}

fn job_ended(agent: &str, job: &JobEnd) -> Event {
    Event::Job {
        agent: agent.to_owned(),
        job: job.id.clone(),
        state: "ended".to_owned(),
        command: job.command.clone(),
        ending: job.text.lines().next().map(String::from),
    }
}

fn usage(u: &proto::Usage) -> Usage {
    Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        // A remote engine that reports no cached tokens: logged as no row reused.
        recomputed_from: u.recomputed_from.unwrap_or(0),
        prefill_ms: u.prefill_ms,
        decode_ms: u.decode_ms,
    }
}

fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndOfTurn => "end_of_turn",
        StopReason::Complete => "complete",
        StopReason::MaxTokens => "max_tokens",
        StopReason::ContextFull => "context_full",
        StopReason::Cancelled => "cancelled",
    }
}
