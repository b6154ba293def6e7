//! One attempt of a piece, in its own tree: the implementer (greedy for the first attempt,
//! sampled with a seed of its own for the others), then the check: a command the harness runs
//! (its exit status the verdict), or for a prose check a model verifier.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::runtime::gate::{self, Who};
use crate::runtime::{
    AgentEnd, AgentSpec, Caller, CoreError, Held, HookFire, Label, Runtime, Segment, Stats, fill,
    offer_skill, run_agent,
};
use aerix_config::AgentDefinition as Definition;
use aerix_session::{Event, Outcome};
use aerix_tools::{Cancel, FileSet, OwnedEnv, Roots, ToolError};
use aerix_turn::{ALL_TOOLS, Answer, VERIFIER_TOOLS};
use caldrix_proto::{Role, Sampling};
use serde_json::{Value, json};

use crate::delegate::opening::{Opening, Whole};
use crate::delegate::piece::{Input, Member, connect};
use crate::delegate::sink::{PieceSink, Trace};
use crate::delegate::{Shared, lock};
use crate::delegate::{checks, reasons};

/// What `brief.md` says done looks like.
const DONE_LOOKS_LIKE: &str = "The check passes when you run it, and again when a verifier who sees only this brief, your summary and the files you touched runs it.";

/// One of a piece's attempts, across its rounds.
pub(crate) struct Lane {
    /// From 1.
    pub(crate) number: u32,
    /// Its agents' ids start so: the piece's id with one attempt, `<piece>.a<k>` with several.
    pub(crate) prefix: String,
    /// Where it works: its worktree, or the caller's tree in place.
    pub(crate) tree: PathBuf,
    pub(crate) sampling: Option<Sampling>,
    pub(crate) trace: Mutex<Trace>,
    /// Cancelled with the request, or alone when another attempt passed.
    pub(crate) cancel: Cancel,
}

/// How one round of an attempt ended.
#[derive(Clone, Debug)]
pub(crate) enum Verdict {
    Pass,
    Fail(String),
    Cancelled,
    /// The implementer ended other than `done`: this attempt stops.
    Ended(Outcome, String),
}

/// How a verdict was reached, for the caller's result.
#[derive(Clone, Debug)]
pub(crate) struct Judged {
    pub(crate) attempt: u32,
    pub(crate) round: u32,
    /// `command` or `verifier`.
    pub(crate) by: &'static str,
    /// The command's exit status, or the verifier's id.
    pub(crate) exit: Option<i32>,
    pub(crate) verifier: Option<String>,
    pub(crate) pass: bool,
}

