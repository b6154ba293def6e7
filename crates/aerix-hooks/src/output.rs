//! What a handler's exit status and output mean (Claude Code's contract): exit 0 with stdout
//! that looks like a JSON object is its JSON output, other stdout is plain text (context for
//! `SessionStart` and `UserPromptSubmit`); exit 2 blocks (`UserPromptSubmit`: the prompt, with
//! stderr as the reason shown to the user; `PreToolUse`: the call, stderr to the model;
//! `PostToolUse`, `Stop`, `SubagentStop`: stderr to the model); any other ending is a
//! non-blocking error, one note.

use serde_json::Value;

use crate::HookEvent;
use crate::process::{Ending, Finished};

/// One handler's effect.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Effect {
    /// Text for the model.
    pub(crate) context: Option<String>,
    /// The action is blocked, for this reason (shown to the user).
    pub(crate) block: Option<String>,
    /// `continue: false`: the run ends, for this reason.
    pub(crate) stop: Option<String>,
    /// PreToolUse `ask`, with its reason (a headless run refuses the call).
    pub(crate) ask: Option<String>,
    /// PreToolUse `updatedInput`.
    pub(crate) updated_input: Option<Value>,
    /// `systemMessage`: a warning for the user.
    pub(crate) message: Option<String>,
    /// A problem with the handler, one line.
    pub(crate) note: Option<String>,
}

/// Characters of a command a note shows.
const COMMAND_CHARS: usize = 80;

pub(crate) fn interpret(event: HookEvent, command: &str, finished: &Finished) -> Effect {
    let name = || format!("{} hook `{}`", event.name(), shorten(command));
    let stderr_line = || {
        let line = finished.stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        if line.is_empty() { String::new() } else { format!(": {line}") }
    };
    let note = |text: String| Effect { note: Some(text), ..Effect::default() };
    match &finished.ending {
        Ending::Exit(0) => success(event, &name(), &finished.stdout),
        Ending::Exit(2) if event.blocks() => {
            let reason = finished.stderr.trim();
            let reason = if reason.is_empty() { "no reason given" } else { reason };
            Effect { block: Some(reason.to_owned()), ..Effect::default() }
        }
        Ending::Exit(127) => note(format!(
            "{} exited 127, command not found{}: it does nothing until that is fixed",
            name(),
            stderr_line()
        )),
        Ending::Exit(code) => note(format!("{} exited {code}{}", name(), stderr_line())),
        Ending::Signal(signal) => note(format!("{} ended by signal {signal}", name())),
        Ending::Timeout { after, killed } => note(format!(
            "{} timed out after {after:?}: sent TERM{}",
            name(),
            if *killed {
                format!(", then KILL after {:?}", crate::KILL_GRACE)
            } else {
                String::new()
            }
        )),
        Ending::Cancelled { killed } => note(format!(
            "{} was cancelled: sent TERM{}",
            name(),
            if *killed {
                format!(", then KILL after {:?}", crate::KILL_GRACE)
            } else {
                String::new()
            }
        )),
        Ending::NotStarted(why) => note(format!("{} could not start: {why}", name())),
    }
}

