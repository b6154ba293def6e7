//! The agent's own tools through a whole request: `context`, `plan`, and the refusals (`skill`
//! without skills among them).

use serde_json::json;

use crate::{World, call, calls, final_turn, of_type, stderr};

#[test]
fn context_tool_ops_and_their_refusals() {
    let replies = vec![
        "answer".to_owned(),
        calls(
            "Look, then manage my context.",
            vec![
                call("read", json!({"path": "calc.sh"})),
                call("context", json!({"op": "status"})),
                call("context", json!({"op": "note", "text": "add subtracts"})),
                call("context", json!({"op": "note", "text": "test.sh checks 2+3"})),
                call("context", json!({"op": "drop", "ids": ["system"]})),
                call("context", json!({"op": "pin", "ids": ["c1"]})),
                call("context", json!({"op": "unpin", "ids": ["c1"]})),
                call(
                    "context",
                    json!({"op": "summarize", "ids": ["c1", "c2"], "text": "calc.sh: add subtracts"}),
                ),
            ],
        ),
        calls(
            "More.",
            vec![
                call("context", json!({"op": "drop", "ids": ["c3"]})),
                call("context", json!({"op": "drop", "ids": ["nope"]})),
                call("context", json!({"op": "summarize", "ids": ["scratchpad"], "text": "x"})),
                call("skill", json!({"list": true})),
                call("skill", json!({"name": "deploy"})),
                call("web_fetch", json!({})),
                call("plan", json!({"op": "read"})),
                call("context", json!({"op": "drop", "ids": ["p1"]})),
            ],
        ),
        final_turn("Done.", "done"),
        // The next request, resumed.
        "answer".to_owned(),
        calls("Where am I?", vec![call("context", json!({"op": "status"}))]),
        final_turn("Seen.", "seen"),
    ];
    let world = World::scripted("context-tool", &replies, false);
    let out = world.aerix(&["-p", "Tidy up."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let result = |id: &str| -> String {
        of_type(&events, "message").into_iter().find(|m| m["call"] == id).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let status = result("c2");
    assert!(
        status.contains("tokens used")
            && status.contains("system  system")
            && status.contains("c1  result"),
        "{status}"
    );
    assert!(status.contains("pinned"), "{status}");
    assert_eq!(result("c3"), "noted in the scratchpad");
    let scratchpad =
        of_type(&events, "segment").into_iter().rfind(|s| s["id"] == "scratchpad").unwrap();
    assert_eq!(scratchpad["text"], "[scratchpad]\n- add subtracts\n- test.sh checks 2+3");
    assert!(
        result("c5").starts_with("error: refused: `system` is the system segment"),
        "{}",
        result("c5")
    );
    assert_eq!(result("c6"), "pinned c1");
    assert_eq!(result("c7"), "unpinned c1");
    assert!(
        result("c8").starts_with("summarized c1, c2 into pinned segment c1"),
        "{}",
        result("c8")
    );
    let summary = of_type(&events, "segment").into_iter().rfind(|s| s["id"] == "c1").unwrap();
    assert_eq!(
        (summary["label"].as_str(), summary["pinned"].as_bool()),
        (Some("summary"), Some(true))
    );
    assert!(result("c9").starts_with("dropped c3"), "{}", result("c9"));
    assert_eq!(result("c10"), "error: no segment `nope`");
    assert!(result("c11").contains("scratchpad segment, which cannot be dropped or summarized"));
    // No skill is loaded, so there is no `skill` tool to call (`skills.rs` tests one).
    for id in ["c12", "c13"] {
        assert!(
            result(id).starts_with("error: refused: `skill` is not one of your tools"),
            "{}",
            result(id)
        );
    }
    assert!(result("c14").contains("`web_fetch` is a reserved name"), "{}", result("c14"));
    assert_eq!(result("c15"), "(no plan yet)");
    // The request's prompt stays: the turns after it answer it.
    assert!(
        result("c16").contains("`p1` is the prompt segment, which cannot be dropped"),
        "{}",
        result("c16")
    );
    let ops: Vec<(&str, bool)> = of_type(&events, "context.op")
        .iter()
        .map(|e| (e["op"].as_str().unwrap(), e["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        ops,
        [
            ("status", true),
            ("note", true),
            ("note", true),
            ("drop", false),
            ("pin", true),
            ("unpin", true),
            ("summarize", true),
            ("drop", true),
            ("drop", false),
            ("summarize", false),
            ("drop", false),
        ]
    );
    // The context the pool holds matches the log: c2 and c3 are gone, c1 is the summary.
    let rebuilt =
        aerix_session::rebuild(&aerix_session::read_log(&world.log_path()).unwrap().events, "a1")
            .unwrap();
    let ids: Vec<&str> = rebuilt.segments.iter().map(|s| s.id.as_str()).collect();
    assert!(ids.contains(&"c1") && !ids.contains(&"c2") && !ids.contains(&"c3"), "{ids:?}");

    // Resumed, every segment comes back under the label the first request logged: the status
    // the model reads lists each of them so.
    let out = world.aerix(&["-p", "Where was I?", "--continue"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let status = crate::last_result(&events, "context");
    let mut labels: Vec<&str> = rebuilt.segments.iter().map(|s| s.label.as_str()).collect();
    for segment in &rebuilt.segments {
        let line = format!("\n{}  {}  ", segment.id, segment.label.as_str());
        assert!(status.contains(&line), "{line:?} is not in the resumed status:\n{status}");
    }
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels, ["prompt", "result", "scratchpad", "summary", "system", "turn"]);
}

#[test]
fn a_decision_member_routes_and_main_runs_the_root() {
    let world = World::new("decision", "", "");
    let main = world.script("main", &[final_turn("Nothing to change.", "fine as it is")], true);
    let decision = world.script("decision", &["answer".to_owned()], true);
    world.write_settings(
        &main,
        &format!("[members.decision]\nmodel = {}\n", serde_json::to_string(&decision).unwrap()),
    );
    let out = world.aerix(&["-p", "Is calc.sh fine?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    assert_eq!(of_type(&events, "route")[0]["member"], "decision");
    assert_eq!(of_type(&events, "agent.spawn")[0]["member"], "main");
    // The decision member was loaded into the pool aerix started with main.
    let status = std::process::Command::new(crate::caldrix())
        .args(["pool", "status", "--json", "--socket", world.socket.to_str().unwrap()])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("\"decision\"") && status.contains("\"main\""), "{status}");
}

/// What once filled the window and killed the agent at the context floor (compact.rs tests the
/// floor itself): three results of 8.9 KB in a 3,072-token window are fitted to the room left
/// and compacted before each turn, and the agent reaches its final.
#[test]
fn results_bigger_than_the_window_are_fitted_and_compacted_instead_of_killing() {
    let big = calls("Read everything.", vec![call("bash", json!({"command": "seq 1 2000"}))]);
    let replies =
        vec!["answer".to_owned(), big.clone(), big.clone(), big, final_turn("Counted.", "2000")];
    let world = World::new("floor", "", "");
    let model = world.script("replies", &replies, true);
    world.write_settings_with(&model, "ctx = 3072\n", "[context.tool_caps]\nbash = 100000\n");
    let out = world.aerix(&["-p", "Count."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    assert_eq!(of_type(&events, "agent.end")[0]["outcome"], "done");
    assert!(!of_type(&events, "compaction").is_empty());
    for id in ["c1", "c2", "c3"] {
        let segment = of_type(&events, "segment")
            .into_iter()
            .find(|s| s["id"] == id && s["op"] == "append")
            .unwrap();
        assert!(segment["text"].as_str().unwrap().contains("[truncated: "), "{segment}");
    }
}
