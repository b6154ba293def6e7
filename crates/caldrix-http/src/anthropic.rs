//! Anthropic's messages API: the request into a `Spec`, the outcome into the message object
//! and the stream's events (`message_start` ... `message_stop`).

use caldrix_proto::{Constraint, Role, ToolCall, ToolChoice};
use serde_json::{Map, Value, json};

use crate::error::{Api, ApiError};
use crate::fields::{self, Endpoint};
use crate::sse::{Encoder, SseEvent};
use crate::translate::{
    Finish, Obj, Outcome, Segments, Spec, Started, Usage, check_tools, element, new_id,
    refused_part, sampling, stops, tool, tools_constraint,
};

/// A messages request. `generating`: `max_tokens` is required (not for `count_tokens`).
pub fn spec(
    body: &Map<String, Value>,
    max_messages: usize,
    generating: bool,
) -> Result<Spec, ApiError> {
    fields::check(Endpoint::Messages, body)?;
    let o = Obj::new(body, "");
    let model = o.required_str("model")?.to_owned();
    let max_tokens = o.u32("max_tokens")?;
    if generating && max_tokens.is_none() {
        return Err(o.missing("max_tokens"));
    }
    let messages = o.array("messages")?.ok_or_else(|| o.missing("messages"))?;
    if messages.len() > max_messages {
        return Err(ApiError::field(
            "messages",
            format!("{} messages, more than the limit of {max_messages}", messages.len()),
        ));
    }
    let mut segments = Segments::default();
    if let Some(system) = o.get("system") {
        let text = blocks_text(system, "system")?;
        if !text.is_empty() {
            segments.push(Role::System, text);
        }
    }
    for (i, m) in messages.iter().enumerate() {
        let path = format!("messages[{i}]");
        let m = Obj::new(element(m, &path)?, &path);
        let content = m.get("content").ok_or_else(|| m.missing("content"))?;
        match m.required_str("role")? {
            "user" => user(&mut segments, content, &m.name("content"))?,
            "assistant" => assistant(&mut segments, content, &m.name("content"))?,
            // Claude Code sends one inside `messages`.
            "system" => segments.push(Role::System, blocks_text(content, &m.name("content"))?),
            other => {
                return Err(ApiError::field(
                    m.name("role"),
                    format!("unknown role {other:?} at `{}`: user or assistant", m.name("role")),
                ));
            }
        }
    }
    segments.check(max_messages, "messages")?;
    let tools = tools(o.array("tools")?)?;
    let (choice, parallel) = tool_choice(o.object("tool_choice")?)?;
    let constraint = tools_constraint(&tools, choice, parallel, Constraint::None, "tool_choice")?;
    Ok(Spec {
        model,
        segments: segments.0,
        tools,
        constraint,
        max_tokens,
        sampling: sampling(&o, 1.0)?,
        logprobs: None,
        stop: stops(&o, "stop_sequences")?,
        stream: o.bool("stream")?.unwrap_or(false),
    })
}

/// A string, or text blocks (their `cache_control` ignored), joined by a newline.
fn blocks_text(v: &Value, path: &str) -> Result<String, ApiError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut texts = Vec::new();
            for (i, b) in blocks.iter().enumerate() {
                let at = format!("{path}[{i}]");
                let b = element(b, &at)?;
                match b.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" => texts.push(text_of(b, &at)?),
                    "thinking" | "redacted_thinking" => {}
                    other => return Err(refused_part(other, &at)),
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(ApiError::field(path, format!("`{path}` must be a string or an array of blocks"))),
    }
}

fn text_of<'a>(b: &'a Map<String, Value>, at: &str) -> Result<&'a str, ApiError> {
    b.get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::field(at, format!("`{at}.text` must be a string")))
}

/// A user turn: text blocks, and tool results (each a tool segment, in order).
fn user(segments: &mut Segments, content: &Value, path: &str) -> Result<(), ApiError> {
    let Value::Array(blocks) = content else {
        segments.push(Role::User, blocks_text(content, path)?);
        return Ok(());
    };
    let mut text: Vec<&str> = Vec::new();
    let flush = |segments: &mut Segments, text: &mut Vec<&str>| {
        if !text.is_empty() {
            segments.push(Role::User, text.join("\n"));
            text.clear();
        }
    };
    for (i, b) in blocks.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let b = element(b, &at)?;
        match b.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => text.push(text_of(b, &at)?),
            "tool_result" => {
                flush(segments, &mut text);
                let result = match b.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(c) => blocks_text(c, &format!("{at}.content"))?,
                };
                let failed = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                segments.push(Role::Tool, if failed { format!("Error: {result}") } else { result });
            }
            "thinking" | "redacted_thinking" => {}
            other => return Err(refused_part(other, &at)),
        }
    }
    flush(segments, &mut text);
    Ok(())
}

/// An assistant turn: its text, then its `tool_use` calls in their text form.
fn assistant(segments: &mut Segments, content: &Value, path: &str) -> Result<(), ApiError> {
    let Value::Array(blocks) = content else {
        segments.push(Role::Assistant, blocks_text(content, path)?);
        return Ok(());
    };
    let mut text = Vec::new();
    let mut calls = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let b = element(b, &at)?;
        match b.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => text.push(text_of(b, &at)?),
            "tool_use" => {
                let o = Obj::new(b, &at);
                let input = o.object("input")?.cloned().unwrap_or_default();
                let name = o.required_str("name")?.to_owned();
                calls.push(ToolCall { name, arguments: Value::Object(input).to_string() });
            }
            "thinking" | "redacted_thinking" => {}
            other => return Err(refused_part(other, &at)),
        }
    }
    if !text.is_empty() || calls.is_empty() {
        segments.push(Role::Assistant, text.join("\n"));
    }
    segments.push_calls(&calls);
    Ok(())
}

