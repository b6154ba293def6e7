//! Delegation end to end: an edit-routed root's `agent` calls, each piece an implementer and a
//! verifier (retried on a `fail`) on scripted members, asserted from the session log.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{
    World, call, calls, final_turn, group_survivors, of_type, read_pid, send, stderr, stdout,
    wait_for,
};

const FIX: &str = "Fix add in calc.sh so that `sh test.sh` prints ok.";
/// A prose check: these tests drive the model verifier (a check that is one of the detected
/// commands, `sh test.sh` itself, is run by the harness: `attempts.rs`).
const CHECK: &str = "`sh test.sh` prints ok";
const TEST: &str = "sh test.sh";

/// The root's first turn: the piece is its third call (`c3`: its id is `a1.c3`), between
/// other calls.
fn root_delegates() -> String {
    calls(
        "Plan, look, then delegate the fix.",
        vec![
            call("plan", json!({"op": "write", "text": "1. fix add"})),
            call("repo_map", json!({})),
            call("agent", json!({"brief": FIX, "check": CHECK})),
            call("context", json!({"op": "status"})),
        ],
    )
}

fn fix_turn() -> String {
    calls(
        "Fix the operator.",
        vec![call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"}))],
    )
}

fn check_turn() -> String {
    calls("Run the check.", vec![call("bash", json!({"command": TEST}))])
}

/// A verifier's final: the reason first, then the verdict (the schema's order).
fn verdict(verdict: &str, reason: &str) -> String {
    json!({"thought": "Checked.", "final": {"reason": reason, "verdict": verdict}}).to_string()
}

/// The one agent result the root got, parsed.
fn piece_result(events: &[Value]) -> Value {
    let message = of_type(events, "message")
        .into_iter()
        .find(|m| m["agent"] == "a1" && m["tool"] == "agent")
        .expect("the root's agent result");
    serde_json::from_str(message["text"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {message}"))
}

/// `(agent, outcome)` of every `agent.end`, in log order.
fn ends(events: &[Value]) -> Vec<(String, String)> {
    of_type(events, "agent.end")
        .iter()
        .map(|e| (e["agent"].as_str().unwrap().into(), e["outcome"].as_str().unwrap().into()))
        .collect()
}

fn spawn<'a>(events: &'a [Value], agent: &str) -> &'a Value {
    of_type(events, "agent.spawn")
        .into_iter()
        .find(|s| s["agent"] == agent)
        .unwrap_or_else(|| panic!("no agent.spawn of {agent}"))
}

/// A user hooks file recording every delegation event's input, one file per fire.
fn record_hooks(world: &World) {
    let record = |event: &str| {
        let dir = world.home.join("fired");
        json!([{"hooks": [{"type": "command", "command": format!(
            "mkdir -p {0}; cat > {0}/{event}-$(date +%s%N).json", dir.display()
        )}]}])
    };
    let hooks = json!({"hooks": {
        "AgentSpawn": record("AgentSpawn"),
        "SubagentStart": record("SubagentStart"),
        "SubagentStop": record("SubagentStop"),
        "Verify": record("Verify"),
        // Tool events inside a subagent carry its id and type (another directory: `fired`
        // lists the delegation events alone).
        "PreToolUse": [{"matcher": "Edit|agent", "hooks": [{"type": "command", "command": format!(
            "mkdir -p {0}; cat > {0}/$(date +%s%N).json", world.home.join("tools").display()
        )}]}],
    }});
    let path = world.home.join("config/aerix/hooks.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, hooks.to_string()).unwrap();
}

/// `(event, agent_id, agent_type)` of the recorded fires, in firing order.
fn fired(world: &World) -> Vec<(String, String, String)> {
    let mut files: Vec<_> =
        std::fs::read_dir(world.home.join("fired")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort_by_key(|p| {
        p.file_name().unwrap().to_string_lossy().split('-').nth(1).map(String::from)
    });
    files
        .iter()
        .map(|p| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (s("hook_event_name"), s("agent_id"), s("agent_type"))
        })
        .collect()
}

/// The recorded input of `event` fired for `agent`.
fn fired_input(world: &World, event: &str, agent: &str) -> Value {
    std::fs::read_dir(world.home.join("fired"))
        .unwrap()
        .map(|e| {
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap()
        })
        .find(|v: &Value| v["hook_event_name"] == event && v["agent_id"] == agent)
        .unwrap_or_else(|| panic!("no {event} of {agent}"))
}

#[test]
fn delegation_a_piece_that_passes_verification() {
    let replies = vec![
        "edit".to_owned(),
        root_delegates(),
        fix_turn(),
        final_turn("Fixed.", "add used `-`; it adds now. sh test.sh prints ok."),
        check_turn(),
        verdict("pass", "sh test.sh printed ok"),
        final_turn("Delegated.", "Fixed add."),
    ];
    let world =
        World::scripted_with("delegate-pass", &replies, true, "[delegation]\nparallel = 1\n");
    record_hooks(&world);
    let out = world.aerix(&["-p", "sh test.sh fails. Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("+add() { echo $(($1 + $2)); }"), "{}", stdout(&out));
    let events = world.events();

    // The agent call ran after the turn's other calls; results are in call order.
    let root_calls: Vec<&str> = of_type(&events, "message")
        .iter()
        .filter(|m| m["agent"] == "a1" && m["role"] == "tool")
        .map(|m| m["tool"].as_str().unwrap())
        .collect();
    assert_eq!(root_calls, ["plan", "repo_map", "context", "agent"]);
    let results: Vec<&str> = of_type(&events, "segment")
        .iter()
        .filter(|s| s["agent"] == "a1" && s["label"] == "result")
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["c1", "c2", "c3", "c4"]);

    let implementer = spawn(&events, "a1.c3");
    assert_eq!(
        (&implementer["parent"], &implementer["kind"]),
        (&json!("a1"), &json!("implementer"))
    );
    let verifier = spawn(&events, "a1.c3.v1");
    assert_eq!(verifier["kind"], "verifier");
    assert_eq!(verifier["tools"], json!(["read", "bash", "grep", "glob", "repo_map"]));
    // The implementer's context: the caller's system segment, then its brief.
    let segments: Vec<(&str, &str)> = of_type(&events, "segment")
        .iter()
        .filter(|s| s["agent"] == "a1.c3" && s["op"] == "append")
        .map(|s| (s["id"].as_str().unwrap(), s["label"].as_str().unwrap()))
        .take(2)
        .collect();
    assert_eq!(segments, [("system", "system"), ("brief", "prompt")]);
    let root_system = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1" && s["id"] == "system")
        .unwrap();
    let piece_system = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1.c3" && s["id"] == "system")
        .unwrap();
    assert_eq!(root_system["text"], piece_system["text"]);
    let brief = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1.c3" && s["id"] == "brief")
        .unwrap();
    assert!(brief["text"].as_str().unwrap().contains(FIX), "{brief}");
    let vbrief = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1.c3.v1" && s["id"] == "brief")
        .unwrap();
    let vtext = vbrief["text"].as_str().unwrap();
    assert!(vtext.contains("add used `-`") && vtext.contains("- calc.sh"), "{vtext}");

    assert_eq!(
        ends(&events),
        [
            ("a1.c3".into(), "done".into()),
            ("a1.c3.v1".into(), "done".into()),
            ("a1".into(), "done".into())
        ]
    );
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "done");
    assert_eq!(result["files_touched"], json!(["calc.sh"]));
    assert_eq!(result["checks_run"], json!([TEST]));
    assert_eq!(result["summary"], "add used `-`; it adds now. sh test.sh prints ok.");

    // Hooks: AgentSpawn and SubagentStart before each agent, Verify with the verifier,
    // SubagentStop on each final; each a `hook` event of its agent.
    let fired = fired(&world);
    let names: Vec<(&str, &str, &str)> =
        fired.iter().map(|(e, a, t)| (e.as_str(), a.as_str(), t.as_str())).collect();
    assert_eq!(
        names,
        [
            ("AgentSpawn", "a1.c3", "implementer"),
            ("SubagentStart", "a1.c3", "implementer"),
            ("SubagentStop", "a1.c3", "implementer"),
            ("AgentSpawn", "a1.c3.v1", "verifier"),
            ("SubagentStart", "a1.c3.v1", "verifier"),
            ("Verify", "a1.c3.v1", "verifier"),
            ("SubagentStop", "a1.c3.v1", "verifier"),
        ]
    );
    // SubagentStop's agent_transcript_path is the subagent's own projection: a sidechain of
    // its lines, ending in its final.
    let stop = fired_input(&world, "SubagentStop", "a1.c3");
    let path = stop["agent_transcript_path"].as_str().unwrap();
    assert!(path.ends_with("/subagents/agent-a1.c3.jsonl"), "{path}");
    let lines: Vec<Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().all(|l| l["isSidechain"] == true && l["agentId"] == "a1.c3"));
    let last = &lines.last().unwrap()["message"]["content"];
    assert_eq!(last[last.as_array().unwrap().len() - 1]["text"], stop["last_assistant_message"]);
    let hooks: Vec<(&str, &str)> = of_type(&events, "hook")
        .iter()
        .map(|h| (h["event"].as_str().unwrap(), h["agent"].as_str().unwrap_or_default()))
        .collect();
    assert!(hooks.contains(&("Verify", "a1.c3.v1")), "{hooks:?}");
    // PreToolUse: the root's `agent` call (no twin: aerix's name and input), then the
    // implementer's edit as Claude Code's Edit, with the subagent's id and type.
    let mut files: Vec<_> =
        std::fs::read_dir(world.home.join("tools")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let tools: Vec<Value> = files
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert_eq!(
        (&tools[0]["tool_name"], &tools[0]["tool_use_id"], &tools[0]["tool_input"]["check"]),
        (&json!("agent"), &json!("a1.c3"), &json!(CHECK))
    );
    assert!(tools[0].get("agent_id").is_none(), "{}", tools[0]);
    assert_eq!(
        (&tools[1]["tool_name"], &tools[1]["agent_id"], &tools[1]["agent_type"]),
        (&json!("Edit"), &json!("a1.c3"), &json!("implementer"))
    );
    assert_eq!(tools[1]["tool_input"]["old_string"], "$1 - $2");
    assert_eq!(hooks.len(), 9, "{hooks:?}");
}

#[test]
fn delegation_a_failed_verification_reruns_the_implementer_with_the_reason() {
    let replies = vec![
        "edit".to_owned(),
        root_delegates(),
        final_turn("Looked.", "Nothing to change."),
        check_turn(),
        verdict("fail", "sh test.sh still prints FAIL"),
        fix_turn(),
        final_turn("Fixed.", "add adds now."),
        check_turn(),
        verdict("pass", "ok"),
        final_turn("Delegated.", "Fixed add."),
    ];
    let world =
        World::scripted_with("delegate-retry", &replies, true, "[delegation]\nparallel = 1\n");
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    assert_eq!(
        ends(&events),
        [
            ("a1.c3".into(), "done".into()),
            ("a1.c3.v1".into(), "done".into()),
            ("a1.c3.r1".into(), "done".into()),
            ("a1.c3.v2".into(), "done".into()),
            ("a1".into(), "done".into()),
        ]
    );
    let retry = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1.c3.r1" && s["id"] == "brief")
        .unwrap();
    let text = retry["text"].as_str().unwrap();
    assert!(text.contains(FIX) && text.contains("sh test.sh still prints FAIL"), "{text}");
    let result = piece_result(&events);
    assert_eq!((&result["outcome"], &result["summary"]), (&json!("done"), &json!("add adds now.")));
}

#[test]
fn delegation_three_failed_verifications_fail_the_piece() {
    let mut replies = vec!["edit".to_owned(), root_delegates()];
    for n in 1..=3 {
        replies.push(final_turn("Tried.", &format!("attempt {n}")));
        replies.push(verdict("fail", &format!("still broken {n}")));
    }
    replies.push(final_turn("It failed.", "The fix failed verification."));
    let world = World::scripted_with(
        "delegate-fail3",
        &replies,
        true,
        "[delegation]\nparallel = 1\nretries = 2\n",
    );
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let agents: Vec<String> = ends(&events).into_iter().map(|(a, _)| a).collect();
    assert_eq!(agents, ["a1.c3", "a1.c3.v1", "a1.c3.r1", "a1.c3.v2", "a1.c3.r2", "a1.c3.v3", "a1"]);
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "failed");
    assert_eq!(result["summary"], "verification failed after 3 attempts: still broken 3");
}

#[test]
fn delegation_an_implementer_that_does_not_finish_ends_the_piece_without_retry() {
    let replies = vec![
        "edit".to_owned(),
        root_delegates(),
        calls("Look first.", vec![call("glob", json!({"pattern": "*.sh"}))]),
        final_turn("It ran out of turns.", "Not fixed."),
    ];
    let world = World::scripted_with(
        "delegate-budget",
        &replies,
        true,
        "[delegation]\nparallel = 1\nmax_turns = 1\n",
    );
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    assert_eq!(ends(&events), [("a1.c3".into(), "budget".into()), ("a1".into(), "done".into())]);
    assert_eq!(of_type(&events, "agent.spawn").len(), 2, "no verifier, no retry");
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "budget");
    let summary = result["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("the implementer a1.c3 ended budget: the turn budget ran out"),
        "{summary}"
    );
}

