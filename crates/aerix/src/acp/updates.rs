//! A session's events as ACP `session/update`s: the events go through Claude Code's stream
//! shape first (`aerix_claude::stream`, as `--output-format stream-json` prints them), so a
//! tool call has one view and one id (`a1.c3`) in every front end; its root's lines become
//! message chunks, tool calls and their updates (an edit's with its diff), the plan a plan.

use std::collections::HashMap;

use aerix_claude::stream::Stream;
use aerix_session::Event;
use aerix_turn::tools::{self, Key, Target};
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionUpdate, TextContent, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;

/// The root agent's id: its lines are the conversation, a subagent's run under its call.
const ROOT: &str = "a1";

/// Turns one session's events into updates, keeping what a later event needs (the calls' inputs
/// for their results' diffs).
pub struct Updates {
    stream: Stream,
    /// Each root call's tool and input (Claude Code's terms), by id.
    calls: HashMap<String, (String, Value)>,
}

impl Updates {
    /// `earlier`: the session log's events before this process (a loaded session).
    pub fn new(session: &str, earlier: &[Event]) -> Updates {
        Updates { stream: Stream::new(ROOT, session, earlier), calls: HashMap::new() }
    }

    /// The updates `event` makes. `replay`: a loaded session's history, whose prompts are
    /// the user's messages again (a live prompt's is the client's own).
    pub fn of(&mut self, event: &Event, replay: bool) -> Vec<SessionUpdate> {
        let mut updates = Vec::new();
        match event {
            Event::SessionStart { prompt, .. } if replay => {
                updates.push(SessionUpdate::UserMessageChunk(chunk(prompt)));
            }
            Event::Plan { agent, text } if agent == ROOT => {
                updates.push(SessionUpdate::Plan(plan(text)));
            }
            _ => {}
        }
        for line in self.stream.lines(event, None) {
            // A subagent's lines run under its `agent` call, shown as that call.
            if line.get("agent_id").is_some() {
                continue;
            }
            let Some(blocks) = line["message"]["content"].as_array() else { continue };
            for block in blocks {
                if let Some(update) = self.block(line["type"].as_str(), block) {
                    updates.push(update);
                }
            }
        }
        updates
    }

    fn block(&mut self, kind: Option<&str>, block: &Value) -> Option<SessionUpdate> {
        match (kind?, block["type"].as_str()?) {
            ("assistant", "text") => {
                let text = block["text"].as_str().filter(|t| !t.is_empty())?;
                Some(SessionUpdate::AgentMessageChunk(chunk(text)))
            }
            ("assistant", "tool_use") => {
                let id = block["id"].as_str()?.to_owned();
                let name = block["name"].as_str().unwrap_or_default().to_owned();
                let input = block["input"].clone();
                let call = ToolCall::new(id.clone(), title(&name, &input))
                    .kind(kind_of(&name))
                    .status(ToolCallStatus::InProgress)
                    .raw_input(input.clone());
                self.calls.insert(id, (name, input));
                Some(SessionUpdate::ToolCall(call))
            }
            ("user", "tool_result") => {
                let id = block["tool_use_id"].as_str()?.to_owned();
                let failed = block["is_error"].as_bool().unwrap_or(false);
                let text = result_text(&block["content"]);
                let mut content: Vec<ToolCallContent> = Vec::new();
                if !failed && let Some((name, input)) = self.calls.get(&id) {
                    content.extend(diff(name, input).map(ToolCallContent::from));
                }
                content.push(ToolCallContent::from(ContentBlock::Text(TextContent::new(text))));
                let status =
                    if failed { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
                let fields = ToolCallUpdateFields::new().status(status).content(content);
                Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields)))
            }
            _ => None,
        }
    }
}

pub fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// The plan's lines, each an entry (aerix's plan is text; its steps are its lines).
fn plan(text: &str) -> Plan {
    let entries = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| PlanEntry::new(l, PlanEntryPriority::Medium, PlanEntryStatus::Pending))
        .collect();
    Plan::new(entries)
}

/// A call's title: the tool and what it acts on.
fn title(name: &str, input: &Value) -> String {
    let on = ["file_path", "path", "command", "pattern", "url", "description"]
        .iter()
        .find_map(|key| input[*key].as_str());
    match on {
        Some(on) => format!("{name} {}", on.chars().take(120).collect::<String>()),
        None => name.to_owned(),
    }
}

/// A call's kind, by what the tool registry says it acts on (`name` is Claude Code's, as the
/// stream shows a twin, or aerix's own).
fn kind_of(name: &str) -> ToolKind {
    match tools::resolve(name).map(|(t, _)| t.key) {
        Some(Key::Reads { target: Target::Path, .. }) => ToolKind::Read,
        Some(Key::Reads { .. }) => ToolKind::Search,
        Some(Key::Edits { .. }) => ToolKind::Edit,
        Some(Key::Command { .. }) => ToolKind::Execute,
        // The reserved web tools (every call refused).
        _ if aerix_turn::RESERVED_TOOLS.contains(&name) => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

/// An edit's or a write's change, as the protocol's diff: the whole file as it is now, and an
/// edit's file before it (the new text put back); the edited text alone when the file cannot
/// be read.
fn diff(name: &str, input: &Value) -> Option<Diff> {
    let path = input["file_path"].as_str()?;
    let now = std::fs::read_to_string(path).ok();
    match name {
        "Edit" => {
            let (old, new) = (input["old_string"].as_str()?, input["new_string"].as_str()?);
            let all = input["replace_all"].as_bool().unwrap_or(false);
            match now.filter(|now| now.contains(new)) {
                Some(now) => {
                    let before =
                        if all { now.replace(new, old) } else { now.replacen(new, old, 1) };
                    Some(Diff::new(path, now).old_text(before))
                }
                None => Some(Diff::new(path, new).old_text(old)),
            }
        }
        "Write" => Some(Diff::new(
            path,
            now.unwrap_or_else(|| input["content"].as_str().unwrap_or_default().to_owned()),
        )),
        _ => None,
    }
}

/// A `tool_result`'s content: a string, or text blocks.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => {
            blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
        _ => String::new(),
    }
}
