//! Claude Code's headless output (`claude -p --output-format json|stream-json`) for an aerix
//! run: the `system`/`init` line, the agents' messages as they happen (made by the
//! transcript's projector from the session's events, so the stream and the transcript show a
//! turn alike), and the final `result` object.

use std::collections::HashMap;

use aerix_session::{Event, Outcome, Usage};
use serde_json::{Map, Value, json};

use crate::tools;
use crate::transcript::{Projector, claude_usage, uuid};

/// A run's stream lines, made event by event.
pub struct Stream {
    projector: Projector,
    root: String,
    session: String,
    /// The index the next event gets (uuids derive from it): a resumed session's go on from
    /// its log's events.
    next: usize,
    /// Lines already sent, per agent.
    sent: HashMap<String, usize>,
}

impl Stream {
    /// A stream of `session` whose root agent is `root`, after the events its log already
    /// holds (a resumed session's): they are projected, not sent, so the calls of this run
    /// get the ids the runtime gives them (it numbers a resumed root's calls on).
    pub fn new(root: &str, session: &str, earlier: &[Event]) -> Stream {
        let mut stream = Stream {
            projector: Projector::new(root.to_owned()),
            root: root.to_owned(),
            session: session.to_owned(),
            next: 0,
            sent: HashMap::new(),
        };
        for event in earlier {
            stream.projector.feed(stream.next, event, None);
            stream.next += 1;
        }
        for agent in stream.projector.agents() {
            let sent = stream.projector.lines(&agent).len();
            stream.sent.insert(agent, sent);
        }
        stream
    }

    /// The stream lines `event` makes, in order: each agent's assistant turns, tool results
    /// and compaction boundaries. The root's prompt is not echoed (Claude Code's is not); a
    /// subagent's brief is its first user message.
    pub fn lines(&mut self, event: &Event, ts: Option<&str>) -> Vec<Value> {
        self.projector.feed(self.next, event, ts);
        self.next += 1;
        let mut out = Vec::new();
        for agent in self.projector.agents() {
            let lines = self.projector.lines(&agent);
            let sent = self.sent.entry(agent.clone()).or_insert(0);
            for line in lines.iter().skip(*sent) {
                if let Some(line) = stream_line(&self.root, &self.session, &agent, line) {
                    out.push(line);
                }
            }
            *sent = lines.len();
        }
        out
    }
}

/// A transcript line in the stream's shape, or `None` for the root's prompt.
fn stream_line(root: &str, session: &str, agent: &str, line: &Value) -> Option<Value> {
    let kind = line["type"].as_str()?;
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    match kind {
        "user" if agent == root && line["message"]["content"].is_string() => return None,
        "user" | "assistant" => {
            out.insert("message".into(), line["message"].clone());
            out.insert("parent_tool_use_id".into(), json!(parent_tool_use(agent)));
        }
        "system" => {
            out.insert("subtype".into(), line["subtype"].clone());
            let meta = &line["compactMetadata"];
            out.insert(
                "compact_metadata".into(),
                json!({"trigger": meta["trigger"], "pre_tokens": meta["preTokens"]}),
            );
        }
        _ => return None,
    }
    if agent != root {
        out.insert("agent_id".into(), json!(agent));
    }
    out.insert("session_id".into(), json!(session));
    out.insert("uuid".into(), line["uuid"].clone());
    Some(Value::Object(out))
}

/// The `tool_use` id of the `agent` call a subagent runs under: its id up to the last call
/// (`a1.c3` for `a1.c3.a2.v1`: the root's call c3), as Claude Code's `parent_tool_use_id`.
pub fn parent_tool_use(agent: &str) -> Option<String> {
    let parts: Vec<&str> = agent.split('.').collect();
    let is_call = |p: &str| {
        p.strip_prefix('c').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let last = parts.iter().rposition(|p| is_call(p))?;
    (last > 0).then(|| parts[..=last].join("."))
}

/// What the stream's first line says of the run.
#[derive(Clone, Debug)]
pub struct Init<'a> {
    pub session: &'a str,
    pub cwd: &'a str,
    pub model: &'a str,
    /// aerix's names of the root's tools (shown by Claude Code's names, as hooks see them).
    pub tools: &'a [String],
    pub mcp_servers: Vec<Value>,
    pub permission_mode: &'a str,
    /// Which request of the process (a `--input-format stream-json` run has several).
    pub request: usize,
}

/// The `system`/`init` line.
pub fn init(init: &Init<'_>) -> Value {
    let tools: Vec<&str> = init.tools.iter().map(|t| tools::tool_name(t)).collect();
    json!({
        "type": "system",
        "subtype": "init",
        "session_id": init.session,
        "cwd": init.cwd,
        "model": init.model,
        "tools": tools,
        "mcp_servers": init.mcp_servers,
        "permissionMode": init.permission_mode,
        "apiKeySource": "none",
        "uuid": uuid(init.session, usize::MAX - init.request, 7),
    })
}

/// A request's generations, summed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    pub prompt_tokens: u64,
    pub recomputed_from: u64,
    pub completion_tokens: u64,
    /// Time the member spent on them (prefill and decode).
    pub model_ms: f64,
}

