//! A session's events through the projection, read back as Claude Code's format.

use aerix_claude::{project, write_projection};
use aerix_session::{Event, Outcome, SegmentOp, Usage};
use serde_json::{Value, json};

use crate::reader;

const SESSION: &str = "20261130-043512-9f3a";

fn start(prompt: &str, resumed: bool) -> Event {
    Event::SessionStart {
        session: SESSION.into(),
        project: "repo-0123456789ab".into(),
        cwd: "/work/repo".into(),
        model: "smollm2.gguf".into(),
        decision: None,
        prompt: prompt.into(),
        resumed,
        version: "0.1.0".into(),
        profile: None,
        profile_branch: None,
        profile_commit: None,
        start_commit: None,
    }
}

fn spawn(agent: &str, parent: Option<&str>) -> Event {
    Event::AgentSpawn {
        agent: agent.into(),
        parent: parent.map(str::to_owned),
        kind: if parent.is_some() { "implementer" } else { "root" }.into(),
        route: Some(aerix_session::Route::Edit),
        member: "main".into(),
        tools: vec!["bash".into()],
        max_turns: 8,
    }
}

fn turn(agent: &str, n: u32, text: Value) -> Event {
    Event::Message {
        agent: agent.into(),
        role: aerix_session::Role::Assistant,
        turn: Some(n),
        call: None,
        tool: None,
        input: None,
        text: text.to_string(),
        error: None,
        usage: Some(Usage {
            prompt_tokens: 900,
            completion_tokens: 40,
            recomputed_from: 850,
            prefill_ms: 3.0,
            decode_ms: 50.0,
        }),
        stop: Some("end_of_turn".into()),
    }
}

fn result(agent: &str, call: &str, tool: &str, input: Value, text: &str, error: bool) -> Event {
    Event::Message {
        agent: agent.into(),
        role: aerix_session::Role::Tool,
        turn: Some(1),
        call: Some(call.into()),
        tool: Some(tool.into()),
        input: Some(input),
        text: text.into(),
        error: Some(error),
        usage: None,
        stop: None,
    }
}

fn segment(agent: &str, id: &str, label: aerix_session::Label, text: &str) -> Event {
    Event::Segment {
        agent: agent.into(),
        op: SegmentOp::Append,
        id: id.into(),
        role: Some(aerix_session::Role::User),
        label: Some(label),
        text: Some(text.into()),
        tokens: Some(10),
        pinned: None,
        recomputed_from: None,
        prompt_tokens: None,
    }
}

/// Two requests: calls with results (one an error), a delegation, a compaction, a turn that
/// did not parse, and a last turn whose call has not run yet (as a `PreToolUse` hook sees it).
fn session() -> Vec<(Event, Option<String>)> {
    let bash = json!({"command": "sh test.sh", "timeout_secs": 10});
    let read = json!({"path": "calc.sh"});
    let events = vec![
        start("Fix the add function.", false),
        spawn("a1", None),
        segment("a1", "p1", aerix_session::Label::Prompt, "Fix the add function."),
        turn(
            "a1",
            1,
            json!({"thought": "Run the test.", "calls": [{"tool": "bash", "input": bash}, {"tool": "read", "input": read}]}),
        ),
        result("a1", "c1", "bash", bash.clone(), "FAIL\n[exit 1]", false),
        result("a1", "c2", "read", read.clone(), "error: cannot read calc.sh", true),
        turn(
            "a1",
            2,
            json!({"thought": "Delegate.", "calls": [{"tool": "agent", "input": {"brief": "fix it"}}]}),
        ),
        spawn("a2", Some("a1")),
        segment("a2", "brief", aerix_session::Label::Prompt, "fix it"),
        turn("a2", 1, json!({"thought": "Done.", "final": "fixed"})),
        Event::AgentEnd {
            agent: "a2".into(),
            outcome: Outcome::Done,
            reason: None,
            final_text: Some("fixed".into()),
            turns: 1,
        },
        result("a1", "c3", "agent", json!({"brief": "fix it"}), "{\"status\":\"done\"}", false),
        Event::Compaction {
            agent: "a1".into(),
            reason: "soft_limit".into(),
            before: 3000,
            after: 1200,
            target: 1500,
            window: 4096,
            compacted: vec!["c1".into()],
            blocked: None,
        },
        turn("a1", 3, json!("not a turn")),
        turn("a1", 4, json!({"thought": "All good.", "final": "The test passes."})),
        Event::AgentEnd {
            agent: "a1".into(),
            outcome: Outcome::Done,
            reason: None,
            final_text: None,
            turns: 4,
        },
        // A turn whose second call a cancel left unrun.
        turn(
            "a1",
            5,
            json!({"thought": "Both.", "calls": [{"tool": "bash", "input": bash}, {"tool": "bash", "input": bash}]}),
        ),
        result("a1", "c4", "bash", bash.clone(), "ok\n[exit 0]", false),
        Event::SessionEnd { outcome: Outcome::Cancelled, exit_code: 130 },
        start("Now run it again.", true),
        turn("a1", 6, json!({"thought": "Again.", "calls": [{"tool": "bash", "input": bash}]})),
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(i, e)| (e, Some(format!("2026-11-30T04:35:{:02}.000Z", i))))
        .collect()
}