/// Exit 0: JSON output, or plain text.
fn success(event: HookEvent, name: &str, stdout: &str) -> Effect {
    // Plain text is context only where Claude Code takes it so; JSON's `additionalContext`
    // on more events (a tool result, a subagent's brief).
    // WorktreeCreate's plain stdout is the path to use (Claude Code's contract), carried as
    // its context.
    let plain_context = matches!(
        event,
        HookEvent::SessionStart | HookEvent::UserPromptSubmit | HookEvent::WorktreeCreate
    );
    let json_context = plain_context
        || matches!(
            event,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::SubagentStart
        );
    let trimmed = stdout.trim();
    if !(trimmed.starts_with('{') && trimmed.ends_with('}')) {
        return Effect {
            context: (plain_context && !trimmed.is_empty()).then(|| trimmed.to_owned()),
            ..Effect::default()
        };
    }
    let object = match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(object)) => object,
        // Text from `{` to `}` that parses is an object: nothing else comes here.
        Ok(_) => return Effect::default(),
        Err(e) => {
            return Effect {
                note: Some(format!("{name} printed JSON that does not parse ({e}); ignored")),
                ..Effect::default()
            };
        }
    };
    let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut effect = Effect { message: text("systemMessage"), ..Effect::default() };
    if object.get("continue") == Some(&Value::Bool(false)) {
        effect.stop = Some(text("stopReason").unwrap_or_else(|| format!("{name} said stop")));
        // `continue: false` wins over decisions.
        return effect;
    }
    let specific = match object.get("hookSpecificOutput") {
        Some(Value::Object(specific)) => {
            match specific.get("hookEventName").and_then(Value::as_str) {
                Some(other) if other != event.name() => {
                    effect.note = Some(format!(
                        "{name} answered for `{other}` in hookSpecificOutput; it is ignored"
                    ));
                    None
                }
                _ => Some(specific),
            }
        }
        _ => None,
    };
    if event == HookEvent::PreToolUse {
        let field = |key: &str| specific.and_then(|s| s.get(key));
        let reason = field("permissionDecisionReason")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| text("reason"))
            .unwrap_or_else(|| "no reason given".to_owned());
        // The deprecated top-level `approve`/`block` are `allow`/`deny`.
        let decision = field("permissionDecision").and_then(Value::as_str).or_else(|| match object
            .get("decision")
            .and_then(Value::as_str)
        {
            Some("approve") => Some("allow"),
            Some("block") => Some("deny"),
            _ => None,
        });
        match decision {
            Some("deny") => effect.block = Some(reason),
            Some("ask") => effect.ask = Some(reason),
            _ => {}
        }
        if let Some(updated) = field("updatedInput").filter(|u| u.is_object()) {
            effect.updated_input = Some(updated.clone());
        }
    } else if event.blocks() && text("decision").as_deref() == Some("block") {
        effect.block = Some(text("reason").unwrap_or_else(|| "no reason given".to_owned()));
    }
    if json_context && let Some(specific) = specific {
        effect.context = specific
            .get("additionalContext")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned);
    }
    effect
}

