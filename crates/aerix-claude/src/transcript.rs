//! The Claude Code format projection of a session: `<id>.claude.jsonl` beside `<id>.jsonl`
//! holds the root agent's conversation, `<id>/subagents/agent-<agent>.jsonl` each subagent's
//! (as Claude Code keeps its subagents' transcripts). [`project`] is a pure function of the
//! events; [`write_projection`] reads the log and replaces the files whole.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use aerix_session::{Event, Label, Role, SegmentOp, Usage};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::{ClaudeError, tools};

/// Calls kept per turn (the runtime's `turn::MAX_CALLS`): the rest were dropped and took no id.
const MAX_CALLS: usize = 8;

/// The lines of every file of a projection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Projection {
    /// The root agent's lines (`<id>.claude.jsonl`).
    pub main: Vec<Value>,
    /// Each subagent's lines, in spawn order (`<id>/subagents/agent-<agent>.jsonl`).
    pub subagents: Vec<(String, Vec<Value>)>,
}

/// `<dir>/<id>.claude.jsonl` for the log `<dir>/<id>.jsonl`.
pub fn transcript_path(log: &Path) -> PathBuf {
    log.with_extension("claude.jsonl")
}

/// Where subagents' projections go: `<dir>/<id>/subagents`.
pub fn subagents_dir(log: &Path) -> PathBuf {
    log.with_extension("").join("subagents")
}

/// Where a subagent's projection goes: `<dir>/<id>/subagents/agent-<agent>.jsonl`.
pub fn subagent_path(log: &Path, agent: &str) -> PathBuf {
    subagents_dir(log).join(format!("agent-{agent}.jsonl"))
}

/// A call's `tool_use` id: `<agent>.<call>` (`a1.c3`), unique in the session and the id hook
/// payloads give as `tool_use_id`.
pub fn use_id(agent: &str, call: &str) -> String {
    format!("{agent}.{call}")
}

/// Per-file state while projecting.
#[derive(Default)]
struct File {
    lines: Vec<Value>,
    last: Option<String>,
}

/// Per-agent state: the last call number given, the highest one answered, and the calls of its
/// last turn not yet answered.
#[derive(Default)]
struct Agent {
    next_call: u32,
    answered: u32,
    pending: Vec<String>,
    /// The line of its last turn, in its file.
    turn_line: usize,
}

pub(crate) struct Projector {
    session: String,
    cwd: String,
    version: String,
    model: String,
    root: String,
    /// Subagents in spawn order.
    order: Vec<String>,
    files: HashMap<String, File>,
    agents: HashMap<String, Agent>,
    ts: String,
}

