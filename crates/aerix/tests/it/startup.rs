//! One startup, two front ends: the same scenario (hooks answering each way, a broken settings
//! file, a missing model) run through `aerix -p` and through the screen (tmux), with the same
//! hook events fired and the same exit statuses.

use serde_json::{Value, json};

use crate::screen::{Pane, STARTUP, STEP};
use crate::{World, final_turn, of_type, smollm2, stderr};

/// Every event the scenario's hooks see, appended to `fired.jsonl` in the world's home.
const RECORD: &str = "cat >> ../fired.jsonl; echo >> ../fired.jsonl";
const EVENTS: [&str; 7] = [
    "SessionStart",
    "InstructionsLoaded",
    "Notification",
    "UserPromptSubmit",
    "RouteDecision",
    "Stop",
    "SessionEnd",
];

/// The user's hooks: `RECORD` on every event; `stop` answers `continue: false` on one event;
/// `block` blocks the prompt.
fn write_hooks(world: &World, stop: Option<&str>, block: bool) {
    let mut hooks = serde_json::Map::new();
    for event in EVENTS {
        let mut handlers = vec![json!({"type": "command", "command": RECORD})];
        if stop == Some(event) {
            let answer = r#"cat > /dev/null; echo '{"continue": false, "stopReason": "Stopped by the test."}'"#;
            handlers.push(json!({"type": "command", "command": answer}));
        }
        if block && event == "UserPromptSubmit" {
            let answer = "cat > /dev/null; echo 'No prompts today.' >&2; exit 2";
            handlers.push(json!({"type": "command", "command": answer}));
        }
        hooks.insert(event.to_owned(), json!([{"hooks": handlers}]));
    }
    let path = world.home.join("config/aerix/hooks.json");
    std::fs::write(path, json!({"hooks": hooks}).to_string()).unwrap();
}

/// The events fired since the last call, `SessionEnd` with its reason; the file is emptied.
fn fired(world: &World) -> Vec<String> {
    let path = world.home.join("fired.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let input: Value = serde_json::from_str(l).unwrap();
            let name = input["hook_event_name"].as_str().unwrap().to_owned();
            match input["reason"].as_str() {
                Some(reason) if name == "SessionEnd" => format!("{name}:{reason}"),
                _ => name,
            }
        })
        .collect()
}

/// How one run ended: its exit status, the hook events it fired, and the request's
/// `session.end` status when it ran one (a screen ends 0 on Ctrl-D whatever its request did).
#[derive(Debug, PartialEq)]
struct Ran {
    status: i32,
    fired: Vec<String>,
    request: Option<i64>,
}

fn request_status(world: &World, before: Option<&std::path::Path>) -> Option<i64> {
    let log = world.try_log_path()?;
    if before == Some(log.as_path()) {
        return None;
    }
    let events = world.events();
    of_type(&events, "session.end").last().and_then(|e| e["exit_code"].as_i64())
}

fn headless(world: &World) -> Ran {
    let before = world.try_log_path();
    let out = world.aerix(&["-p", "Hello."]);
    let status = out.status.code().unwrap();
    eprintln!("-p: {status}\n{}", stderr(&out));
    let request = request_status(world, before.as_deref());
    Ran { status, fired: fired(world), request }
}

