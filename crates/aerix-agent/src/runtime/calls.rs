//! Running one call, by who runs it in the registry (`aerix_turn::tools::Run`): the machine's
//! tools (`aerix-tools`), the agent's own (`plan`, `skill`; `context` through `Compaction`), MCP
//! tools (`aerix-mcp`'s `Servers`), and the refusals (the reserved web tools, a tool the agent
//! may not call). Then the result's cap. (`agent` calls run
//! together through `Delegation`, after a turn's other calls: `turn_loop.rs`.)

use std::sync::Arc;

use aerix_session::Event;
use aerix_tools::{OwnedEnv, ToolError};
use aerix_turn::tools::{Run, tool_named};
use aerix_turn::{Call, RESERVED_TOOLS};
use serde_json::Value;

use crate::runtime::agent::{Agent, job_started};
use crate::runtime::gates::PlanDecision;
use crate::runtime::services::Runtime;

/// A call's result text, or the error the model sees as `error: ...`.
pub(crate) async fn run(
    agent: &mut Agent,
    rt: &mut Runtime<'_>,
    call: &Call,
) -> Result<String, ToolError> {
    let tool = call.tool.as_str();
    if RESERVED_TOOLS.contains(&tool) {
        return Err(ToolError::new(format!(
            "`{tool}` is a reserved name: this build has no web access"
        )));
    }
    if !agent.spec.tools.iter().any(|t| t == tool) {
        return Err(ToolError::new(format!(
            "refused: `{tool}` is not one of your tools here; you may call {}",
            agent.spec.tools.join(", ")
        )));
    }
    if tool.starts_with("mcp__") {
        return rt.services.external.call(tool, &call.input).await.map_err(ToolError::new);
    }
    let Some(entry) = tool_named(tool) else {
        return Err(ToolError::new(format!("unknown tool `{tool}`")));
    };
    match entry.run {
        // A turn's `agent` calls run together after its others (`turn_loop.rs`).
        Run::Agent => {
            Err(ToolError::new("`agent` calls run together, after the turn's other calls"))
        }
        Run::Plan => plan(agent, rt, &call.input).await,
        Run::Context => {
            let compaction = Arc::clone(&rt.services.compaction);
            let window = agent.spec.window;
            compaction.context_tool(&mut agent.context, window, rt, &call.input).await
        }
        Run::Skill => skill(rt, &call.input),
        Run::Machine => {
            let result = machine_tool(agent, rt, call).await;
            for (job, command) in agent.jobs.take_started() {
                rt.sink.event(job_started(&agent.spec.id, &job, &command));
            }
            result
        }
    }
}

/// One of `aerix-tools`' calls, on a blocking thread of the runtime's pool: a command may run
/// for minutes, and whatever else the runtime runs (another piece's agents, the screen) goes on
/// meanwhile, on either flavor of runtime.
///
/// What it needs is taken owned before anything is awaited: the future holds no borrow of the
/// agent or the runtime, so an agent's future stays `Send` for a task of its own.
fn machine_tool(
    agent: &Agent,
    rt: &Runtime<'_>,
    call: &Call,
) -> impl std::future::Future<Output = Result<String, ToolError>> + Send + 'static {
    let (tool, input) = (call.tool.clone(), call.input.clone());
    let env = OwnedEnv {
        cwd: rt.cwd.to_owned(),
        cancel: agent.cancel.clone(),
        jobs: Arc::clone(&agent.jobs),
        files: Arc::clone(&agent.files),
        roots: rt.roots.clone(),
        sandbox: rt.services.sandbox.clone(),
    };
    let run = tokio::task::spawn_blocking(move || aerix_tools::run(&tool, &input, &env.env()));
    let name = call.tool.clone();
    async move { run.await.unwrap_or_else(|e| Err(ToolError::new(format!("`{name}` failed: {e}")))) }
}

fn str_field<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

async fn plan(agent: &mut Agent, rt: &mut Runtime<'_>, input: &Value) -> Result<String, ToolError> {
    match str_field(input, "op") {
        Some("read") => Ok(agent.plan.clone().unwrap_or_else(|| "(no plan yet)".to_owned())),
        Some("write") => {
            let text = str_field(input, "text")
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| ToolError::new("`write` needs the plan's `text`"))?;
            let mut text = text.to_owned();
            // The root's first plan write of the request waits for the user (when there is
            // one: headless accepts it).
            if agent.spec.depth == 0 && !rt.plan_gated {
                rt.plan_gated = true;
                let gate = Arc::clone(&rt.services.plan_gate);
                match gate.plan(&agent.spec.id, &text).await {
                    PlanDecision::Accept => {}
                    PlanDecision::Replace(edited) if !edited.trim().is_empty() => text = edited,
                    PlanDecision::Replace(_) => {}
                    PlanDecision::Abort => {
                        rt.cancel.cancel();
                        return Err(ToolError::new("refused: the user aborted the plan"));
                    }
                }
            }
            agent.plan = Some(text.clone());
            rt.sink.event(Event::Plan { agent: agent.spec.id.clone(), text });
            Ok("plan saved".to_owned())
        }
        other => Err(ToolError::new(format!("`op` is `read` or `write`, not {other:?}"))),
    }
}

fn skill(rt: &Runtime<'_>, input: &Value) -> Result<String, ToolError> {
    match str_field(input, "name") {
        Some(name) => rt
            .services
            .skills
            .load(name, str_field(input, "args").unwrap_or_default())
            .map_err(|e| ToolError::new(e.to_string())),
        None if input.get("list").and_then(Value::as_bool) == Some(true) => {
            Ok(rt.services.skills.list())
        }
        None => Err(ToolError::new("give a skill's `name`, or `list: true`")),
    }
}

/// A result over its tool's cap is cut, and the whole of it spooled once with a pointer line.
pub(crate) fn cap(rt: &mut Runtime<'_>, call: &Call, text: String) -> String {
    let cap = usize::try_from(rt.services.options.tool_cap(&call.tool)).unwrap_or(usize::MAX);
    if text.len() <= cap {
        return text;
    }
    let mut cut = cap;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = text.len() - cut;
    match rt.sink.spool(&format!("{}-{}.txt", call.id, call.tool), &text) {
        Some(path) => format!(
            "{}\n[truncated: {more} more bytes; read with read(path=\"{}\", offset=1)]",
            &text[..cut],
            path.display()
        ),
        None => format!("{}\n[truncated: {more} more bytes]", &text[..cut]),
    }
}
