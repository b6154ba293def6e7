//! Checkpoints and `aerix rewind`: a request's `bash` and `edit` changes undone, the user's
//! git state untouched, the conversation rewound, `--files-only`, and `sessions rm`.

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, of_type, stderr, stdout};

/// What the user's git state is: HEAD, branches, tags, stash, index.
fn git_state(world: &World) -> String {
    [
        world.git(&["rev-parse", "HEAD"]),
        world.git(&["for-each-ref", "refs/heads", "refs/tags", "refs/stash"]),
        world.git(&["stash", "list"]),
        world.git(&["ls-files", "--stage"]),
    ]
    .concat()
}

fn read(world: &World, path: &str) -> Option<Vec<u8>> {
    std::fs::read(world.repo.join(path)).ok()
}

fn results<'a>(events: &'a [Value], tool: &str) -> Vec<&'a Value> {
    of_type(events, "message").into_iter().filter(|m| m["tool"] == tool).collect()
}

#[test]
fn rewind_restores_bash_and_edit_changes_and_the_conversation() {
    let replies = vec![
        "investigate".to_owned(),
        calls(
            "Change things.",
            vec![
                call("bash", json!({"command": "printf 'made\\n' > made.txt"})),
                call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"})),
                call("bash", json!({"command": "rm doomed.txt"})),
            ],
        ),
        final_turn("Done.", "first answer"),
        "investigate".to_owned(),
        calls("More.", vec![call("bash", json!({"command": "echo two > second.txt"}))]),
        final_turn("Done.", "second answer"),
        "investigate".to_owned(),
        calls("What do I hold?", vec![call("context", json!({"op": "status"}))]),
        final_turn("Done.", "third answer"),
    ];
    let world = World::scripted("rewind", &replies, true);
    // The user's own state: a stash, a staged file, an untracked one the request deletes.
    world.write("test.sh", "stashed\n");
    world.git(&["stash", "-q"]);
    world.write("staged.txt", "staged\n");
    world.git(&["add", "staged.txt"]);
    world.write("doomed.txt", "doomed \x01 bytes\n");
    let before = git_state(&world);
    let (calc, doomed) = (read(&world, "calc.sh").unwrap(), read(&world, "doomed.txt").unwrap());

    let out = world.aerix(&["-p", "First."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(&world, "made.txt").as_deref(), Some(&b"made\n"[..]));
    assert_ne!(read(&world, "calc.sh").unwrap(), calc, "the edit ran");
    assert_eq!(read(&world, "doomed.txt"), None);
    let out = world.aerix(&["-p", "Second.", "--continue"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let session = events[0]["session"].as_str().unwrap_or_default().to_owned();
    let kept: Vec<(u64, bool)> = of_type(&events, "session.checkpoint")
        .iter()
        .map(|c| (c["request"].as_u64().unwrap(), c["commit"].is_string()))
        .collect();
    assert_eq!(kept, [(1, true), (2, true)]);
    let refs = world.git(&["for-each-ref", "--format=%(refname)", "refs/aerix"]);
    assert_eq!(
        refs,
        format!("refs/aerix/checkpoints/{session}/1\nrefs/aerix/checkpoints/{session}/2\n")
    );

    let out = world.aerix(&["rewind", "--list"]);
    assert_eq!(stdout(&out), "  1  First.\n  2  Second.\n", "{}", stderr(&out));
    let out = world.aerix(&["rewind", "--to", "3"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("requests are 1 to 2"), "{}", stderr(&out));

    let out = world.aerix(&["rewind", "--to", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("to before request 1 (files and conversation)"));
    assert_eq!(read(&world, "made.txt"), None, "made by bash: removed");
    assert_eq!(read(&world, "calc.sh").unwrap(), calc, "edited: restored");
    assert_eq!(read(&world, "doomed.txt").unwrap(), doomed, "deleted by bash: restored");
    assert_eq!(read(&world, "second.txt"), None, "a later request's file: removed");
    assert_eq!(git_state(&world), before, "HEAD, branches, stash and index untouched");
    let out = world.aerix(&["rewind", "--list"]);
    assert_eq!(stdout(&out), "  1  (rewound) First.\n  2  (rewound) Second.\n");

    // The next request sees none of the rewound requests' conversation.
    let out = world.aerix(&["-p", "Third.", "--continue"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let status = results(&events, "context").last().unwrap()["text"].as_str().unwrap().to_owned();
    assert!(status.contains("prompt"), "{status}");
    for old in ["c1 ", "c2 ", "c3 ", "c4 "] {
        assert!(!status.contains(old), "request 1 or 2's {old} is in the context: {status}");
    }
    let prompts = of_type(&events, "segment")
        .into_iter()
        .filter(|s| s["label"] == "prompt")
        .filter_map(|s| s["text"].as_str())
        .map(|t| t.lines().next().unwrap_or_default().to_owned())
        .collect::<Vec<_>>();
    assert_eq!(prompts.last().map(String::as_str), Some("Third."));
    assert!(!status.contains("First.") && !status.contains("Second."), "{status}");

    // --files-only: the files go back, the conversation keeps request 3.
    world.write("later.txt", "later\n");
    let out = world.aerix(&["rewind", "--files-only"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("to before request 3 (files)"), "{}", stdout(&out));
    assert_eq!(read(&world, "later.txt"), None);
    let out = world.aerix(&["rewind", "--list"]);
    assert_eq!(stdout(&out), "  1  (rewound) First.\n  2  (rewound) Second.\n  3  Third.\n");
    let rewinds: Vec<(u64, bool)> = of_type(&world.events(), "session.rewind")
        .iter()
        .map(|r| (r["to"].as_u64().unwrap(), r["conversation"].as_bool().unwrap()))
        .collect();
    assert_eq!(rewinds, [(1, true), (3, false)]);

    // `sessions rm` takes the checkpoints with the session.
    assert_eq!(world.git(&["for-each-ref", "refs/aerix"]).lines().count(), 3);
    let out = world.aerix(&["sessions", "rm", &session]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("its 3 checkpoint(s)"), "{}", stdout(&out));
    assert_eq!(world.git(&["for-each-ref", "refs/aerix"]), "");
    assert_eq!(git_state(&world), before);
}

/// The screen's `/rewind`: the list, then back to before request 1; the next request's context
/// holds none of it.
#[test]
fn the_screens_rewind_lists_and_restores() {
    use crate::screen::{ALLOW, Pane, STARTUP, STEP, exited};
    let replies = vec![
        "investigate".to_owned(),
        calls("Make it.", vec![call("bash", json!({"command": "printf 'made\\n' > made.txt"}))]),
        final_turn("Done.", "made it"),
        "investigate".to_owned(),
        calls("What do I hold?", vec![call("context", json!({"op": "status"}))]),
        final_turn("Done.", "looked"),
    ];
    let world = crate::World::scripted_with("screen-rewind", &replies, true, ALLOW);
    let pane = Pane::open(&world, "screen-rewind", "true");
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Make a file.");
    pane.wait_for("made it", STEP);
    assert_eq!(read(&world, "made.txt").as_deref(), Some(&b"made\n"[..]));
    pane.type_line("/rewind");
    let listed = pane.wait_for("goes back to before N", STEP);
    assert!(listed.contains("1  Make a file."), "{listed}");
    pane.type_line("/rewind 1");
    pane.wait_for("to before request 1", STEP);
    assert_eq!(read(&world, "made.txt"), None, "the file bash made is gone");
    pane.type_line("Look.");
    pane.wait_for("looked", STEP);
    pane.keys(&["C-d"]);
    exited(&pane);
    let events = world.events();
    let status = results(&events, "context").last().unwrap()["text"].as_str().unwrap().to_owned();
    assert!(!status.contains("c1 "), "request 1's call is in the context: {status}");
    let rewinds = of_type(&events, "session.rewind");
    assert_eq!((rewinds.len(), rewinds[0]["to"].as_u64()), (1, Some(1)));
}
