//! Harness hook payloads: what Claude Code, Codex and OpenCode (through ai-memory's plugin)
//! send on stdin, read into one event; and what each expects back on stdout.

use serde::Deserialize;

/// The events ai-memory handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    SessionStart,
    PromptSubmit,
    SessionEnd,
}

impl HookKind {
    /// The `ai-memory hook <event>` argument.
    pub fn parse(arg: &str) -> Option<HookKind> {
        match arg {
            "session-start" => Some(HookKind::SessionStart),
            "prompt-submit" => Some(HookKind::PromptSubmit),
            "session-end" => Some(HookKind::SessionEnd),
            _ => None,
        }
    }

    pub fn arg(self) -> &'static str {
        match self {
            HookKind::SessionStart => "session-start",
            HookKind::PromptSubmit => "prompt-submit",
            HookKind::SessionEnd => "session-end",
        }
    }

    /// Claude Code's (and Codex's) event name.
    pub fn claude_name(self) -> &'static str {
        match self {
            HookKind::SessionStart => "SessionStart",
            HookKind::PromptSubmit => "UserPromptSubmit",
            HookKind::SessionEnd => "SessionEnd",
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
    /// UserPromptSubmit's prompt.
    #[serde(default)]
    pub prompt: Option<String>,
    /// SessionStart's source (`startup`, `resume`, `clear`, `compact`).
    #[serde(default)]
    pub source: Option<String>,
    /// SessionEnd's reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// Codex names its session `thread_id` in some events.
    #[serde(default)]
    pub thread_id: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HookInputError {
    #[error("the hook input is not JSON: {0}")]
    Json(String),
    #[error("the hook input has no session id (`session_id`)")]
    NoSession,
    #[error("the hook input is for {got}, not {want}")]
    WrongEvent { got: String, want: &'static str },
}

impl HookInput {
    pub fn parse(stdin: &str, kind: HookKind) -> Result<HookInput, HookInputError> {
        let mut input: HookInput =
            serde_json::from_str(stdin).map_err(|e| HookInputError::Json(e.to_string()))?;
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
