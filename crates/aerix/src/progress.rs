//! The headless run's progress lines: a line on stderr per event a reader wants to follow.

use aerix_session::Event;

/// One line on stderr for what a reader of a headless run wants to follow.
pub fn progress(event: &Event) {
    match event {
        Event::Route { route, raw, .. } => match raw {
            Some(raw) => eprintln!("route: {route} (the member answered {raw:?})"),
            None => eprintln!("route: {route}"),
        },
        Event::Message {
            agent,
            role: aerix_session::Role::Tool,
            tool: Some(tool),
            call: Some(call),
            input,
            error,
            text,
            ..
        } => {
            let input = input.as_ref().map(|i| i.to_string()).unwrap_or_default();
            let input = clip(&input, 100);
            let mark = if *error == Some(true) { " (error)" } else { "" };
            eprintln!("{agent} {call} {tool} {input}{mark}");
            // A piece's result: its outcome and summary (the line above comes when it ended).
            if tool == "agent"
                && let Some(line) = piece_line(text)
            {
                eprintln!("{agent} {call} {line}");
            }
        }
        Event::Hook { event, command, ending, duration_ms, blocked, .. } => {
            let mark = if *blocked { " (blocked)" } else { "" };
            let command = clip(command, 100);
            eprintln!("hook {event} {command}: {ending} in {duration_ms} ms{mark}");
        }
        Event::AgentEnd { agent, outcome, reason, turns, final_text, .. } => {
            let reason = reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default();
            // A subagent's final (an implementer's summary, a verifier's verdict) goes to its
            // caller, not to stdout: its first 200 characters here. The root's is the answer.
            let said = match final_text {
                Some(text) if agent.contains('.') => {
                    format!(": {}", first_line(text, 200))
                }
                _ => String::new(),
            };
            eprintln!("{agent} {} after {turns} turns{reason}{said}", outcome.as_str());
        }
        other => {
            if let Some(line) = other.attempt_line() {
                eprintln!("{line}");
            }
        }
    }
}

/// `-> failed: verification failed after 2 attempts: ...` for an `agent` call's JSON result.
/// A summary of several lines (a check's output tail) shows its first and its last.
fn piece_line(text: &str) -> Option<String> {
    let result: serde_json::Value = serde_json::from_str(text).ok()?;
    let summary = result["summary"].as_str()?;
    let mut line = first_line(summary, 200);
    let last = summary.lines().skip(1).map(str::trim).filter(|l| !l.is_empty()).last();
    if let Some(last) = last {
        line.push_str(&format!(" [...] {}", clip(last, 100)));
    }
    Some(format!("-> {}: {line}", result["outcome"].as_str()?))
}

/// The first `chars` characters of `text`.
fn clip(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

/// The first line of `text`'s first `chars` characters.
fn first_line(text: &str, chars: usize) -> String {
    clip(text, chars).lines().next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::piece_line;

    #[test]
    fn a_piece_line_shows_a_summary_s_first_and_last_lines() {
        let result = serde_json::json!({
            "outcome": "failed",
            "summary": "`sh test.sh` exited 1. Its output ends:\nrunning\nFAIL: add 2 3 gave -1\n\n",
        });
        assert_eq!(
            piece_line(&result.to_string()).unwrap(),
            "-> failed: `sh test.sh` exited 1. Its output ends: [...] FAIL: add 2 3 gave -1"
        );
        let one = serde_json::json!({"outcome": "done", "summary": "Fixed add."});
        assert_eq!(piece_line(&one.to_string()).unwrap(), "-> done: Fixed add.");
    }
}
