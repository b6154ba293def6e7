//! The headless run's sink: every event to the session log, a line per tool call to stderr.

use std::path::PathBuf;

use aerix_core::Sink;
use aerix_session::{Event, Log};

pub struct HeadlessSink {
    pub log: Log,
    /// The first write failure, reported once at the end.
    pub failed: Option<String>,
    pub quiet: bool,
}

impl Sink for HeadlessSink {
    fn event(&mut self, event: Event) {
        if !self.quiet {
            progress(&event);
        }
        if let Err(e) = self.log.append(&event)
            && self.failed.is_none()
        {
            self.failed = Some(e.to_string());
        }
    }

    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf> {
        match self.log.spool(name, text) {
            Ok(path) => Some(path),
            Err(e) => {
                if self.failed.is_none() {
                    self.failed = Some(e.to_string());
                }
                None
            }
        }
    }
}

/// One line on stderr for what a reader of a headless run wants to follow.
pub fn progress(event: &Event) {
    match event {
        Event::Route { route, raw, .. } => match raw {
            Some(raw) => eprintln!("route: {route} (the member answered {raw:?})"),
            None => eprintln!("route: {route}"),
        },
        Event::Message {
            agent,
            role,
            tool: Some(tool),
            call: Some(call),
            input,
            error,
            text,
            ..
        } if role == "tool" => {
            let input = input.as_ref().map(|i| i.to_string()).unwrap_or_default();
            let input: String = input.chars().take(100).collect();
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
            let command: String = command.chars().take(100).collect();
            eprintln!("hook {event} {command}: {ending} in {duration_ms} ms{mark}");
        }
        Event::AgentEnd { agent, outcome, reason, turns, final_text, .. } => {
            let reason = reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default();
            // A subagent's final (an implementer's summary, a verifier's verdict) goes to its
            // caller, not to stdout: its first 200 characters here. The root's is the answer.
            let said = match final_text {
                Some(text) if agent.contains('.') => {
                    let text: String = text.chars().take(200).collect();
                    format!(": {}", text.lines().next().unwrap_or_default())
                }
                _ => String::new(),
            };
            eprintln!("{agent} {} after {turns} turns{reason}{said}", outcome.as_str());
        }
        _ => {}
    }
}

/// `-> failed: verification failed after 2 attempts: ...` for an `agent` call's JSON result.
fn piece_line(text: &str) -> Option<String> {
    let result: serde_json::Value = serde_json::from_str(text).ok()?;
    let summary: String = result["summary"].as_str()?.chars().take(200).collect();
    Some(format!(
        "-> {}: {}",
        result["outcome"].as_str()?,
        summary.lines().next().unwrap_or_default()
    ))
}
