//! The turn loop (the spec's "The turn"): a turn generated under the turn schema, parsed
//! (re-asked when it does not parse or was cut), its calls run in order with the `agent` calls
//! after the others, each through `PreToolUse`/`PostToolUse`, the results appended in call
//! order; a final through `Stop`/`SubagentStop` and the background jobs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aerix_session::{Event, Outcome, Usage};
use aerix_tools::ToolError;
use aerix_turn::{Body, Call, TURN_RETRIES, Turn};
use caldrix_proto::{self as proto, Constraint, Generate, Role, StopReason};

use crate::runtime::agent::{Agent, AgentEnd, AgentSpec, job_ended};
use crate::runtime::calls;
use crate::runtime::context::{Context, Label, Segment};
use crate::runtime::error::CoreError;
use crate::runtime::gate::{self, Who};
use crate::runtime::hooks::HookFire;
use crate::runtime::services::{Caller, Runtime};

/// Hard-limit hits before an agent is killed.
pub const HARD_LIMIT_HITS: u32 = 2;
/// A turn cut to the room left needs at least this many tokens.
pub const MIN_TURN_TOKENS: u32 = 64;
/// `Stop` (the root) and `SubagentStop` continue an agent at most this many times per run.
pub const STOP_CONTINUES: u32 = 5;
/// How often a final waiting for background jobs looks at them.
const JOB_POLL: Duration = Duration::from_secs(1);

impl Agent {
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

