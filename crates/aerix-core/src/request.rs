//! A request end to end: route, set up the root agent `a1`, run it.

use aerix_config::InstructionFile;
use aerix_session::{Event, Rebuilt};
use caldrix_proto::Role;

use crate::agent::{Agent, AgentEnd, AgentSpec};
use crate::context::{Context, Label, Segment, parse_role};
use crate::hooks::HookFire;
use crate::route::{Route, route};
use crate::turn::{ALL_TOOLS, Answer, tools_section, turns_section};
use crate::{CoreError, Prompts, Runtime, delegate};

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
    /// The root's context and plan from the session log, when resuming.
    pub resume: Option<Rebuilt>,
}

#[derive(Debug)]
pub struct RequestEnd {
    pub route: Route,
    pub end: AgentEnd,
}

/// The system segment: `system.md`, every tool, the skills' listing, and the turn contract
/// (code-rendered, last). Without a listing there is no `skill` tool to describe.
pub fn system_segment(prompts: &Prompts, skills: Option<&str>) -> String {
    let skills = skills.map(|s| format!("{}\n\n", s.trim())).unwrap_or_default();
    format!(
        "{}\n\n{}\n{skills}{}",
        prompts.get("system.md").trim(),
        tools_section(prompts, skills.is_empty()),
        turns_section()
    )
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
fn planner_note(tools: &[String], request: &str) -> String {
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
    let call = serde_json::json!({"tool": "agent", "input": {"brief": brief}});
    format!(
        "\n\n({tools_line} Delegate anything that reads files or runs commands with `agent`, giving each piece a complete brief and a check. A request that is one piece of work is one call whose brief is the request, and whose check is the command that shows it works (one the request names, when it names one):\n\n{call}\n)"
    )
}

/// A resumed root gets this session start's hook context: the earlier segment replaced in
/// place (or removed when there is none now), else a new one before the prompt.
async fn resume_hook_context(
    rt: &mut Runtime<'_>,
    context: &mut Context,
    hook_context: Option<&str>,
) -> Result<(), CoreError> {
    let old = context.get(HOOK_CONTEXT).map(|s| s.text.clone());
    match (old, hook_context.map(hook_context_text)) {
        (Some(old), Some(new)) if old != new => {
            context.replace(rt.client, rt.sink, HOOK_CONTEXT, new, Some(true), None).await
        }
        (Some(_), None) => context.remove(rt.client, rt.sink, HOOK_CONTEXT).await,
        (None, Some(new)) => {
            let segment = Segment {
                id: HOOK_CONTEXT.into(),
                role: Role::User,
                label: Label::Hook,
                text: new,
                pinned: true,
                tokens: 0,
            };
            context.append(rt.client, rt.sink, segment).await
        }
        _ => Ok(()),
    }
}

pub async fn run_request(rt: &mut Runtime<'_>, request: Request) -> Result<RequestEnd, CoreError> {
    let router = request.decision.clone().unwrap_or_else(|| request.main.clone());
    let route = route(rt, ROOT, &router, &request.prompt).await?;
    let decided = rt.hooks.fire(HookFire::RouteDecision {
        agent: ROOT,
        route: &route.name,
        scores: &route.scores,
        raw: route.raw.as_deref(),
    });
    if let Some(reason) = decided.stop {
        return Err(CoreError::Killed(format!("a RouteDecision hook ended the request: {reason}")));
    }
    let planner = matches!(route.name.as_str(), "edit" | "plan");
    let tools: Vec<String> = if planner {
        let allowed = &rt.settings.delegation.planner_tools;
        ALL_TOOLS
            .iter()
            .filter(|t| allowed.iter().any(|a| a == *t))
            .map(|t| (*t).to_owned())
            .collect()
    } else {
        ALL_TOOLS.iter().map(|t| (*t).to_owned()).collect()
    };
    // The root is at depth 0: with `delegation.depth = 0` it cannot spawn either.
    let tools = delegate::without_agent_at(tools, 0, rt.settings);
    let tools = crate::skills::offered(tools, rt.skills);
    rt.sink.event(Event::AgentSpawn {
        agent: ROOT.to_owned(),
        parent: None,
        kind: "root".to_owned(),
        route: route.name.clone(),
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
        prompt.push_str(&planner_note(&tools, &request.prompt));
    }
    let (segments, log_them, rebuilt) = match request.resume {
        Some(rebuilt) => {
            let segments: Vec<Segment> = rebuilt
                .segments
                .iter()
                .map(|s| Segment {
                    id: s.id.clone(),
                    role: parse_role(&s.role),
                    label: Label::parse(&s.label),
                    text: s.text.clone(),
                    pinned: s.pinned,
                    tokens: s.tokens,
                })
                .collect();
            (segments, false, Some(rebuilt))
        }
        None => {
            let mut segments = vec![Segment {
                id: "system".into(),
                role: Role::System,
                label: Label::System,
                text: system_segment(
                    rt.prompts,
                    rt.skills
                        .listing(usize::try_from(rt.settings.context.skills_chars).unwrap_or(0))
                        .as_deref(),
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
            (segments, true, None)
        }
    };
    let mut context =
        Context::create(rt.client, rt.sink, ROOT, &request.main, segments, log_them).await?;
    if rebuilt.is_some() {
        resume_hook_context(rt, &mut context, request.hook_context.as_deref()).await?;
    }
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
    };
    let mut agent = Agent::new(spec, context, rt.cwd, rt.cancel.clone());
    if let Some(rebuilt) = &rebuilt {
        agent.plan = rebuilt.plan.clone();
        agent.next_call = rebuilt.calls;
        agent.turn_base = rebuilt.turns;
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
    let context_id = agent.context.id;
    let result = match agent.context.append(rt.client, rt.sink, segment).await {
        Ok(()) => Ok(agent.run(rt).await),
        Err(e) => Err(e),
    };
    let _ = rt.client.drop_context(context_id).await;
    Ok(RequestEnd { route, end: result? })
}
