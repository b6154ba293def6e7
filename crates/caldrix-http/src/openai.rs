//! OpenAI's chat completions and completions: the request into a `Spec`, the outcome into the
//! response object and the stream's chunks.

use caldrix_proto::{Role, TokenLogprob, Tool, ToolCall};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::fields::{self, Endpoint};
use crate::sse::{Encoder, SseEvent};
use crate::translate::{
    Finish, Obj, Outcome, Segments, Spec, Started, Usage, check_tools, content_text, element,
    format_constraint, new_id, openai_tool_choice, sampling, stops, tool, tools_constraint,
};

/// The most alternatives per token (OpenAI's bound, and the engine's).
pub const MAX_TOP_LOGPROBS: u32 = 20;

/// What a chat request asks of its answer besides the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape {
    /// `stream_options.include_usage`: a last chunk with the usage.
    pub include_usage: bool,
    pub logprobs: bool,
}

/// A chat completions request.
pub fn chat_spec(
    body: &Map<String, Value>,
    max_messages: usize,
) -> Result<(Spec, Shape), ApiError> {
    fields::check(Endpoint::Chat, body)?;
    let o = Obj::new(body, "");
    let model = o.required_str("model")?.to_owned();
    let messages = o.array("messages")?.ok_or_else(|| o.missing("messages"))?;
    if messages.len() > max_messages {
        return Err(ApiError::field(
            "messages",
            format!("{} messages, more than the limit of {max_messages}", messages.len()),
        ));
    }
    let mut segments = Segments::default();
    for (i, m) in messages.iter().enumerate() {
        let path = format!("messages[{i}]");
        let m = Obj::new(element(m, &path)?, &path);
        let content_path = m.name("content");
        let content = m.get("content");
        match m.required_str("role")? {
            "system" | "developer" => {
                segments.push(Role::System, content_text(content, &content_path, &["text"], &[])?)
            }
            "user" => {
                segments.push(Role::User, content_text(content, &content_path, &["text"], &[])?)
            }
            "assistant" => {
                let text = content_text(content, &content_path, &["text"], &["refusal"])?;
                let calls = assistant_calls(&m)?;
                if !text.is_empty() || calls.is_empty() {
                    segments.push(Role::Assistant, text);
                }
                segments.push_calls(&calls);
            }
            "tool" => {
                segments.push(Role::Tool, content_text(content, &content_path, &["text"], &[])?)
            }
            "function" => {
                return Err(ApiError::field(
                    m.name("role"),
                    "the legacy role \"function\" is not supported: use \"tool\"",
                ));
            }
            other => {
                return Err(ApiError::field(
                    m.name("role"),
                    format!("unknown role {other:?} at `{}`", m.name("role")),
                ));
            }
        }
    }
    segments.check(max_messages, "messages")?;
    let tools = openai_tools(o.array("tools")?, Endpoint::Chat)?;
    let choice = openai_tool_choice(o.get("tool_choice"), "tool_choice")?;
    let parallel = o.bool("parallel_tool_calls")?.unwrap_or(true);
    let format = format_constraint(o.get("response_format"), "response_format")?;
    let constraint = tools_constraint(&tools, choice, parallel, format, "tool_choice")?;
    let max_tokens = match o.u32("max_completion_tokens")? {
        Some(n) => Some(n),
        None => o.u32("max_tokens")?,
    };
    let logprobs_on = o.bool("logprobs")?.unwrap_or(false);
    let logprobs = match (logprobs_on, o.u32("top_logprobs")?) {
        (false, _) => None,
        (true, Some(k)) if k > MAX_TOP_LOGPROBS => {
            return Err(ApiError::field(
                "top_logprobs",
                format!("`top_logprobs` is {k}, more than the limit of {MAX_TOP_LOGPROBS}"),
            ));
        }
        (true, k) => Some(k.unwrap_or(0)),
    };
    let include_usage = o
        .object("stream_options")?
        .and_then(|s| s.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let spec = Spec {
        model,
        segments: segments.0,
        tools,
        constraint,
        max_tokens,
        sampling: sampling(&o, 2.0)?,
        logprobs,
        stop: stops(&o, "stop")?,
        stream: o.bool("stream")?.unwrap_or(false),
    };
    Ok((spec, Shape { include_usage, logprobs: logprobs_on }))
}

/// The calls of an assistant message in the history.
fn assistant_calls(m: &Obj) -> Result<Vec<ToolCall>, ApiError> {
    let Some(calls) = m.array("tool_calls")? else { return Ok(Vec::new()) };
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let path = format!("{}[{i}]", m.name("tool_calls"));
            let c = Obj::new(element(c, &path)?, &path);
            let f = c.object("function")?.ok_or_else(|| c.missing("function"))?;
            let f = Obj::new(f, &path);
            let arguments = f.str("arguments")?.unwrap_or("{}").to_owned();
            Ok(ToolCall { name: f.required_str("name")?.to_owned(), arguments })
        })
        .collect()
}