/// The projection of a session's events (each with the `ts` its log line carried). Uuids are
/// derived from the session id and the event's index, so a rebuild gives the same ones.
pub fn project(events: &[(Event, Option<String>)]) -> Projection {
    let root = events
        .iter()
        .find_map(|(e, _)| match e {
            Event::AgentSpawn { agent, parent: None, .. } => Some(agent.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "a1".to_owned());
    let mut p = Projector::new(root);
    for (index, (event, ts)) in events.iter().enumerate() {
        p.feed(index, event, ts.as_deref());
    }
    let mut files = std::mem::take(&mut p.files);
    Projection {
        main: files.remove(&p.root).map(|f| f.lines).unwrap_or_default(),
        subagents: p
            .order
            .iter()
            .filter_map(|a| files.remove(a).map(|f| (a.clone(), f.lines)))
            .collect(),
    }
}

impl Projector {
    pub(crate) fn new(root: String) -> Projector {
        Projector {
            session: String::new(),
            cwd: String::new(),
            version: String::new(),
            model: String::new(),
            root,
            order: Vec::new(),
            files: HashMap::new(),
            agents: HashMap::new(),
            ts: "1970-01-01T00:00:00.000Z".to_owned(),
        }
    }

    /// Projects the event at `index` of the log (uuids are derived from it), logged at `ts`.
    pub(crate) fn feed(&mut self, index: usize, event: &Event, ts: Option<&str>) {
        if let Some(ts) = ts {
            self.ts = ts.to_owned();
        }
        self.event(index, event);
    }

    /// The lines of `agent`'s file so far.
    pub(crate) fn lines(&self, agent: &str) -> &[Value] {
        self.files.get(agent).map_or(&[], |f| f.lines.as_slice())
    }

    /// The agents with a file, the root first, then subagents in spawn order (an agent whose
    /// spawn was not seen last).
    pub(crate) fn agents(&self) -> Vec<String> {
        let mut agents = vec![self.root.clone()];
        agents.extend(self.order.iter().cloned());
        let mut rest: Vec<String> =
            self.files.keys().filter(|a| !agents.contains(a)).cloned().collect();
        rest.sort();
        agents.extend(rest);
        agents
    }

    fn event(&mut self, index: usize, event: &Event) {
        match event {
            Event::SessionStart { session, cwd, model, prompt, version, resumed, .. } => {
                // A resumed root numbers its calls on from the highest one answered, as the
                // runtime's rebuild does (calls a cancel left unrun are not counted).
                if *resumed && let Some(root) = self.agents.get_mut(&self.root) {
                    root.next_call = root.answered;
                    // Their ids come again: the unrun calls' own are marked, so each id names
                    // one call.
                    let unrun = std::mem::take(&mut root.pending);
                    let line = self
                        .files
                        .get_mut(&self.root)
                        .and_then(|f| f.lines.get_mut(root.turn_line));
                    let blocks = line.and_then(|l| l["message"]["content"].as_array_mut());
                    for block in blocks.into_iter().flatten() {
                        if block["type"] == "tool_use"
                            && let Some(id) = block["id"]
                                .as_str()
                                .filter(|id| unrun.iter().any(|u| use_id(&self.root, u) == *id))
                                .map(str::to_owned)
                        {
                            block["id"] = json!(format!("{id}-unrun"));
                        }
                    }
                }
                self.session = session.clone();
                self.cwd = cwd.clone();
                self.model = model.clone();
                self.version = version.clone();
                let root = self.root.clone();
                let message = json!({"role": "user", "content": prompt});
                self.push(&root, index, 0, "user", message, Map::new());
            }
            Event::AgentSpawn { agent, parent: Some(_), .. } if !self.order.contains(agent) => {
                self.order.push(agent.clone());
            }
            // A subagent's brief is its first user message.
            Event::Segment {
                agent,
                op: SegmentOp::Append,
                label: Some(Label::Prompt),
                text,
                ..
            } if *agent != self.root => {
                let message = json!({"role": "user", "content": text.clone().unwrap_or_default()});
                self.push(agent, index, 0, "user", message, Map::new());
            }
            Event::Message { agent, role: Role::Assistant, text, usage, stop, .. } => {
                self.assistant(index, agent, text, usage.as_ref(), stop.as_deref());
            }
            Event::Message {
                agent,
                role: Role::Tool,
                call: Some(call),
                tool,
                input,
                text,
                error,
                ..
            } => {
                let tool = tool.as_deref().unwrap_or("unknown");
                let input = input.clone().unwrap_or(Value::Object(Map::new()));
                self.result(index, agent, call, tool, &input, text, error.unwrap_or(false));
            }
            Event::Compaction { agent, before, compacted, blocked: None, .. }
                if !compacted.is_empty() =>
            {
                let file = self.files.entry(agent.clone()).or_default();
                let logical = file.last.clone();
                let mut extra = Map::new();
                extra.insert("subtype".into(), json!("compact_boundary"));
                extra.insert("content".into(), json!("Conversation compacted"));
                extra.insert("isMeta".into(), json!(false));
                extra.insert("level".into(), json!("info"));
                extra.insert("logicalParentUuid".into(), json!(logical));
                // aerix compacts on its own, before a turn: Claude Code's `auto`.
                extra.insert(
                    "compactMetadata".into(),
                    json!({"trigger": "auto", "preTokens": before}),
                );
                // A boundary starts a new chain, as Claude Code writes it.
                self.files.entry(agent.clone()).or_default().last = None;
                self.push(agent, index, 0, "system", Value::Null, extra);
            }
            _ => {}
        }
    }

    fn assistant(
        &mut self,
        index: usize,
        agent: &str,
        text: &str,
        usage: Option<&Usage>,
        stop: Option<&str>,
    ) {
        let state = self.agents.entry(agent.to_owned()).or_default();
        state.pending.clear();
        let mut content = Vec::new();
        let mut calls = false;
        match parse_turn(text) {
            Some(turn) => {
                if !turn.thought.is_empty() {
                    content.push(
                        json!({"type": "thinking", "thinking": turn.thought, "signature": ""}),
                    );
                }
                match turn.body {
                    Body::Final(text) => content.push(json!({"type": "text", "text": text})),
                    Body::Calls(list) => {
                        calls = true;
                        for (tool, input) in list {
                            state.next_call += 1;
                            let id = format!("c{}", state.next_call);
                            state.pending.push(id.clone());
                            content.push(json!({
                                "type": "tool_use",
                                "id": use_id(agent, &id),
                                "name": tools::tool_name(&tool),
                                "input": tools::view(&tool, &input, Path::new(&self.cwd)).input,
                            }));
                        }
                    }
                }
            }
            // A turn that did not parse is shown as the member wrote it.
            None => content.push(json!({"type": "text", "text": text})),
        }
        let stop_reason = match stop {
            Some("max_tokens" | "context_full") => "max_tokens",
            _ if calls => "tool_use",
            _ => "end_turn",
        };
        let message = json!({
            "id": format!("msg_{}", &hex(&self.session, index, 1)[..24]),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": usage.map(claude_usage),
        });
        self.push(agent, index, 0, "assistant", message, Map::new());
        let line = self.files.get(agent).map_or(0, |f| f.lines.len().saturating_sub(1));
        self.agents.entry(agent.to_owned()).or_default().turn_line = line;
    }

    #[allow(clippy::too_many_arguments, reason = "one tool message's fields")]
    fn result(
        &mut self,
        index: usize,
        agent: &str,
        call: &str,
        tool: &str,
        input: &Value,
        text: &str,
        error: bool,
    ) {
        let cwd = PathBuf::from(&self.cwd);
        let state = self.agents.entry(agent.to_owned()).or_default();
        let number = call.strip_prefix('c').and_then(|n| n.parse::<u32>().ok());
        state.answered = state.answered.max(number.unwrap_or(0));
        if let Some(at) = state.pending.iter().position(|p| p == call) {
            state.pending.remove(at);
        } else {
            // A call the turn's text did not predict (it should not happen): its tool_use is
            // written here, so every result has its call.
            state.next_call = state.next_call.max(number.unwrap_or(0));
            let message = json!({
                "id": format!("msg_{}", &hex(&self.session, index, 1)[..24]),
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [{"type": "tool_use", "id": use_id(agent, call), "name": tools::tool_name(tool), "input": tools::view(tool, input, &cwd).input}],
                "stop_reason": "tool_use",
                "stop_sequence": null,
            });
            self.push(agent, index, 2, "assistant", message, Map::new());
        }
        let mut block =
            json!({"type": "tool_result", "tool_use_id": use_id(agent, call), "content": text});
        if error {
            block["is_error"] = json!(true);
        }
        let message = json!({"role": "user", "content": [block]});
        let mut extra = Map::new();
        extra
            .insert("toolUseResult".into(), tools::tool_use_result(tool, input, text, error, &cwd));
        self.push(agent, index, 0, "user", message, extra);
    }

    /// Appends a line to `agent`'s file, chained to the file's last line.
    fn push(
        &mut self,
        agent: &str,
        index: usize,
        part: u8,
        kind: &str,
        message: Value,
        extra: Map<String, Value>,
    ) {
        let sidechain = agent != self.root;
        let uuid = uuid(&self.session, index, part);
        let file = self.files.entry(agent.to_owned()).or_default();
        let mut line = Map::new();
        line.insert("parentUuid".into(), json!(file.last));
        line.insert("isSidechain".into(), json!(sidechain));
        line.insert("userType".into(), json!("external"));
        line.insert("cwd".into(), json!(self.cwd));
        line.insert("sessionId".into(), json!(self.session));
        line.insert("version".into(), json!(self.version));
        if sidechain {
            line.insert("agentId".into(), json!(agent));
        }
        line.insert("type".into(), json!(kind));
        if !message.is_null() {
            line.insert("message".into(), message);
        }
        line.extend(extra);
        line.insert("uuid".into(), json!(uuid));
        line.insert("timestamp".into(), json!(self.ts));
        file.last = Some(uuid);
        file.lines.push(Value::Object(line));
    }
}

/// The pool's figures in the Messages API's terms: rows reused from the prefix store are cache
/// reads, the rest of the prompt is input.
pub(crate) fn claude_usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.prompt_tokens.saturating_sub(u.recomputed_from),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.recomputed_from.min(u.prompt_tokens),
        "output_tokens": u.completion_tokens,
    })
}

