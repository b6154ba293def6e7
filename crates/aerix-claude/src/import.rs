//! Reading a Claude Code transcript (`~/.claude/projects/<dir>/<session>.jsonl`, and its
//! subagents' files) into aerix session events. Everything in it is untrusted: every line is
//! bounded, checked, and either converted or counted in the [`Report`]; nothing is fatal.
//!
//! What becomes events: the main line of the conversation (the branch that ends at the file's
//! last message, walked back through `parentUuid`, and across a compaction through
//! `logicalParentUuid`): each user prompt a `session.start` (the first one new, the later ones
//! `resumed`, as aerix records a session's requests), each assistant message (the lines Claude
//! Code splits one message into, joined) a `message` of `a1` with its text and usage, each
//! tool result a `tool` `message` with its call's name and input, as Claude Code wrote them.
//! Subagents (sidechains, or `subagents/agent-*.jsonl`) become agents `a2`, `a3`, ... spawned
//! by `a1`. The rest (thinking, system lines, snapshots, other branches, ...) is counted.

use std::collections::{BTreeMap, HashMap, HashSet};

use aerix_session::{Event, SegmentOp, Usage};
use serde_json::{Map, Value};

/// A line longer than this is refused (by its number).
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// A transcript larger than this is refused whole (by its name).
pub const MAX_FILE_BYTES: u64 = 512 << 20;

/// What reading a transcript came to, for the one line the importer prints per file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Non-blank lines read.
    pub lines: usize,
    /// User and assistant lines that became events.
    pub converted: usize,
    /// Line numbers that are not JSON objects.
    pub malformed: Vec<usize>,
    /// Line numbers over [`MAX_LINE_BYTES`].
    pub too_long: Vec<usize>,
    /// Lines whose `uuid` an earlier line had (a resume appends the history again).
    pub duplicates: usize,
    /// `summary` lines whose `leafUuid` is not in the file (another session's).
    pub foreign_summaries: usize,
    /// User and assistant lines off the main line (a rewind's abandoned branch).
    pub other_branches: usize,
    /// The main line's walk stopped at a `parentUuid` the file does not hold.
    pub broken_chain: bool,
    /// Subagents converted.
    pub subagents: usize,
    /// Tool calls without a result on the main line.
    pub unanswered: usize,
    /// What was read but not converted, by kind (a line type, `system:<subtype>`, a block type).
    pub not_converted: BTreeMap<String, usize>,
}

impl Report {
    /// What was left out, as one phrase (empty when nothing was).
    pub fn skipped(&self) -> String {
        let mut parts = Vec::new();
        let lines = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
        if !self.malformed.is_empty() {
            parts.push(format!(
                "{} malformed (line {})",
                self.malformed.len(),
                lines(&self.malformed)
            ));
        }
        if !self.too_long.is_empty() {
            parts.push(format!(
                "{} over {} MiB (line {})",
                self.too_long.len(),
                MAX_LINE_BYTES >> 20,
                lines(&self.too_long)
            ));
        }
        if self.duplicates > 0 {
            parts.push(format!("{} duplicate uuid", self.duplicates));
        }
        if self.foreign_summaries > 0 {
            parts.push(format!("{} summary of another session", self.foreign_summaries));
        }
        if self.other_branches > 0 {
            parts.push(format!("{} on other branches", self.other_branches));
        }
        if self.broken_chain {
            parts.push("the chain breaks at a parent not in the file".to_owned());
        }
        if self.unanswered > 0 {
            parts.push(format!("{} tool call without a result", self.unanswered));
        }
        if !self.not_converted.is_empty() {
            let kinds: Vec<String> =
                self.not_converted.iter().map(|(k, n)| format!("{n} {k}")).collect();
            parts.push(format!("not converted: {}", kinds.join(", ")));
        }
        parts.join("; ")
    }
}

/// A transcript read into events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Imported {
    /// The first line's `cwd`, `version`, and the first assistant message's `model`.
    pub cwd: Option<String>,
    pub version: Option<String>,
    pub model: Option<String>,
    /// A `custom-title`, else the last summary of this session, else the first prompt.
    pub title: String,
    pub first_ts: Option<String>,
    pub last_ts: Option<String>,
    /// User prompts on the main line (each a request).
    pub prompts: u32,
    /// The events, each with its line's timestamp; `session.start`'s `session` and `project`
    /// are empty until [`Imported::assign`].
    pub events: Vec<(Event, Option<String>)>,
    pub report: Report,
}