impl Judged {
    /// The session log's `check` event of this verdict, on `agent` (the implementer judged).
    pub(crate) fn event(&self, agent: String, check: &str, reason: String) -> Event {
        Event::Check {
            agent,
            attempt: self.attempt,
            round: self.round,
            by: self.by.to_owned(),
            check: check.to_owned(),
            exit: self.exit,
            verdict: if self.pass { "pass" } else { "fail" }.to_owned(),
            reason,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut v = json!({
            "attempt": self.attempt,
            "round": self.round,
            "by": self.by,
            "verdict": if self.pass { "pass" } else { "fail" },
        });
        if let Some(exit) = self.exit {
            v["exit"] = json!(exit);
        }
        if let Some(verifier) = &self.verifier {
            v["verifier"] = json!(verifier);
        }
        v
    }
}

/// A round of one attempt.
pub(crate) struct Ended {
    pub(crate) verdict: Verdict,
    /// The implementer's final.
    pub(crate) summary: String,
    pub(crate) judged: Vec<Judged>,
    pub(crate) stats: Stats,
    /// A passing attempt's change, as `tests_kept` read it (so landing reads it once).
    pub(crate) change: Option<aerix_worktrees::Change>,
}

impl Ended {
    /// A round that ended without a verdict, failed for `why`.
    pub(crate) fn stopped(why: String) -> Ended {
        Ended {
            verdict: Verdict::Ended(Outcome::Failed, why),
            summary: String::new(),
            judged: Vec::new(),
            stats: Stats::default(),
            change: None,
        }
    }
}

/// Round `round` (from 0) of `lane`; `reasons`: why every attempt of the last round failed,
/// grouped.
pub(crate) async fn run(
    shared: &Shared,
    caller: &Caller,
    lane: &Lane,
    input: &Input,
    member: &Member,
    round: u32,
    reasons: &[reasons::Group],
) -> Ended {
    let mut ended = Ended {
        verdict: Verdict::Cancelled,
        summary: String::new(),
        judged: Vec::new(),
        stats: Stats::default(),
        change: None,
    };
    let mut client = match connect(shared).await {
        Ok(client) => client,
        Err(e) => {
            ended.verdict = Verdict::Ended(Outcome::Failed, e.0);
            return ended;
        }
    };
    let mut sink = PieceSink::new(&shared.outlet, &lane.prefix, &lane.trace);
    let roots = roots(shared, &lane.tree);
    // The caller's services as they are: the plan gate is the root's alone (an attempt's
    // agents are deeper), the rest is the session's.
    let services = Arc::clone(&shared.services);
    let mut rt =
        Runtime::sharing(&mut *client, &mut sink, services, &lane.tree, lane.cancel.clone())
            .with_roots(roots);
    let implementer_id =
        if round == 0 { lane.prefix.clone() } else { format!("{}.r{round}", lane.prefix) };
    let verdict = async {
        let end =
            implementer(&mut rt, shared, caller, lane, member, input, &implementer_id, reasons)
                .await?;
        let verifier_id = format!("{}.v{}", lane.prefix, round + 1);
        let judging = Judging { lane, round, implementer: &implementer_id, verifier: &verifier_id };
        if end.outcome != Outcome::Done {
            let reason = end.reason.unwrap_or_default();
            let what = format!(
                "the implementer {implementer_id} ended {}: {reason}",
                end.outcome.as_str()
            );
            // A write that made the check pass is not lost to the turns after it: a command
            // check (cheap, and read by the harness, not a model) still judges the tree of an
            // implementer that ran out of turns or failed (`stuck` included). Not after a
            // cancel, nor after a hook or a bound ended it.
            let command = shared.services.checks.contains(&input.check);
            if command && matches!(end.outcome, Outcome::Budget | Outcome::Failed) {
                // What a `verify.review` verifier reads: it runs only once the check passed.
                let summary = format!("{what}. The check passed in its tree afterwards.");
                let judged = &mut ended.judged;
                let verdict =
                    judge(&mut rt, shared, caller, member, input, &judging, &summary, judged)
                        .await?;
                if matches!(verdict, Verdict::Pass) {
                    ended.summary = summary;
                }
                if matches!(verdict, Verdict::Pass | Verdict::Cancelled) {
                    return Ok(verdict);
                }
            }
            return Ok::<_, ToolError>(Verdict::Ended(end.outcome, what));
        }
        ended.summary = end.final_text.unwrap_or_default();
        judge(&mut rt, shared, caller, member, input, &judging, &ended.summary, &mut ended.judged)
            .await
    }
    .await;
    ended.verdict = match verdict {
        Ok(verdict) => verdict,
        Err(e) => Verdict::Ended(Outcome::Failed, e.0),
    };
    ended.stats = rt.stats.clone();
    ended
}

/// The file tools' roots in `tree`: the tree, the caller's other directories, and a worktree's
/// git directories (its own writable, the repository's shared one to read) so `git` works in it
/// under the sandbox too.
fn roots(shared: &Shared, tree: &std::path::Path) -> Roots {
    let mut roots = Roots::new(tree);
    for dir in shared.roots.writable().iter().filter(|d| d.as_path() != shared.roots.tree()) {
        roots = roots.with_dir(dir);
    }
    for dir in shared.roots.read_only() {
        roots = roots.with_read_only(dir);
    }
    if let Some((own, common)) = crate::delegate::tree::git_dirs(tree) {
        roots = roots.with_dir(&own).with_read_only(&common);
    }
    roots
}

/// A definition that lists its tools gets an MCP tool (`mcp__...`, added by `tools_at`) only
/// when it names it.
fn definition_held(tools: Vec<String>, definition: Option<&Definition>) -> Vec<String> {
    let Some(listed) = definition.and_then(|d| d.tools.as_ref()) else { return tools };
    tools.into_iter().filter(|t| !t.starts_with("mcp__") || listed.contains(t)).collect()
}

#[allow(clippy::too_many_arguments, reason = "the piece's parts, each once")]
async fn implementer(
    rt: &mut Runtime<'_>,
    shared: &Shared,
    caller: &Caller,
    lane: &Lane,
    member: &Member,
    input: &Input,
    id: &str,
    reasons: &[reasons::Group],
) -> Result<AgentEnd, ToolError> {
    let depth = caller.depth + 1;
    let definition = input.definition.as_ref();
    let tools: Vec<String> = match definition.and_then(|d| d.tools.as_ref()) {
        Some(tools) => ALL_TOOLS
            .iter()
            .filter(|t| tools.iter().any(|d| d == *t))
            .map(|t| (*t).to_owned())
            .collect(),
        None => ALL_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
    };
    let tools = offer_skill(tools, &rt.services.skills);
    let spec = AgentSpec {
        id: id.to_owned(),
        member: member.alias.clone(),
        window: member.window,
        json: member.json,
        tools: definition_held(rt.tools_at(tools, depth), definition),
        max_turns: definition.and_then(|d| d.max_turns).unwrap_or(shared.delegator.max_turns),
        depth,
        answer: Answer::Text,
        agent_type: Some(definition.map_or("implementer", |d| d.name.as_str()).to_owned()),
        held: held(caller, definition),
        sampling: lane.sampling,
    };
    let mut segments = caller.prefix.clone();
    if let Some(definition) = definition.filter(|d| !d.body.trim().is_empty()) {
        segments.push(user("definition", Label::Instructions, definition.body.trim().to_owned()));
    }
    let mut brief = fill(
        rt.services.prompts.get("brief.md"),
        &[
            ("brief", &input.brief),
            ("check", &input.check),
            ("check_turn", &check_turn("First I run the check, to see what fails.", &input.check)),
            ("done_looks_like", DONE_LOOKS_LIKE),
        ],
    );
    let attempts: usize = reasons.iter().map(|g| g.attempts.len()).sum();
    match (attempts, reasons) {
        (_, []) => {}
        (1, [one]) => brief.push_str(&format!(
            "\n\n# The last attempt failed its check\n\n{}\n\nThe repository holds that attempt's changes: fix what the check found.",
            one.reason
        )),
        (n, [one]) => brief.push_str(&format!(
            "\n\n# The last attempts failed their checks\n\nEach tried in a tree of its own; this tree holds one of them. All {n} failed the same way:\n\n{}\n",
            one.reason
        )),
        (_, several) => {
            brief.push_str(
                "\n\n# The last attempts failed their checks\n\nEach tried in a tree of its own; this tree holds one of them. Why each failed:\n",
            );
            for group in several {
                brief.push_str(&format!("\n## From {}\n\n{}\n", group.label(), group.reason));
            }
        }
    }
    segments.push(user("brief", Label::Prompt, brief));
    let command = shared.services.checks.contains(&input.check).then(|| input.check.clone());
    let mut opening = Opening::new(command, &input.brief, &input.check, &lane.tree);
    if shared.delegator.whole {
        let (member, sampling) = (member.alias.clone(), lane.sampling);
        opening = opening.with_whole(Whole { member, sampling, cancel: lane.cancel.clone() });
    }
    spawn(rt, caller, spec, segments, None, Some(Box::new(opening))).await
}

/// The patterns holding an implementer: its caller's, and its definition's (never widened: a
/// piece of a held agent is held as it is).
fn held(caller: &Caller, definition: Option<&Definition>) -> Vec<Held> {
    let mut held = caller.held.clone();
    if let Some(d) = definition.filter(|d| !d.held.is_empty()) {
        held.push(Held { definition: d.name.clone(), patterns: d.held.clone() });
    }
    held
}

/// Which judging this is.
struct Judging<'a> {
    lane: &'a Lane,
    /// From 0.
    round: u32,
    implementer: &'a str,
    verifier: &'a str,
}