enum Body {
    Final(String),
    Calls(Vec<(String, Value)>),
}

struct Turn {
    thought: String,
    body: Body,
}

/// A turn read the way the runtime reads it (`aerix_turn::parse_as`), so the calls
/// get the ids the runtime gave them; `None` when the runtime would not have parsed it.
fn parse_turn(text: &str) -> Option<Turn> {
    let trimmed = text.trim();
    let trimmed = match trimmed.strip_prefix("```") {
        Some(rest) => {
            let rest = rest.strip_prefix("json").unwrap_or(rest);
            rest.strip_suffix("```").unwrap_or(rest).trim()
        }
        None => trimmed,
    };
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(trimmed) else { return None };
    if object.keys().any(|k| !["thought", "calls", "final"].contains(&k.as_str())) {
        return None;
    }
    let thought = match object.get("thought") {
        Some(Value::String(s)) => s.clone(),
        None => String::new(),
        Some(_) => return None,
    };
    let body = match (object.get("calls"), object.get("final")) {
        (None, Some(Value::String(text))) => Body::Final(text.clone()),
        // A verifier's verdict.
        (None, Some(verdict @ Value::Object(_))) => Body::Final(verdict.to_string()),
        (Some(Value::Array(calls)), None) if !calls.is_empty() => {
            let mut parsed = Vec::new();
            for call in calls {
                let tool = call.get("tool")?.as_str()?;
                let input = call.get("input").cloned().unwrap_or(Value::Object(Map::new()));
                if !input.is_object() {
                    return None;
                }
                parsed.push((tool.to_owned(), input));
            }
            parsed.truncate(MAX_CALLS);
            Body::Calls(parsed)
        }
        _ => return None,
    };
    Some(Turn { thought, body })
}

