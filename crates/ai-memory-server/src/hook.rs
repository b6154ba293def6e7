//! Harness hook payloads: what Claude Code, Codex and OpenCode (through ai-memory's plugin)
//! send on stdin, read into one event; and what each expects back on stdout.

use serde::Deserialize;

pub mod tool;

/// The harness name of Kimi Code, whose prompt hook's output reaches the model on every
/// prompt: its session-start context goes with the session's first prompt instead.
pub const KIMI_CODE: &str = "kimi-code";

/// The events ai-memory handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    SessionStart,
    PromptSubmit,
    SessionEnd,
    /// An edit or write tool ran: the files its input names go into the session's handoff.
    ToolUse,
}

impl HookKind {
    /// The `ai-memory hook <event>` argument.
    pub fn parse(arg: &str) -> Option<HookKind> {
        match arg {
            "session-start" => Some(HookKind::SessionStart),
            "prompt-submit" => Some(HookKind::PromptSubmit),
            "session-end" => Some(HookKind::SessionEnd),
            "tool-use" => Some(HookKind::ToolUse),
            _ => None,
        }
    }

    pub fn arg(self) -> &'static str {
        match self {
            HookKind::SessionStart => "session-start",
            HookKind::PromptSubmit => "prompt-submit",
            HookKind::SessionEnd => "session-end",
            HookKind::ToolUse => "tool-use",
        }
    }

    /// Claude Code's (and Codex's) event name.
    pub fn claude_name(self) -> &'static str {
        match self {
            HookKind::SessionStart => "SessionStart",
            HookKind::PromptSubmit => "UserPromptSubmit",
            HookKind::SessionEnd => "SessionEnd",
            HookKind::ToolUse => "PostToolUse",
        }
    }
}

/// The fields ai-memory reads from a harness's hook input; unknown fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct HookInput {
    #[serde(default)]
    pub session_id: String,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub hook_event_name: Option<String>,
    /// UserPromptSubmit's prompt: a string, or (Kimi Code) a list of content parts whose
    /// `text` parts are joined.
    #[serde(default, deserialize_with = "prompt_text")]
    pub prompt: Option<String>,
    /// SessionStart's source (`startup`, `resume`, `clear`, `compact`).
    #[serde(default)]
    pub source: Option<String>,
    /// SessionEnd's reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// A tool event's tool (`Edit`, `apply_patch`, ...).
    #[serde(default)]
    pub tool_name: Option<String>,
    /// A tool event's input, where an edit or write tool names its file. (The tool's output,
    /// `tool_response`, is never read.)
    #[serde(default)]
    pub tool_input: Option<serde_json::Value>,
    /// Codex names its session `thread_id` in some events.
    #[serde(default)]
    pub thread_id: Option<String>,
}

fn prompt_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct Part {
        #[serde(rename = "type", default)]
        kind: String,
        #[serde(default)]
        text: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Prompt {
        Text(String),
        Parts(Vec<Part>),
    }
    Ok(match Option::<Prompt>::deserialize(d)? {
        None => None,
        Some(Prompt::Text(t)) => Some(t),
        Some(Prompt::Parts(parts)) => Some(
            parts
                .into_iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    })
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HookInputError {
    #[error("the hook input is not JSON: {0}")]
    Json(String),
    #[error("the hook input must be a JSON object, not {0}")]
    NotObject(&'static str),
    #[error("the hook input has no session id (`session_id`)")]
    NoSession,
    #[error("the hook input is for {got}, not {want}")]
    WrongEvent { got: String, want: &'static str },
}

impl HookInput {
    pub fn parse(stdin: &str, kind: HookKind) -> Result<HookInput, HookInputError> {
        let value: serde_json::Value =
            serde_json::from_str(stdin).map_err(|e| HookInputError::Json(e.to_string()))?;
        // serde reads a struct from an array too (fields by position): only an object is a
        // harness's hook input.
        if !value.is_object() {
            return Err(HookInputError::NotObject(json_kind(&value)));
        }
        let mut input: HookInput =
            serde_json::from_value(value).map_err(|e| HookInputError::Json(e.to_string()))?;
        if input.session_id.is_empty()
            && let Some(thread) = input.thread_id.take()
        {
            input.session_id = thread;
        }
        if input.session_id.is_empty() {
            return Err(HookInputError::NoSession);
        }
        if let Some(name) = &input.hook_event_name
            && !name.eq_ignore_ascii_case(kind.claude_name())
            && name != kind.arg()
        {
            return Err(HookInputError::WrongEvent { got: name.clone(), want: kind.claude_name() });
        }
        Ok(input)
    }
}

/// What a JSON value is, for a refusal that names it.
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// What a session-start hook prints: Claude Code's shape, which Codex reads too (and
/// ai-memory's OpenCode plugin). Empty context prints nothing.
pub fn session_start_output(context: &str) -> String {
    if context.is_empty() {
        return String::new();
    }
    serde_json::json!({
        "hookSpecificOutput": { "hookEventName": "SessionStart", "additionalContext": context }
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_json_object_is_hook_input() {
        for (stdin, kind) in
            [(r#"["SessionStart"]"#, "an array"), ("\"s\"", "a string"), ("null", "null")]
        {
            let err = HookInput::parse(stdin, HookKind::SessionStart).unwrap_err();
            assert_eq!(err, HookInputError::NotObject(kind), "{stdin}");
        }
        let ok = HookInput::parse(r#"{"session_id":"s"}"#, HookKind::SessionStart).unwrap();
        assert_eq!(ok.session_id, "s");
    }

    #[test]
    fn a_prompt_of_content_parts_is_its_text() {
        let stdin = r#"{"session_id":"s","prompt":[{"type":"text","text":"Always use uv."},
            {"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"Thanks."}]}"#;
        let input = HookInput::parse(stdin, HookKind::PromptSubmit).unwrap();
        assert_eq!(input.prompt.as_deref(), Some("Always use uv.\nThanks."));
    }
}
