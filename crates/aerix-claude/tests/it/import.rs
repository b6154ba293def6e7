//! Claude Code transcripts in its real format (`tests/fixtures/claude/projects/-work-app/`)
//! read into aerix events.

use std::path::PathBuf;

use aerix_claude::import::{Report, read};
use aerix_session::Event;
use serde_json::json;

const SESSION: &str = "11111111-1111-4111-8111-111111111111";

fn fixture(path: &str) -> Vec<u8> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude/projects/-work-app");
    std::fs::read(dir.join(path)).unwrap()
}

/// `(agent or "-", kind, text)` of each event.
fn outline(events: &[(Event, Option<String>)]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|(e, _)| {
            let agent = e.agent().unwrap_or("-").to_owned();
            match e {
                Event::SessionStart { prompt, resumed, .. } => {
                    (agent, format!("start resumed={resumed}"), prompt.clone())
                }
                Event::Message { role, tool, text, .. } => {
                    let kind = match tool {
                        Some(tool) => format!("{} {tool}", role.as_str()),
                        None => role.as_str().to_owned(),
                    };
                    (agent, kind, text.clone())
                }
                Event::Segment { label, text, .. } => (
                    agent,
                    format!("segment {}", label.map(|l| l.as_str()).unwrap_or_default()),
                    text.clone().unwrap_or_default(),
                ),
                Event::AgentSpawn { parent, .. } => (
                    agent,
                    format!("spawn by {}", parent.clone().unwrap_or_default()),
                    String::new(),
                ),
                other => (agent, format!("{other:?}"), String::new()),
            }
        })
        .collect()
}

#[test]
fn a_transcript_with_every_variation_reads_its_main_line_and_counts_the_rest() {
    let main = fixture(&format!("{SESSION}.jsonl"));
    let subagent = fixture(&format!("{SESSION}/subagents/agent-def456.jsonl"));
    let imported = read(&main, &[("agent-def456.jsonl".into(), subagent)]);
    let o = |a: &str, k: &str, t: &str| (a.to_owned(), k.to_owned(), t.to_owned());
    assert_eq!(
        outline(&imported.events),
        [
            o("-", "start resumed=false", "Fix the failing test"),
            // The two lines of msg_01 are one turn.
            o("a1", "assistant", "Let me run the tests."),
            o("a1", "tool Bash", "1 failing"),
            // The rewind: the branch the last message ends is the main line.
            o("-", "start resumed=true", "Only read src/add.js first."),
            o("a1", "assistant", ""),
            o("a1", "tool Read", "1\texport const add = (a, b) => a - b;"),
            // Across the compaction (its boundary and summary are not converted).
            o("a1", "assistant", "The test passes now."),
            // The sidechain of the main file, then the subagent's own file.
            o("a2", "spawn by a1", ""),
            o("a2", "segment prompt", "Search for tests of add"),
            o("a2", "assistant", "Found 3 tests."),
            o("a3", "spawn by a1", ""),
            o("a3", "segment prompt", "Check the other callers"),
            o("a3", "assistant", ""),
            o("a3", "tool Grep", "src/main.js:3"),
            o("a3", "assistant", "One caller, in src/main.js."),
        ]
    );
    let (first, _) = &imported.events[2];
    let Event::Message { call, input, error, turn, .. } = first else { panic!() };
    assert_eq!((call.as_deref(), turn, error), (Some("toolu_01"), &Some(1), &Some(false)));
    assert_eq!(input, &Some(json!({"command": "npm test", "description": "Run the tests"})));
    let Event::Message { usage: Some(usage), .. } = &imported.events[1].0 else { panic!() };
    // The last line of the message has its final usage.
    assert_eq!(
        (usage.prompt_tokens, usage.completion_tokens, usage.recomputed_from),
        (2110, 42, 2000)
    );
    assert_eq!(imported.events[0].1.as_deref(), Some("2026-03-01T10:00:00.000Z"));

    assert_eq!(imported.title, "Fixing the failing add test");
    assert_eq!(imported.prompts, 2);
    assert_eq!(imported.cwd.as_deref(), Some("/work/app"));
    assert_eq!(imported.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(imported.first_ts.as_deref(), Some("2026-03-01T10:00:00.000Z"));
    let report = &imported.report;
    let not_converted: Vec<(&str, usize)> =
        report.not_converted.iter().map(|(k, n)| (k.as_str(), *n)).collect();
    assert_eq!(
        not_converted,
        [
            ("compact summary", 1),
            ("file-history-snapshot", 1),
            ("system:compact_boundary", 1),
            ("thinking block", 1),
            ("x-future-thing", 1),
        ]
    );
    assert_eq!(
        (report.lines, report.malformed.as_slice(), report.duplicates, report.foreign_summaries),
        (23, &[7][..], 1, 1)
    );
    assert_eq!((report.other_branches, report.subagents, report.unanswered), (1, 2, 0));
    assert!(!report.broken_chain);
    assert_eq!(
        report.skipped(),
        "1 malformed (line 7); 1 duplicate uuid; 1 summary of another session; 1 on other branches; not converted: 1 compact summary, 1 file-history-snapshot, 1 system:compact_boundary, 1 thinking block, 1 x-future-thing"
    );
    // Reading is a function of the bytes.
    assert_eq!(read(&main, &[]).events[..7], imported.events[..7]);
}

#[test]
fn a_file_without_messages_has_no_events_and_says_why() {
    let imported = read(&fixture("22222222-2222-4222-8222-222222222222.jsonl"), &[]);
    assert!(imported.events.is_empty());
    assert_eq!(imported.report.skipped(), "1 malformed (line 2); 1 summary of another session");
}

#[test]
fn an_overlong_line_is_refused_by_number_and_a_cut_chain_said() {
    let big = format!(
        "{{\"type\":\"user\",\"uuid\":\"u0\",\"parentUuid\":null,\"message\":{{\"role\":\"user\",\"content\":\"{}\"}}}}",
        "x".repeat(aerix_claude::import::MAX_LINE_BYTES)
    );
    let text = format!(
        "{big}\n{}\n",
        json!({"type": "user", "uuid": "u2", "parentUuid": "u1", "message": {"role": "user", "content": "hello"}})
    );
    let imported = read(text.as_bytes(), &[]);
    assert_eq!(imported.report.too_long, [1]);
    assert!(imported.report.broken_chain);
    assert_eq!(imported.prompts, 1);
    let expected = Report {
        lines: 2,
        converted: 1,
        too_long: vec![1],
        broken_chain: true,
        ..Report::default()
    };
    assert_eq!(imported.report, expected);
}
