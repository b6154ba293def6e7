//! The screen's state: the launch and startup, the transcript of requests, the running
//! request's live figures, the editor and what waits on the user. Fed by [`Feed`]s; nothing
//! here reads a clock but what it is given.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aerix_session::{Event, Outcome, Role};

use crate::editor::Editor;
use crate::feed::{DiffStat, Feed, RequestEnd};
use crate::startup::{Launch, Level, Note, Startup};

/// The root agent's id.
const ROOT: &str = "a1";
/// Less streaming than this gives no rate (`–`).
const MIN_STREAMING: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub struct Screen {
    pub launch: Launch,
    pub startup: Startup,
    pub editor: Editor,
    pub(crate) history: Vec<Entry>,
    pub(crate) running: Option<Running>,
    pub(crate) queued: Vec<String>,
    pub(crate) help: bool,
    pub(crate) gate: Option<Gate>,
    pub(crate) context: Option<Figure>,
    pub(crate) diff: Option<DiffStat>,
    pub(crate) verifier: Option<Verifier>,
    /// Rows the transcript is scrolled up from its end.
    pub(crate) scroll: u16,
}

/// What waits on the user before the request goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// The root's first plan write of the request.
    Plan { agent: String, text: String },
    /// A `PreToolUse` hook's `ask`, or the permission rules': `reason` is the line shown,
    /// `always` whether "always for this project" may be answered.
    Ask { agent: String, tool: String, input: String, reason: String, always: bool },
    /// At startup: the project is not trusted, and would run `items` (`changed`: it was
    /// trusted before they changed).
    Trust { root: String, items: Vec<String>, changed: bool },
}

/// The last verifier's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verifier {
    Pending,
    Passed,
    Failed,
}

/// A line of the transcript.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Entry {
    Prompt(String),
    Step(String),
    Plan { agent: String, text: String },
    Answer(String),
    Ended(Level, String),
    Stats(String),
    Note(Note),
}

/// The root's context figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Figure {
    pub tokens: u32,
    /// The client's count after a compaction, until the pool reports again.
    pub approx: bool,
}

#[derive(Debug)]
pub(crate) struct Running {
    pub started: Instant,
    pub max_turns: u32,
    pub root_turn: u32,
    /// Tool calls per agent, in the order the agents first called one.
    pub calls: Vec<(String, u32)>,
    pub cancelling: bool,
    /// Tokens streamed so far by the root's running generation.
    pub root_streamed: Option<u32>,
    /// Generations running, by agent: whether each has streamed.
    generations: HashMap<String, bool>,
    /// Agents whose last generation streamed, until its usage arrives.
    streamed_usage: Vec<String>,
    /// Generations streaming now, since when, and the time at least one streamed.
    streaming: u32,
    streaming_since: Option<Instant>,
    streaming_time: Duration,
    completion_tokens: u64,
}

impl Screen {
    pub fn new(launch: Launch) -> Screen {
        Screen {
            launch,
            startup: Startup::default(),
            editor: Editor::new(),
            history: Vec::new(),
            running: None,
            queued: Vec::new(),
            help: false,
            gate: None,
            context: None,
            diff: None,
            verifier: None,
            scroll: 0,
        }
    }

    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    pub fn gate(&self) -> Option<&Gate> {
        self.gate.as_ref()
    }

    /// Something waits on the user: the plan gate or an ask.
    pub fn set_gate(&mut self, gate: Gate) {
        self.help = false;
        self.gate = Some(gate);
    }

    pub fn queued(&self) -> &[String] {
        &self.queued
    }

    /// The next queued prompt, once the running request has ended.
    pub fn next_queued(&mut self) -> Option<String> {
        if self.running.is_some() || self.queued.is_empty() {
            return None;
        }
        Some(self.queued.remove(0))
    }

    pub fn queue(&mut self, prompt: String) {
        self.queued.push(prompt);
    }

    pub fn show_help(&mut self, shown: bool) {
        self.help = shown;
    }

    pub fn help_shown(&self) -> bool {
        self.help
    }

    /// `Esc` while a request runs: `cancelling…` until it ends.
    pub fn cancelling(&mut self) {
        if let Some(running) = &mut self.running {
            running.cancelling = true;
        }
        self.gate = None;
    }

