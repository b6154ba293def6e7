//! A request end to end: route (`route.rs`), set up the root agent `a1` (its system,
//! instruction and hook segments, or a resumed root's from the log; the prompt, with the
//! planner note on `edit`/`plan`), run it on the turn loop (`runtime`).

mod route;

use crate::runtime::{
    Agent, AgentEnd, AgentSpec, Connection, Context, CoreError, HookFire, Label, Runtime, Segment,
    offer_skill,
};
use aerix_config::InstructionFile;
use std::path::Path;

use aerix_session::{Event, Outcome, Rebuilt, SessionError, read_log, rebuild};
use aerix_turn::{ALL_TOOLS, Answer, system_segment_with};
use caldrix_proto::Role;

pub use route::{ROUTE_TOKENS, Routed, route};

pub const ROOT: &str = "a1";
/// The id of the root's pinned `# Hook context` segment.
pub const HOOK_CONTEXT: &str = "hooks";

/// One request to run.
pub struct Request {
    pub prompt: String,
    pub instructions: Vec<InstructionFile>,
    /// What the `SessionStart` hooks said: the root's pinned `# Hook context` segment, after
    /// the instructions (a resumed root's earlier one is replaced in place, or removed).
    pub hook_context: Option<String>,
    /// What the `UserPromptSubmit` hooks said: appended to the prompt (routing sees the
    /// prompt alone).
    pub prompt_context: Option<String>,
    /// The member agents run on, its window, and whether it takes the `Json` constraint.
    pub main: String,
    pub window: u32,
    pub json: bool,
    /// The member that routes (`main` when there is none).
    pub decision: Option<String>,
    pub max_turns: u32,
    /// Where the root's context comes from.
    pub start: Start,
}

/// Where a request's root comes from.
#[derive(Debug)]
pub enum Start {
    /// The session's first request: the pinned segments.
    Fresh,
    /// `--resume` / `--continue`: the conversation from the session log.
    Rebuilt(Rebuilt),
    /// The root the session's previous request left, its context still in the pool.
    Live(Root),
}

/// The root between two requests of a session: its pool context and what its next request
/// continues from (the plan, the call and turn numbers), so no request after the first reads
/// the log back.
#[derive(Debug)]
pub struct Root {
    context: Context,
    plan: Option<String>,
    calls: u32,
    turns: u32,
}

impl Root {
    /// Ends the root: its context leaves the pool.
    pub async fn drop_context(self, client: &mut dyn Connection) {
        let _ = client.drop_context(self.context.id).await;
    }

    /// A resumed root: the log's conversation in a new pool context (not logged again).
    async fn rebuilt(
        rt: &mut Runtime<'_>,
        member: &str,
        rebuilt: Rebuilt,
    ) -> Result<Root, CoreError> {
        let segments: Vec<Segment> = rebuilt
            .segments
            .into_iter()
            .map(|s| Segment {
                id: s.id,
                role: s.role,
                label: s.label,
                text: s.text,
                pinned: s.pinned,
                tokens: s.tokens,
            })
            .collect();
        let context = Context::create(rt.client, rt.sink, ROOT, member, segments, false).await?;
        Ok(Root { context, plan: rebuilt.plan, calls: rebuilt.calls, turns: rebuilt.turns })
    }
}

impl Start {
    /// A session's next request: on the root the last one left live, else (it failed or was
    /// cancelled) on the root read back from the log at `log`.
    pub fn next(root: Option<Root>, log: &Path) -> Result<Start, SessionError> {
        match root {
            Some(root) => Ok(Start::Live(root)),
            None => Ok(Start::Rebuilt(rebuild(&read_log(log)?.events, ROOT)?)),
        }
    }

    /// A request that never ran its root: a live one leaves the pool.
    pub async fn release(self, client: &mut dyn Connection) {
        if let Start::Live(root) = self {
            root.drop_context(client).await;
        }
    }
}

#[derive(Debug)]
pub struct RequestEnd {
    pub route: Routed,
    pub end: AgentEnd,
    /// The root, live for the session's next request (none after a failed or cancelled one).
    pub root: Option<Root>,
}

fn instructions_text(files: &[InstructionFile]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let mut text =
        String::from("# Instructions\n\nThe project's instruction files, outermost first.\n");
    for file in files {
        text.push_str(&format!("\n## {}\n\n{}\n", file.path.display(), file.text.trim()));
    }
    Some(text)
}

fn hook_context_text(context: &str) -> String {
    format!("# Hook context\n\n{}", context.trim())
}

/// A request longer than this is not repeated in the planner note's example call.
const NOTE_REQUEST_CHARS: usize = 2000;