impl Imported {
    /// Names the aerix session and project the events belong to.
    pub fn assign(&mut self, session: &str, project: &str) {
        for (event, _) in &mut self.events {
            if let Event::SessionStart { session: s, project: p, .. } = event {
                *s = session.to_owned();
                *p = project.to_owned();
            }
        }
    }
}

struct Line {
    no: usize,
    value: Map<String, Value>,
}

impl Line {
    fn str(&self, key: &str) -> Option<&str> {
        self.value.get(key).and_then(Value::as_str)
    }
    fn kind(&self) -> &str {
        self.str("type").unwrap_or("")
    }
    fn flag(&self, key: &str) -> bool {
        self.value.get(key).and_then(Value::as_bool).unwrap_or(false)
    }
}

/// Reads a main transcript and its subagents' files (`(name, bytes)`, in the order given).
pub fn read(main: &[u8], subagents: &[(String, Vec<u8>)]) -> Imported {
    let mut out = Imported::default();
    let lines = parse_lines(main, &mut out.report);
    let (main_lines, side_lines): (Vec<&Line>, Vec<&Line>) =
        lines.iter().partition(|l| !l.flag("isSidechain"));
    let in_file: HashSet<&str> = lines.iter().filter_map(|l| l.str("uuid")).collect();
    let mut summary = None;
    let mut custom_title = None;
    for line in &lines {
        match line.kind() {
            "user" | "assistant" => {}
            "summary" => {
                if line.str("leafUuid").is_some_and(|leaf| in_file.contains(leaf)) {
                    summary = line.str("summary").map(str::to_owned);
                } else {
                    out.report.foreign_summaries += 1;
                }
            }
            "custom-title" => {
                custom_title = line.str("customTitle").map(str::to_owned);
                count(&mut out.report, "custom-title");
            }
            "system" => {
                let kind = format!("system:{}", line.str("subtype").unwrap_or("?"));
                count(&mut out.report, &kind);
            }
            "" => count(&mut out.report, "line without a type"),
            other => count(&mut out.report, other),
        }
    }
    out.cwd = lines.iter().find_map(|l| l.str("cwd")).map(str::to_owned);
    out.version = lines.iter().find_map(|l| l.str("version")).map(str::to_owned);
    out.model = lines.iter().filter(|l| l.kind() == "assistant").find_map(|l| {
        let model = l.value.get("message")?.get("model")?.as_str()?;
        (!model.starts_with('<')).then(|| model.to_owned())
    });

    let path = main_line(&main_lines, &mut out.report);
    let mut converter = Converter::new(&out, "a1");
    converter.convert(&path, &mut out.report);
    out.prompts = converter.prompts;
    out.title =
        custom_title.or(summary).or_else(|| converter.first_prompt.clone()).unwrap_or_default();
    let mut events = converter.events;

    // Subagents: older transcripts keep them as sidechain lines of the main file (grouped by
    // `agentId`), newer ones in files of their own.
    let mut groups: Vec<(String, Vec<&Line>)> = Vec::new();
    for line in side_lines {
        let key = line.str("agentId").unwrap_or("sidechain").to_owned();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push(line),
            None => groups.push((key, vec![line])),
        }
    }
    let files: Vec<Vec<Line>> =
        subagents.iter().map(|(_, bytes)| parse_lines(bytes, &mut out.report)).collect();
    for file in &files {
        groups.push((String::new(), file.iter().collect()));
    }
    for (i, (_, group)) in groups.iter().enumerate() {
        let agent = format!("a{}", i + 2);
        let path = main_line(group, &mut out.report);
        let mut converter = Converter::new(&out, &agent);
        converter.convert(&path, &mut out.report);
        if converter.events.is_empty() {
            continue;
        }
        let ts = converter.events.first().and_then(|(_, ts)| ts.clone());
        events.push((
            Event::AgentSpawn {
                agent: agent.clone(),
                parent: Some("a1".into()),
                kind: "claude-code".into(),
                route: None,
                member: out.model.clone().unwrap_or_default(),
                tools: Vec::new(),
                max_turns: 0,
            },
            ts,
        ));
        events.extend(converter.events);
        out.report.subagents += 1;
    }
    out.first_ts = events.iter().find_map(|(_, ts)| ts.clone());
    out.last_ts = events.iter().rev().find_map(|(_, ts)| ts.clone());
    out.events = events;
    out
}

fn count(report: &mut Report, kind: &str) {
    *report.not_converted.entry(kind.to_owned()).or_default() += 1;
}

