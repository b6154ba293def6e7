//! `aerix -p`'s output formats (`--output-format`): `text` (the answer, then the diff and
//! `untracked:` lines), `json` (one `result` object at the end of each request) and
//! `stream-json` (a line per message as it happens, then the `result`), in Claude Code's
//! shapes (`aerix_claude::stream`). And `--input-format stream-json`: user messages read from
//! stdin, one request each.

use std::io::{BufRead, Write};
use std::time::Instant;

use aerix_claude::stream::{self, Init, Stream, Totals};
use aerix_session::{Event, Outcome};
use serde_json::Value;

/// `--output-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    StreamJson,
}

/// `--input-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    Text,
    StreamJson,
}

/// What one request printed, counted as its events pass.
pub struct Output {
    format: Format,
    stream: Option<Stream>,
    session: String,
    cwd: String,
    model: String,
    permission_mode: String,
    /// The init line's `mcp_servers`: `{"name", "status"}` each.
    mcp_servers: Vec<Value>,
    /// Requests of this process begun so far (the current one's number from 1).
    requests: usize,
    started: Instant,
    totals: Totals,
    root_turns: u32,
    /// The current request's `result` is printed.
    reported: bool,
}

/// A request's end, as the `result` object says it.
pub struct Ending<'a> {
    pub outcome: Outcome,
    pub exit_code: i32,
    /// The root's final answer, or what ended the request.
    pub result: &'a str,
    pub diff: &'a str,
    pub untracked: &'a [String],
}

impl Output {
    /// `earlier`: the events the session's log held before this process (a resumed session),
    /// so the stream's ids go on from them.
    pub fn new(format: Format, session: &str, earlier: &[Event]) -> Output {
        Output {
            format,
            stream: (format == Format::StreamJson).then(|| Stream::new("a1", session, earlier)),
            session: session.to_owned(),
            cwd: String::new(),
            model: String::new(),
            permission_mode: String::new(),
            mcp_servers: Vec::new(),
            requests: 0,
            started: Instant::now(),
            totals: Totals::default(),
            root_turns: 0,
            reported: false,
        }
    }

    /// The `init` line's mode.
    pub fn set_permission_mode(&mut self, mode: &str) {
        self.permission_mode = mode.to_owned();
    }

    /// The init line's servers: each by name with its state (`ready`, `failed: ...`,
    /// `skipped: ...`).
    pub fn set_mcp_servers(&mut self, servers: Vec<Value>) {
        self.mcp_servers = servers;
    }

    /// A request begins: its figures start from zero.
    pub fn begin(&mut self) {
        self.requests += 1;
        self.started = Instant::now();
        self.totals = Totals::default();
        self.root_turns = 0;
        self.reported = false;
    }

    /// Counts `event` for the result and, for `stream-json`, prints its lines.
    pub fn event(&mut self, event: &Event) {
        match event {
            Event::SessionStart { cwd, model, .. } => {
                self.cwd.clone_from(cwd);
                self.model.clone_from(model);
            }
            Event::Message { agent, role: aerix_session::Role::Assistant, usage, .. } => {
                if let Some(usage) = usage {
                    self.totals.add(usage);
                }
                if agent == "a1" {
                    self.root_turns += 1;
                }
            }
            // The root of each request is spawned first: the stream's `init` line.
            Event::AgentSpawn { parent: None, tools, .. } if self.stream.is_some() => {
                let init = stream::init(&Init {
                    session: &self.session,
                    cwd: &self.cwd,
                    model: &self.model,
                    tools,
                    mcp_servers: self.mcp_servers.clone(),
                    permission_mode: &self.permission_mode,
                    request: self.requests,
                });
                print_line(&init);
            }
            _ => {}
        }
        if let Some(stream) = &mut self.stream {
            for line in stream.lines(event, None) {
                print_line(&line);
            }
        }
    }

    /// The `result` object of the current request (`json`, `stream-json`); nothing for
    /// `text`, which prints as it goes. Once a request.
    pub fn result(&mut self, ending: &Ending<'_>) {
        if self.format == Format::Text || self.reported {
            return;
        }
        self.reported = true;
        let value = stream::result(&stream::Ended {
            session: &self.session,
            outcome: ending.outcome,
            result: ending.result,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            num_turns: self.root_turns,
            totals: &self.totals,
            diff: ending.diff,
            untracked: ending.untracked,
            exit_code: ending.exit_code,
            request: self.requests,
        });
        print_line(&value);
    }
}

/// One JSON line on stdout, flushed (a reader follows the run as it goes). A closed stdout is
/// not the run's failure.
fn print_line(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

/// The user messages of a `--input-format stream-json` stdin, read on a thread of their own
/// (a signal cancels the wait for the next one).
pub struct Inputs {
    rx: tokio::sync::mpsc::UnboundedReceiver<Result<String, String>>,
}

impl Inputs {
    pub fn spawn() -> Inputs {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut line_no = 0;
            loop {
                let next = next_message(&mut stdin, &mut line_no);
                let last = !matches!(next, Ok(Some(_)));
                if let Some(next) = next.transpose()
                    && tx.send(next).is_err()
                {
                    return;
                }
                if last {
                    return;
                }
            }
        });
        Inputs { rx }
    }

    /// The next message, an error naming a bad line (the last thing read), or `None` at the
    /// end of stdin.
    pub async fn next(&mut self) -> Option<Result<String, String>> {
        self.rx.recv().await
    }
}