impl Totals {
    pub fn add(&mut self, usage: &Usage) {
        self.prompt_tokens += u64::from(usage.prompt_tokens);
        self.recomputed_from += u64::from(usage.recomputed_from.min(usage.prompt_tokens));
        self.completion_tokens += u64::from(usage.completion_tokens);
        self.model_ms += usage.prefill_ms + usage.decode_ms;
    }

    /// In the Messages API's terms, as the transcript gives each turn's: rows reused from the
    /// prefix store are cache reads.
    fn usage(&self) -> Value {
        let one = Usage {
            prompt_tokens: u32::try_from(self.prompt_tokens).unwrap_or(u32::MAX),
            completion_tokens: u32::try_from(self.completion_tokens).unwrap_or(u32::MAX),
            recomputed_from: u32::try_from(self.recomputed_from).unwrap_or(u32::MAX),
            prefill_ms: 0.0,
            decode_ms: 0.0,
        };
        claude_usage(&one)
    }
}

/// How a request ended, for its `result` object.
#[derive(Clone, Debug)]
pub struct Ended<'a> {
    pub session: &'a str,
    pub outcome: Outcome,
    /// The root's final answer; for a request that failed, what went wrong.
    pub result: &'a str,
    pub duration_ms: u64,
    pub num_turns: u32,
    pub totals: &'a Totals,
    /// The request's diff against the tree it started on, and the new untracked files
    /// (aerix's own keys: `-p`'s text output prints them after the answer).
    pub diff: &'a str,
    pub untracked: &'a [String],
    pub exit_code: i32,
    pub request: usize,
}

