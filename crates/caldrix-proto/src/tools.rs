//! Tool calling on the wire: the tools a context offers (`context_create`'s `tools`), how a
//! generation may call them (the `tools` constraint), the calls it made (`done`'s
//! `tool_calls`), and the one text form a call takes in an assistant segment.
//!
//! A call is written `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` (the form
//! Hermes-style chat templates train, Qwen's and SmolLM3's among them), several calls one per
//! line. The pool generates exactly this text under the constraint, so a client that echoes a
//! call back (an assistant segment holding it) renders the same tokens the model wrote, and the
//! stored prefix still matches.

use serde::{Deserialize, Serialize};

/// Opens a call in an assistant segment's text.
pub const CALL_OPEN: &str = "<tool_call>\n";
/// Closes a call.
pub const CALL_CLOSE: &str = "\n</tool_call>";
/// Between two calls of one reply.
pub const CALL_SEPARATOR: &str = "\n";

/// The most tools one context may offer.
pub const MAX_TOOLS: usize = 128;

/// A tool a context offers: its name (`[A-Za-z0-9_-]`, 1 to 64 bytes), what it does, and its
/// arguments' JSON Schema as JSON text (an object schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub parameters: String,
}

/// A call a generation made: the tool's name and its arguments as JSON text (an object valid
/// against the tool's schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
}

/// Which replies the `tools` constraint admits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolChoice {
    /// A plain answer or calls.
    Auto {},
    /// At least one call.
    Required {},
    /// A plain answer only (the tools are still shown to the model).
    None {},
    /// Calls of this tool only.
    Named { name: String },
}

/// Whether `name` is a tool name the protocol takes.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The text of `calls` in an assistant segment (what the model writes for them).
pub fn write_tool_calls(calls: &[ToolCall]) -> String {
    let mut out = String::new();
    for (i, call) in calls.iter().enumerate() {
        if i > 0 {
            out.push_str(CALL_SEPARATOR);
        }
        let arguments: serde_json::Value = serde_json::from_str(&call.arguments)
            .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
        let body = serde_json::json!({ "name": call.name, "arguments": arguments });
        out.push_str(CALL_OPEN);
        out.push_str(&body.to_string());
        out.push_str(CALL_CLOSE);
    }
    out
}

/// The calls `text` holds when it is nothing but calls in their text form; `None` for any
/// other text (a plain answer).
pub fn parse_tool_calls(text: &str) -> Option<Vec<ToolCall>> {
    let mut rest = text.trim();
    if !rest.starts_with(CALL_OPEN.trim_end()) {
        return None;
    }
    let mut calls = Vec::new();
    while !rest.is_empty() {
        let body = rest.strip_prefix(CALL_OPEN.trim_end())?;
        let end = body.find(CALL_CLOSE.trim_start())?;
        let value: serde_json::Value = serde_json::from_str(body[..end].trim()).ok()?;
        let name = value.get("name")?.as_str()?.to_owned();
        let arguments = value.get("arguments").filter(|a| a.is_object())?.to_string();
        calls.push(ToolCall { name, arguments });
        rest = body[end + CALL_CLOSE.trim_start().len()..].trim_start();
    }
    Some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_read_back_as_written() {
        let calls = vec![
            ToolCall { name: "read".into(), arguments: r#"{"path":"a.rs"}"#.into() },
            ToolCall { name: "bash".into(), arguments: r#"{"command":"ls -l"}"#.into() },
        ];
        let text = write_tool_calls(&calls);
        assert!(text.starts_with("<tool_call>\n{"), "{text}");
        assert_eq!(parse_tool_calls(&text), Some(calls));
    }

    #[test]
    fn a_plain_answer_or_a_broken_call_is_no_call() {
        assert_eq!(parse_tool_calls("The answer is 4."), None);
        assert_eq!(parse_tool_calls("<tool_call>\n{\"name\": \"x\"\n</tool_call>"), None);
        assert_eq!(
            parse_tool_calls("<tool_call>\n{\"name\": \"x\", \"arguments\": 3}\n</tool_call>"),
            None
        );
        assert_eq!(parse_tool_calls("<tool_call>\n{\"name\": \"x\", \"arguments\": {}}"), None);
    }

    #[test]
    fn tool_names_are_bounded() {
        assert!(valid_tool_name("read_file-2"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("a b"));
        assert!(!valid_tool_name(&"a".repeat(65)));
    }
}