/// Function tools: chat's `{"type":"function","function":{...}}` or Responses'
/// `{"type":"function", name, ...}`; built-in types the table ignores are left out, others
/// refused by name.
pub fn openai_tools(list: Option<&Vec<Value>>, endpoint: Endpoint) -> Result<Vec<Tool>, ApiError> {
    let mut tools = Vec::new();
    for (i, t) in list.into_iter().flatten().enumerate() {
        let path = format!("tools[{i}]");
        let t = element(t, &path)?;
        let kind = t.get("type").and_then(Value::as_str).unwrap_or("function");
        if kind != "function" {
            let listed = fields::TOOL_TYPES.iter().find(|(e, k, ..)| *e == endpoint && *k == kind);
            if let Some((_, _, fields::Decision::Ignored, _)) = listed {
                tracing::debug!(kind, "left out a built-in tool");
                continue;
            }
            return Err(ApiError::field(
                format!("{path}.type"),
                format!("tools of type {kind:?} are not supported by caldrix: only function tools"),
            ));
        }
        let f = match t.get("function") {
            Some(f) => element(f, &format!("{path}.function"))?,
            None => t,
        };
        let description = f.get("description").and_then(Value::as_str);
        tools.push(tool(
            f.get("name").and_then(Value::as_str),
            description,
            f.get("parameters"),
            &path,
        )?);
    }
    check_tools(&tools, "tools")?;
    Ok(tools)
}

/// A completions request: its prompt is one user message.
pub fn completion_spec(body: &Map<String, Value>) -> Result<(Spec, Shape), ApiError> {
    fields::check(Endpoint::Completions, body)?;
    let o = Obj::new(body, "");
    let model = o.required_str("model")?.to_owned();
    let prompt = match o.get("prompt") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(_)) => {
            return Err(ApiError::field(
                "prompt",
                "`prompt` as an array (several prompts, or token ids) is not supported: send one string",
            ));
        }
        Some(_) => return Err(ApiError::field("prompt", "`prompt` must be a string")),
        None => return Err(o.missing("prompt")),
    };
    let mut segments = Segments::default();
    segments.push(Role::User, prompt);
    let logprobs = match o.u32("logprobs")? {
        Some(k) if k > MAX_TOP_LOGPROBS => {
            return Err(ApiError::field(
                "logprobs",
                format!("`logprobs` is {k}, more than the limit of {MAX_TOP_LOGPROBS}"),
            ));
        }
        k => k,
    };
    let include_usage = o
        .object("stream_options")?
        .and_then(|s| s.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let spec = Spec {
        model,
        segments: segments.0,
        tools: Vec::new(),
        constraint: caldrix_proto::Constraint::None,
        max_tokens: o.u32("max_tokens")?,
        sampling: sampling(&o, 2.0)?,
        logprobs,
        stop: stops(&o, "stop")?,
        stream: o.bool("stream")?.unwrap_or(false),
    };
    Ok((spec, Shape { include_usage, logprobs: logprobs.is_some() }))
}

pub fn finish_reason(finish: &Finish) -> &'static str {
    match finish {
        Finish::EndTurn | Finish::Stop(_) => "stop",
        Finish::Length => "length",
        Finish::ToolCalls => "tool_calls",
    }
}

pub fn usage(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt,
        "completion_tokens": u.completion,
        "total_tokens": u.prompt + u.completion,
        "prompt_tokens_details": { "cached_tokens": u.cached },
        "completion_tokens_details": { "reasoning_tokens": 0 },
    })
}

fn calls_json(calls: &[ToolCall]) -> Vec<Value> {
    calls
        .iter()
        .map(|c| {
            json!({
                "id": new_id("call_"),
                "type": "function",
                "function": { "name": c.name, "arguments": c.arguments },
            })
        })
        .collect()
}

/// Chat's `logprobs` object.
fn chat_logprobs(lps: &[TokenLogprob]) -> Value {
    let content: Vec<Value> = lps
        .iter()
        .map(|t| {
            let top: Vec<Value> = t
                .top
                .iter()
                .map(|a| json!({"token": a.text, "logprob": a.logprob, "bytes": a.text.as_bytes()}))
                .collect();
            json!({"token": t.text, "logprob": t.logprob, "bytes": t.text.as_bytes(), "top_logprobs": top})
        })
        .collect();
    json!({ "content": content, "refusal": null })
}