/// The most one stdin line may hold (a prompt with pasted files is far less).
pub const MAX_INPUT_LINE: usize = 4 << 20;

/// The next user message of a `--input-format stream-json` stdin: `Ok(None)` at its end.
/// Blank lines are skipped; a line that is not a user message is an error naming its number.
pub fn next_message<R: BufRead>(
    input: &mut R,
    line_no: &mut usize,
) -> Result<Option<String>, String> {
    loop {
        let mut line = Vec::new();
        let read = <&mut R as std::io::Read>::take(input, MAX_INPUT_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading stdin: {e}"))?;
        if read == 0 {
            return Ok(None);
        }
        *line_no += 1;
        if line.len() > MAX_INPUT_LINE {
            return Err(format!(
                "stdin line {line_no} is longer than {} MiB",
                MAX_INPUT_LINE >> 20
            ));
        }
        let text =
            String::from_utf8(line).map_err(|_| format!("stdin line {line_no} is not UTF-8"))?;
        if text.trim().is_empty() {
            continue;
        }
        return user_message(&text).map(Some).map_err(|e| format!("stdin line {line_no}: {e}"));
    }
}

/// The text of a stream-json user message: `{"type":"user","message":{"role":"user",
/// "content": "..." | [{"type":"text","text":"..."}, ...]}}` (text blocks joined by a blank
/// line; other block kinds are refused by name).
pub fn user_message(line: &str) -> Result<String, String> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object ({e})"))?;
    if value["type"] != "user" {
        return Err(format!(
            "`type` is {}, and only user messages are read",
            short(&value["type"])
        ));
    }
    let message = &value["message"];
    if message["role"] != "user" {
        return Err(format!("`message.role` is {}, not \"user\"", short(&message["role"])));
    }
    let text = match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => {
            let mut texts = Vec::new();
            for block in blocks {
                match (block["type"].as_str(), block["text"].as_str()) {
                    (Some("text"), Some(text)) => texts.push(text),
                    (Some("text"), None) => return Err("a text block without `text`".to_owned()),
                    _ => {
                        return Err(format!(
                            "a content block of type {} (only text is read)",
                            short(&block["type"])
                        ));
                    }
                }
            }
            texts.join("\n\n")
        }
        other => return Err(format!("`message.content` is {}", short(other))),
    };
    if text.trim().is_empty() {
        return Err("the message's text is empty".to_owned());
    }
    Ok(text)
}

/// A value as a reader would name it, cut short.
fn short(value: &Value) -> String {
    match value {
        Value::Null => "missing".to_owned(),
        other => other.to_string().chars().take(40).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_message_gives_its_text() {
        let plain = r#"{"type":"user","message":{"role":"user","content":"fix it"}}"#;
        assert_eq!(user_message(plain).unwrap(), "fix it");
        let blocks = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"session_id":"x","parent_tool_use_id":null}"#;
        assert_eq!(user_message(blocks).unwrap(), "a\n\nb");
    }

    #[test]
    fn anything_else_is_named() {
        let cases = [
            ("not json", "not a JSON object"),
            (r#"{"type":"assistant","message":{}}"#, "`type` is \"assistant\""),
            (r#"{"type":"user","message":{"role":"system","content":"x"}}"#, "`message.role`"),
            (r#"{"type":"user","message":{"role":"user"}}"#, "`message.content` is missing"),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"image"}]}}"#,
                "type \"image\"",
            ),
            (r#"{"type":"user","message":{"role":"user","content":"  "}}"#, "empty"),
        ];
        for (line, says) in cases {
            let error = user_message(line).unwrap_err();
            assert!(error.contains(says), "{line}: {error}");
        }
    }

    #[test]
    fn lines_are_read_one_message_at_a_time_with_their_numbers() {
        let input = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"one\"}}\n\n\
                     {\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"two\"}}\n\
                     {\"type\":\"result\"}\n";
        let mut reader = std::io::Cursor::new(input.as_bytes());
        let mut n = 0;
        assert_eq!(next_message(&mut reader, &mut n).unwrap().as_deref(), Some("one"));
        assert_eq!(next_message(&mut reader, &mut n).unwrap().as_deref(), Some("two"));
        assert_eq!(n, 3);
        let error = next_message(&mut reader, &mut n).unwrap_err();
        assert!(error.starts_with("stdin line 4:"), "{error}");
        assert_eq!(next_message(&mut reader, &mut n).unwrap(), None);
    }

    #[test]
    fn a_line_over_the_bound_is_refused() {
        let long = vec![b'x'; MAX_INPUT_LINE + 10];
        let mut reader = std::io::Cursor::new(long);
        let mut n = 0;
        let error = next_message(&mut reader, &mut n).unwrap_err();
        assert!(error.contains("longer than 4 MiB"), "{error}");
    }
}