#[test]
fn delegation_at_the_depth_limit_an_agent_has_no_agent_tool() {
    let replies = vec![
        "edit".to_owned(),
        root_delegates(),
        calls("Delegate further.", vec![call("agent", json!({"brief": "b", "check": "c"}))]),
        final_turn("Cannot delegate.", "Did it myself."),
        verdict("pass", "fine"),
        final_turn("Delegated.", "Done."),
    ];
    // Without the constraint: the scripted member may then name a tool the schema leaves out.
    let world = World::scripted_with(
        "delegate-depth",
        &replies,
        false,
        "[delegation]\nparallel = 1\ndepth = 1\n",
    );
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    assert!(spawn(&events, "a1")["tools"].as_array().unwrap().contains(&json!("agent")));
    let tools = spawn(&events, "a1.c3")["tools"].as_array().unwrap().clone();
    assert!(!tools.contains(&json!("agent")) && tools.contains(&json!("edit")), "{tools:?}");
    let refused = of_type(&events, "message")
        .into_iter()
        .find(|m| m["agent"] == "a1.c3" && m["tool"] == "agent")
        .unwrap();
    assert!(refused["text"].as_str().unwrap().starts_with("error: refused: `agent`"), "{refused}");
    assert_eq!(piece_result(&events)["outcome"], "done");
}

