//! The model's own `context` tool: `status`, `drop`, `summarize`, `pin`, `unpin`, `note`;
//! every op is a `context.op` event. The turn schema offers only the ids there are
//! (`aerix_turn::schemas`); this checks them again.

use crate::runtime::{Context, CoreError, Label, Runtime, Segment};
use aerix_session::Event;
use aerix_tools::ToolError;
use caldrix_proto::Role;
use serde_json::Value;

fn str_field<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// The context tool; every op is a `context.op` event.
pub(crate) async fn context(
    context: &mut Context,
    window: u32,
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
    let result = context_op(context, window, rt, &op, &ids, str_field(input, "text")).await;
    let (ok, detail) = match &result {
        Ok(text) => (true, text.lines().next().unwrap_or_default().to_owned()),
        Err(e) => (false, e.0.clone()),
    };
    rt.sink.event(Event::ContextOp { agent: context.agent.clone(), op, ids, ok, detail });
    result
}

async fn context_op(
    context: &mut Context,
    window: u32,
    rt: &mut Runtime<'_>,
    op: &str,
    ids: &[String],
    text: Option<&str>,
) -> Result<String, ToolError> {
    let fail = |e: CoreError| ToolError::new(e.to_string());
    let check_ids = |context: &Context, protect: bool| -> Result<(), ToolError> {
        if ids.is_empty() {
            return Err(ToolError::new(format!("`{op}` needs the segment `ids`")));
        }
        for id in ids {
            let segment =
                context.get(id).ok_or_else(|| ToolError::new(format!("no segment `{id}`")))?;
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
            let mut out = format!("{} of {window} tokens used\n", context.total_tokens);
            for s in &context.segments {
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
            check_ids(context, true)?;
            let before = context.total_tokens;
            context.remove_all(rt.client, rt.sink, ids).await.map_err(fail)?;
            Ok(format!(
                "dropped {} ({} tokens freed)",
                ids.join(", "),
                before.saturating_sub(context.total_tokens)
            ))
        }
        "summarize" => {
            check_ids(context, true)?;
            let text = text
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| ToolError::new("`summarize` needs the summary `text`"))?;
            let before = context.total_tokens;
            let (first, rest) = ids.split_first().ok_or_else(|| ToolError::new("no ids"))?;
            let summary = format!("[summary of {}]\n{text}", ids.join(", "));
            context
                .replace(rt.client, rt.sink, first, summary, Some(true), Some(Label::Summary))
                .await
                .map_err(fail)?;
            context.remove_all(rt.client, rt.sink, rest).await.map_err(fail)?;
            Ok(format!(
                "summarized {} into pinned segment {first} ({} tokens freed)",
                ids.join(", "),
                before.saturating_sub(context.total_tokens)
            ))
        }
        "pin" | "unpin" => {
            check_ids(context, false)?;
            let pinned = op == "pin";
            for id in ids {
                let text = context.get(id).map(|s| s.text.clone()).unwrap_or_default();
                context
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
            match context.get(ID).map(|s| s.text.clone()) {
                Some(old) => {
                    let new = format!("{old}\n- {text}");
                    context
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
                    context.append(rt.client, rt.sink, segment).await.map_err(fail)?;
                }
            }
            Ok("noted in the scratchpad".to_owned())
        }
        other => Err(ToolError::new(format!(
            "`op` is one of status, drop, summarize, pin, unpin, note; not `{other}`"
        ))),
    }
}