    pub fn scroll_by(&mut self, rows: i32) {
        self.scroll = u16::try_from((i32::from(self.scroll) + rows).max(0)).unwrap_or(u16::MAX);
    }

    pub fn feed(&mut self, feed: Feed, now: Instant) {
        match feed {
            Feed::Event(event) => self.event(event),
            Feed::Generating { agent } => {
                if let Some(running) = &mut self.running {
                    if agent == ROOT {
                        running.root_streamed = Some(0);
                    }
                    running.generations.insert(agent, false);
                }
            }
            Feed::Streamed { agent } => {
                if let Some(running) = &mut self.running {
                    if agent == ROOT
                        && let Some(streamed) = &mut running.root_streamed
                    {
                        *streamed += 1;
                    }
                    if let Some(streamed) = running.generations.get_mut(&agent)
                        && !*streamed
                    {
                        *streamed = true;
                        if running.streaming == 0 {
                            running.streaming_since = Some(now);
                        }
                        running.streaming += 1;
                    }
                }
            }
            Feed::Generated { agent } => {
                if let Some(running) = &mut self.running {
                    if agent == ROOT
                        && let (Some(streamed), Some(figure)) =
                            (running.root_streamed.take(), &mut self.context)
                    {
                        // Until its usage comes, what it streamed counts.
                        figure.tokens += streamed;
                    }
                    if running.generations.remove(&agent) == Some(true) {
                        running.streamed_usage.push(agent);
                        running.streaming = running.streaming.saturating_sub(1);
                        if running.streaming == 0
                            && let Some(since) = running.streaming_since.take()
                        {
                            running.streaming_time += now.saturating_duration_since(since);
                        }
                    }
                }
            }
            Feed::RequestStarted { prompt, max_turns } => {
                self.scroll = 0;
                self.history.push(Entry::Prompt(prompt));
                self.running = Some(Running {
                    started: now,
                    max_turns,
                    root_turn: 0,
                    calls: Vec::new(),
                    cancelling: false,
                    root_streamed: None,
                    generations: HashMap::new(),
                    streamed_usage: Vec::new(),
                    streaming: 0,
                    streaming_since: None,
                    streaming_time: Duration::ZERO,
                    completion_tokens: 0,
                });
            }
            Feed::RequestEnded(end) => self.ended(end, now),
            Feed::Diff(diff) => self.diff = diff,
            Feed::Note(note) => self.history.push(Entry::Note(note)),
        }
    }

    fn ended(&mut self, end: RequestEnd, now: Instant) {
        self.gate = None;
        let Some(mut running) = self.running.take() else { return };
        if let Some(since) = running.streaming_since.take() {
            running.streaming_time += now.saturating_duration_since(since);
        }
        if let Some(answer) = end.answer.filter(|a| !a.trim().is_empty()) {
            self.history.push(Entry::Answer(answer));
        }
        let took = now.saturating_duration_since(running.started);
        match end.outcome {
            Outcome::Done | Outcome::Budget => {
                if end.outcome == Outcome::Budget {
                    self.history
                        .push(Entry::Ended(Level::Warning, "out of turns (budget)".to_owned()));
                }
                let rate =
                    if running.streaming_time >= MIN_STREAMING && running.completion_tokens > 0 {
                        let rate =
                            running.completion_tokens as f64 / running.streaming_time.as_secs_f64();
                        format!(
                            "{rate:.1} tok/s ({} tokens over {:.1} s)",
                            running.completion_tokens,
                            running.streaming_time.as_secs_f64()
                        )
                    } else {
                        "– tok/s".to_owned()
                    };
                self.history.push(Entry::Stats(format!(
                    "{rate} · {} · {}",
                    seconds(took),
                    end.local_time
                )));
            }
            Outcome::Cancelled => {
                self.history.push(Entry::Ended(Level::Warning, "cancelled".to_owned()));
            }
            Outcome::Failed | Outcome::Killed => {
                let what = end.outcome.as_str();
                let line = match end.error {
                    Some(error) => format!("{what}: {error}"),
                    None => what.to_owned(),
                };
                self.history.push(Entry::Ended(Level::Error, line));
            }
        }
    }