#[test]
fn the_projection_reads_back_as_claude_codes_format() {
    let projection = project(&session());
    let text: String = projection.main.iter().map(|l| format!("{l}\n")).collect();
    let main = reader::read(&text, SESSION, false);
    assert_eq!(main.prompts(), ["Fix the add function.", "Now run it again."]);
    // A turn that did not parse shows as the member wrote it; a final is text.
    assert_eq!(main.assistant_texts(), ["\"not a turn\"", "The test passes."]);
    // Calls by Claude Code's names with its inputs; every result paired with its call; the
    // last call (not run yet) is in the transcript, numbered on from the last one answered
    // before the resume, as the runtime numbers it; ids are the hooks' `tool_use_id`s.
    let calls: Vec<(&str, &str)> =
        main.calls.iter().map(|(id, name)| (id.as_str(), name.as_str())).collect();
    let expected = [
        ("a1.c1", "Bash"),
        ("a1.c2", "Read"),
        ("a1.c3", "agent"),
        ("a1.c4", "Bash"),
        ("a1.c5-unrun", "Bash"),
        ("a1.c5", "Bash"),
    ];
    assert_eq!(calls, expected);
    assert_eq!(main.results, ["a1.c1", "a1.c2", "a1.c3", "a1.c4"]);
    let first = main.of("assistant")[0];
    let input = &first["message"]["content"][1]["input"];
    assert_eq!(input, &json!({"command": "sh test.sh", "timeout": 10000}));
    assert_eq!(first["message"]["content"][2]["input"]["file_path"], "/work/repo/calc.sh");
    assert_eq!(first["message"]["content"][0]["type"], "thinking");
    assert_eq!(first["message"]["stop_reason"], "tool_use");
    assert_eq!(
        first["message"]["usage"],
        json!({"input_tokens": 50, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 850, "output_tokens": 40})
    );
    let results = main.of("user");
    // Bash's stdout without aerix's `[exit N]` line (Claude Code's has none).
    assert_eq!(results[1]["toolUseResult"]["stdout"], "FAIL");
    assert_eq!(results[1]["message"]["content"][0]["content"], "FAIL\n[exit 1]");
    assert_eq!(results[2]["message"]["content"][0]["is_error"], true);
    assert_eq!(results[2]["toolUseResult"], "Error: cannot read calc.sh");
    let boundary = main.of("system");
    assert_eq!(boundary.len(), 1);
    assert_eq!(boundary[0]["compactMetadata"], json!({"trigger": "auto", "preTokens": 3000}));
    assert_eq!(main.lines[0]["timestamp"], "2026-11-30T04:35:00.000Z");

    // The subagent has a file of its own, a sidechain starting at its brief.
    assert_eq!(projection.subagents.len(), 1);
    let (agent, lines) = &projection.subagents[0];
    assert_eq!(agent, "a2");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let sub = reader::read(&text, SESSION, true);
    assert_eq!(sub.prompts(), ["fix it"]);
    assert_eq!(sub.assistant_texts(), ["fixed"]);
    assert!(sub.lines.iter().all(|l| l["agentId"] == "a2"));

    // Rebuilt, it is the same, uuids included.
    assert_eq!(project(&session()), projection);
}

#[test]
fn the_files_are_written_beside_the_log_and_replaced_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join(format!("{SESSION}.jsonl"));
    let mut text = String::new();
    for (event, ts) in session() {
        let mut value = serde_json::to_value(&event).unwrap();
        value["ts"] = json!(ts);
        text.push_str(&format!("{value}\n"));
    }
    // A line a crash cut is left out, as the log's readers leave it.
    text.push_str("{\"type\":\"message\",\"agent\"");
    std::fs::write(&log, &text).unwrap();
    let main = write_projection(&log).unwrap();
    assert_eq!(main, dir.path().join(format!("{SESSION}.claude.jsonl")));
    let written = std::fs::read_to_string(&main).unwrap();
    assert_eq!(reader::read(&written, SESSION, false).calls.len(), 6);
    let sub = dir.path().join(SESSION).join("subagents/agent-a2.jsonl");
    assert!(reader::read(&std::fs::read_to_string(sub).unwrap(), SESSION, true).lines.len() == 2);
    // `refresh` takes the transcript path hooks are given; nothing else is left behind.
    aerix_claude::refresh(&main).unwrap();
    assert_eq!(std::fs::read_to_string(&main).unwrap(), written);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [SESSION.to_owned(), format!("{SESSION}.claude.jsonl"), format!("{SESSION}.jsonl")]
    );
    assert!(aerix_claude::refresh(&log).is_err());
}