/// The note a planner's prompt carries, with the start of the call that delegates the whole
/// request (a small model copies an example call: without one it filled briefs with
/// `parse.rs` and `1.0.0.0`, eight pieces a turn).
fn planner_note(tools: &[String], request: &str, checks: &[String]) -> String {
    let tools_line =
        format!("You are planning this request: you may call only {}.", tools.join(", "));
    if !tools.iter().any(|t| t == "agent") {
        return format!("\n\n({tools_line})");
    }
    let brief = if request.chars().count() <= NOTE_REQUEST_CHARS {
        request
    } else {
        "<the request above, in full>"
    };
    // A request that names none of the repository's test commands gets the first as its
    // default check: only a command's exit status decides without a model.
    let check = default_check(request, checks);
    let mut input = serde_json::json!({"brief": brief});
    if let Some(check) = check {
        input["check"] = serde_json::json!(check);
    }
    let call = serde_json::json!({"tool": "agent", "input": input});
    let which = match check {
        Some(check) => format!(
            "the command that shows it works (here `{check}`, the repository's test command, unless the request names another)"
        ),
        None => {
            "the command that shows it works (one the request names, when it names one)".to_owned()
        }
    };
    format!(
        "\n\n({tools_line} Delegate anything that reads files or runs commands with `agent`, giving each piece a complete brief and a check. A request that is one piece of work is one call whose brief is the request, and whose check is {which}:\n\n{call}\n)"
    )
}

/// The check a planning root's pieces default to: the test command the request names, else
/// the repository's first.
fn default_check<'c>(request: &str, checks: &'c [String]) -> Option<&'c str> {
    checks.iter().find(|c| request.contains(c.as_str())).or(checks.first()).map(String::as_str)
}

/// The root's pinned segments as this start reads them: the system segment (the profile's
/// prompts, the skills' listing), the instruction files, the `SessionStart` hooks' context.
fn pinned_segments(rt: &Runtime<'_>, request: &Request) -> Vec<Segment> {
    let listing =
        rt.services.skills.listing(usize::try_from(rt.services.options.skills_chars).unwrap_or(0));
    let mut segments = vec![Segment {
        id: "system".into(),
        role: Role::System,
        label: Label::System,
        text: system_segment_with(
            &rt.services.prompts,
            listing.as_deref(),
            rt.services.external.listing().as_deref(),
        ),
        pinned: true,
        tokens: 0,
    }];
    if let Some(text) = instructions_text(&request.instructions) {
        segments.push(Segment {
            id: "instructions".into(),
            role: Role::User,
            label: Label::Instructions,
            text,
            pinned: true,
            tokens: 0,
        });
    }
    if let Some(context) = &request.hook_context {
        segments.push(Segment {
            id: HOOK_CONTEXT.into(),
            role: Role::User,
            label: Label::Hook,
            text: hook_context_text(context),
            pinned: true,
            tokens: 0,
        });
    }
    segments
}

/// A resumed root's conversation comes from the log, its pinned segments from this start (the
/// prompts of the profile commit it attached, `--profile-refresh`'s included; the instruction
/// files as they are now; this start's hook context): each replaced in place when it differs
/// from the log's, removed when there is none now, appended before the prompt when the root had
/// none. Equal texts change nothing, so the stored prefix still serves.
async fn resume_pinned(
    rt: &mut Runtime<'_>,
    context: &mut Context,
    pinned: Vec<Segment>,
) -> Result<(), CoreError> {
    for id in ["system", "instructions", HOOK_CONTEXT] {
        let old = context.get(id).map(|s| s.text.clone());
        let new = pinned.iter().find(|s| s.id == id).cloned();
        match (old, new) {
            (Some(old), Some(new)) if old != new.text => {
                context.replace(rt.client, rt.sink, id, new.text, Some(true), None).await?;
            }
            (Some(_), None) => context.remove(rt.client, rt.sink, id).await?,
            (None, Some(new)) => context.append(rt.client, rt.sink, new).await?,
            _ => {}
        }
    }
    Ok(())
}

/// Runs `request`'s root. It ends live (`RequestEnd::root`) when the agent ran to an end; a
/// request that fails or is cancelled drops the root's context (a live one too), so the next
/// request rebuilds it from the log.
pub async fn run_request(
    rt: &mut Runtime<'_>,
    mut request: Request,
) -> Result<RequestEnd, CoreError> {
    let start = std::mem::replace(&mut request.start, Start::Fresh);
    let routed = routed(rt, &request).await;
    let route = match routed {
        Ok(route) => route,
        Err(e) => {
            start.release(rt.client).await;
            return Err(e);
        }
    };
    run_root(rt, request, start, route).await
}