    fn event(&mut self, event: Event) {
        match event {
            Event::Route { route, .. } => self.history.push(Entry::Step(format!("route {route}"))),
            Event::AgentSpawn { agent, kind, parent: Some(_), .. } => {
                if is_verifier(&agent) {
                    self.verifier = Some(Verifier::Pending);
                }
                self.history.push(Entry::Step(format!("{agent} {kind} started")));
            }
            Event::AgentSpawn { agent, max_turns, .. } if agent == ROOT => {
                if let Some(running) = &mut self.running {
                    running.max_turns = max_turns;
                }
            }
            Event::Message { agent, role: Role::Assistant, turn, usage, .. } => {
                if let Some(running) = &mut self.running {
                    if let Some(at) = running.streamed_usage.iter().position(|a| *a == agent)
                        && let Some(usage) = &usage
                    {
                        running.streamed_usage.remove(at);
                        running.completion_tokens += u64::from(usage.completion_tokens);
                    }
                    if agent == ROOT
                        && let Some(turn) = turn
                    {
                        running.root_turn = turn;
                    }
                }
                if agent == ROOT
                    && let Some(usage) = usage
                {
                    self.context = Some(Figure {
                        tokens: usage.prompt_tokens + usage.completion_tokens,
                        approx: false,
                    });
                }
            }
            Event::Message {
                agent,
                role: Role::Tool,
                call: Some(call),
                tool: Some(tool),
                input,
                error,
                ..
            } => {
                if let Some(running) = &mut self.running {
                    match running.calls.iter_mut().find(|(a, _)| *a == agent) {
                        Some((_, n)) => *n += 1,
                        None => running.calls.push((agent.clone(), 1)),
                    }
                }
                let input = input.map(|i| brief_input(&i)).unwrap_or_default();
                let mark = if error == Some(true) { " (error)" } else { "" };
                self.history.push(Entry::Step(format!("{agent} {call} {tool} {input}{mark}")));
            }
            Event::Plan { agent, text } => self.history.push(Entry::Plan { agent, text }),
            Event::Attempt { .. } | Event::Check { .. } | Event::Land { .. } => {
                if let Some(line) = event.attempt_line() {
                    self.history.push(Entry::Step(line));
                }
            }
            Event::Compaction { agent, before, after, compacted, blocked, .. } => {
                if agent == ROOT && blocked.is_none() {
                    self.context = Some(Figure { tokens: after, approx: true });
                }
                let what = match blocked {
                    Some(reason) => format!("compaction blocked by a hook: {reason}"),
                    None => format!(
                        "compacted {} → {} tokens ({} segments)",
                        group(u64::from(before)),
                        group(u64::from(after)),
                        compacted.len()
                    ),
                };
                self.history.push(Entry::Step(format!("{agent} {what}")));
            }
            Event::AgentEnd { agent, outcome, reason, final_text, turns } if agent != ROOT => {
                if is_verifier(&agent) {
                    let passed = outcome == Outcome::Done
                        && final_text.as_deref().and_then(verdict) == Some(true);
                    self.verifier = Some(if passed { Verifier::Passed } else { Verifier::Failed });
                }
                let reason = reason.map(|r| format!(": {r}")).unwrap_or_default();
                let said = final_text
                    .map(|t| format!(" · {}", t.lines().next().unwrap_or_default()))
                    .unwrap_or_default();
                self.history.push(Entry::Step(format!(
                    "{agent} {} after {turns} turns{reason}{said}",
                    outcome.as_str()
                )));
            }
            Event::Hook { event, command, blocked: true, .. } => {
                self.history.push(Entry::Step(format!("hook {event} `{command}` blocked")));
            }
            _ => {}
        }
    }