/// The check of a round: a known command run by the harness (and, with `verify.review`, a
/// verifier after it passes), else a verifier.
#[allow(clippy::too_many_arguments, reason = "the piece's parts, each once")]
async fn judge(
    rt: &mut Runtime<'_>,
    shared: &Shared,
    caller: &Caller,
    member: &Member,
    input: &Input,
    judging: &Judging<'_>,
    summary: &str,
    judged: &mut Vec<Judged>,
) -> Result<Verdict, ToolError> {
    let (attempt, round) = (judging.lane.number, judging.round + 1);
    if shared.services.checks.contains(&input.check) {
        let run = command_check(rt, caller, judging, &input.check).await?;
        let (pass, reason) = match &run {
            Ok(run) => (run.passed(), if run.passed() { String::new() } else { run.reason() }),
            Err(refused) => (false, refused.clone()),
        };
        let exit = run.as_ref().ok().and_then(|r| r.exit);
        let verdict = Judged { attempt, round, by: "command", exit, verifier: None, pass };
        rt.sink.event(verdict.event(judging.implementer.to_owned(), &input.check, reason.clone()));
        judged.push(verdict);
        if rt.cancel.is_cancelled() {
            return Ok(Verdict::Cancelled);
        }
        if !pass {
            return Ok(Verdict::Fail(reason));
        }
        if !shared.delegator.review {
            return Ok(Verdict::Pass);
        }
    }
    let files = files_text(&lock(&judging.lane.trace).files);
    let verdict = verifier(rt, shared, caller, member, input, judging, summary, &files).await?;
    let (pass, reason) = match &verdict {
        Verdict::Pass => (true, String::new()),
        Verdict::Fail(reason) => (false, reason.clone()),
        Verdict::Cancelled | Verdict::Ended(..) => return Ok(verdict),
    };
    let verifier = Some(judging.verifier.to_owned());
    let judgement = Judged { attempt, round, by: "verifier", exit: None, verifier, pass };
    rt.sink.event(judgement.event(judging.implementer.to_owned(), &input.check, reason));
    judged.push(judgement);
    Ok(verdict)
}

