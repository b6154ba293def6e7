//! `aerix -p --output-format json|stream-json` and `--input-format stream-json`, checked field
//! by field against Claude Code's headless shapes (docs/configuration.md, "Machine output").

use std::io::Write;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, of_type, stderr, stdout};

const FIX: &str = "Fix add in calc.sh so that `sh test.sh` prints ok.";
const CHECK: &str = "`sh test.sh` prints ok";

/// Every stdout line, each one JSON object (nothing else is printed there).
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// The fields every `result` object has, with their types.
fn assert_result_shape(result: &Value, session: &str) {
    assert_eq!(result["type"], "result", "{result}");
    for key in ["subtype", "result", "session_id", "outcome", "diff"] {
        assert!(result[key].is_string(), "{key} in {result}");
    }
    for key in ["duration_ms", "duration_api_ms", "num_turns", "exit_code"] {
        assert!(result[key].is_u64(), "{key} in {result}");
    }
    assert!(result["is_error"].is_boolean() && result["total_cost_usd"].is_number(), "{result}");
    assert!(result["untracked"].is_array() && result["permission_denials"].is_array());
    for key in
        ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"]
    {
        assert!(result["usage"][key].is_u64(), "usage.{key} in {result}");
    }
    assert_eq!(result["session_id"], session);
    assert!(result["uuid"].as_str().is_some_and(|u| u.len() == 36), "{result}");
}

