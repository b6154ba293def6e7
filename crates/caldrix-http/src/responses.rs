//! OpenAI's Responses API as far as Codex CLI uses it with a custom provider: message,
//! function call and function call output items in, text and function calls out, streamed as
//! the `response.*` events. Nothing is stored: every request carries its whole input.

use caldrix_proto::{Role, ToolCall};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::fields::{self, Endpoint};
use crate::openai::openai_tools;
use crate::sse::{Encoder, SseEvent};
use crate::translate::{
    Finish, Obj, Outcome, Segments, Spec, Started, Usage, content_text, element, format_constraint,
    new_id, openai_tool_choice, refused_part, sampling, tools_constraint,
};

/// The request fields a response object repeats.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Echo {
    pub instructions: Value,
    pub tools: Value,
    pub tool_choice: Value,
    pub parallel_tool_calls: bool,
    pub temperature: Value,
    pub top_p: Value,
    pub max_output_tokens: Value,
}

/// A Responses request.
pub fn spec(body: &Map<String, Value>, max_messages: usize) -> Result<(Spec, Echo), ApiError> {
    fields::check(Endpoint::Responses, body)?;
    let o = Obj::new(body, "");
    let model = o.required_str("model")?.to_owned();
    let mut segments = Segments::default();
    if let Some(instructions) = o.str("instructions")?
        && !instructions.is_empty()
    {
        segments.push(Role::System, instructions.to_owned());
    }
    match o.get("input") {
        Some(Value::String(s)) => segments.push(Role::User, s.clone()),
        Some(Value::Array(items)) => {
            if items.len() > max_messages {
                return Err(ApiError::field(
                    "input",
                    format!("{} input items, more than the limit of {max_messages}", items.len()),
                ));
            }
            input_items(&mut segments, items)?;
        }
        Some(_) => {
            return Err(ApiError::field("input", "`input` must be a string or an array of items"));
        }
        None => return Err(o.missing("input")),
    }
    segments.check(max_messages, "input")?;
    let tools = openai_tools(o.array("tools")?, Endpoint::Responses)?;
    let choice = openai_tool_choice(o.get("tool_choice"), "tool_choice")?;
    let parallel = o.bool("parallel_tool_calls")?.unwrap_or(true);
    let format = match o.object("text")? {
        Some(text) => format_constraint(text.get("format"), "text.format")?,
        None => caldrix_proto::Constraint::None,
    };
    let constraint = tools_constraint(&tools, choice, parallel, format, "tool_choice")?;
    let echo = Echo {
        instructions: o.get("instructions").cloned().unwrap_or(Value::Null),
        tools: o.get("tools").cloned().unwrap_or(json!([])),
        tool_choice: o.get("tool_choice").cloned().unwrap_or(json!("auto")),
        parallel_tool_calls: parallel,
        temperature: o.get("temperature").cloned().unwrap_or(json!(1.0)),
        top_p: o.get("top_p").cloned().unwrap_or(json!(1.0)),
        max_output_tokens: o.get("max_output_tokens").cloned().unwrap_or(Value::Null),
    };
    let spec = Spec {
        model,
        segments: segments.0,
        tools,
        constraint,
        max_tokens: o.u32("max_output_tokens")?,
        sampling: sampling(&o, 2.0)?,
        logprobs: None,
        stop: Vec::new(),
        stream: o.bool("stream")?.unwrap_or(false),
    };
    Ok((spec, echo))
}

/// The input items in order; consecutive function calls are one assistant turn.
fn input_items(segments: &mut Segments, items: &[Value]) -> Result<(), ApiError> {
    let mut calls: Vec<ToolCall> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("input[{i}]");
        let item = Obj::new(element(item, &path)?, &path);
        let kind = match item.str("type")? {
            Some(kind) => kind,
            None if item.get("role").is_some() => "message",
            None => return Err(item.missing("type")),
        };
        if kind != "function_call" && !calls.is_empty() {
            segments.push_calls(&calls);
            calls.clear();
        }
        let content_path = item.name("content");
        match kind {
            "message" => {
                let content = item.get("content");
                let (role, text) = match item.required_str("role")? {
                    "system" | "developer" => {
                        (Role::System, content_text(content, &content_path, &["input_text"], &[])?)
                    }
                    "user" => {
                        (Role::User, content_text(content, &content_path, &["input_text"], &[])?)
                    }
                    "assistant" => (
                        Role::Assistant,
                        content_text(
                            content,
                            &content_path,
                            &["output_text", "input_text"],
                            &["refusal"],
                        )?,
                    ),
                    other => {
                        return Err(ApiError::field(
                            item.name("role"),
                            format!("unknown role {other:?} at `{}`", item.name("role")),
                        ));
                    }
                };
                segments.push(role, text);
            }
            "function_call" => {
                let name = item.required_str("name")?.to_owned();
                let arguments = item.str("arguments")?.unwrap_or("{}").to_owned();
                calls.push(ToolCall { name, arguments });
            }
            "function_call_output" => {
                let output = content_text(
                    item.get("output"),
                    &item.name("output"),
                    &["input_text", "output_text"],
                    &[],
                )?;
                segments.push(Role::Tool, output);
            }
            "reasoning" => {}
            other => return Err(refused_part(other, &path)),
        }
    }
    segments.push_calls(&calls);
    Ok(())
}

fn usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.prompt,
        "input_tokens_details": { "cached_tokens": u.cached },
        "output_tokens": u.completion,
        "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": u.prompt + u.completion,
    })
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{"type": "output_text", "text": text, "annotations": []}])
    } else {
        json!([])
    };
    json!({"type": "message", "id": id, "status": status, "role": "assistant", "content": content})
}

