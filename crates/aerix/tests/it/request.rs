//! A whole request on the scripted member: route, read, edit, run the test, final, diff.

use serde_json::json;

use crate::{World, call, calls, final_turn, of_type, stderr, stdout};

#[test]
fn reads_edits_and_runs_the_test_then_prints_the_diff() {
    let replies = vec![
        "investigate".to_owned(),
        calls(
            "Look at the code and the test.",
            vec![
                call("read", json!({"path": "calc.sh"})),
                call("bash", json!({"command": "sh test.sh"})),
            ],
        ),
        calls(
            "add subtracts: fix the operator, then rerun the test.",
            vec![
                call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"})),
                call("bash", json!({"command": "sh test.sh"})),
                call("write", json!({"path": "NOTES.md", "content": "add fixed\n"})),
            ],
        ),
        final_turn(
            "The test passes.",
            "Fixed add in calc.sh: it subtracted. sh test.sh prints ok.",
        ),
    ];
    let world = World::scripted("request", &replies, true);
    let out = world.aerix(&["-p", "The test in test.sh fails. Fix it."]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert!(text.starts_with("Fixed add in calc.sh"), "{text}");
    assert!(
        text.contains("-add() { echo $(($1 - $2)); }\n+add() { echo $(($1 + $2)); }"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("untracked: NOTES.md"), "{text}");
    assert_eq!(
        std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(),
        "add() { echo $(($1 + $2)); }\n"
    );

    let events = world.events();
    let route = of_type(&events, "route");
    assert_eq!(route[0]["route"], "investigate");
    assert_eq!(route[0]["scores"].as_object().unwrap().len(), 4);
    let results: Vec<(String, String)> = of_type(&events, "message")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["call"].as_str().unwrap().to_owned(), m["text"].as_str().unwrap().to_owned()))
        .collect();
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5"]);
    assert!(
        results[1].1.starts_with("FAIL") && results[1].1.ends_with("[exit 1]"),
        "{:?}",
        results[1]
    );
    assert_eq!(results[3].1, "ok\n[exit 0]");
    // Results are user segments headed `[<tool> <id>]`.
    let heads: Vec<String> = of_type(&events, "segment")
        .iter()
        .filter(|s| s["label"] == "result")
        .map(|s| s["text"].as_str().unwrap().lines().next().unwrap().to_owned())
        .collect();
    assert_eq!(heads, ["[read c1]", "[bash c2]", "[edit c3]", "[bash c4]", "[write c5]"]);
    // Every segment event carries the pool's token count.
    assert!(
        of_type(&events, "segment")
            .iter()
            .filter(|s| s["op"] == "append")
            .all(|s| s["tokens"].as_u64().unwrap() > 0)
    );
    let end = of_type(&events, "agent.end");
    assert_eq!(
        (end[0]["agent"].as_str(), end[0]["outcome"].as_str(), end[0]["turns"].as_u64()),
        (Some("a1"), Some("done"), Some(3))
    );
    assert_eq!(of_type(&events, "session.end")[0]["exit_code"], 0);
    // Every agent event names its agent.
    for event in &events {
        let kind = event["type"].as_str().unwrap();
        assert!(kind.starts_with("session.") || event["agent"] == "a1", "{event}");
    }
}