    async fn turn_loop(&mut self, rt: &mut Runtime<'_>) -> Result<AgentEnd, CoreError> {
        let mut results = Vec::new();
        while let Some(opening) = self.opening.as_mut() {
            let Some((thought, calls)) = opening.next(rt.client, &results).await else { break };
            results = self.open(rt, thought, calls).await?;
        }
        self.opening = None;
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
                    if self.stop_continues(rt, &text).await? {
                        continue;
                    }
                    return Ok(self.end(Outcome::Done, None, Some(text)));
                }
                Body::Calls(calls) => {
                    // Results go to the pool together (one request), in call order; a
                    // `context` call first sees every earlier result of its turn. On a cancel
                    // the calls not yet run are skipped; the results so far are kept.
                    // `agent` calls run after the others, concurrently (`delegate.rs`).
                    let (calls, pieces) = set_aside(calls, &self.spec.tools);
                    self.guard.new_turn();
                    let mut results = Vec::new();
                    for call in calls {
                        if self.cancel.is_cancelled() || self.hook_stop.is_some() {
                            break;
                        }
                        if call.tool == "context" {
                            let earlier = std::mem::take(&mut results);
                            self.append_results(rt, earlier).await?;
                        }
                        results.push(self.run_call(rt, call).await);
                    }
                    if !pieces.is_empty() && !self.cancel.is_cancelled() && self.hook_stop.is_none()
                    {
                        // PreToolUse before the pieces run together: a refused one never runs.
                        let mut to_run = Vec::new();
                        for mut call in pieces {
                            match self.pre_tool(rt, &mut call).await {
                                Ok(context) => to_run.push((call, context)),
                                Err(refusal) => {
                                    results.push(self.result_segment(rt, &call, refusal, true))
                                }
                            }
                        }
                        let calls: Vec<Call> = to_run.iter().map(|(c, _)| c.clone()).collect();
                        let mut ran: HashMap<String, Result<String, ToolError>> =
                            self.delegate(rt, &calls).await.into_iter().collect();
                        // Each result takes the path every call's takes after it ran.
                        for (call, context) in to_run {
                            let result = ran.remove(&call.id).unwrap_or_else(|| {
                                Err(ToolError::new(
                                    "this piece did not run: the request was cancelled before it started",
                                ))
                            });
                            results.push(self.after_call(rt, call, result, context));
                        }
                        in_call_order(&mut results);
                    }
                    self.append_results(rt, results).await?;
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
    async fn next_turn(&mut self, rt: &mut Runtime<'_>) -> Result<Turn, CoreError> {
        let mut retries = 0;
        loop {
            let compaction = Arc::clone(&rt.services.compaction);
            compaction.before_turn(&mut self.context, self.spec.window, rt).await?;
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
                sampling: self.spec.sampling.map(|s| proto::Sampling {
                    seed: s.seed.wrapping_add(u64::from(self.turns)),
                    ..s
                }),
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
            self.context.appended_by_pool(rt.client, rt.sink, segment, &done).await?;
            rt.sink.event(self.turn_event(
                text.clone(),
                Some(usage(&done.usage)),
                stop_name(done.stop),
            ));
            let mut next_call = self.next_call;
            match aerix_turn::parse_as(&text, &mut next_call, self.spec.answer) {
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

    /// An opening turn: appended and logged as the agent's (its stop `opening`), its calls run
    /// as the agent's are (repeat guard, hooks, permissions, caps); it takes none of the budget.
    async fn open(
        &mut self,
        rt: &mut Runtime<'_>,
        thought: String,
        calls: Vec<(String, serde_json::Value)>,
    ) -> Result<Vec<String>, CoreError> {
        let call = |(tool, input): (String, serde_json::Value)| {
            self.next_call += 1;
            Call { id: format!("c{}", self.next_call), tool, input }
        };
        let calls: Vec<Call> = calls.into_iter().map(call).collect();
        let body = Body::Calls(calls.clone());
        let text = Turn { thought, body, notes: Vec::new(), changed: false }.to_json();
        let (role, label, id) = (Role::Assistant, Label::Turn, self.fresh_id("t"));
        let segment = Segment { id, role, label, text: text.clone(), pinned: false, tokens: 0 };
        self.context.append(rt.client, rt.sink, segment).await?;
        rt.sink.event(self.turn_event(text, None, "opening"));
        self.turn_base += 1;
        self.guard.new_turn();
        let mut results = Vec::new();
        for call in calls {
            results.push(self.run_call(rt, call).await);
        }
        let texts = results.iter().map(|s| s.text.clone()).collect();
        self.append_results(rt, results).await?;
        Ok(texts)
    }

    /// The `message` event of the agent's next turn.
    fn turn_event(&self, text: String, usage: Option<Usage>, stop: &str) -> Event {
        Event::Message {
            agent: self.spec.id.clone(),
            role: aerix_session::Role::Assistant,
            turn: Some(self.turn_base + self.turns + 1),
            call: None,
            tool: None,
            input: None,
            text,
            error: None,
            usage,
            stop: Some(stop.into()),
        }
    }

    /// `min(max_new_tokens, W / 4)`, cut to the room left on a hard-limit hit.
    fn turn_tokens(&mut self, rt: &Runtime<'_>) -> Result<u32, CoreError> {
        let window = self.spec.window;
        let wanted = rt.services.options.max_new_tokens.min(window / 4).max(1);
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
        let options = &rt.services.options;
        if options.last_turn_final && self.turns + 1 >= self.spec.max_turns {
            Vec::new()
        } else if options.repeat_guard {
            self.guard.offered(&self.spec.tools, &self.context)
        } else {
            self.spec.tools.clone()
        }
    }

    /// Runs a call and returns its result segment (`[<tool> <id>]` and the text): the repeat
    /// guard's pointer, or `PreToolUse` (a deny is the result `refused: <reason>`), the call
    /// and `PostToolUse`.
    async fn run_call(&mut self, rt: &mut Runtime<'_>, mut call: Call) -> Segment {
        let guard = rt.services.options.repeat_guard;
        let jobs = self.jobs.running();
        if guard && let Some((pointer, failed)) = self.guard.answer(&call, &self.context, jobs) {
            return self.result_segment(rt, &call, pointer, failed);
        }
        match self.pre_tool(rt, &mut call).await {
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
        self.after_call(rt, call, result, pre_context)
    }

    /// A call that ran: the repeat guard told, `PostToolUse` (or `PostToolUseFailure`), the
    /// hooks' context after the result, and the result's segment.
    fn after_call(
        &mut self,
        rt: &mut Runtime<'_>,
        call: Call,
        result: Result<String, ToolError>,
        pre_context: Option<String>,
    ) -> Segment {
        if rt.services.options.repeat_guard {
            self.guard.ran(&call, result.is_ok(), self.jobs.running());
        }
        let (mut text, error) = match result {
            Ok(text) => (text, false),
            Err(e) => (format!("error: {e}"), true),
        };
        let agent_type = self.spec.agent_type.clone();
        let who =
            Who { agent: &self.spec.id, agent_type: agent_type.as_deref(), held: &self.spec.held };
        let interrupted = self.cancel.is_cancelled();
        let (id, tool) = (&call.id, &call.tool);
        let reply = gate::after(rt, who, id, tool, &call.input, &text, error, interrupted);
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

    /// `PreToolUse`, the rules and the approval for a call ([`gate::before`]): its context, or
    /// the refusal that is its result (a hook's stop ends the agent after it).
    async fn pre_tool(
        &mut self,
        rt: &mut Runtime<'_>,
        call: &mut Call,
    ) -> Result<Option<String>, String> {
        let agent_type = self.spec.agent_type.clone();
        let who =
            Who { agent: &self.spec.id, agent_type: agent_type.as_deref(), held: &self.spec.held };
        match gate::before(rt, who, &call.id, &call.tool, &call.input).await {
            Ok(passed) => {
                call.input = passed.input;
                Ok(passed.context)
            }
            Err(refused) => {
                let text = refused.text();
                if let Some(stop) = refused.stop {
                    self.hook_stop.get_or_insert(stop);
                }
                Err(text)
            }
        }
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
            role: aerix_session::Role::Tool,
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

    /// Results appended in call order, fitted to the room left (`Compaction`).
    async fn append_results(
        &mut self,
        rt: &mut Runtime<'_>,
        results: Vec<Segment>,
    ) -> Result<(), CoreError> {
        let compaction = Arc::clone(&rt.services.compaction);
        compaction.append_results(&mut self.context, self.spec.window, rt, results).await
    }

    /// Runs this turn's `agent` calls together (`Delegation`): each result by its call's id.
    async fn delegate(
        &mut self,
        rt: &mut Runtime<'_>,
        calls: &[Call],
    ) -> Vec<(String, Result<String, ToolError>)> {
        let caller = Caller {
            id: self.spec.id.clone(),
            depth: self.spec.depth,
            member: self.spec.member.clone(),
            window: self.spec.window,
            json: self.spec.json,
            held: self.spec.held.clone(),
            prefix: self
                .context
                .segments
                .iter()
                .take_while(|s| matches!(s.label, Label::System | Label::Instructions))
                .map(|s| Segment { tokens: 0, ..s.clone() })
                .collect(),
        };
        let delegation = Arc::clone(&rt.services.delegation);
        delegation.run_all(rt, &caller, calls).await
    }

    /// A final fires `Stop` (the root) or `SubagentStop`; a block continues the agent (the
    /// reason is its next instruction), at most `STOP_CONTINUES` times per run. True when it
    /// goes on.
    async fn stop_continues(
        &mut self,
        rt: &mut Runtime<'_>,
        last_message: &str,
    ) -> Result<bool, CoreError> {
        let active = self.stop_continues > 0;
        let id = self.spec.id.clone();
        let (event, reply) = match self.spec.agent_type.clone() {
            Some(agent_type) => (
                "SubagentStop",
                rt.services.hooks.fire(HookFire::SubagentStop {
                    agent: &id,
                    agent_type: &agent_type,
                    last_message,
                    active,
                }),
            ),
            None => (
                "Stop",
                rt.services.hooks.fire(HookFire::Stop { agent: &id, last_message, active }),
            ),
        };
        match reply.block {
            Some(reason) if reply.stop.is_none() && self.stop_continues < STOP_CONTINUES => {
                self.stop_continues += 1;
                self.add_note(rt, Label::Note, format!("[{event} hook] {reason}")).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// Runs an agent with `spec` on a new context of `segments` (logged), after its `opening`,
/// and drops the context after: what a piece of delegation runs.
pub async fn run_agent(
    rt: &mut Runtime<'_>,
    spec: AgentSpec,
    segments: Vec<Segment>,
    opening: Option<Box<dyn crate::runtime::agent::Opening>>,
) -> Result<AgentEnd, CoreError> {
    let context =
        Context::create(rt.client, rt.sink, &spec.id, &spec.member, segments, true).await?;
    let context_id = context.id;
    let mut agent = Agent::new(spec, context, rt.cwd, rt.cancel.clone());
    agent.opening = opening;
    let end = agent.run(rt).await;
    let _ = rt.client.drop_context(context_id).await;
    Ok(end)
}

/// Splits a turn's calls: the `agent` calls the agent may make run later, together.
fn set_aside(calls: Vec<Call>, tools: &[String]) -> (Vec<Call>, Vec<Call>) {
    if !tools.iter().any(|t| t == "agent") {
        return (calls, Vec::new());
    }
    calls.into_iter().partition(|c| c.tool != "agent")
}

/// Results go back in call order (`c2` before `c10`), whichever ran first.
fn in_call_order(results: &mut [Segment]) {
    results.sort_by_key(|s| s.id.strip_prefix('c').and_then(|n| n.parse::<u32>().ok()));
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
        // A stop reason a newer pool sends (the enum is open on the wire).
        _ => "other",
    }
}