/// How the screen is driven to its end.
enum Drive {
    /// A request typed at the prompt, its end waited for (`until`), then Ctrl-D.
    Request { until: &'static str },
    /// The startup ends with an error row (`until`); a key closes the screen.
    Failed { until: &'static str },
    /// The screen never opens.
    Nothing,
}

fn screen(world: &World, name: &str, drive: Drive) -> Ran {
    let before = world.try_log_path();
    let pane = Pane::start(world, name, "true", &|aerix| {
        format!("'{aerix}' 2>../screen.err; echo \"aerix exited $?\"; exec sleep 60")
    });
    let mut request = None;
    match drive {
        Drive::Request { until } => {
            pane.wait_for("ready in", STARTUP);
            pane.type_line("Hello.");
            pane.wait_for(until, STEP);
            pane.keys(&["C-d"]);
        }
        Drive::Failed { until } => {
            pane.wait_for(until, STARTUP);
            pane.keys(&["Enter"]);
        }
        Drive::Nothing => {}
    }
    let text = pane.wait_for("aerix exited", STARTUP);
    let status = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("aerix exited "))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    if matches!(drive, Drive::Request { .. }) {
        request = request_status(world, before.as_deref());
    }
    let err = std::fs::read_to_string(world.home.join("screen.err")).unwrap_or_default();
    eprintln!("screen: {status}\n{err}");
    Ran { status, fired: fired(world), request }
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_same_startup_through_p_and_the_screen_fires_the_same_events_and_ends_alike() {
    let mut replies = Vec::new();
    for i in 0..3 {
        replies.push("answer".to_owned());
        replies.push(final_turn("Done.", &format!("answer {i}")));
    }
    let world = World::scripted("one-startup", &replies, true);
    let model =
        format!("script:{}@{}", world.home.join("replies.json").display(), smollm2().display());
    world.write("AGENTS.md", "Be brief.\n");
    // The pool started once (its startup note is the first run's only).
    assert_eq!(world.aerix(&["-p", "Warm up."]).status.code(), Some(0));
    // A broken hooks file: a startup note, so a `Notification`.
    world.write(".aerix/hooks.local.json", "{\"hooks\": ");

    // Hooks that answer nothing: the request runs; every event fires.
    write_hooks(&world, None, false);
    let all = strings(&[
        "SessionStart",
        "InstructionsLoaded",
        "Notification",
        "UserPromptSubmit",
        "RouteDecision",
        "Stop",
        "SessionEnd:other",
    ]);
    let p = headless(&world);
    assert_eq!(p, Ran { status: 0, fired: all.clone(), request: Some(0) });
    let s = screen(&world, "one-startup-done", Drive::Request { until: "answer 2" });
    assert_eq!(s, p);

    // `continue: false` on SessionStart, then on InstructionsLoaded: status 3, SessionEnd fires.
    for (event, fired) in [
        ("SessionStart", strings(&["SessionStart", "SessionEnd:other"])),
        (
            "InstructionsLoaded",
            strings(&["SessionStart", "InstructionsLoaded", "SessionEnd:other"]),
        ),
    ] {
        write_hooks(&world, Some(event), false);
        let p = headless(&world);
        assert_eq!(p, Ran { status: 3, fired: fired.clone(), request: Some(3) }, "{event}");
        let name = format!("one-startup-{event}");
        let s = screen(&world, &name, Drive::Failed { until: "Stopped by the test." });
        // The screen ran no request: its session is gone, as one closed at its prompt.
        assert_eq!((s.status, &s.fired), (p.status, &p.fired), "{event}");
    }

    // A blocked prompt ends the request with status 3 (the screen stays open for the next).
    write_hooks(&world, None, true);
    let blocked = strings(&[
        "SessionStart",
        "InstructionsLoaded",
        "Notification",
        "UserPromptSubmit",
        "SessionEnd:other",
    ]);
    let p = headless(&world);
    assert_eq!(p, Ran { status: 3, fired: blocked.clone(), request: Some(3) });
    // (The blocked hook's row names its command, which says "No prompts today." too: wait for
    // the request's end.)
    let until = "killed: the prompt was blocked";
    let s = screen(&world, "one-startup-blocked", Drive::Request { until });
    assert_eq!(s, Ran { status: 0, fired: blocked, request: Some(3) });

    // A broken settings file: status 78 before anything starts, no hook fires.
    write_hooks(&world, None, false);
    world.write(".aerix/settings.toml", "max_turns = \n");
    let p = headless(&world);
    assert_eq!((p.status, p.fired.len()), (78, 0));
    let s = screen(&world, "one-startup-settings", Drive::Nothing);
    assert_eq!((s.status, s.fired.len()), (78, 0));
    std::fs::remove_file(world.repo.join(".aerix/settings.toml")).unwrap();

    // A missing model: the pool cannot load it, status 1; no session hook fires (the pool is
    // bound before `SessionStart`).
    world.write_settings("/nonexistent/missing-model.gguf", "");
    let p = headless(&world);
    assert_eq!((p.status, p.fired.len()), (1, 0));
    // The error row's own words: the launch line names the model before the row exists.
    let s = screen(&world, "one-startup-model", Drive::Failed { until: "cannot read model" });
    assert_eq!((s.status, s.fired.len()), (1, 0));
    world.write_settings(&model, "");
}

/// The spec: "the session's first request makes `session/<id>`". A screen closed at its
/// prompt leaves no branch; one that ran a request leaves its session's, at the commit its
/// `session.start` records.
#[test]
fn a_screen_closed_without_a_request_leaves_no_profile_branch() {
    let replies = vec!["answer".to_owned(), final_turn("Done.", "made")];
    let world = World::scripted("screen-branch", &replies, true);
    let branches = |world: &World| -> Vec<String> {
        let profiles = world.home.join("data/aerix/profiles");
        let Some(repo) = std::fs::read_dir(&profiles).ok().and_then(|mut d| d.next()) else {
            return Vec::new();
        };
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(repo.unwrap().path())
            .args(["for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/session"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
    };
    let pane = Pane::open(&world, "branch-idle", "true");
    pane.wait_for("ready in", STARTUP);
    pane.keys(&["C-d"]);
    crate::screen::exited(&pane);
    assert!(world.home.join("data/aerix/profiles").is_dir(), "the profile was attached");
    assert_eq!(branches(&world), Vec::<String>::new());
    assert_eq!(world.try_log_path(), None, "nor a session");

    let pane = Pane::open(&world, "branch-request", "true");
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Make it.");
    pane.wait_for("made", STEP);
    pane.keys(&["C-d"]);
    crate::screen::exited(&pane);
    let events = world.events();
    let start = &of_type(&events, "session.start")[0];
    let expected = format!(
        "session/{} {}",
        start["session"].as_str().unwrap(),
        start["profile_commit"].as_str().unwrap()
    );
    assert_eq!(branches(&world), [expected]);
}

/// A `SessionStart` hook that changes a file: its change is the session's in both front ends'
/// diffs (each takes its snapshot before the session hooks run).
#[test]
fn a_change_a_session_start_hook_makes_is_in_both_front_ends_diff() {
    let mut replies = Vec::new();
    for i in 0..2 {
        replies.push("answer".to_owned());
        replies.push(final_turn("Done.", &format!("answer {i}")));
    }
    let world = World::scripted("start-diff", &replies, true);
    let write = "cat > /dev/null; echo '# hooked' >> calc.sh";
    let hooks =
        json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": write}]}]}});
    std::fs::write(world.home.join("config/aerix/hooks.json"), hooks.to_string()).unwrap();

    let out = world.aerix(&["-p", "Hello."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("+# hooked"), "the -p diff: {diff}");
    world.git(&["checkout", "calc.sh"]);

    let pane = Pane::start(&world, "start-diff", "true", &|aerix| {
        format!("'{aerix}' 2>../screen.err; echo \"aerix exited $?\"; exec sleep 60")
    });
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Hello.");
    pane.wait_for("answer 1", STEP);
    let text = pane.wait_for("in 1 file", STEP);
    assert!(text.contains("diff +1 −0 in 1 file"), "the screen's diff line: {text}");
    pane.keys(&["C-d"]);
    pane.wait_for("aerix exited", STARTUP);
}
