//! What becomes of every request field each API defines: honoured, ignored, or refused by name
//! (a 400 naming the field), in one table `docs/http.md` is written from. A field set to
//! `null` is always taken as absent. Keys the table does not list are ignored (logged at
//! debug): agents send vendor extensions and fields newer than this table, and refusing them
//! would break the agent, not help its user.
//!
//! Tool types and content blocks that are not fields are listed here too (`TOOL_TYPES`,
//! `CONTENT`), so the whole surface is read in one place.

use serde_json::{Map, Value};

use crate::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`
    Chat,
    /// `POST /v1/completions`
    Completions,
    /// `POST /v1/responses`
    Responses,
    /// `POST /v1/messages` (and `/v1/messages/count_tokens`)
    Messages,
}

#[derive(Debug, Clone, Copy)]
pub enum Decision {
    Honoured,
    /// Accepted and without effect; the note says why.
    Ignored,
    /// Any value other than null is a 400 naming the field.
    Refused,
    /// Refused unless the value is the API's default (the check), which changes nothing.
    RefusedUnless(fn(&Value) -> bool),
}

#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub endpoint: Endpoint,
    pub name: &'static str,
    pub decision: Decision,
    pub note: &'static str,
}

use Decision::{Honoured as H, Ignored as I, Refused as R, RefusedUnless as RU};
use Endpoint::{Chat, Completions, Messages, Responses};

const fn f(
    endpoint: Endpoint,
    name: &'static str,
    decision: Decision,
    note: &'static str,
) -> Field {
    Field { endpoint, name, decision, note }
}

fn zero(v: &Value) -> bool {
    v.as_f64() == Some(0.0)
}
fn one(v: &Value) -> bool {
    v.as_f64() == Some(1.0)
}
fn falsy(v: &Value) -> bool {
    v == &Value::Bool(false)
}
fn empty(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty)
        || v.as_array().is_some_and(Vec::is_empty)
        || v.as_str() == Some("")
}
fn text_only(v: &Value) -> bool {
    v.as_array().is_some_and(|a| a.iter().all(|m| m == "text"))
}
fn disabled(v: &Value) -> bool {
    v == "disabled"
}

/// The table. Sampling defaults: `temperature` absent is the API's default 1.0 (0 is greedy),
/// `top_p` absent is 1.0, `seed` absent is a fresh seed per request; max tokens absent is the
/// rest of the member's window.
pub const FIELDS: &[Field] = &[
    // OpenAI chat completions.
    f(Chat, "model", H, "a member's alias or its loaded reference"),
    f(Chat, "messages", H, "system, developer, user, assistant (with tool_calls), tool"),
    f(Chat, "stream", H, "server-sent events, ended by `data: [DONE]`"),
    f(Chat, "stream_options", H, "include_usage: a last chunk with the usage; the rest ignored"),
    f(Chat, "temperature", H, "0 to 2; 0 is greedy; absent 1.0"),
    f(Chat, "top_p", H, "above 0, at most 1"),
    f(Chat, "seed", H, "absent: a fresh seed per request"),
    f(Chat, "max_tokens", H, "past the window: 400 naming the counts"),
    f(Chat, "max_completion_tokens", H, "as max_tokens"),
    f(Chat, "stop", H, "a string or up to 16; cut in the front, the generation cancelled"),
    f(Chat, "logprobs", H, "streamed: all of them in the last chunk"),
    f(Chat, "top_logprobs", H, "0 to 20"),
    f(Chat, "response_format", H, "text, json_object, json_schema (the pool's JSON constraint)"),
    f(Chat, "tools", H, "function tools; other types are refused by name"),
    f(Chat, "tool_choice", H, "auto, required, none, a named function"),
    f(Chat, "parallel_tool_calls", H, "absent: true"),
    f(Chat, "n", RU(one), "one choice per request"),
    f(Chat, "frequency_penalty", RU(zero), "the sampler has no penalties"),
    f(Chat, "presence_penalty", RU(zero), "the sampler has no penalties"),
    f(Chat, "logit_bias", RU(empty), "the sampler takes no bias"),
    f(Chat, "modalities", RU(text_only), "text only"),
    f(Chat, "audio", R, "text only"),
    f(Chat, "prediction", R, "no predicted outputs"),
    f(Chat, "web_search_options", R, "no web search"),
    f(Chat, "functions", R, "the legacy form: use tools"),
    f(Chat, "function_call", R, "the legacy form: use tool_choice"),
    f(Chat, "user", I, "nothing is logged per user"),
    f(Chat, "metadata", I, "nothing is stored"),
    f(Chat, "store", I, "nothing is stored"),
    f(Chat, "service_tier", I, "one tier"),
    f(Chat, "prompt_cache_key", I, "the prefix store finds shared prefixes by their tokens"),
    f(Chat, "safety_identifier", I, "nothing is logged per user"),
    f(Chat, "reasoning_effort", I, "no reasoning mode"),
    f(Chat, "verbosity", I, "no such control"),
    // OpenAI completions.
    f(Completions, "model", H, "a member's alias or its loaded reference"),
    f(Completions, "prompt", H, "one string, sent as one user message through the chat template"),
    f(Completions, "stream", H, "server-sent events, ended by `data: [DONE]`"),
    f(Completions, "stream_options", H, "include_usage"),
    f(Completions, "temperature", H, "0 to 2; 0 is greedy; absent 1.0"),
    f(Completions, "top_p", H, "above 0, at most 1"),
    f(Completions, "seed", H, "absent: a fresh seed per request"),
    f(Completions, "max_tokens", H, "absent: the rest of the window (OpenAI's default is 16)"),
    f(Completions, "stop", H, "a string or up to 16"),
    f(Completions, "logprobs", H, "0 to 20 alternatives"),
    f(Completions, "n", RU(one), "one choice per request"),
    f(Completions, "best_of", RU(one), "one choice per request"),
    f(Completions, "echo", RU(falsy), "the prompt is not echoed"),
    f(Completions, "suffix", RU(empty), "no insertion"),
    f(Completions, "frequency_penalty", RU(zero), "the sampler has no penalties"),
    f(Completions, "presence_penalty", RU(zero), "the sampler has no penalties"),
    f(Completions, "logit_bias", RU(empty), "the sampler takes no bias"),
    f(Completions, "user", I, "nothing is logged per user"),
    // OpenAI Responses, as far as Codex CLI uses it.
    f(Responses, "model", H, "a member's alias or its loaded reference"),
    f(
        Responses,
        "input",
        H,
        "a string, or message, function_call, function_call_output and reasoning items",
    ),
    f(Responses, "instructions", H, "the first system segment"),
    f(Responses, "stream", H, "the response.* events"),
    f(Responses, "tools", H, "function tools; built-in tool types are left out (TOOL_TYPES)"),
    f(Responses, "tool_choice", H, "auto, required, none, a named function"),
    f(Responses, "parallel_tool_calls", H, "absent: true"),
    f(Responses, "max_output_tokens", H, "past the window: 400 naming the counts"),
    f(Responses, "temperature", H, "0 to 2; 0 is greedy; absent 1.0"),
    f(Responses, "top_p", H, "above 0, at most 1"),
    f(Responses, "text", H, "format text, json_object, json_schema; verbosity ignored"),
    f(Responses, "reasoning", I, "no reasoning mode: no reasoning items are produced"),
    f(Responses, "include", I, "nothing extra to include (no reasoning, no logprobs)"),
    f(Responses, "store", I, "nothing is stored: every request carries its whole input"),
    f(Responses, "prompt_cache_key", I, "the prefix store finds shared prefixes by their tokens"),
    f(Responses, "client_metadata", I, "nothing is stored"),
    f(Responses, "metadata", I, "nothing is stored"),
    f(Responses, "user", I, "nothing is logged per user"),
    f(Responses, "safety_identifier", I, "nothing is logged per user"),
    f(Responses, "service_tier", I, "one tier"),
    f(Responses, "stream_options", I, "no options"),
    f(Responses, "max_tool_calls", I, "one reply's calls are bounded by the tools constraint"),
    f(Responses, "truncation", RU(disabled), "never truncated: a prompt over the window is a 400"),
    f(Responses, "background", RU(falsy), "answered in the request"),
    f(Responses, "previous_response_id", R, "nothing is stored: send the whole input"),
    f(Responses, "conversation", R, "nothing is stored: send the whole input"),
    f(Responses, "prompt", R, "no stored prompt templates"),
    f(Responses, "top_logprobs", RU(zero), "no log-probabilities in the Responses API here"),
    // Anthropic messages.
    f(Messages, "model", H, "a member's alias or its loaded reference"),
    f(Messages, "messages", H, "user and assistant (a system message inside is a system segment)"),
    f(Messages, "system", H, "a string or text blocks (cache_control ignored)"),
    f(Messages, "max_tokens", H, "required; past the window: 400 naming the counts"),
    f(Messages, "stop_sequences", H, "up to 16; cut in the front, the generation cancelled"),
    f(Messages, "stream", H, "message_start ... message_stop"),
    f(Messages, "temperature", H, "0 to 1; 0 is greedy; absent 1.0"),
    f(Messages, "top_p", H, "above 0, at most 1"),
    f(Messages, "tools", H, "custom tools; typed (server) tools are left out (TOOL_TYPES)"),
    f(Messages, "tool_choice", H, "auto, any, tool, none; disable_parallel_tool_use"),
    f(Messages, "top_k", R, "the sampler has no top-k"),
    f(Messages, "metadata", I, "nothing is logged per user"),
    f(Messages, "thinking", I, "no thinking mode: no thinking blocks are produced"),
    f(Messages, "context_management", I, "the client's context is sent whole every time"),
    f(Messages, "output_config", I, "no effort levels"),
    f(Messages, "service_tier", I, "one tier"),
    f(Messages, "container", I, "no code execution"),
    f(Messages, "mcp_servers", R, "the pool connects to no MCP server"),
];

/// What becomes of each tool type that is not a plain function (custom) tool.
pub const TOOL_TYPES: &[(Endpoint, &str, Decision, &str)] = &[
    (Chat, "custom", R, "free-form tools: only function tools are callable"),
    (Responses, "custom", R, "free-form tools: only function tools are callable"),
    (Responses, "web_search", I, "left out: the model cannot call it"),
    (Responses, "web_search_preview", I, "left out: the model cannot call it"),
    (Responses, "file_search", I, "left out: the model cannot call it"),
    (Responses, "code_interpreter", I, "left out: the model cannot call it"),
    (Responses, "image_generation", I, "left out: the model cannot call it"),
    (Responses, "local_shell", I, "left out: the model cannot call it"),
    (Responses, "computer_use_preview", I, "left out: the model cannot call it"),
    (Responses, "mcp", I, "left out: the pool connects to no MCP server"),
    // Anthropic's typed tools (`web_search_20250305`, `bash_20250124`, ...): their schemas are
    // Anthropic's and unknown here, so they are left out rather than failing the agent.
    (Messages, "<any typed tool>", I, "left out: the model cannot call it"),
];

/// Content that is not text, per endpoint (messages' content parts and input items).
pub const CONTENT: &[(Endpoint, &str, Decision, &str)] = &[
    (Chat, "image_url", R, "text only"),
    (Chat, "input_audio", R, "text only"),
    (Chat, "file", R, "text only"),
    (Chat, "refusal", I, "an assistant part: left out"),
    (Responses, "input_image", R, "text only"),
    (Responses, "input_file", R, "text only"),
    (Responses, "refusal", I, "an assistant part: left out"),
    (Responses, "reasoning", I, "an item: left out (no reasoning mode)"),
    (Messages, "image", R, "text only"),
    (Messages, "document", R, "text only"),
    (Messages, "thinking", I, "left out of the prompt"),
    (Messages, "redacted_thinking", I, "left out of the prompt"),
    (Messages, "cache_control", I, "on any block: the prefix store caches by tokens"),
];

impl Endpoint {
    pub fn route(self) -> &'static str {
        match self {
            Chat => "POST /v1/chat/completions",
            Completions => "POST /v1/completions",
            Responses => "POST /v1/responses",
            Messages => "POST /v1/messages",
        }
    }
}

impl Decision {
    fn word(self) -> &'static str {
        match self {
            Decision::Honoured => "honoured",
            Decision::Ignored => "ignored",
            Decision::Refused => "refused",
            Decision::RefusedUnless(_) => "refused unless its default",
        }
    }
}

/// The tables of `docs/http.md` (between its `fields` markers), written from `FIELDS`,
/// `TOOL_TYPES` and `CONTENT` so the page says what the code does.
pub fn markdown() -> String {
    let mut out = String::new();
    for endpoint in [Chat, Completions, Responses, Messages] {
        out.push_str(&format!(
            "\n#### `{}`\n\n| field | | what becomes of it |\n|---|---|---|\n",
            endpoint.route()
        ));
        for field in FIELDS.iter().filter(|f| f.endpoint == endpoint) {
            out.push_str(&format!(
                "| `{}` | {} | {} |\n",
                field.name,
                field.decision.word(),
                field.note
            ));
        }
        let others: Vec<_> = TOOL_TYPES
            .iter()
            .map(|t| ("tool type", t))
            .chain(CONTENT.iter().map(|c| ("content", c)))
            .filter(|(_, (e, ..))| *e == endpoint)
            .collect();
        for (kind, (_, name, decision, note)) in others {
            out.push_str(&format!("| {kind} `{name}` | {} | {note} |\n", decision.word()));
        }
    }
    out.push_str("\nAny other field is ignored (logged at debug): agents send vendor extensions and fields newer than this table.\n");
    out
}

/// Refuses the fields `FIELDS` refuses for `endpoint`, naming the first one.
pub fn check(endpoint: Endpoint, body: &Map<String, Value>) -> Result<(), ApiError> {
    for field in FIELDS.iter().filter(|f| f.endpoint == endpoint) {
        let Some(value) = body.get(field.name).filter(|v| !v.is_null()) else { continue };
        let refused = match field.decision {
            Decision::Refused => true,
            Decision::RefusedUnless(default) => !default(value),
            Decision::Honoured | Decision::Ignored => false,
        };
        if refused {
            return Err(ApiError::field(
                field.name,
                format!(
                    "`{}` is not supported by caldrix ({}); leave it out{}",
                    field.name,
                    field.note,
                    match field.decision {
                        Decision::RefusedUnless(_) => " or send its default",
                        _ => "",
                    }
                ),
            ));
        }
    }
    for key in body.keys() {
        if !FIELDS.iter().any(|f| f.endpoint == endpoint && f.name == key) {
            tracing::debug!(field = %key, "ignored a field this front does not know");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn refused_fields_are_named_and_defaults_pass() {
        let e = check(Chat, &body(json!({"model": "m", "n": 2}))).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("n"));
        assert!(e.message.contains("`n` is not supported"), "{}", e.message);
        check(Chat, &body(json!({"n": 1, "frequency_penalty": 0, "logit_bias": {}}))).unwrap();
        check(Chat, &body(json!({"audio": null, "modalities": ["text"]}))).unwrap();
        let e = check(Completions, &body(json!({"echo": true}))).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("echo"));
        let e = check(Messages, &body(json!({"top_k": 5}))).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("top_k"));
        let e = check(Responses, &body(json!({"previous_response_id": "resp_1"}))).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("previous_response_id"));
    }

    /// What the measured agents send passes.
    #[test]
    fn the_agents_fields_are_accepted() {
        let claude = json!({"model": "m", "max_tokens": 100, "messages": [], "metadata": {"user_id": "u"},
            "thinking": {"type": "enabled", "budget_tokens": 10}, "context_management": {},
            "output_config": {}, "system": [{"type": "text", "text": "s", "cache_control": {}}]});
        check(Messages, &body(claude)).unwrap();
        let codex = json!({"model": "m", "input": [], "stream": true, "tools": [], "tool_choice": "auto",
            "parallel_tool_calls": false, "reasoning": {}, "store": false,
            "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k",
            "client_metadata": {}, "instructions": "i"});
        check(Responses, &body(codex)).unwrap();
        let opencode = json!({"model": "m", "messages": [], "stream_options": {"include_usage": true},
            "tool_choice": "auto", "max_tokens": 10, "some_new_field": 1});
        check(Chat, &body(opencode)).unwrap();
    }

    #[test]
    fn every_endpoint_lists_model_once() {
        for endpoint in [Chat, Completions, Responses, Messages] {
            let n = FIELDS.iter().filter(|f| f.endpoint == endpoint && f.name == "model").count();
            assert_eq!(n, 1, "{endpoint:?}");
        }
        let mut seen = std::collections::BTreeSet::new();
        for field in FIELDS {
            assert!(seen.insert((field.endpoint as u8, field.name)), "{} twice", field.name);
        }
    }
}