/// Completions' `logprobs` object.
fn completion_logprobs(lps: &[TokenLogprob]) -> Value {
    let mut offset = 0;
    let mut offsets = Vec::new();
    for t in lps {
        offsets.push(offset);
        offset += t.text.len();
    }
    let top: Vec<Value> = lps
        .iter()
        .map(|t| {
            let alternatives: Map<String, Value> =
                t.top.iter().map(|a| (a.text.clone(), json!(a.logprob))).collect();
            Value::Object(alternatives)
        })
        .collect();
    json!({
        "tokens": lps.iter().map(|t| t.text.as_str()).collect::<Vec<_>>(),
        "token_logprobs": lps.iter().map(|t| t.logprob).collect::<Vec<_>>(),
        "top_logprobs": top,
        "text_offset": offsets,
    })
}

/// The chat completion object.
pub fn chat_response(model: &str, created: u64, o: &Outcome, shape: Shape) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if o.tool_calls.is_empty() { Value::from(o.text.as_str()) } else { Value::Null },
        "refusal": null,
    });
    if !o.tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(calls_json(&o.tool_calls));
    }
    let logprobs = match (&o.logprobs, shape.logprobs) {
        (Some(lps), true) => chat_logprobs(lps),
        _ => Value::Null,
    };
    json!({
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": null,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": finish_reason(&o.finish),
        }],
        "usage": usage(&o.usage),
    })
}

/// The text completion object.
pub fn completion_response(model: &str, created: u64, o: &Outcome, shape: Shape) -> Value {
    let logprobs = match (&o.logprobs, shape.logprobs) {
        (Some(lps), true) => completion_logprobs(lps),
        _ => Value::Null,
    };
    json!({
        "id": new_id("cmpl-"),
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{
            "text": o.text,
            "index": 0,
            "logprobs": logprobs,
            "finish_reason": finish_reason(&o.finish),
        }],
        "usage": usage(&o.usage),
    })
}

/// Chat's chunks: the role, the text, the calls (one chunk each, whole), the finish, the usage
/// when asked, `[DONE]`. Log-probabilities, when asked, come whole in the finish chunk.
#[derive(Debug)]
pub struct ChatStream {
    id: String,
    created: u64,
    model: String,
    shape: Shape,
    completion: bool,
}

impl ChatStream {
    pub fn chat(model: &str, created: u64, shape: Shape) -> ChatStream {
        ChatStream {
            id: new_id("chatcmpl-"),
            created,
            model: model.into(),
            shape,
            completion: false,
        }
    }

    /// The same sequence in the completions API's chunks.
    pub fn completion(model: &str, created: u64, shape: Shape) -> ChatStream {
        ChatStream { id: new_id("cmpl-"), created, model: model.into(), shape, completion: true }
    }

    fn chunk(&self, choice: Value) -> SseEvent {
        let object = if self.completion { "text_completion" } else { "chat.completion.chunk" };
        let mut chunk = json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        });
        if !self.completion {
            chunk["system_fingerprint"] = Value::Null;
        }
        if self.shape.include_usage {
            chunk["usage"] = Value::Null;
        }
        SseEvent::data(chunk.to_string())
    }

    fn delta(&self, delta: Value, finish: Option<&str>, logprobs: Value) -> SseEvent {
        if self.completion {
            let text = delta.get("content").cloned().unwrap_or(json!(""));
            self.chunk(
                json!({"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish}),
            )
        } else {
            self.chunk(
                json!({"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}),
            )
        }
    }
}

impl Encoder for ChatStream {
    fn start(&mut self, _: &Started) -> Vec<SseEvent> {
        if self.completion {
            return Vec::new();
        }
        vec![self.delta(json!({"role": "assistant", "content": ""}), None, Value::Null)]
    }

    fn text(&mut self, text: &str) -> Vec<SseEvent> {
        vec![self.delta(json!({ "content": text }), None, Value::Null)]
    }

    fn finish(&mut self, o: &Outcome) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for (i, call) in calls_json(&o.tool_calls).into_iter().enumerate() {
            let mut call = call;
            call["index"] = json!(i);
            events.push(self.delta(json!({ "tool_calls": [call] }), None, Value::Null));
        }
        let logprobs = match (&o.logprobs, self.shape.logprobs, self.completion) {
            (Some(lps), true, false) => chat_logprobs(lps),
            (Some(lps), true, true) => completion_logprobs(lps),
            _ => Value::Null,
        };
        events.push(self.delta(json!({}), Some(finish_reason(&o.finish)), logprobs));
        if self.shape.include_usage {
            let object = if self.completion { "text_completion" } else { "chat.completion.chunk" };
            let chunk = json!({
                "id": self.id,
                "object": object,
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": usage(&o.usage),
            });
            events.push(SseEvent::data(chunk.to_string()));
        }
        events.push(SseEvent::data("[DONE]"));
        events
    }

    fn fail(&mut self, error: &ApiError) -> Vec<SseEvent> {
        vec![SseEvent::data(json!({ "error": error.openai_error() }).to_string())]
    }
}

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
