//! The turn's parse rules, on members with and without the `Json` constraint.

use serde_json::json;

use crate::{World, call, calls, final_turn, of_type, stderr, stdout};

#[test]
fn a_long_thought_is_cut_and_ten_calls_become_eight() {
    // Ten different calls: identical ones would be answered as repeats (`repeats.rs`).
    let ten: Vec<_> =
        (0..10).map(|i| call("glob", json!({"pattern": format!("*{i}.sh")}))).collect();
    let replies = vec!["answer".to_owned(), calls(&"x".repeat(700), ten), final_turn("ok", "done")];
    let world = World::scripted("cut-thought", &replies, false);
    let out = world.aerix(&["-p", "List the scripts."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let results = of_type(&events, "message").into_iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(results, 8);
    let replaced = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["op"] == "replace" && s["id"] == "t1")
        .unwrap();
    let stored: serde_json::Value =
        serde_json::from_str(replaced["text"].as_str().unwrap()).unwrap();
    assert_eq!(stored["thought"].as_str().unwrap().len(), 600);
    assert_eq!(stored["calls"].as_array().unwrap().len(), 8);
    let note = of_type(&events, "segment").into_iter().find(|s| s["label"] == "note").unwrap();
    assert!(note["text"].as_str().unwrap().contains("2 more were dropped"), "{note}");
}

#[test]
fn invalid_json_twice_then_valid_is_accepted_a_third_time_fails() {
    let replies = vec![
        "answer".to_owned(),
        "I will look at the file.".to_owned(),
        "{\"thought\": \"oops\"".to_owned(),
        final_turn("Third time.", "parsed at last"),
    ];
    let world = World::scripted("reparse", &replies, false);
    let out = world.aerix(&["-p", "Say something."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("parsed at last"));
    let events = world.events();
    let errors: Vec<&str> = of_type(&events, "segment")
        .iter()
        .filter(|s| s["label"] == "note")
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 2);
    assert!(
        errors.iter().all(|e| e.starts_with("[parse error] Your turn is not valid JSON")),
        "{errors:?}"
    );

    let bad = vec!["answer".to_owned(), "no".into(), "still no".into(), "never".into()];
    let world = World::scripted("reparse-fail", &bad, false);
    let out = world.aerix(&["-p", "Say something."]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let events = world.events();
    let end = of_type(&events, "agent.end");
    assert_eq!(end[0]["outcome"], "failed");
    assert!(
        end[0]["reason"].as_str().unwrap().contains("did not parse after 2 retries"),
        "{}",
        end[0]
    );
}

#[test]
fn a_turn_cut_by_the_token_limit_is_removed_and_asked_again_shorter() {
    // Under the constraint: the cut reply is a valid prefix of a turn, cut at 64 tokens.
    let long = calls(&"word ".repeat(100), vec![call("repo_map", json!({}))]);
    let replies = vec!["answer".to_owned(), long, final_turn("Short now.", "short answer")];
    let world =
        World::scripted_with("cut-turn", &replies, true, "[context]\nmax_new_tokens = 64\n");
    let out = world.aerix(&["-p", "Answer briefly."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let messages = of_type(&events, "message");
    assert_eq!(messages[0]["stop"], "max_tokens");
    assert_eq!(messages[0]["usage"]["completion_tokens"], 64);
    let removed = of_type(&events, "segment").into_iter().find(|s| s["op"] == "remove").unwrap();
    assert_eq!(removed["id"], "t1");
    let note = of_type(&events, "segment").into_iter().find(|s| s["label"] == "note").unwrap();
    assert!(note["text"].as_str().unwrap().contains("limit of 64 tokens"), "{note}");
    // The accepted turn took the freed id: the context holds no trace of the cut one.
    let end = of_type(&events, "agent.end");
    assert_eq!((end[0]["outcome"].as_str(), end[0]["turns"].as_u64()), (Some("done"), Some(1)));
}