#[test]
fn stream_json_shows_each_agent_as_it_happens_and_json_the_result_alone() {
    let replies = vec![
        "edit".to_owned(),
        calls(
            "Plan, then delegate the fix.",
            vec![
                call("plan", json!({"op": "write", "text": "1. fix add"})),
                call("agent", json!({"brief": FIX, "check": CHECK})),
            ],
        ),
        // The implementer: a read that fails (a tool error), the fix, its summary.
        calls("Look at a file.", vec![call("read", json!({"path": "missing.txt"}))]),
        calls(
            "Fix the operator.",
            vec![call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"}))],
        ),
        final_turn("Fixed.", "add adds now."),
        // The verifier.
        calls("Run the check.", vec![call("bash", json!({"command": "sh test.sh"}))]),
        json!({"thought": "Checked.", "final": {"reason": "it prints ok", "verdict": "pass"}})
            .to_string(),
        final_turn("Delegated.", "Fixed add."),
        // The second run (json): one turn of calls, then the budget.
        "answer".to_owned(),
        calls("Look.", vec![call("bash", json!({"command": "echo hi > note.txt"}))]),
    ];
    let world =
        World::scripted_with("output-stream", &replies, true, "[delegation]\nparallel = 1\n");
    let out =
        world.aerix(&["-p", "sh test.sh fails. Fix calc.sh.", "--output-format", "stream-json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = json_lines(&stdout(&out));
    let session = world.log_path().file_stem().unwrap().to_string_lossy().into_owned();

    // First the init line, naming the session, the tree, the model and the root's tools (by
    // Claude Code's names, as hooks see them).
    let init = &lines[0];
    assert_eq!((&init["type"], &init["subtype"]), (&json!("system"), &json!("init")));
    assert_eq!(init["session_id"], session);
    assert_eq!(init["cwd"], world.repo.canonicalize().unwrap().display().to_string());
    assert!(init["model"].as_str().unwrap().starts_with("script:"), "{init}");
    let tools: Vec<&str> =
        init["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(tools, ["repo_map", "plan", "context", "agent"], "{init}");
    assert_eq!(init["mcp_servers"], json!([]));
    assert_eq!(init["permissionMode"], "default");

    // Then the messages, in the order they happened; the last line is the result.
    let (result, messages) = lines[1..].split_last().unwrap();
    let kinds: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (m["type"].as_str().unwrap(), m["agent_id"].as_str().unwrap_or("a1")))
        .collect();
    // The root's turn and its plan result; the piece (the implementer's brief first), whose
    // lines all name it; the piece's result and the root's answer.
    assert_eq!(kinds[..3], [("assistant", "a1"), ("user", "a1"), ("user", "a1.c2")], "{kinds:?}");
    assert_eq!(kinds[kinds.len() - 2..], [("user", "a1"), ("assistant", "a1")], "{kinds:?}");
    let piece = &kinds[2..kinds.len() - 2];
    assert!(piece.iter().all(|(_, agent)| agent.starts_with("a1.c2")), "{kinds:?}");
    for message in messages {
        assert_eq!(message["session_id"], session, "{message}");
        assert!(message["uuid"].is_string(), "{message}");
        let agent = message["agent_id"].as_str();
        // A subagent's lines name the root's `agent` call they run under.
        match agent {
            None => assert_eq!(message["parent_tool_use_id"], Value::Null, "{message}"),
            Some(agent) => {
                assert!(agent == "a1.c2" || agent.starts_with("a1.c2."), "{message}");
                assert_eq!(message["parent_tool_use_id"], "a1.c2", "{message}");
            }
        }
        assert_eq!(message["message"]["role"], message["type"], "{message}");
    }
    // Every tool_result answers a tool_use seen before it.
    let mut uses = Vec::new();
    for message in messages {
        for block in message["message"]["content"].as_array().into_iter().flatten() {
            match block["type"].as_str().unwrap() {
                "tool_use" => uses.push(block["id"].clone()),
                "tool_result" => assert!(uses.contains(&block["tool_use_id"]), "{message}"),
                _ => {}
            }
        }
    }
    // The implementer's failed read: a tool_use named as Claude Code's Read, its result an
    // error, both tagged with the implementer.
    let is_missing_read = |b: &Value| {
        b["name"] == "Read"
            && b["input"]["file_path"].as_str().is_some_and(|p| p.ends_with("/missing.txt"))
    };
    let read = messages
        .iter()
        .find(|m| m["message"]["content"].as_array().is_some_and(|c| c.iter().any(is_missing_read)))
        .expect("the implementer's read");
    assert_eq!(read["agent_id"], "a1.c2", "{read}");
    let read_id =
        read["message"]["content"].as_array().unwrap().iter().find(|b| is_missing_read(b)).unwrap()
            ["id"]
            .clone();
    let failed = messages
        .iter()
        .flat_map(|m| m["message"]["content"].as_array().into_iter().flatten())
        .find(|b| b["tool_use_id"] == read_id)
        .expect("the read's result");
    assert_eq!(failed["is_error"], true, "{failed}");
    // The verifier's lines are tagged with its own id.
    assert!(messages.iter().any(|m| m["agent_id"] == "a1.c2.v1"), "{kinds:?}");
    // An assistant message in the Messages API's shape, with the pool's usage.
    let first = &messages[0]["message"];
    assert_eq!((&first["type"], &first["stop_reason"]), (&json!("message"), &json!("tool_use")));
    assert!(first["usage"]["output_tokens"].as_u64().unwrap() > 0, "{first}");

    assert_result_shape(result, &session);
    assert_eq!((&result["subtype"], &result["is_error"]), (&json!("success"), &json!(false)));
    assert_eq!((&result["result"], &result["num_turns"]), (&json!("Fixed add."), &json!(2)));
    assert_eq!((&result["outcome"], &result["exit_code"]), (&json!("done"), &json!(0)));
    assert!(result["diff"].as_str().unwrap().contains("+add() { echo $(($1 + $2)); }"), "{result}");
    assert_eq!(result["untracked"], json!([]));
    assert!(result["usage"]["output_tokens"].as_u64().unwrap() > 0, "{result}");
    // Every generation of the request counts, the subagents' too.
    let generated: u64 = of_type(&world.events(), "message")
        .iter()
        .filter_map(|m| m["usage"]["completion_tokens"].as_u64())
        .sum();
    assert_eq!(result["usage"]["output_tokens"], generated);

    // `json`: the result object alone, at the end; a budget is `error_max_turns`, exit 2, and
    // a new file is named under `untracked`.
    let out = world.aerix(&[
        "-p",
        "What is here?",
        "--continue",
        "--max-turns",
        "1",
        "--output-format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let lines = json_lines(&stdout(&out));
    assert_eq!(lines.len(), 1, "{lines:?}");
    let result = &lines[0];
    assert_result_shape(result, &session);
    assert_eq!(
        (&result["subtype"], &result["is_error"], &result["exit_code"]),
        (&json!("error_max_turns"), &json!(true), &json!(2))
    );
    assert_eq!((&result["outcome"], &result["num_turns"]), (&json!("budget"), &json!(1)));
    assert_eq!(result["untracked"], json!(["note.txt"]));
    assert_eq!(result["diff"], "");
}

#[test]
fn stream_json_input_runs_each_message_as_a_request_of_one_session() {
    let replies = vec![
        "answer".to_owned(),
        final_turn("Easy.", "One."),
        "answer".to_owned(),
        final_turn("Still easy.", "Two."),
    ];
    let world = World::scripted("output-input", &replies, true);
    // Usage: the input needs the stream output, and takes no PROMPT.
    let out = world.aerix(&["-p", "--input-format", "stream-json"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("needs --output-format stream-json"), "{}", stderr(&out));
    let out = world.aerix(&[
        "-p",
        "hi",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
    ]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));

    let mut child = world
        .aerix_command(&["-p", "--input-format", "stream-json", "--output-format", "stream-json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let user = |text: &str| json!({"type": "user", "message": {"role": "user", "content": text}});
    let mut stdin = child.stdin.take().unwrap();
    // Two requests, then a line that is not a user message: a usage error naming its line,
    // after both results.
    let second = json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "And the second?"}]}});
    writeln!(stdin, "{}\n", user("The first?")).unwrap();
    // The first result, then a line in the log no rebuild could read: the second request runs
    // on the root the first left live in the pool, never on the log read back.
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    while !first.contains("\"subtype\":\"success\"") {
        let mut line = String::new();
        assert!(std::io::BufRead::read_line(&mut reader, &mut line).unwrap() > 0, "{first}");
        first.push_str(&line);
    }
    let mut log = std::fs::OpenOptions::new().append(true).open(world.log_path()).unwrap();
    writeln!(log, "{}", json!({"type": "segment", "agent": "a1", "op": "append", "id": "x1", "role": "user", "label": "memo", "text": "?"})).unwrap();
    drop(log);
    writeln!(stdin, "{second}\n{{\"type\":\"assistant\"}}").unwrap();
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("stdin line 4:"), "{}", stderr(&out));
    let lines = json_lines(&(first + &rest));
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l["subtype"].as_str().unwrap_or_else(|| l["type"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, ["init", "assistant", "success", "init", "assistant", "success"]);
    let session = world.log_path().file_stem().unwrap().to_string_lossy().into_owned();
    assert!(lines.iter().all(|l| l["session_id"] == session));
    assert_eq!((&lines[2]["result"], &lines[5]["result"]), (&json!("One."), &json!("Two.")));
    assert_ne!(lines[0]["uuid"], lines[3]["uuid"]);
    assert_ne!(lines[2]["uuid"], lines[5]["uuid"]);
    // One session: its second request resumed the first, its prompt the second message.
    let events = world.events();
    let starts = of_type(&events, "session.start");
    assert_eq!(starts.len(), 2);
    assert_eq!((&starts[0]["resumed"], &starts[1]["resumed"]), (&json!(false), &json!(true)));
    assert_eq!(starts[1]["prompt"], "And the second?");
    // Each request ends as it began, as the screen's do: a `session.end` of its own.
    let ends = of_type(&events, "session.end");
    assert_eq!(ends.len(), 2, "{ends:?}");
    // The second request's root saw the first's exchange.
    let prompts: Vec<&str> = of_type(&events, "segment")
        .iter()
        .filter(|s| s["agent"] == "a1" && s["label"] == "prompt")
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert!(prompts.len() >= 2 && prompts[0].starts_with("The first?"), "{prompts:?}");
}
