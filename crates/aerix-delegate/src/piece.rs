//! One piece: the implementer on a fresh copy of the caller's shared prefix, then a verifier on
//! a fresh context, the implementer rerun with the verifier's reason at most
//! `delegation.retries` times; the caller gets `{summary, files_touched, checks_run, outcome}`.

use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex};

use aerix_core::{
    ACCEPT_PLANS, AgentEnd, AgentSpec, Caller, CoreError, Definition, Held, HookFire, Label,
    Runtime, Segment, Sink, Stats, fill, offer_skill, run_agent,
};
use aerix_session::{Event, Outcome};
use aerix_tools::ToolError;
use aerix_turn::{ALL_TOOLS, Answer, Call, VERIFIER_TOOLS};
use caldrix_client::Client;
use caldrix_proto::{ErrorKind, FrameFormat, Role};
use serde_json::{Value, json};

use crate::sink::{PieceSink, Trace};
use crate::{Delegator, Shared, lock};

/// How long a piece waits for a free pool connection (the pool's `max_connections`) before its
/// call is an error: the bound of a control request.
const CONNECT_WAIT: Duration = Duration::from_secs(30);
const CONNECT_POLL: Duration = Duration::from_millis(100);

/// What `brief.md` says done looks like.
const DONE_LOOKS_LIKE: &str = "The check passes when you run it, and again when a verifier who sees only this brief, your summary and the files you touched runs it.";

/// The member a piece's agents run on.
struct Member {
    alias: String,
    window: u32,
    json: bool,
}

/// How a piece ended.
struct Ending {
    outcome: Outcome,
    summary: String,
}

/// Runs the piece of `call`; its result for the caller, and the time its generations took.
pub(crate) async fn run(
    shared: &Shared<'_>,
    caller: &Caller,
    call: &Call,
) -> (Result<String, ToolError>, Stats) {
    let piece = format!("{}.{}", caller.id, call.id);
    let mut client = match connect(shared).await {
        Ok(client) => client,
        Err(e) => return (Err(e), Stats::default()),
    };
    let trace = Mutex::new(Trace::default());
    let mut sink = PieceSink::new(&shared.sink, &piece, &trace);
    let mut rt = Runtime::new(
        &mut client,
        &mut sink,
        shared.options.clone(),
        shared.prompts,
        shared.cwd,
        shared.cancel.clone(),
    )
    .with_roots(shared.roots.clone())
    .with_sandbox(shared.sandbox.clone())
    .with_hooks(shared.hooks)
    .with_definitions(shared.definitions)
    .with_skills(shared.skills)
    .with_gates(&ACCEPT_PLANS, shared.ask_gate)
    .with_permissions(shared.permissions)
    .with_compaction(Arc::clone(&shared.compaction))
    .with_delegation(Arc::clone(&shared.delegation));
    let ending = attempts(&mut rt, shared.delegator, caller, &piece, call, &trace).await;
    let stats = rt.stats.clone();
    drop(rt);
    let result = ending.map(|ending| {
        let cap = usize::try_from(shared.options.tool_cap("agent")).unwrap_or(usize::MAX);
        let trace = lock(&trace).clone();
        result_json(&ending, &trace.files, &trace.checks, cap, &mut sink)
    });
    (result, stats)
}

/// A connection of the piece's own; the pool's `TooManyConnections` is waited out (a piece
/// ending frees one), up to `CONNECT_WAIT`.
async fn connect(shared: &Shared<'_>) -> Result<Client, ToolError> {
    let socket = &shared.delegator.socket;
    let start = Instant::now();
    loop {
        match Client::connect(socket, FrameFormat::Cbor, "aerix").await {
            Ok(client) => return Ok(client),
            Err(e)
                if e.kind() == Some(ErrorKind::TooManyConnections)
                    && start.elapsed() < CONNECT_WAIT
                    && !shared.cancel.is_cancelled() =>
            {
                tokio::time::sleep(CONNECT_POLL).await;
            }
            Err(e) => {
                return Err(ToolError::new(format!("the piece could not reach the pool: {e}")));
            }
        }
    }
}

/// The `agent` call's input, checked.
struct Input {
    brief: String,
    check: String,
    definition: Option<Definition>,
    member: Option<String>,
}

fn input(rt: &Runtime<'_>, value: &Value) -> Result<Input, ToolError> {
    let text =
        |key: &str| value.get(key).and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty());
    let brief = text("brief").ok_or_else(|| ToolError::new("`agent` needs a `brief`"))?;
    let check = text("check").ok_or_else(|| ToolError::new("`agent` needs a `check`"))?;
    let definition = match text("definition") {
        Some(name) => Some(
            rt.definitions
                .get(name)
                .ok_or_else(|| ToolError::new(format!("no agent definition named `{name}`")))?,
        ),
        None => None,
    };
    Ok(Input {
        brief: brief.to_owned(),
        check: check.to_owned(),
        definition,
        member: text("member").map(str::to_owned),
    })
}