/// The request's route, and the `RouteDecision` hooks' answer to it.
async fn routed(rt: &mut Runtime<'_>, request: &Request) -> Result<Routed, CoreError> {
    let router = request.decision.clone().unwrap_or_else(|| request.main.clone());
    let route = route(rt, ROOT, &router, &request.prompt).await?;
    let decided = rt.services.hooks.fire(HookFire::RouteDecision {
        agent: ROOT,
        route: route.route.as_str(),
        scores: &route.scores,
        raw: route.raw.as_deref(),
    });
    if let Some(reason) = decided.stop {
        return Err(CoreError::Killed(format!("a RouteDecision hook ended the request: {reason}")));
    }
    Ok(route)
}

async fn run_root(
    rt: &mut Runtime<'_>,
    request: Request,
    start: Start,
    route: Routed,
) -> Result<RequestEnd, CoreError> {
    let planner = matches!(route.route, aerix_session::Route::Edit | aerix_session::Route::Plan);
    let tools: Vec<String> = if planner {
        let allowed = &rt.services.options.planner_tools;
        ALL_TOOLS
            .iter()
            .filter(|t| allowed.iter().any(|a| a == *t))
            .map(|t| (*t).to_owned())
            .collect()
    } else {
        ALL_TOOLS.iter().map(|t| (*t).to_owned()).collect()
    };
    // The root is at depth 0: with `delegation.depth = 0` it cannot spawn either.
    let tools = rt.tools_at(tools, 0);
    let tools = offer_skill(tools, &rt.services.skills);
    rt.sink.event(Event::AgentSpawn {
        agent: ROOT.to_owned(),
        parent: None,
        kind: "root".to_owned(),
        route: Some(route.route),
        member: request.main.clone(),
        tools: tools.clone(),
        max_turns: request.max_turns,
    });
    let mut prompt = request.prompt.clone();
    if let Some(context) = &request.prompt_context {
        prompt.push_str("\n\n");
        prompt.push_str(&hook_context_text(context));
    }
    if planner {
        prompt.push_str(&planner_note(&tools, &request.prompt, &rt.services.checks));
    }
    let pinned = pinned_segments(rt, &request);
    // What the agent continues from: the log's (resumed) or the previous request's (live).
    let resumed = match start {
        Start::Fresh => None,
        Start::Rebuilt(rebuilt) => Some(Root::rebuilt(rt, &request.main, rebuilt).await?),
        Start::Live(root) => Some(root),
    };
    let (context, carried) = match resumed {
        None => {
            (Context::create(rt.client, rt.sink, ROOT, &request.main, pinned, true).await?, None)
        }
        Some(Root { mut context, plan, calls, turns }) => {
            if let Err(e) = resume_pinned(rt, &mut context, pinned).await {
                let _ = rt.client.drop_context(context.id).await;
                return Err(e);
            }
            (context, Some((plan, calls, turns)))
        }
    };
    let spec = AgentSpec {
        id: ROOT.to_owned(),
        member: request.main.clone(),
        window: request.window,
        json: request.json,
        tools,
        max_turns: request.max_turns,
        depth: 0,
        answer: Answer::Text,
        agent_type: None,
        held: Vec::new(),
        sampling: None,
    };
    let mut agent = Agent::new(spec, context, rt.cwd, rt.cancel.clone());
    if let Some((plan, calls, turns)) = carried {
        agent.plan = plan;
        agent.next_call = calls;
        agent.turn_base = turns;
    }
    let prompt_id = agent.fresh_id("p");
    let segment = Segment {
        id: prompt_id,
        role: Role::User,
        label: Label::Prompt,
        text: prompt,
        pinned: false,
        tokens: 0,
    };
    let end = match agent.context.append(rt.client, rt.sink, segment).await {
        Ok(()) => agent.run(rt).await,
        Err(e) => {
            let _ = rt.client.drop_context(agent.context.id).await;
            return Err(e);
        }
    };
    // A failed or cancelled agent may have left the pool's context and this mirror apart (a
    // connection lost mid-edit): the next request rebuilds the root from the log instead.
    if matches!(end.outcome, Outcome::Failed | Outcome::Cancelled) {
        let _ = rt.client.drop_context(agent.context.id).await;
        return Ok(RequestEnd { route, end, root: None });
    }
    let turns = agent.turn_base + agent.turns;
    let root = Root { context: agent.context, plan: agent.plan, calls: agent.next_call, turns };
    Ok(RequestEnd { route, end, root: Some(root) })
}