fn call_item(id: &str, call_id: &str, call: &ToolCall, status: &str) -> Value {
    let arguments = if status == "completed" { call.arguments.as_str() } else { "" };
    json!({"type": "function_call", "id": id, "call_id": call_id, "name": call.name,
           "arguments": arguments, "status": status})
}

/// The output items of an outcome, with fresh ids.
fn output(o: &Outcome) -> Vec<Value> {
    let mut items = Vec::new();
    if !o.text.is_empty() || o.tool_calls.is_empty() {
        items.push(message_item(&new_id("msg_"), &o.text, "completed"));
    }
    for call in &o.tool_calls {
        items.push(call_item(&new_id("fc_"), &new_id("call_"), call, "completed"));
    }
    items
}

fn object(id: &str, model: &str, created: u64, echo: &Echo, status: &str) -> Value {
    json!({
        "id": id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "instructions": echo.instructions,
        "max_output_tokens": echo.max_output_tokens,
        "model": model,
        "output": [],
        "parallel_tool_calls": echo.parallel_tool_calls,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "store": false,
        "temperature": echo.temperature,
        "text": {"format": {"type": "text"}},
        "tool_choice": echo.tool_choice,
        "tools": echo.tools,
        "top_p": echo.top_p,
        "truncation": "disabled",
        "usage": null,
        "metadata": {},
    })
}

fn finished(mut r: Value, o: &Outcome, items: Vec<Value>) -> Value {
    if o.finish == Finish::Length {
        r["status"] = json!("incomplete");
        r["incomplete_details"] = json!({"reason": "max_output_tokens"});
    } else {
        r["status"] = json!("completed");
    }
    r["output"] = Value::Array(items);
    r["usage"] = usage(&o.usage);
    r
}

/// The response object: finished with `outcome`, or in progress without one.
pub fn response(
    id: &str,
    model: &str,
    created: u64,
    echo: &Echo,
    outcome: Option<&Outcome>,
) -> Value {
    let r = object(id, model, created, echo, "in_progress");
    match outcome {
        Some(o) => finished(r, o, output(o)),
        None => r,
    }
}

/// The `response.*` events, numbered.
#[derive(Debug)]
pub struct Stream {
    id: String,
    model: String,
    created: u64,
    echo: Echo,
    sequence: u64,
    /// The message item's id once text began.
    message: Option<String>,
    text: String,
}

impl Stream {
    pub fn new(model: &str, created: u64, echo: Echo) -> Stream {
        Stream {
            id: new_id("resp_"),
            model: model.into(),
            created,
            echo,
            sequence: 0,
            message: None,
            text: String::new(),
        }
    }

    fn event(&mut self, name: &'static str, mut data: Value) -> SseEvent {
        data["type"] = json!(name);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        SseEvent::named(name, &data)
    }

    fn open_message(&mut self) -> Vec<SseEvent> {
        let id = new_id("msg_");
        self.message = Some(id.clone());
        vec![
            self.event(
                "response.output_item.added",
                json!({"output_index": 0, "item": message_item(&id, "", "in_progress")}),
            ),
            self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": 0, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
        ]
    }
}

impl Encoder for Stream {
    fn start(&mut self, _: &Started) -> Vec<SseEvent> {
        let r = object(&self.id, &self.model, self.created, &self.echo, "in_progress");
        vec![
            self.event("response.created", json!({ "response": r })),
            self.event("response.in_progress", json!({ "response": r })),
        ]
    }

    fn text(&mut self, text: &str) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if self.message.is_none() {
            events.extend(self.open_message());
        }
        self.text.push_str(text);
        let id = self.message.clone().unwrap_or_default();
        events.push(self.event(
            "response.output_text.delta",
            json!({"item_id": id, "output_index": 0, "content_index": 0, "delta": text}),
        ));
        events
    }

    fn finish(&mut self, o: &Outcome) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut items = Vec::new();
        if self.message.is_none() && o.tool_calls.is_empty() {
            events.extend(self.open_message());
        }
        if let Some(id) = self.message.clone() {
            let text = self.text.clone();
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            events.push(self.event(
                "response.output_text.done",
                json!({"item_id": id, "output_index": 0, "content_index": 0, "text": text}),
            ));
            events.push(self.event(
                "response.content_part.done",
                json!({"item_id": id, "output_index": 0, "content_index": 0, "part": part}),
            ));
            let item = message_item(&id, &text, "completed");
            events.push(
                self.event("response.output_item.done", json!({"output_index": 0, "item": item})),
            );
            items.push(item);
        }
        for call in &o.tool_calls {
            let index = items.len();
            let (id, call_id) = (new_id("fc_"), new_id("call_"));
            events.push(self.event(
                "response.output_item.added",
                json!({"output_index": index, "item": call_item(&id, &call_id, call, "in_progress")}),
            ));
            events.push(self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": index, "delta": call.arguments}),
            ));
            events.push(self.event(
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": index, "arguments": call.arguments}),
            ));
            let item = call_item(&id, &call_id, call, "completed");
            events.push(
                self.event(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                ),
            );
            items.push(item);
        }
        let r = object(&self.id, &self.model, self.created, &self.echo, "in_progress");
        let r = finished(r, o, items);
        let name =
            if o.finish == Finish::Length { "response.incomplete" } else { "response.completed" };
        events.push(self.event(name, json!({ "response": r })));
        events
    }

    fn fail(&mut self, error: &ApiError) -> Vec<SseEvent> {
        let mut r = object(&self.id, &self.model, self.created, &self.echo, "failed");
        r["error"] =
            json!({"code": error.code.unwrap_or("server_error"), "message": error.message});
        vec![self.event("response.failed", json!({ "response": r }))]
    }
}

#[cfg(test)]
#[path = "responses_tests.rs"]
mod tests;