/// The call's `member`, else the definition's `model` when the pool has it, else the caller's.
async fn member(rt: &mut Runtime<'_>, caller: &Caller, input: &Input) -> Result<Member, ToolError> {
    let wanted = input.member.clone();
    let from_definition = input.definition.as_ref().and_then(|d| d.model.clone());
    if wanted.is_none() && from_definition.is_none() {
        return Ok(Member {
            alias: caller.member.clone(),
            window: caller.window,
            json: caller.json,
        });
    }
    let members = rt.client.members().await.map_err(|e| {
        // The client's own words, as before the connection was a trait.
        let e = match e {
            CoreError::Pool(e) => e.to_string(),
            other => other.to_string(),
        };
        ToolError::new(format!("listing the pool's members: {e}"))
    })?;
    let find = |name: &str| members.iter().find(|m| m.alias == name || m.reference == name);
    let found = match (&wanted, &from_definition) {
        (Some(name), _) => Some(find(name).ok_or_else(|| {
            let aliases: Vec<&str> = members.iter().map(|m| m.alias.as_str()).collect();
            ToolError::new(format!("no pool member `{name}`; loaded: {}", aliases.join(", ")))
        })?),
        // Claude Code's `inherit`, `sonnet`, ...: no such member here, the caller's serves.
        (None, Some(model)) => find(model),
        (None, None) => None,
    };
    Ok(match found {
        Some(m) => {
            Member { alias: m.alias.clone(), window: m.context_window, json: m.json_constraint }
        }
        None => Member { alias: caller.member.clone(), window: caller.window, json: caller.json },
    })
}

/// The implementer, the verifier, the retries.
async fn attempts(
    rt: &mut Runtime<'_>,
    delegator: &Delegator,
    caller: &Caller,
    piece: &str,
    call: &Call,
    trace: &Mutex<Trace>,
) -> Result<Ending, ToolError> {
    let input = input(rt, &call.input)?;
    let member = member(rt, caller, &input).await?;
    let retries = delegator.retries;
    let mut last_reason: Option<String> = None;
    for attempt in 0..=retries {
        let id = if attempt == 0 { piece.to_owned() } else { format!("{piece}.r{attempt}") };
        let end = implementer(rt, delegator, caller, &member, &input, &id, last_reason.as_deref())
            .await?;
        if end.outcome != Outcome::Done {
            let reason = end.reason.unwrap_or_default();
            return Ok(Ending {
                outcome: end.outcome,
                summary: format!("the implementer {id} ended {}: {reason}", end.outcome.as_str()),
            });
        }
        let summary = end.final_text.unwrap_or_default();
        let verifier_id = format!("{piece}.v{}", attempt + 1);
        let files = files_text(&lock(trace).files);
        let attempt = Attempt { implementer: &id, verifier: &verifier_id, number: attempt + 1 };
        match verifier(rt, delegator, caller, &member, &input, &attempt, &summary, &files).await? {
            Verdict::Pass => return Ok(Ending { outcome: Outcome::Done, summary }),
            Verdict::Fail(reason) => last_reason = Some(reason),
            Verdict::Cancelled => {
                return Ok(Ending { outcome: Outcome::Cancelled, summary: "cancelled".into() });
            }
        }
    }
    Ok(Ending {
        outcome: Outcome::Failed,
        summary: format!(
            "verification failed after {} attempts: {}",
            retries + 1,
            last_reason.unwrap_or_default()
        ),
    })
}

async fn implementer(
    rt: &mut Runtime<'_>,
    delegator: &Delegator,
    caller: &Caller,
    member: &Member,
    input: &Input,
    id: &str,
    failed: Option<&str>,
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
    let tools = offer_skill(tools, rt.skills);
    let spec = AgentSpec {
        id: id.to_owned(),
        member: member.alias.clone(),
        window: member.window,
        json: member.json,
        tools: rt.tools_at(tools, depth),
        max_turns: definition.and_then(|d| d.max_turns).unwrap_or(delegator.max_turns),
        depth,
        answer: Answer::Text,
        agent_type: Some(definition.map_or("implementer", |d| d.name.as_str()).to_owned()),
        held: held(caller, definition),
    };
    let mut segments = caller.prefix.clone();
    if let Some(definition) = definition.filter(|d| !d.body.trim().is_empty()) {
        segments.push(user("definition", Label::Instructions, definition.body.trim().to_owned()));
    }
    let mut brief = fill(
        rt.prompts.get("brief.md"),
        &[
            ("brief", &input.brief),
            ("check", &input.check),
            ("check_turn", &check_turn("First I run the check, to see what fails.", &input.check)),
            ("done_looks_like", DONE_LOOKS_LIKE),
        ],
    );
    if let Some(reason) = failed {
        brief.push_str(&format!(
            "\n\n# The last attempt failed verification\n\n{reason}\n\nThe repository holds that attempt's changes: fix what the verifier found."
        ));
    }
    segments.push(user("brief", Label::Prompt, brief));
    spawn(rt, caller, spec, segments, None).await
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

enum Verdict {
    Pass,
    Fail(String),
    Cancelled,
}

/// Which verification this is.
struct Attempt<'a> {
    implementer: &'a str,
    verifier: &'a str,
    /// From 1.
    number: u32,
}