/// Custom tools; typed tools (Anthropic's server and versioned client tools, whose schemas
/// are Anthropic's) are left out (`fields::TOOL_TYPES`).
fn tools(list: Option<&Vec<Value>>) -> Result<Vec<caldrix_proto::Tool>, ApiError> {
    let mut out = Vec::new();
    for (i, t) in list.into_iter().flatten().enumerate() {
        let path = format!("tools[{i}]");
        let t = element(t, &path)?;
        match t.get("type").and_then(Value::as_str) {
            None | Some("custom") => {}
            Some(kind) => {
                tracing::debug!(kind, "left out a typed tool");
                continue;
            }
        }
        let description = t.get("description").and_then(Value::as_str);
        out.push(tool(
            t.get("name").and_then(Value::as_str),
            description,
            t.get("input_schema"),
            &path,
        )?);
    }
    check_tools(&out, "tools")?;
    Ok(out)
}

fn tool_choice(v: Option<&Map<String, Value>>) -> Result<(Option<ToolChoice>, bool), ApiError> {
    let Some(m) = v else { return Ok((None, true)) };
    let o = Obj::new(m, "tool_choice");
    let parallel = !o.bool("disable_parallel_tool_use")?.unwrap_or(false);
    let choice = match o.required_str("type")? {
        "auto" => ToolChoice::Auto {},
        "any" => ToolChoice::Required {},
        "none" => ToolChoice::None {},
        "tool" => ToolChoice::Named { name: o.required_str("name")?.to_owned() },
        other => {
            return Err(ApiError::field(
                "tool_choice.type",
                format!("`tool_choice.type` must be auto, any, tool or none, not {other:?}"),
            ));
        }
    };
    Ok((Some(choice), parallel))
}

fn stop_reason(finish: &Finish) -> (&'static str, Value) {
    match finish {
        Finish::EndTurn => ("end_turn", Value::Null),
        Finish::Length => ("max_tokens", Value::Null),
        Finish::ToolCalls => ("tool_use", Value::Null),
        Finish::Stop(s) => ("stop_sequence", Value::from(s.as_str())),
    }
}

fn usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.prompt.saturating_sub(u.cached),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached,
        "output_tokens": u.completion,
    })
}

/// A call's `input`: its arguments as an object (always one under the constraint).
fn input(call: &ToolCall) -> Value {
    serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

/// The message object.
pub fn response(model: &str, o: &Outcome) -> Value {
    let mut content = Vec::new();
    if !o.text.is_empty() || o.tool_calls.is_empty() {
        content.push(json!({"type": "text", "text": o.text}));
    }
    for call in &o.tool_calls {
        content.push(json!({"type": "tool_use", "id": new_id("toolu_"), "name": call.name, "input": input(call)}));
    }
    let (reason, sequence) = stop_reason(&o.finish);
    json!({
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage(&o.usage),
    })
}

/// The message's events: `message_start` and `ping` once the prompt is counted, a text block
/// opened on the first text, each call a `tool_use` block with its arguments in one
/// `input_json_delta`, then `message_delta` and `message_stop`.
#[derive(Debug)]
pub struct Stream {
    id: String,
    model: String,
    text_open: bool,
    blocks: usize,
}

impl Stream {
    pub fn new(model: &str) -> Stream {
        Stream { id: new_id("msg_"), model: model.into(), text_open: false, blocks: 0 }
    }

    fn open_text(&mut self) -> SseEvent {
        self.text_open = true;
        self.blocks += 1;
        SseEvent::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": self.blocks - 1,
                    "content_block": {"type": "text", "text": ""}}),
        )
    }

    fn stop_block(&self) -> SseEvent {
        SseEvent::named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": self.blocks - 1}),
        )
    }
}

impl Encoder for Stream {
    fn start(&mut self, started: &Started) -> Vec<SseEvent> {
        let message = json!({
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": started.prompt_tokens, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 0},
        });
        vec![
            SseEvent::named("message_start", &json!({"type": "message_start", "message": message})),
            SseEvent::named("ping", &json!({"type": "ping"})),
        ]
    }

    fn text(&mut self, text: &str) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if !self.text_open {
            events.push(self.open_text());
        }
        events.push(SseEvent::named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": self.blocks - 1,
                    "delta": {"type": "text_delta", "text": text}}),
        ));
        events
    }

    fn finish(&mut self, o: &Outcome) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if !self.text_open && o.tool_calls.is_empty() {
            events.push(self.open_text());
        }
        if self.text_open {
            events.push(self.stop_block());
            self.text_open = false;
        }
        for call in &o.tool_calls {
            self.blocks += 1;
            let index = self.blocks - 1;
            events.push(SseEvent::named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block":
                        {"type": "tool_use", "id": new_id("toolu_"), "name": call.name, "input": {}}}),
            ));
            events.push(SseEvent::named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": input(call).to_string()}}),
            ));
            events.push(self.stop_block());
        }
        let (reason, sequence) = stop_reason(&o.finish);
        events.push(SseEvent::named(
            "message_delta",
            &json!({"type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": sequence},
                    "usage": usage(&o.usage)}),
        ));
        events.push(SseEvent::named("message_stop", &json!({"type": "message_stop"})));
        events
    }

    fn fail(&mut self, error: &ApiError) -> Vec<SseEvent> {
        vec![SseEvent::named("error", &error.body(Api::Anthropic))]
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