#[test]
fn delegation_a_long_result_is_capped_under_tool_caps_agent() {
    let long = "The fix was long to explain. ".repeat(60);
    let replies = vec![
        "edit".to_owned(),
        root_delegates(),
        fix_turn(),
        final_turn("Fixed.", &long),
        verdict("pass", "ok"),
        final_turn("Delegated.", "Fixed add."),
    ];
    let world = World::scripted_with(
        "delegate-cap",
        &replies,
        true,
        "[delegation]\nparallel = 1\n[context.tool_caps]\nagent = 300\n",
    );
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let message = of_type(&events, "message")
        .into_iter()
        .find(|m| m["agent"] == "a1" && m["tool"] == "agent")
        .unwrap();
    let text = message["text"].as_str().unwrap();
    assert!(text.len() <= 300, "{} bytes: {text}", text.len());
    let result = piece_result(&events);
    assert_eq!(
        (&result["outcome"], &result["files_touched"]),
        (&json!("done"), &json!(["calc.sh"]))
    );
    let summary = result["summary"].as_str().unwrap();
    assert!(summary.starts_with("The fix was long"), "{summary}");
    let (_, path) = summary.split_once("the whole result is in ").unwrap();
    let whole: Value =
        serde_json::from_str(&std::fs::read_to_string(path.trim_end_matches(']')).unwrap())
            .unwrap();
    assert_eq!(whole["summary"], long.as_str());
}