fn shorten(command: &str) -> String {
    let command = command.trim();
    if command.chars().count() <= COMMAND_CHARS {
        return command.to_owned();
    }
    let mut short: String = command.chars().take(COMMAND_CHARS - 1).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Effect, interpret};
    use crate::HookEvent::{self, SessionEnd, SessionStart, UserPromptSubmit};
    use crate::process::{Ending, Finished};

    fn check(event: HookEvent, ending: Ending, stdout: &str, stderr: &str, expected: Effect) {
        let finished = Finished {
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            ending,
            duration: Duration::ZERO,
        };
        assert_eq!(interpret(event, "hook.sh", &finished), expected);
    }

    fn context(text: &str) -> Effect {
        Effect { context: Some(text.to_owned()), ..Effect::default() }
    }

    fn note(text: &str) -> Effect {
        Effect { note: Some(text.to_owned()), ..Effect::default() }
    }

    #[test]
    fn exit_0_json_or_plain_text() {
        let json = r#"{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"remember X"}}"#;
        check(SessionStart, Ending::Exit(0), json, "", context("remember X"));
        check(SessionStart, Ending::Exit(0), "  plain words\n", "", context("plain words"));
        check(UserPromptSubmit, Ending::Exit(0), "added", "", context("added"));
        check(SessionEnd, Ending::Exit(0), "ignored", "", Effect::default());
        check(SessionStart, Ending::Exit(0), "", "", Effect::default());
        check(
            SessionStart,
            Ending::Exit(0),
            r#"{"systemMessage":"heads up","hookSpecificOutput":{"additionalContext":"c"}}"#,
            "",
            Effect {
                context: Some("c".into()),
                message: Some("heads up".into()),
                ..Effect::default()
            },
        );
        check(
            SessionStart,
            Ending::Exit(0),
            r#"{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"c"}}"#,
            "",
            note(
                "SessionStart hook `hook.sh` answered for `UserPromptSubmit` in hookSpecificOutput; it is ignored",
            ),
        );
        let bad = interpret(
            SessionStart,
            "hook.sh",
            &Finished {
                stdout: "{not json}".into(),
                stderr: String::new(),
                ending: Ending::Exit(0),
                duration: Duration::ZERO,
            },
        );
        assert!(
            bad.note.as_deref().unwrap().starts_with(
                "SessionStart hook `hook.sh` printed JSON that does not parse (key must be a string"
            ),
            "{bad:?}"
        );
    }

    #[test]
    fn blocks_and_stops() {
        let block = |reason: &str| Effect { block: Some(reason.into()), ..Effect::default() };
        check(UserPromptSubmit, Ending::Exit(2), "{}", "no secrets\n", block("no secrets"));
        check(UserPromptSubmit, Ending::Exit(2), "", "", block("no reason given"));
        check(
            UserPromptSubmit,
            Ending::Exit(0),
            r#"{"decision":"block","reason":"policy"}"#,
            "",
            block("policy"),
        );
        // Exit 2 blocks nothing on SessionStart: a non-blocking error.
        check(
            SessionStart,
            Ending::Exit(2),
            "",
            "nope",
            note("SessionStart hook `hook.sh` exited 2: nope"),
        );
        check(
            SessionStart,
            Ending::Exit(0),
            r#"{"continue":false,"stopReason":"maintenance","decision":"block"}"#,
            "",
            Effect { stop: Some("maintenance".into()), ..Effect::default() },
        );
    }

    #[test]
    fn pre_tool_use_decisions_and_updated_input() {
        use crate::HookEvent::{PostToolUse, PreToolUse};
        let deny = |reason: &str| Effect { block: Some(reason.into()), ..Effect::default() };
        check(PreToolUse, Ending::Exit(2), "", "no rm\n", deny("no rm"));
        check(
            PreToolUse,
            Ending::Exit(0),
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"protected"}}"#,
            "",
            deny("protected"),
        );
        // The deprecated top-level decisions.
        check(
            PreToolUse,
            Ending::Exit(0),
            r#"{"decision":"block","reason":"old"}"#,
            "",
            deny("old"),
        );
        check(PreToolUse, Ending::Exit(0), r#"{"decision":"approve"}"#, "", Effect::default());
        check(
            PreToolUse,
            Ending::Exit(0),
            r#"{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?","updatedInput":{"command":"ls"},"additionalContext":"c"}}"#,
            "",
            Effect {
                ask: Some("sure?".into()),
                updated_input: Some(serde_json::json!({"command": "ls"})),
                context: Some("c".into()),
                ..Effect::default()
            },
        );
        // PostToolUse: a block's reason and the context, both for the model.
        check(
            PostToolUse,
            Ending::Exit(0),
            r#"{"decision":"block","reason":"lint failed","hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"ran lint"}}"#,
            "",
            Effect {
                block: Some("lint failed".into()),
                context: Some("ran lint".into()),
                ..Effect::default()
            },
        );
        check(PostToolUse, Ending::Exit(0), "plain text", "", Effect::default());
    }

    #[test]
    fn other_endings_are_one_note() {
        check(
            UserPromptSubmit,
            Ending::Exit(127),
            "",
            "sh: 1: guard.sh: not found\n",
            note(
                "UserPromptSubmit hook `hook.sh` exited 127, command not found: sh: 1: guard.sh: not found: it does nothing until that is fixed",
            ),
        );
        check(
            SessionEnd,
            Ending::Exit(1),
            "",
            "\nboom\nmore",
            note("SessionEnd hook `hook.sh` exited 1: boom"),
        );
        check(
            SessionStart,
            Ending::Timeout { after: Duration::from_secs(1), killed: true },
            "partial",
            "",
            note("SessionStart hook `hook.sh` timed out after 1s: sent TERM, then KILL after 2s"),
        );
        check(
            SessionStart,
            Ending::Timeout { after: Duration::from_secs(1), killed: false },
            "",
            "",
            note("SessionStart hook `hook.sh` timed out after 1s: sent TERM"),
        );
        check(
            SessionStart,
            Ending::Cancelled { killed: false },
            "partial",
            "",
            note("SessionStart hook `hook.sh` was cancelled: sent TERM"),
        );
    }
}