fn hex(session: &str, index: usize, part: u8) -> String {
    let digest = Sha256::digest(format!("{session}/{index}/{part}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A version-4-shaped uuid derived from the session, the event's index and the part of it.
pub(crate) fn uuid(session: &str, index: usize, part: u8) -> String {
    let h = hex(session, index, part);
    format!("{}-{}-4{}-8{}-{}", &h[..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// One rebuild at a time in this process: each reads the log after the one before, so the
/// file never goes back to an older state.
static WRITING: Mutex<()> = Mutex::new(());

/// Rebuilds the projection at `transcript` (`<dir>/<id>.claude.jsonl`) from the log beside it
/// (`<dir>/<id>.jsonl`).
pub fn refresh(transcript: &Path) -> Result<(), ClaudeError> {
    let name = transcript.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some(id) = name.strip_suffix(".claude.jsonl") else {
        return Err(ClaudeError::NotATranscript(transcript.to_owned()));
    };
    write_projection(&transcript.with_file_name(format!("{id}.jsonl"))).map(|_| ())
}

/// Reads the log and replaces its projection's files whole (each written to a temporary file,
/// then renamed over the old one, so a reader sees the old file or the new one). Returns the
/// main file's path.
pub fn write_projection(log: &Path) -> Result<PathBuf, ClaudeError> {
    let _one = WRITING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let bytes = std::fs::read(log).map_err(|error| ClaudeError::Io {
        what: "cannot read the session log",
        path: log.to_owned(),
        error,
    })?;
    // A rewound request's conversation is not the session's any more (`aerix rewind`).
    let timed = timed_events(&bytes);
    let plain: Vec<Event> = timed.iter().map(|(e, _)| e.clone()).collect();
    let live: Vec<(Event, Option<String>)> = timed
        .into_iter()
        .zip(aerix_session::live_mask(&plain))
        .filter_map(|(event, live)| live.then_some(event))
        .collect();
    let projection = project(&live);
    let main = transcript_path(log);
    replace(&main, &projection.main)?;
    for (agent, lines) in &projection.subagents {
        // An agent id names a file: only the runtime's shapes (`a1.c3.v1`) are taken.
        let safe = !agent.starts_with('.')
            && agent.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if safe {
            replace(&subagent_path(log, agent), lines)?;
        }
    }
    Ok(main)
}

/// Every complete event of a log with its `ts` (lines that are not events are left out, as
/// `aerix_session::read_log` leaves them).
pub fn timed_events(bytes: &[u8]) -> Vec<(Event, Option<String>)> {
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| {
            let value: Value = serde_json::from_slice(line).ok()?;
            let ts = value.get("ts").and_then(Value::as_str).map(str::to_owned);
            Some((serde_json::from_value(value).ok()?, ts))
        })
        .collect()
}

fn replace(path: &Path, lines: &[Value]) -> Result<(), ClaudeError> {
    let io = |error| ClaudeError::Io { what: "cannot write", path: path.to_owned(), error };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut text = String::new();
    for line in lines {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    let tmp = path.with_extension(format!("jsonl.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}
