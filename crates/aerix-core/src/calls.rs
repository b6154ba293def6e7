//! Running one call: the machine's tools (`aerix-tools`), the agent's own (`plan`, `context`,
//! `skill`), `agent` (its piece's result, `delegate.rs`), and the refusals (the reserved web
//! tools, a tool the agent may not call). Then the result's cap.

use aerix_session::Event;
use aerix_tools::{ToolEnv, ToolError};
use caldrix_proto::Role;
use serde_json::Value;

use crate::agent::{Agent, job_started};
use crate::context::{Label, Segment};
use crate::turn::{Call, RESERVED_TOOLS};
use crate::{CoreError, PlanDecision, Runtime, delegate};

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
    match tool {
        "agent" => delegate::result(agent, call),
        "plan" => plan(agent, rt, &call.input),
        "context" => context(agent, rt, &call.input).await,
        "skill" => skill(rt, &call.input),
        _ => {
            let env = ToolEnv {
                cwd: rt.cwd,
                cancel: &agent.cancel,
                jobs: &agent.jobs,
                files: &agent.files,
            };
            // Tools block (a command may run for minutes): keep the runtime's other tasks going.
            let result = tokio::task::block_in_place(|| aerix_tools::run(tool, &call.input, &env));
            for (job, command) in agent.jobs.take_started() {
                rt.sink.event(job_started(&agent.spec.id, &job, &command));
            }
            result
        }
    }
}

fn str_field<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

fn plan(agent: &mut Agent, rt: &mut Runtime<'_>, input: &Value) -> Result<String, ToolError> {
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
                match rt.plan_gate.plan(&agent.spec.id, &text) {
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
        Some(name) => rt.skills.load(name, str_field(input, "args").unwrap_or_default()),
        None if input.get("list").and_then(Value::as_bool) == Some(true) => Ok(rt.skills.list()),
        None => Err("give a skill's `name`, or `list: true`".to_owned()),
    }
    .map_err(ToolError::new)
}

/// The context tool; every op is a `context.op` event.
async fn context(
    agent: &mut Agent,
    rt: &mut Runtime<'_>,
    input: &Value,
) -> Result<String, ToolError> {
    let op = str_field(input, "op").unwrap_or_default().to_owned();
    // An id named twice counts once (`summarize` would otherwise replace a segment with the
    // summary and then remove it).
    let mut ids: Vec<String> = Vec::new();
    for id in input.get("ids").and_then(Value::as_array).into_iter().flatten() {
        if let Some(id) = id.as_str().filter(|id| !ids.iter().any(|i| i == id)) {
            ids.push(id.to_owned());
        }
    }
    let result = context_op(agent, rt, &op, &ids, str_field(input, "text")).await;
    let (ok, detail) = match &result {
        Ok(text) => (true, text.lines().next().unwrap_or_default().to_owned()),
        Err(e) => (false, e.0.clone()),
    };
    rt.sink.event(Event::ContextOp { agent: agent.spec.id.clone(), op, ids, ok, detail });
    result
}

async fn context_op(
    agent: &mut Agent,
    rt: &mut Runtime<'_>,
    op: &str,
    ids: &[String],
    text: Option<&str>,
) -> Result<String, ToolError> {
    let fail = |e: CoreError| ToolError::new(e.to_string());
    let check_ids = |agent: &Agent, protect: bool| -> Result<(), ToolError> {
        if ids.is_empty() {
            return Err(ToolError::new(format!("`{op}` needs the segment `ids`")));
        }
        for id in ids {
            let segment = agent
                .context
                .get(id)
                .ok_or_else(|| ToolError::new(format!("no segment `{id}`")))?;
            if protect && segment.label.is_protected() {
                return Err(ToolError::new(format!(
                    "refused: `{id}` is the {} segment, which cannot be dropped or summarized",
                    segment.label.as_str()
                )));
            }
        }
        Ok(())
    };
    match op {
        "status" => {
            let window = agent.spec.window;
            let mut out = format!("{} of {window} tokens used\n", agent.context.total_tokens);
            for s in &agent.context.segments {
                let pin = if s.pinned { "  pinned" } else { "" };
                out.push_str(&format!(
                    "{}  {}  {} tokens{pin}\n",
                    s.id,
                    s.label.as_str(),
                    s.tokens
                ));
            }
            Ok(out.trim_end().to_owned())
        }
        "drop" => {
            check_ids(agent, true)?;
            let before = agent.context.total_tokens;
            agent.context.remove_all(rt.client, rt.sink, ids).await.map_err(fail)?;
            Ok(format!(
                "dropped {} ({} tokens freed)",
                ids.join(", "),
                before.saturating_sub(agent.context.total_tokens)
            ))
        }
        "summarize" => {
            check_ids(agent, true)?;
            let text = text
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| ToolError::new("`summarize` needs the summary `text`"))?;
            let before = agent.context.total_tokens;
            let (first, rest) = ids.split_first().ok_or_else(|| ToolError::new("no ids"))?;
            let summary = format!("[summary of {}]\n{text}", ids.join(", "));
            agent
                .context
                .replace(rt.client, rt.sink, first, summary, Some(true), Some(Label::Summary))
                .await
                .map_err(fail)?;
            agent.context.remove_all(rt.client, rt.sink, rest).await.map_err(fail)?;
            Ok(format!(
                "summarized {} into pinned segment {first} ({} tokens freed)",
                ids.join(", "),
                before.saturating_sub(agent.context.total_tokens)
            ))
        }
        "pin" | "unpin" => {
            check_ids(agent, false)?;
            let pinned = op == "pin";
            for id in ids {
                let text = agent.context.get(id).map(|s| s.text.clone()).unwrap_or_default();
                agent
                    .context
                    .replace(rt.client, rt.sink, id, text, Some(pinned), None)
                    .await
                    .map_err(fail)?;
            }
            Ok(format!("{op}ned {}", ids.join(", ")))
        }
        "note" => {
            let text = text
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| ToolError::new("`note` needs `text`"))?;
            const ID: &str = "scratchpad";
            match agent.context.get(ID).map(|s| s.text.clone()) {
                Some(old) => {
                    let new = format!("{old}\n- {text}");
                    agent
                        .context
                        .replace(rt.client, rt.sink, ID, new, Some(true), None)
                        .await
                        .map_err(fail)?;
                }
                None => {
                    let segment = Segment {
                        id: ID.to_owned(),
                        role: Role::User,
                        label: Label::Scratchpad,
                        text: format!("[scratchpad]\n- {text}"),
                        pinned: true,
                        tokens: 0,
                    };
                    agent.context.append(rt.client, rt.sink, segment).await.map_err(fail)?;
                }
            }
            Ok("noted in the scratchpad".to_owned())
        }
        other => Err(ToolError::new(format!(
            "`op` is one of status, drop, summarize, pin, unpin, note; not `{other}`"
        ))),
    }
}

/// A result over its tool's cap is cut, and the whole of it spooled once with a pointer line.
pub(crate) fn cap(rt: &mut Runtime<'_>, call: &Call, text: String) -> String {
    let cap = usize::try_from(rt.settings.context.tool_cap(&call.tool)).unwrap_or(usize::MAX);
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