    /// The status line's parts while a request runs: elapsed, the root's turn, the calls.
    pub(crate) fn status(&self, now: Instant) -> Option<String> {
        let running = self.running.as_ref()?;
        let elapsed = now.saturating_duration_since(running.started).as_secs();
        let mut parts = vec![
            format!("{elapsed}s"),
            format!("turn {}/{}", running.root_turn, running.max_turns),
        ];
        if !running.calls.is_empty() {
            let calls: Vec<String> =
                running.calls.iter().map(|(agent, n)| format!("{agent} {n}")).collect();
            parts.push(format!("calls {}", calls.join(", ")));
        }
        if !self.queued.is_empty() {
            parts.push(format!("{} queued", self.queued.len()));
        }
        if running.cancelling {
            parts.push("cancelling…".to_owned());
        }
        Some(parts.join(" · "))
    }

    /// The thinking icon's frame: one every 100 ms of the request.
    pub(crate) fn tick(&self, now: Instant) -> usize {
        self.running.as_ref().map_or(0, |r| {
            usize::try_from(now.saturating_duration_since(r.started).as_millis() / 100).unwrap_or(0)
        })
    }

    /// The context line: the pool's figure for the root, moved by its running generation.
    pub(crate) fn context_line(&self) -> Option<String> {
        let figure = self.context?;
        let streamed = self.running.as_ref().and_then(|r| r.root_streamed).unwrap_or(0);
        let tokens = figure.tokens + streamed;
        let window = self.launch.window.max(1);
        let percent = u64::from(tokens) * 100 / u64::from(window);
        let approx = if figure.approx { "≈" } else { "" };
        Some(format!(
            "context {approx}{} / {} tokens ({percent}%)",
            group(u64::from(tokens)),
            group(u64::from(self.launch.window))
        ))
    }

    /// The diff line, with the verifier's state.
    pub(crate) fn diff_line(&self) -> Option<String> {
        let diff = self.diff.filter(|d| d.files > 0).map(|d| {
            let files = if d.files == 1 { "file" } else { "files" };
            format!("diff +{} −{} in {} {files}", d.added, d.removed, d.files)
        });
        let verifier = self.verifier.map(|v| match v {
            Verifier::Pending => "verifier pending",
            Verifier::Passed => "verifier passed",
            Verifier::Failed => "verifier failed",
        });
        match (diff, verifier) {
            (Some(diff), Some(v)) => Some(format!("{diff} · {v}")),
            (Some(diff), None) => Some(diff),
            (None, Some(v)) => Some(v.to_owned()),
            (None, None) => None,
        }
    }
}

/// `a1.c3.v1`, `a1.c3.r1.v2`: a verifier's id.
fn is_verifier(agent: &str) -> bool {
    agent.rsplit('.').next().is_some_and(|last| {
        last.strip_prefix('v')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// A verifier's final: `Some(true)` for `pass`.
fn verdict(text: &str) -> Option<bool> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get("verdict").and_then(|v| v.as_str()).map(|v| v == "pass")
}

/// A call's input in one short line: its first string field, else its JSON.
fn brief_input(input: &serde_json::Value) -> String {
    let text = ["command", "path", "pattern", "brief", "op", "name"]
        .iter()
        .find_map(|k| input.get(k).and_then(|v| v.as_str()))
        .map(str::to_owned)
        .unwrap_or_else(|| input.to_string());
    let line = text.lines().next().unwrap_or_default();
    let clipped: String = line.chars().take(80).collect();
    if clipped.len() < line.len() { format!("{clipped}…") } else { clipped }
}

/// `12,345`.
pub(crate) fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `41.2 s`, `2 min 05 s`.
pub(crate) fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        let whole = d.as_secs();
        format!("{} min {:02} s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifier_ids_and_verdicts() {
        assert!(is_verifier("a1.c3.v1"));
        assert!(is_verifier("a1.c3.r1.v12"));
        assert!(!is_verifier("a1.c3"));
        assert!(!is_verifier("a1.c3.v"));
        assert_eq!(verdict(r#"{"reason":"ok","verdict":"pass"}"#), Some(true));
        assert_eq!(verdict(r#"{"verdict":"fail","reason":"x"}"#), Some(false));
        assert_eq!(verdict("pass"), None);
    }

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(group(8192), "8,192");
        assert_eq!(group(123), "123");
        assert_eq!(group(1234567), "1,234,567");
        assert_eq!(seconds(Duration::from_millis(41_230)), "41.2 s");
        assert_eq!(seconds(Duration::from_secs(125)), "2 min 05 s");
    }
}