/// A pool started by the test with the main member and `count` scripted members, `p1`...,
/// piece `n`'s replying `replies(n)`, so each piece's replies come in its own order whatever
/// runs first. `parallel` is `delegation.parallel`.
fn pool_with_pieces(
    world: &World,
    main: &str,
    parallel: u32,
    count: usize,
    replies: impl Fn(usize) -> Vec<String>,
) {
    let pieces: Vec<String> =
        (1..=count).map(|n| world.script(&format!("p{n}"), &replies(n), true)).collect();
    world.write_settings(main, &format!("[delegation]\nparallel = {parallel}\n"));
    let mut args = vec![
        "pool".to_owned(),
        "--socket".to_owned(),
        world.socket.display().to_string(),
        "--max-connections".to_owned(),
        "8".to_owned(),
        // Scripted members compute no rows: no prefix store, so seven fit beside each other.
        "--context-budget".to_owned(),
        "0".to_owned(),
        "--load".to_owned(),
        main.to_owned(),
        "--threads".to_owned(),
        "2".to_owned(),
    ];
    for (n, model) in pieces.iter().enumerate() {
        args.extend(["--load".into(), model.clone(), "--alias".into(), format!("p{}", n + 1)]);
    }
    world.start_pool(&args);
}

#[test]
fn delegation_six_pieces_run_at_most_parallel_at_once() {
    let world = World::new("delegate-parallel", "", "");
    let pieces: Vec<Value> = (1..=6)
        .map(|n| {
            call(
                "agent",
                json!({"brief": format!("piece {n}"), "check": "true", "member": format!("p{n}")}),
            )
        })
        .collect();
    let main = world.script(
        "main",
        &["edit".to_owned(), calls("Six pieces.", pieces), final_turn("All ran.", "Six done.")],
        true,
    );
    pool_with_pieces(&world, &main, 2, 6, |n| {
        vec![
            calls("Work.", vec![call("bash", json!({"command": "sleep 0.4"}))]),
            final_turn("Done.", &format!("piece {n} done")),
            verdict("pass", "ok"),
        ]
    });
    let out = world.aerix(&["-p", "Do six things."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    // A piece runs from its implementer's spawn to its verifier's end.
    let (mut running, mut most) = (0, 0);
    for event in &events {
        let agent = event["agent"].as_str().unwrap_or_default();
        let depth = agent.matches('.').count();
        if event["type"] == "agent.spawn" && depth == 1 {
            running += 1;
            most = most.max(running);
        }
        if event["type"] == "agent.end" && agent.ends_with(".v1") {
            running -= 1;
        }
    }
    assert_eq!((most, running), (2, 0), "at most delegation.parallel pieces at once");
    let results: Vec<Value> = of_type(&events, "message")
        .iter()
        .filter(|m| m["agent"] == "a1" && m["tool"] == "agent")
        .map(|m| {
            let text = m["text"].as_str().unwrap();
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
        })
        .collect();
    let summaries: Vec<&str> = results.iter().map(|r| r["summary"].as_str().unwrap()).collect();
    assert_eq!(
        summaries,
        (1..=6).map(|n| format!("piece {n} done")).collect::<Vec<_>>(),
        "results in call order"
    );
    for n in 1..=6 {
        assert_eq!(spawn(&events, &format!("a1.c{n}"))["member"], format!("p{n}"));
    }
}

#[test]
fn a_piece_asked_twice_in_one_turn_runs_once() {
    let world = World::new("delegate-copies", "", "");
    let twice = json!({"brief": "piece one", "check": "true", "member": "p1"});
    let main = world.script(
        "main",
        &[
            "edit".to_owned(),
            calls(
                "Two pieces, one asked twice.",
                vec![
                    call("agent", twice.clone()),
                    call("agent", json!({"brief": "piece two", "check": "true", "member": "p2"})),
                    call("agent", twice),
                ],
            ),
            final_turn("Both ran.", "Done."),
        ],
        true,
    );
    // Each member has replies for one piece: a second run of piece one would find none.
    pool_with_pieces(&world, &main, 2, 2, |n| {
        vec![final_turn("Done.", &format!("piece {n} done")), verdict("pass", "ok")]
    });
    let out = world.aerix(&["-p", "Do two things."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let mut implementers: Vec<&str> = of_type(&events, "agent.spawn")
        .iter()
        .filter_map(|e| e["agent"].as_str())
        .filter(|a| a.matches('.').count() == 1)
        .collect();
    implementers.sort_unstable();
    assert_eq!(implementers, ["a1.c1", "a1.c2"], "the copy never ran");
    let copy = of_type(&events, "message")
        .into_iter()
        .find(|m| m["agent"] == "a1" && m["call"] == "c3")
        .expect("the copy's result");
    assert_eq!(copy["error"], false);
    assert!(
        copy["text"].as_str().unwrap().starts_with("[same piece as c1, asked twice in this turn"),
        "{copy}"
    );
}

#[test]
fn delegation_sigint_mid_piece_cancels_the_running_implementer() {
    let replies = vec![
        "edit".to_owned(),
        root_delegates(),
        calls(
            "Run the slow check.",
            // `$HOME` is the world's home (the implementer works in a worktree elsewhere).
            vec![call(
                "bash",
                json!({"command": "echo $$ > \"$HOME/bash.pid\"; sleep 30; echo after"}),
            )],
        ),
        final_turn("Never reached.", "no"),
    ];
    let world =
        World::scripted_with("delegate-cancel", &replies, true, "[delegation]\nparallel = 1\n");
    let mut child = world
        .aerix_command(&["-p", "Fix calc.sh."])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pgid =
        wait_for(&mut child, Duration::from_secs(120), || read_pid(&world.home.join("bash.pid")));
    let started = Instant::now();
    send("INT", i32::try_from(child.id()).unwrap());
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(group_survivors(pgid, Duration::from_secs(1)), Vec::<i32>::new());
    let events = world.events();
    assert_eq!(
        ends(&events),
        [("a1.c3".into(), "cancelled".into()), ("a1".into(), "cancelled".into())]
    );
    let bash = of_type(&events, "message")
        .into_iter()
        .find(|m| m["agent"] == "a1.c3" && m["tool"] == "bash")
        .unwrap();
    assert_eq!(bash["text"], "[cancelled]");
    assert_eq!(piece_result(&events)["outcome"], "cancelled");
    let last = events.last().unwrap();
    assert_eq!((&last["type"], &last["outcome"]), (&json!("session.end"), &json!("cancelled")));
}

#[test]
fn delegation_a_named_definition_gives_its_tools_turns_and_body_and_an_unknown_one_is_an_error() {
    let root = calls(
        "Delegate to the fixer, and to one that does not exist.",
        vec![
            call("agent", json!({"brief": FIX, "check": CHECK, "definition": "fixer"})),
            call("agent", json!({"brief": FIX, "check": CHECK, "definition": "nobody"})),
        ],
    );
    let replies = vec![
        "edit".to_owned(),
        root,
        fix_turn(),
        final_turn("Fixed.", "add adds now."),
        verdict("pass", "ok"),
        final_turn("Delegated.", "Fixed add."),
    ];
    // A member without the constraint: under it, the turn schema offers only the definitions
    // that exist (`fixer`), so `nobody` could not be asked for at all.
    let world = World::scripted_with(
        "delegate-definition",
        &replies,
        false,
        "[delegation]\nparallel = 1\n",
    );
    world.write(
        ".aerix/agents/fixer.md",
        "---\nname: fixer\ndescription: Fixes shell scripts.\ntools: Read, Edit\nmaxTurns: 5\n---\nYou fix shell scripts, nothing else.\n",
    );
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let fixer = spawn(&events, "a1.c1");
    assert_eq!(
        (&fixer["kind"], &fixer["tools"], &fixer["max_turns"]),
        (&json!("fixer"), &json!(["read", "edit"]), &json!(5))
    );
    let body = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1.c1" && s["id"] == "definition")
        .unwrap();
    assert_eq!(body["text"], "You fix shell scripts, nothing else.");
    let unknown = of_type(&events, "message")
        .into_iter()
        .find(|m| m["agent"] == "a1" && m["call"] == "c2")
        .unwrap();
    assert_eq!(unknown["text"], "error: no agent definition named `nobody`");
    assert_eq!(unknown["error"], true);
}

/// `context.last_turn_final`: the budget's last turn may only be a final, so an implementer of
/// one turn ends done and faces its verifier, whose one turn is its verdict; a call on that turn
/// is refused by the constraint.
#[test]
fn delegation_last_turn_final_ends_a_one_turn_implementer_done_and_verified() {
    let settings = "[context]\nlast_turn_final = true\n[delegation]\nmax_turns = 1\nretries = 0\n";
    let replies = vec![
        "edit".to_owned(),
        calls("Delegate.", vec![call("agent", json!({"brief": FIX, "check": CHECK}))]),
        final_turn("Out of turns.", "I could not fix it in one turn."),
        verdict("fail", "not fixed"),
        final_turn("Delegated.", "The piece failed verification."),
    ];
    let world = World::scripted_with("delegate-last-final", &replies, true, settings);
    let out = world.aerix(&["-p", "sh test.sh fails. Fix calc.sh.", "--max-turns", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    assert_eq!(
        ends(&events),
        [
            ("a1.c1".into(), "done".into()),
            ("a1.c1.v1".into(), "done".into()),
            ("a1".into(), "done".into())
        ]
    );
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "failed");
    assert!(
        result["summary"]
            .as_str()
            .unwrap()
            .starts_with("verification failed after 1 attempts: not fixed"),
        "{result}"
    );

    // A call on an implementer's last turn does not satisfy the turn schema.
    let replies = vec![
        "edit".to_owned(),
        calls("Delegate.", vec![call("agent", json!({"brief": FIX, "check": CHECK}))]),
        check_turn(),
        final_turn("Delegated.", "The piece failed."),
    ];
    let world = World::scripted_with("delegate-last-call", &replies, true, settings);
    let out = world.aerix(&["-p", "sh test.sh fails. Fix calc.sh.", "--max-turns", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let end = of_type(&events, "agent.end").into_iter().find(|e| e["agent"] == "a1.c1").unwrap();
    assert_eq!(end["outcome"], "failed", "{end}");
    assert!(
        end["reason"].as_str().unwrap().contains("does not satisfy the request's constraint"),
        "{end}"
    );
}