/// The check command, run as the verifier's `bash` call would be: through the permission rules
/// (a refusal is the check's failure), in the attempt's tree, under `bash`'s bounds.
async fn command_check(
    rt: &mut Runtime<'_>,
    caller: &Caller,
    judging: &Judging<'_>,
    command: &str,
) -> Result<Result<checks::CheckRun, String>, ToolError> {
    // The model wrote the check: it takes the path a model's `bash` takes (PreToolUse, the
    // rules, the approval, then the sandbox below), and PostToolUse sees its result.
    let who = Who { agent: judging.verifier, agent_type: Some("verifier"), held: &caller.held };
    let call = format!("{}-check", judging.verifier);
    let input = match gate::before(rt, who, &call, "bash", &json!({"command": command})).await {
        Ok(passed) => passed.input,
        Err(refused) => {
            return Ok(Err(format!("the check `{command}` was refused: {}", refused.why)));
        }
    };
    // A hook may rewrite the command, as it may a model's.
    let Some(command) = input.get("command").and_then(|c| c.as_str()).map(str::to_owned) else {
        return Ok(Err(format!(
            "the check `{command}` was refused: a PreToolUse hook left no command"
        )));
    };
    // On a blocking thread of the runtime's pool, as a model's `bash` runs.
    let env = OwnedEnv {
        cwd: rt.cwd.to_owned(),
        cancel: rt.cancel.clone(),
        jobs: Arc::default(),
        files: Arc::new(FileSet::new(rt.cwd)),
        roots: rt.roots.clone(),
        sandbox: rt.services.sandbox.clone(),
    };
    let owned = command.clone();
    let run = tokio::task::spawn_blocking(move || {
        let run = checks::run(&owned, &env.env()).map_err(|e| e.0);
        drop(env.jobs.kill_all());
        run
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    let command = command.as_str();
    let run = run.map_err(|e| format!("the check `{command}` could not run: {e}"));
    let (text, error) = match &run {
        Ok(run) => {
            let exit = run.exit.map_or_else(|| "none".to_owned(), |code| code.to_string());
            (format!("{}\n[exit {exit}]", run.tail.trim_end()), !run.passed())
        }
        Err(why) => (why.clone(), true),
    };
    let interrupted = rt.cancel.is_cancelled();
    // Its reply only annotates a model's result; the check's verdict is its exit status.
    gate::after(rt, who, &call, "bash", &input, &text, error, interrupted);
    Ok(run)
}

#[allow(clippy::too_many_arguments, reason = "the piece's parts, each once")]
async fn verifier(
    rt: &mut Runtime<'_>,
    shared: &Shared,
    caller: &Caller,
    member: &Member,
    input: &Input,
    judging: &Judging<'_>,
    summary: &str,
    files: &str,
) -> Result<Verdict, ToolError> {
    let id = judging.verifier;
    let spec = AgentSpec {
        id: id.to_owned(),
        member: member.alias.clone(),
        window: member.window,
        json: member.json,
        tools: VERIFIER_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
        max_turns: shared.delegator.max_turns,
        depth: caller.depth + 1,
        answer: Answer::Verdict,
        agent_type: Some("verifier".to_owned()),
        // A verifier checks the piece's work with the caller's rights, never wider ones.
        held: caller.held.clone(),
        sampling: None,
    };
    let text = fill(
        rt.services.prompts.get("verifier.md"),
        &[
            ("brief", &input.brief),
            ("check", &input.check),
            ("check_turn", &check_turn("First I run the check: does it still fail?", &input.check)),
            ("summary", summary),
            ("files", files),
        ],
    );
    let mut segments = caller.prefix.clone();
    segments.push(user("brief", Label::Prompt, text));
    let verify = HookFire::Verify {
        agent: id,
        implementer: judging.implementer,
        attempt: judging.round + 1,
    };
    let end = spawn(rt, caller, spec, segments, Some(verify), None).await?;
    Ok(match end.outcome {
        Outcome::Cancelled => Verdict::Cancelled,
        Outcome::Done => read_verdict(end.final_text.as_deref().unwrap_or_default()),
        other => Verdict::Fail(format!(
            "the verifier ended {} without a verdict: {}",
            other.as_str(),
            end.reason.unwrap_or_default()
        )),
    })
}

/// A turn that runs the check as a command, for `brief.md` and `verifier.md` (rendered here,
/// so the check's quotes are escaped).
fn check_turn(thought: &str, check: &str) -> String {
    json!({"thought": thought, "calls": [{"tool": "bash", "input": {"command": check}}]})
        .to_string()
}

/// `{"verdict": "pass"|"fail", "reason": ...}`; anything else is a `fail`.
fn read_verdict(text: &str) -> Verdict {
    let value: Value = serde_json::from_str(text.trim()).unwrap_or(Value::Null);
    let reason = value.get("reason").and_then(Value::as_str).unwrap_or_default().to_owned();
    match value.get("verdict").and_then(Value::as_str) {
        Some("pass") => Verdict::Pass,
        Some("fail") => Verdict::Fail(reason),
        _ => Verdict::Fail(format!("the verifier gave no verdict; its final was: {text}")),
    }
}

/// The files the attempt touched so far, one a line, for `verifier.md`.
fn files_text(files: &[String]) -> String {
    if files.is_empty() {
        return "(none written or edited)".to_owned();
    }
    files.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n")
}

/// `AgentSpawn` and `SubagentStart` (a `continue: false` ends it before it runs, a context is
/// appended to its brief), its events, its opening and run, its context dropped.
async fn spawn(
    rt: &mut Runtime<'_>,
    caller: &Caller,
    spec: AgentSpec,
    mut segments: Vec<Segment>,
    verify: Option<HookFire<'_>>,
    opening: Option<Box<dyn crate::runtime::Opening>>,
) -> Result<AgentEnd, ToolError> {
    let agent_type = spec.agent_type.clone().unwrap_or_default();
    let id = spec.id.clone();
    rt.sink.event(Event::AgentSpawn {
        agent: id.clone(),
        parent: Some(caller.id.clone()),
        kind: agent_type.clone(),
        route: Some(aerix_session::Route::Delegate),
        member: spec.member.clone(),
        tools: spec.tools.clone(),
        max_turns: spec.max_turns,
    });
    let mut stopped = None;
    let mut fire = |event: HookFire<'_>, segments: &mut Vec<Segment>| {
        let reply = rt.services.hooks.fire(event);
        if let Some(context) = reply.context
            && let Some(brief) = segments.last_mut()
        {
            brief.text.push_str(&format!("\n\n# Hook context\n\n{}", context.trim()));
        }
        if stopped.is_none() {
            stopped = reply.stop.map(|r| format!("a {} hook ended it: {r}", event.name()));
        }
    };
    fire(
        HookFire::AgentSpawn { agent: &id, parent: &caller.id, agent_type: &agent_type },
        &mut segments,
    );
    fire(HookFire::SubagentStart { agent: &id, agent_type: &agent_type }, &mut segments);
    if let Some(verify) = verify {
        fire(verify, &mut segments);
    }
    if let Some(reason) = stopped {
        let end =
            AgentEnd { outcome: Outcome::Killed, reason: Some(reason), final_text: None, turns: 0 };
        rt.sink.event(Event::AgentEnd {
            agent: id,
            outcome: end.outcome,
            reason: end.reason.clone(),
            final_text: None,
            turns: 0,
        });
        return Ok(end);
    }
    run_agent(rt, spec, segments, opening)
        .await
        .map_err(|e: CoreError| ToolError::new(format!("{id}: {e}")))
}

fn user(id: &str, label: Label, text: String) -> Segment {
    Segment { id: id.to_owned(), role: Role::User, label, text, pinned: true, tokens: 0 }
}
