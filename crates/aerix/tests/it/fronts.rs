//! One scenario through the three front ends of one session: `aerix -p --output-format
//! stream-json`, the screen in tmux, and `aerix acp` driven by the protocol's official client.
//! A SessionStart hook writes a file, a PreToolUse hook denies a command, a rule denies another,
//! a delegated piece passes its command check and lands, and the piece's context is compacted:
//! the session log holds the same events in the same order, and the tree the same diff, in all
//! three.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, StopReason, TextContent,
};
use agent_client_protocol::{Agent, Error};
use serde_json::{Value, json};

use crate::screen::{Pane, STARTUP};
use crate::{World, call, calls, final_turn, of_type};

const PROMPT: &str = "Fix calc.sh.";
const ANSWER: &str = "The piece fixed add.";

/// `lines` distinct lines of about 9 tokens each.
fn text(tag: &str, lines: usize) -> String {
    (1..=lines).map(|i| format!("{tag} line {i} alpha beta gamma delta\n")).collect()
}

/// The scenario's world: its member's replies, settings, hooks and files.
fn world(front: &str) -> World {
    let brief = "Fix add in calc.sh so that `sh test.sh` prints ok.";
    let replies = vec![
        "edit".to_owned(),
        calls("Delegate.", vec![call("agent", json!({"brief": brief, "check": "sh test.sh"}))]),
        // The implementer: a command a rule denies, one a hook denies, and reads that fill its
        // window (compacted before its next turn).
        calls(
            "Look around.",
            vec![
                call("bash", json!({"command": "rm -rf build"})),
                call("bash", json!({"command": "curl -s example.com"})),
                call("read", json!({"path": "big1.txt"})),
                call("read", json!({"path": "big2.txt"})),
            ],
        ),
        calls("Read more.", vec![call("read", json!({"path": "big3.txt"}))]),
        calls(
            "Fix.",
            vec![call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"}))],
        ),
        final_turn("Fixed.", "add adds now"),
        final_turn("Done.", ANSWER),
    ];
    let world = World::new(&format!("fronts-{front}"), "", "");
    let model = world.script("replies", &replies, true);
    let settings = "[context]\nmax_new_tokens = 256\n\
        [delegation]\nattempts = 1\nparallel = 1\nretries = 0\n\
        [permissions]\nallow = [\"Bash\", \"Edit\", \"Read\"]\ndeny = [\"Bash(rm:*)\"]\n";
    world.write_settings_with(&model, "ctx = 4096\n", settings);
    let command = |c: &str| json!([{"matcher": "*", "hooks": [{"type": "command", "command": c}]}]);
    let hooks = json!({"hooks": {
        "SessionStart": command("echo started > started.txt"),
        "PreToolUse": command("grep -q curl && { echo 'no network here' >&2; exit 2; }; exit 0"),
    }});
    std::fs::write(world.home.join("config/aerix/hooks.json"), hooks.to_string()).unwrap();
    for (n, lines) in [(1, 110), (2, 110), (3, 110)] {
        world.write(&format!("big{n}.txt"), &text(&format!("file{n}"), lines));
    }
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "the scenario's files"]);
    world
}

/// The log's events as a front end cannot change them: each event's kind, agent and what it
/// names (tool, hook event, segment op, outcome, verdict), without ids of the run (session,
/// commits, paths, times).
fn projection(events: &[Value]) -> Vec<String> {
    const KEYS: [&str; 12] = [
        "agent", "role", "tool", "call", "event", "op", "id", "outcome", "route", "state", "by",
        "blocked",
    ];
    events
        .iter()
        .map(|event| {
            let mut line = event["type"].as_str().unwrap_or("?").to_owned();
            for key in KEYS {
                match &event[key] {
                    Value::String(s) => line.push_str(&format!(" {key}={s}")),
                    Value::Bool(b) => line.push_str(&format!(" {key}={b}")),
                    _ => {}
                }
            }
            if event["error"] == json!(true) {
                line.push_str(" error");
            }
            line
        })
        .collect()
}

/// What the session changed in the tree: the diff of tracked files and the untracked ones.
fn changes(world: &World) -> (String, String) {
    (world.git(&["diff"]), world.git(&["status", "--porcelain", "--untracked-files=all"]))
}

fn headless() -> World {
    let world = world("p");
    let out = world.aerix(&["-p", PROMPT, "--output-format", "stream-json"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::stderr(&out));
    let lines = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(lines.contains(ANSWER), "{lines}");
    world
}

fn screen() -> World {
    let world = world("screen");
    let pane = Pane::open(&world, "fronts", "true");
    pane.wait_for("ready in", STARTUP);
    pane.type_line(PROMPT);
    pane.wait_for(ANSWER, Duration::from_secs(60));
    pane.keys(&["C-d"]);
    crate::screen::exited(&pane);
    world
}

fn acp() -> World {
    let world = world("acp");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let repo = world.repo.clone();
    let seen = Arc::new(Mutex::new(crate::acp::Seen::default()));
    let stop = runtime
        .block_on(crate::acp::connected(&world, seen, async move |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1)).block_task().await?;
            let id = cx.send_request(NewSessionRequest::new(repo)).block_task().await?.session_id;
            let prompt = vec![ContentBlock::Text(TextContent::new(PROMPT))];
            let done = cx.send_request(PromptRequest::new(id, prompt)).block_task().await?;
            Ok::<_, Error>(done.stop_reason)
        }))
        .unwrap();
    assert_eq!(stop, StopReason::EndTurn);
    world
}

#[test]
fn one_scenario_logs_the_same_events_and_leaves_the_same_diff_in_all_three_front_ends() {
    let p = headless();
    let events = p.events();
    // The scenario happened: the hook's file, both denials, the check, the landing, a pass.
    let (diff, status) = changes(&p);
    assert!(diff.contains("+add() { echo $(($1 + $2)); }"), "{diff}");
    assert!(status.contains("?? started.txt"), "{status}");
    let results: Vec<&Value> = of_type(&events, "message")
        .into_iter()
        .filter(|m| m["role"] == "tool" && m["error"] == json!(true))
        .collect();
    let said = |what: &str| results.iter().any(|m| m["text"].as_str().unwrap_or("").contains(what));
    assert!(said("no network here"), "{results:?}");
    assert!(said("denied by permission rule Bash(rm:*)"), "{results:?}");
    let checks: Vec<&str> =
        of_type(&events, "check").iter().map(|c| c["verdict"].as_str().unwrap_or("?")).collect();
    assert!(checks.contains(&"pass"), "{checks:?}");
    assert_eq!(of_type(&events, "land")[0]["state"], "landed");
    assert!(!of_type(&events, "compaction").is_empty(), "no compaction");

    let expected = projection(&events);
    for (front, world) in [("the screen", screen()), ("aerix acp", acp())] {
        let got = projection(&world.events());
        if got != expected {
            let first = got.iter().zip(&expected).position(|(a, b)| a != b);
            panic!(
                "{front}'s log differs from -p's at event {first:?}:\n{}\n---\n{}",
                got.join("\n"),
                expected.join("\n")
            );
        }
        assert_eq!(changes(&world), (diff.clone(), status.clone()), "{front}'s diff");
    }
}