#[test]
fn an_edit_route_gives_the_root_only_the_planner_tools() {
    let replies = vec![
        "edit".to_owned(),
        calls(
            "Plan first.",
            vec![
                call("plan", json!({"op": "write", "text": "1. fix add"})),
                // A prose check: a model verifier judges it.
                call("agent", json!({"brief": "fix add in calc.sh", "check": "add 2 3 gives 5"})),
            ],
        ),
        // The piece: its implementer's final, its verifier's verdict.
        final_turn("Fixed.", "add adds now"),
        json!({"thought": "Checked.", "final": {"reason": "ok", "verdict": "pass"}}).to_string(),
        final_turn("Delegated.", "Planned and delegated the fix."),
    ];
    let world = World::scripted("planner", &replies, true);
    let out = world.aerix(&["-p", "Fix add."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let spawn = of_type(&events, "agent.spawn");
    assert_eq!(spawn[0]["tools"], json!(["repo_map", "plan", "context", "agent"]));
    let prompt = of_type(&events, "segment").into_iter().find(|s| s["label"] == "prompt").unwrap();
    assert!(
        prompt["text"]
            .as_str()
            .unwrap()
            .contains("you may call only repo_map, plan, context, agent")
    );
    // The request names no check: the repository's detected test command is the default.
    let text = prompt["text"].as_str().unwrap();
    assert!(
        text.contains(r#""check":"sh test.sh""#) && text.contains("the repository's test command"),
        "{text}"
    );
    assert_eq!(of_type(&events, "plan")[0]["text"], "1. fix add");
    let agent = of_type(&events, "message").into_iter().find(|m| m["tool"] == "agent").unwrap();
    let result: serde_json::Value = serde_json::from_str(agent["text"].as_str().unwrap()).unwrap();
    assert_eq!((&result["outcome"], &result["summary"]), (&json!("done"), &json!("add adds now")));
    assert!(stdout(&out).starts_with("Planned and delegated the fix."), "{}", stdout(&out));
}

#[test]
fn a_turn_budget_that_runs_out_exits_2() {
    // Two different calls: a second `repo_map` is no longer offered once its result stands.
    let look = calls("Look around.", vec![call("repo_map", json!({}))]);
    let closer = calls("Look closer.", vec![call("read", json!({"path": "calc.sh"}))]);
    let replies = vec!["answer".to_owned(), look, closer];
    let world = World::scripted("budget", &replies, true);
    let out = world.aerix(&["-p", "What is in this repository?", "--max-turns", "2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let events = world.events();
    let end = of_type(&events, "agent.end");
    assert_eq!(end[0]["outcome"], "budget");
    assert!(end[0]["reason"].as_str().unwrap().contains("2 turns"));
}

/// `context.last_turn_final`: the root's last turn of `--max-turns` may only be a final, so
/// the budget ends in an answer (exit 0); a call there does not satisfy the turn schema.
#[test]
fn last_turn_final_makes_the_budget_s_last_turn_an_answer() {
    let look = calls("Look around.", vec![call("repo_map", json!({}))]);
    let settings = "[context]\nlast_turn_final = true\n";
    let replies = vec!["answer".to_owned(), look.clone(), final_turn("Seen.", "Two files.")];
    let world = World::scripted_with("last-final", &replies, true, settings);
    let out = world.aerix(&["-p", "What is in this repository?", "--max-turns", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let end = &of_type(&events, "agent.end")[0];
    assert_eq!((&end["outcome"], &end["turns"]), (&json!("done"), &json!(2)), "{end}");

    let closer = calls("Look closer.", vec![call("read", json!({"path": "calc.sh"}))]);
    let world =
        World::scripted_with("last-call", &["answer".to_owned(), look, closer], true, settings);
    let out = world.aerix(&["-p", "What is in this repository?", "--max-turns", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not satisfy the request's constraint"), "{}", stderr(&out));
}

#[test]
fn resume_after_a_cut_last_line_rebuilds_the_context_and_plan() {
    let replies = vec![
        "answer".to_owned(),
        calls("Note a plan.", vec![call("plan", json!({"op": "write", "text": "1. answer"}))]),
        final_turn("Done.", "first answer"),
        "answer".to_owned(),
        calls("Read my plan back.", vec![call("plan", json!({"op": "read"}))]),
        final_turn("Done.", "second answer"),
    ];
    let world = World::scripted("resume", &replies, true);
    let out = world.aerix(&["-p", "First question."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first_events = world.events().len();
    // A crash cut the last line in half.
    let log = world.log_path();
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(r#"{"type":"segment","agent":"a1","op":"append","id":"x"#);
    std::fs::write(&log, text).unwrap();

    let out = world.aerix(&["-p", "Second question.", "--continue"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("second answer"), "{}", stdout(&out));
    assert!(stderr(&out).contains("1 line(s)"), "{}", stderr(&out));
    let events = world.events();
    assert!(events.len() > first_events + 5);
    // The plan came back from the log, and the old turns are in the rebuilt context: the new
    // prompt's segment is appended after them.
    let plan_read = of_type(&events, "message").into_iter().rfind(|m| m["tool"] == "plan").unwrap();
    assert_eq!(plan_read["text"], "1. answer");
    let prompts: Vec<&str> = of_type(&events, "segment")
        .iter()
        .filter(|s| s["label"] == "prompt")
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["p1", "p2"]);
    let calls: Vec<&str> =
        of_type(&events, "message").iter().filter_map(|m| m["call"].as_str()).collect();
    assert_eq!(calls, ["c1", "c2"], "call ids continue across requests");
    let starts = of_type(&events, "session.start");
    assert_eq!((starts.len(), starts[1]["resumed"].as_bool()), (2, Some(true)));
}

/// A file that was untracked when the request started is in its snapshot: the request's edit
/// to it is in the diff (not an `untracked:` line), a file it creates is `untracked:`, and the
/// user's index is as it was.
#[test]
fn an_edit_to_a_file_untracked_at_the_start_is_in_the_diff() {
    let replies = vec![
        "investigate".to_owned(),
        calls(
            "Edit the notes, add a file.",
            vec![
                call("edit", json!({"path": "draft.md", "old": "one", "new": "two"})),
                call("write", json!({"path": "NEW.md", "content": "new\n"})),
            ],
        ),
        final_turn("Done.", "edited"),
    ];
    let world = World::scripted("request-untracked", &replies, true);
    world.write("draft.md", "one\n");
    let index = world.git(&["ls-files", "--stage"]);
    let out = world.aerix(&["-p", "Edit the draft."]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert!(text.contains("draft.md") && text.contains("-one\n+two"), "{text}");
    assert!(!text.contains("untracked: draft.md"), "{text}");
    assert!(text.trim_end().ends_with("untracked: NEW.md"), "{text}");
    assert!(!text.contains("+new"), "a new file is named, not diffed: {text}");
    assert_eq!(world.git(&["ls-files", "--stage"]), index, "the user's index is untouched");
    assert_eq!(world.git(&["status", "--porcelain"]), "?? NEW.md\n?? draft.md\n");
    // The start commit holds the untracked file as it was: a replay starts from it.
    let start =
        of_type(&world.events(), "session.start")[0]["start_commit"].as_str().unwrap().to_owned();
    assert_eq!(world.git(&["show", &format!("{start}:draft.md")]), "one\n");
    assert_eq!(world.git(&["rev-parse", &format!("{start}^")]), world.git(&["rev-parse", "HEAD"]));
}