/// The JSON objects of a file, each line bounded; duplicates by `uuid` dropped.
fn parse_lines(bytes: &[u8], report: &mut Report) -> Vec<Line> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        report.lines += 1;
        if line.len() > MAX_LINE_BYTES {
            report.too_long.push(i + 1);
            continue;
        }
        let Ok(Value::Object(value)) = serde_json::from_slice::<Value>(line) else {
            report.malformed.push(i + 1);
            continue;
        };
        if let Some(uuid) = value.get("uuid").and_then(Value::as_str)
            && !seen.insert(uuid.to_owned())
        {
            report.duplicates += 1;
            continue;
        }
        out.push(Line { no: i + 1, value });
    }
    out
}

/// The branch ending at the last user or assistant line, root first.
fn main_line<'a>(lines: &[&'a Line], report: &mut Report) -> Vec<&'a Line> {
    let by_uuid: HashMap<&str, &Line> =
        lines.iter().filter_map(|l| Some((l.str("uuid")?, *l))).collect();
    let messages = |l: &&Line| matches!(l.kind(), "user" | "assistant");
    let Some(leaf) = lines.iter().rev().find(|l| messages(l) && l.str("uuid").is_some()) else {
        // Without uuids there is no tree: the messages in file order.
        return lines.iter().copied().filter(messages).collect();
    };
    let mut path = Vec::new();
    let mut on_path = HashSet::new();
    let mut at = Some(*leaf);
    while let Some(line) = at {
        if !on_path.insert(line.no) {
            break;
        }
        path.push(line);
        // A compaction's boundary starts a new chain; its logical parent continues the old.
        let parent = line.str("parentUuid").or_else(|| line.str("logicalParentUuid"));
        at = match parent {
            Some(parent) => {
                let next = by_uuid.get(parent).copied();
                report.broken_chain |= next.is_none();
                next
            }
            None => None,
        };
    }
    path.reverse();
    report.other_branches +=
        lines.iter().filter(|l| messages(l) && !on_path.contains(&l.no)).count();
    path.into_iter().filter(messages).collect()
}

/// One agent's path into events.
struct Converter {
    agent: String,
    cwd: String,
    version: String,
    model: String,
    events: Vec<(Event, Option<String>)>,
    prompts: u32,
    first_prompt: Option<String>,
    turns: u32,
    /// The tool calls not answered yet: id → (name, input).
    calls: HashMap<String, (String, Value)>,
    /// The message id of the last event when it was an assistant message.
    last_message: Option<String>,
}

impl Converter {
    fn new(head: &Imported, agent: &str) -> Converter {
        Converter {
            agent: agent.to_owned(),
            cwd: head.cwd.clone().unwrap_or_default(),
            version: format!("claude-code {}", head.version.as_deref().unwrap_or("?")),
            model: head.model.clone().unwrap_or_else(|| "claude-code".to_owned()),
            events: Vec::new(),
            prompts: 0,
            first_prompt: None,
            turns: 0,
            calls: HashMap::new(),
            last_message: None,
        }
    }

    fn convert(&mut self, path: &[&Line], report: &mut Report) {
        for line in path {
            let ts = line.str("timestamp").map(str::to_owned);
            let message = line.value.get("message");
            let content = message.and_then(|m| m.get("content"));
            match line.kind() {
                "user" if line.flag("isMeta") => count(report, "meta user message"),
                "user" if line.flag("isCompactSummary") => count(report, "compact summary"),
                "user" => {
                    self.user(content, ts, report);
                    report.converted += 1;
                }
                _ => {
                    self.assistant(message, ts, report);
                    report.converted += 1;
                }
            }
        }
        report.unanswered += self.calls.len();
    }