#[allow(clippy::too_many_arguments, reason = "the piece's parts, each once")]
async fn verifier(
    rt: &mut Runtime<'_>,
    delegator: &Delegator,
    caller: &Caller,
    member: &Member,
    input: &Input,
    attempt: &Attempt<'_>,
    summary: &str,
    files: &str,
) -> Result<Verdict, ToolError> {
    let id = attempt.verifier;
    let spec = AgentSpec {
        id: id.to_owned(),
        member: member.alias.clone(),
        window: member.window,
        json: member.json,
        tools: VERIFIER_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
        max_turns: delegator.max_turns,
        depth: caller.depth + 1,
        answer: Answer::Verdict,
        agent_type: Some("verifier".to_owned()),
        // A verifier checks the piece's work with the caller's rights, never wider ones.
        held: caller.held.clone(),
    };
    let text = fill(
        rt.prompts.get("verifier.md"),
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
    let verify =
        HookFire::Verify { agent: id, implementer: attempt.implementer, attempt: attempt.number };
    let end = spawn(rt, caller, spec, segments, Some(verify)).await?;
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

/// The files the piece touched so far, one a line, for `verifier.md`.
fn files_text(files: &[String]) -> String {
    if files.is_empty() {
        return "(none written or edited)".to_owned();
    }
    files.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n")
}

/// `AgentSpawn` and `SubagentStart` (a `continue: false` ends it before it runs, a context is
/// appended to its brief), its events, its run, its context dropped.
async fn spawn(
    rt: &mut Runtime<'_>,
    caller: &Caller,
    spec: AgentSpec,
    mut segments: Vec<Segment>,
    verify: Option<HookFire<'_>>,
) -> Result<AgentEnd, ToolError> {
    let agent_type = spec.agent_type.clone().unwrap_or_default();
    let id = spec.id.clone();
    rt.sink.event(Event::AgentSpawn {
        agent: id.clone(),
        parent: Some(caller.id.clone()),
        kind: agent_type.clone(),
        route: "delegate".to_owned(),
        member: spec.member.clone(),
        tools: spec.tools.clone(),
        max_turns: spec.max_turns,
    });
    let mut stopped = None;
    let mut fire = |event: HookFire<'_>, segments: &mut Vec<Segment>| {
        let reply = rt.hooks.fire(event);
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
    run_agent(rt, spec, segments).await.map_err(|e: CoreError| ToolError::new(format!("{id}: {e}")))
}

fn user(id: &str, label: Label, text: String) -> Segment {
    Segment { id: id.to_owned(), role: Role::User, label, text, pinned: true, tokens: 0 }
}

/// The caller's JSON, within `cap` bytes: a long summary is cut, the whole result spooled.
fn result_json(
    ending: &Ending,
    files: &[String],
    checks: &[String],
    cap: usize,
    sink: &mut PieceSink<'_, '_>,
) -> String {
    let render = |summary: &str, files: &[String], checks: &[String]| {
        json!({
            "summary": summary,
            "files_touched": files,
            "checks_run": checks,
            "outcome": ending.outcome.as_str(),
        })
        .to_string()
    };
    let whole = render(&ending.summary, files, checks);
    if whole.len() <= cap {
        return whole;
    }
    let pointer = match Sink::spool(sink, "agent.json", &whole) {
        Some(path) => format!(" [truncated: the whole result is in {}]", path.display()),
        None => " [truncated]".to_owned(),
    };
    // Lists first kept whole, then cut from the end; the summary takes what room is left.
    let (mut files, mut checks) = (files.to_vec(), checks.to_vec());
    loop {
        let bare = render(&pointer, &files, &checks);
        if bare.len() <= cap || (files.is_empty() && checks.is_empty()) {
            let room = cap.saturating_sub(bare.len());
            let mut summary = String::new();
            for c in ending.summary.chars() {
                // JSON escapes may grow a character: measure as rendered.
                let grown = serde_json::to_string(&c.to_string()).map_or(6, |s| s.len() - 2);
                if summary.len() + grown > room {
                    break;
                }
                summary.push(c);
            }
            summary.push_str(&pointer);
            return render(&summary, &files, &checks);
        }
        if checks.len() >= files.len() {
            checks.pop()
        } else {
            files.pop()
        };
    }
}
