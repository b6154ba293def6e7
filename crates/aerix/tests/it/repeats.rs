//! Calls that go nowhere (`context.repeat_guard`, a deviation from the spec): a pure call
//! repeated with nothing changed since is answered with a pointer, three in a row end the
//! agent as stuck; a change in between, or the guard off, runs the call again.

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, of_type, stderr};

fn read_calc() -> Value {
    call("read", json!({"path": "calc.sh"}))
}

fn tool_results(events: &[Value]) -> Vec<(String, String)> {
    of_type(events, "message")
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["call"].as_str().unwrap().to_owned(), m["text"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn three_repeats_in_a_row_end_the_agent_as_stuck() {
    let replies = vec![
        "answer".to_owned(),
        calls("Read it.", vec![read_calc()]),
        calls("Read it again.", vec![read_calc()]),
        calls("And again.", vec![read_calc()]),
        calls("Once more.", vec![read_calc()]),
        final_turn("Never reached.", "done"),
    ];
    let world = World::scripted("repeats-stuck", &replies, true);
    let out = world.aerix(&["-p", "What does add do?"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let events = world.events();
    let results = tool_results(&events);
    assert!(results[0].1.contains("add()"), "{results:?}");
    for (id, text) in &results[1..] {
        assert!(text.starts_with("[same call as c1"), "{id}: {text}");
    }
    assert_eq!(results.len(), 4);
    let end = of_type(&events, "agent.end")[0];
    assert_eq!(end["outcome"], "failed");
    let reason = end["reason"].as_str().unwrap();
    assert!(reason.starts_with("stuck: the same `read` call"), "{reason}");
    assert!(reason.contains("first answered as c1"), "{reason}");
}

#[test]
fn a_change_in_between_or_the_guard_off_runs_the_call_again() {
    let replies = vec![
        "answer".to_owned(),
        calls("Read.", vec![read_calc()]),
        calls(
            "Fix, then read again.",
            vec![
                call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"})),
                read_calc(),
            ],
        ),
        calls("Read once more.", vec![read_calc()]),
        final_turn("Fixed.", "done"),
    ];
    let world = World::scripted("repeats-change", &replies, true);
    let out = world.aerix(&["-p", "Fix add."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = tool_results(&world.events());
    assert!(results[2].1.contains("$1 + $2"), "the read after the edit ran: {results:?}");
    assert!(results[3].1.starts_with("[same call as c3"), "{results:?}");

    let replies = vec![
        "answer".to_owned(),
        calls("Read.", vec![read_calc()]),
        calls("Again.", vec![read_calc()]),
        calls("Again.", vec![read_calc()]),
        calls("Again.", vec![read_calc()]),
        final_turn("Read it four times.", "done"),
    ];
    let world =
        World::scripted_with("repeats-off", &replies, true, "[context]\nrepeat_guard = false\n");
    let out = world.aerix(&["-p", "What does add do?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = tool_results(&world.events());
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|(_, text)| text.contains("add()")), "{results:?}");
}

/// Repeats within one turn count too (the results reach the context at the turn's end), and
/// once `repo_map`'s result stands the schema no longer offers it: a scripted second call is
/// refused by the constraint itself.
#[test]
fn repeats_within_a_turn_count_and_a_standing_repo_map_leaves_the_schema() {
    let map = || call("repo_map", json!({}));
    let replies = vec![
        "answer".to_owned(),
        calls("Map it, twice.", vec![map(), map(), read_calc()]),
        calls("Map it again.", vec![map()]),
    ];
    let world = World::scripted("repeats-turn", &replies, true);
    let out = world.aerix(&["-p", "What is here?"]);
    let events = world.events();
    let results = tool_results(&events);
    assert!(results[1].1.starts_with("[same call as c1"), "{results:?}");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let end = of_type(&events, "agent.end")[0];
    let reason = end["reason"].as_str().unwrap();
    assert!(reason.contains("does not satisfy the request's constraint"), "{reason}");
}

/// A call that failed, made again with nothing changed since, gets a pointer to its error
/// (marked an error itself), and the third failing call in a row ends the agent as stuck; a
/// `bash` whose command failed is run again each time (it may pass next time).
#[test]
fn the_same_failing_call_three_times_ends_the_agent_as_stuck() {
    let missing = || call("read", json!({"path": "nowhere.sh"}));
    let fails = || call("bash", json!({"command": "false"}));
    let replies = vec![
        "answer".to_owned(),
        calls("Run it.", vec![fails()]),
        calls("Run it again.", vec![fails()]),
        calls("Read it.", vec![missing()]),
        calls("Read it again.", vec![missing()]),
        calls("And again.", vec![missing()]),
        final_turn("Never reached.", "done"),
    ];
    let world = World::scripted("repeats-failing", &replies, true);
    let out = world.aerix(&["-p", "What does nowhere.sh do?"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let events = world.events();
    let results: Vec<&Value> =
        of_type(&events, "message").into_iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), 5, "{results:?}");
    for bash in &results[..2] {
        let text = bash["text"].as_str().unwrap();
        assert!(text.contains("exit 1") && !text.starts_with("[same call"), "{bash}");
    }
    assert!(results[2]["text"].as_str().unwrap().contains("cannot read"), "{:?}", results[2]);
    for repeat in &results[3..] {
        let text = repeat["text"].as_str().unwrap();
        assert!(text.starts_with("[same call as c3, which failed,"), "{text}");
        assert_eq!(repeat["error"], true, "{repeat}");
    }
    let end = of_type(&events, "agent.end")[0];
    assert_eq!(end["outcome"], "failed");
    let reason = end["reason"].as_str().unwrap();
    assert!(reason.starts_with("stuck: the same `read` call"), "{reason}");
    assert!(reason.ends_with("3 times in a row, each failing as c3 did"), "{reason}");
}