/// The `result` object: Claude Code's fields (`subtype` `success`, `error_max_turns` or
/// `error_during_execution`), then aerix's (`outcome`, `exit_code`, `diff`, `untracked`).
pub fn result(ended: &Ended<'_>) -> Value {
    let subtype = match ended.outcome {
        Outcome::Done => "success",
        Outcome::Budget => "error_max_turns",
        _ => "error_during_execution",
    };
    json!({
        "type": "result",
        "subtype": subtype,
        "is_error": ended.outcome != Outcome::Done,
        "duration_ms": ended.duration_ms,
        "duration_api_ms": ended.totals.model_ms.round() as u64,
        "num_turns": ended.num_turns,
        "result": ended.result,
        "session_id": ended.session,
        // A local model costs nothing per token.
        "total_cost_usd": 0.0,
        "usage": ended.totals.usage(),
        "permission_denials": [],
        "uuid": uuid(ended.session, usize::MAX - ended.request, 8),
        "outcome": ended.outcome.as_str(),
        "exit_code": ended.exit_code,
        "diff": ended.diff,
        "untracked": ended.untracked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u32, reused: u32, out: u32) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: out,
            recomputed_from: reused,
            prefill_ms: 10.4,
            decode_ms: 20.3,
        }
    }

    #[test]
    fn a_subagent_runs_under_the_call_that_made_it() {
        assert_eq!(parent_tool_use("a1"), None);
        assert_eq!(parent_tool_use("a1.c3").as_deref(), Some("a1.c3"));
        assert_eq!(parent_tool_use("a1.c3.a2").as_deref(), Some("a1.c3"));
        assert_eq!(parent_tool_use("a1.c3.a2.v1").as_deref(), Some("a1.c3"));
        assert_eq!(parent_tool_use("a1.c3.r1").as_deref(), Some("a1.c3"));
        assert_eq!(parent_tool_use("a1.c3.c12.v2").as_deref(), Some("a1.c3.c12"));
        // `c` alone or with letters is not a call.
        assert_eq!(parent_tool_use("a1.cx.v1"), None);
    }

    fn spawn(agent: &str, parent: Option<&str>) -> Event {
        Event::AgentSpawn {
            agent: agent.into(),
            parent: parent.map(str::to_owned),
            kind: "implementer".into(),
            route: Some(aerix_session::Route::Edit),
            member: "main".into(),
            tools: vec!["read".into()],
            max_turns: 4,
        }
    }

    fn assistant(agent: &str, text: &str) -> Event {
        Event::Message {
            agent: agent.into(),
            role: aerix_session::Role::Assistant,
            turn: Some(1),
            call: None,
            tool: None,
            input: None,
            text: text.into(),
            error: None,
            usage: Some(usage(100, 60, 20)),
            stop: None,
        }
    }

    fn tool(agent: &str, call: &str, text: &str, error: bool) -> Event {
        Event::Message {
            agent: agent.into(),
            role: aerix_session::Role::Tool,
            turn: None,
            call: Some(call.into()),
            tool: Some("read".into()),
            input: Some(json!({"path": "a.txt"})),
            text: text.into(),
            error: error.then_some(true),
            usage: None,
            stop: None,
        }
    }

    fn start(resumed: bool) -> Event {
        Event::SessionStart {
            session: "s1".into(),
            project: "p".into(),
            cwd: "/w".into(),
            model: "m.gguf".into(),
            decision: None,
            prompt: "fix it".into(),
            resumed,
            version: "0".into(),
            profile: None,
            profile_branch: None,
            profile_commit: None,
            start_commit: None,
        }
    }

    #[test]
    fn each_event_gives_its_lines_once_with_the_subagents_tagged() {
        let mut stream = Stream::new("a1", "s1", &[]);
        // The root's prompt is not echoed.
        assert!(stream.lines(&start(false), None).is_empty());
        let call = r#"{"calls":[{"tool":"read","input":{"path":"a.txt"}}]}"#;
        let turn = stream.lines(&assistant("a1", call), None);
        assert_eq!(turn.len(), 1);
        assert_eq!(turn[0]["type"], "assistant");
        assert_eq!(turn[0]["parent_tool_use_id"], Value::Null);
        assert_eq!(turn[0]["session_id"], "s1");
        assert_eq!(turn[0]["message"]["content"][0]["type"], "tool_use");
        assert_eq!(turn[0]["message"]["content"][0]["id"], "a1.c1");
        assert_eq!(turn[0]["message"]["content"][0]["name"], "Read");
        assert!(turn[0].get("agent_id").is_none());
        let result = stream.lines(&tool("a1", "c1", "no such file", true), None);
        assert_eq!(result.len(), 1);
        assert_eq!(result[0]["type"], "user");
        let block = &result[0]["message"]["content"][0];
        assert_eq!(block["type"], "tool_result");
        assert_eq!(block["tool_use_id"], "a1.c1");
        assert_eq!(block["is_error"], true);
        // A subagent: its brief, then its turn, each tagged.
        assert!(stream.lines(&spawn("a1.c2", Some("a1")), None).is_empty());
        let brief = Event::Segment {
            agent: "a1.c2".into(),
            op: aerix_session::SegmentOp::Append,
            id: "brief".into(),
            role: Some(aerix_session::Role::User),
            label: Some(aerix_session::Label::Prompt),
            text: Some("do the piece".into()),
            tokens: None,
            pinned: None,
            recomputed_from: None,
            prompt_tokens: None,
        };
        let lines = stream.lines(&brief, None);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["message"]["content"], "do the piece");
        assert_eq!(lines[0]["parent_tool_use_id"], "a1.c2");
        assert_eq!(lines[0]["agent_id"], "a1.c2");
        let lines = stream.lines(&assistant("a1.c2", r#"{"final":"done"}"#), None);
        assert_eq!(lines[0]["message"]["content"][0]["text"], "done");
        assert_eq!(lines[0]["agent_id"], "a1.c2");
        // Nothing is sent twice.
        assert!(stream.lines(&spawn("a1.c3", Some("a1")), None).is_empty());
    }

    #[test]
    fn a_resumed_root_s_calls_keep_the_runtime_s_ids() {
        let call = r#"{"calls":[{"tool":"read","input":{"path":"a.txt"}}]}"#;
        let earlier = [start(false), assistant("a1", call), tool("a1", "c1", "text", false)];
        let mut stream = Stream::new("a1", "s1", &earlier);
        let resumed = start(true);
        // Nothing of the earlier request is sent again.
        assert!(stream.lines(&resumed, None).is_empty());
        let turn = stream.lines(&assistant("a1", call), None);
        assert_eq!(turn.len(), 1);
        assert_eq!(turn[0]["message"]["content"][0]["id"], "a1.c2");
        let result = stream.lines(&tool("a1", "c2", "text", false), None);
        assert_eq!(result.len(), 1);
        assert_eq!(result[0]["message"]["content"][0]["tool_use_id"], "a1.c2");
    }

    #[test]
    fn the_result_names_how_the_request_ended() {
        let mut totals = Totals::default();
        totals.add(&usage(100, 60, 20));
        totals.add(&usage(150, 120, 30));
        let ended = Ended {
            session: "s1",
            outcome: Outcome::Budget,
            result: "",
            duration_ms: 1234,
            num_turns: 2,
            totals: &totals,
            diff: "diff --git a/x b/x\n",
            untracked: &["new.txt".to_owned()],
            exit_code: 2,
            request: 0,
        };
        let value = result(&ended);
        assert_eq!(value["type"], "result");
        assert_eq!(value["subtype"], "error_max_turns");
        assert_eq!(value["is_error"], true);
        assert_eq!(value["num_turns"], 2);
        assert_eq!(value["duration_ms"], 1234);
        assert_eq!(value["duration_api_ms"], 61);
        assert_eq!(value["usage"]["input_tokens"], 70);
        assert_eq!(value["usage"]["cache_read_input_tokens"], 180);
        assert_eq!(value["usage"]["output_tokens"], 50);
        assert_eq!(value["untracked"][0], "new.txt");
        assert_eq!(value["exit_code"], 2);
        let done = result(&Ended { outcome: Outcome::Done, exit_code: 0, ..ended.clone() });
        assert_eq!(done["subtype"], "success");
        assert_eq!(done["is_error"], false);
        let failed = result(&Ended { outcome: Outcome::Failed, ..ended });
        assert_eq!(failed["subtype"], "error_during_execution");
    }
}