    fn user(&mut self, content: Option<&Value>, ts: Option<String>, report: &mut Report) {
        self.last_message = None;
        let mut prompt = Vec::new();
        match content {
            Some(Value::String(text)) => prompt.push(text.clone()),
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    match block.get("type").and_then(Value::as_str).unwrap_or("") {
                        "tool_result" => self.result(block, ts.clone()),
                        "text" => prompt.push(text_of(block.get("text"))),
                        "image" => prompt.push("[image]".to_owned()),
                        other => count(report, &format!("{other} block")),
                    }
                }
            }
            _ => count(report, "user line without content"),
        }
        if prompt.is_empty() {
            return;
        }
        let text = prompt.join("\n");
        self.prompts += 1;
        if self.first_prompt.is_none() {
            self.first_prompt = Some(text.lines().next().unwrap_or("").to_owned());
        }
        let event = if self.agent == "a1" {
            Event::SessionStart {
                session: String::new(),
                project: String::new(),
                cwd: self.cwd.clone(),
                model: self.model.clone(),
                decision: None,
                prompt: text,
                resumed: self.prompts > 1,
                version: self.version.clone(),
                profile: None,
                profile_branch: None,
                profile_commit: None,
                start_commit: None,
            }
        } else {
            Event::Segment {
                agent: self.agent.clone(),
                op: SegmentOp::Append,
                id: if self.prompts == 1 { "brief".into() } else { format!("p{}", self.prompts) },
                role: Some(aerix_session::Role::User),
                label: Some(aerix_session::Label::Prompt),
                text: Some(text),
                tokens: None,
                pinned: None,
                recomputed_from: None,
                prompt_tokens: None,
            }
        };
        self.events.push((event, ts));
    }

    fn result(&mut self, block: &Value, ts: Option<String>) {
        self.start(ts.clone());
        let id = block.get("tool_use_id").and_then(Value::as_str).unwrap_or("").to_owned();
        let (tool, input) =
            self.calls.remove(&id).unwrap_or_else(|| ("unknown".to_owned(), Value::Null));
        self.events.push((
            Event::Message {
                agent: self.agent.clone(),
                role: aerix_session::Role::Tool,
                turn: Some(self.turns),
                call: Some(id),
                tool: Some(tool),
                input: Some(input),
                text: text_of(block.get("content")),
                error: Some(block.get("is_error").and_then(Value::as_bool).unwrap_or(false)),
                usage: None,
                stop: None,
            },
            ts,
        ));
    }

    fn assistant(&mut self, message: Option<&Value>, ts: Option<String>, report: &mut Report) {
        self.start(ts.clone());
        let id = message.and_then(|m| m.get("id")).and_then(Value::as_str).map(str::to_owned);
        let mut texts = Vec::new();
        let blocks = message.and_then(|m| m.get("content"));
        match blocks {
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    match block.get("type").and_then(Value::as_str).unwrap_or("") {
                        "text" => texts.push(text_of(block.get("text"))),
                        "tool_use" => {
                            let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                            let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                            let input = block.get("input").cloned().unwrap_or(Value::Null);
                            self.calls.insert(id.to_owned(), (name.to_owned(), input));
                        }
                        other => count(report, &format!("{other} block")),
                    }
                }
            }
            Some(Value::String(text)) => texts.push(text.clone()),
            _ => count(report, "assistant line without content"),
        }
        let usage = message.and_then(|m| m.get("usage")).map(usage_of);
        let stop =
            message.and_then(|m| m.get("stop_reason")).and_then(Value::as_str).map(str::to_owned);
        let text = texts.join("\n\n");
        // Claude Code writes one line per content block of a message: they are one turn.
        if id.is_some()
            && self.last_message == id
            && let Some((Event::Message { text: t, usage: u, stop: s, .. }, _)) =
                self.events.last_mut()
        {
            if !text.is_empty() {
                if !t.is_empty() {
                    t.push_str("\n\n");
                }
                t.push_str(&text);
            }
            *u = usage.or(u.take());
            *s = stop.or(s.take());
            return;
        }
        self.turns += 1;
        self.last_message = id;
        self.events.push((
            Event::Message {
                agent: self.agent.clone(),
                role: aerix_session::Role::Assistant,
                turn: Some(self.turns),
                call: None,
                tool: None,
                input: None,
                text,
                error: None,
                usage,
                stop,
            },
            ts,
        ));
    }

    /// The root's events start with a `session.start`, even when the transcript does not
    /// start with a prompt.
    fn start(&mut self, ts: Option<String>) {
        if self.agent == "a1" && self.events.is_empty() {
            self.prompts += 1;
            self.events.push((
                Event::SessionStart {
                    session: String::new(),
                    project: String::new(),
                    cwd: self.cwd.clone(),
                    model: self.model.clone(),
                    decision: None,
                    prompt: String::new(),
                    resumed: false,
                    version: self.version.clone(),
                    profile: None,
                    profile_branch: None,
                    profile_commit: None,
                    start_commit: None,
                },
                ts,
            ));
        }
    }
}

/// A string, or the text blocks of a list joined (an image is `[image]`).
fn text_of(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("image") => "[image]".to_owned(),
                _ => text_of(b.get("text")),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The Messages API's usage in the pool's terms (a cache read is a reused row).
fn usage_of(usage: &Value) -> Usage {
    let n = |key: &str| {
        usage.get(key).and_then(Value::as_u64).map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    };
    let read = n("cache_read_input_tokens");
    Usage {
        prompt_tokens: n("input_tokens")
            .saturating_add(read)
            .saturating_add(n("cache_creation_input_tokens")),
        completion_tokens: n("output_tokens"),
        recomputed_from: read,
        prefill_ms: 0.0,
        decode_ms: 0.0,
    }
}
