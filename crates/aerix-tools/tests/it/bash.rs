use std::time::{Duration, Instant};

use serde_json::json;

use crate::Scratch;

#[test]
fn stdout_then_stderr_then_the_exit_status() {
    let s = Scratch::new("bash-order", false);
    let out = s.ok("bash", json!({"command": "echo err >&2; echo out; exit 3"}));
    assert_eq!(out, "out\nerr\n[exit 3]");
    assert_eq!(s.ok("bash", json!({"command": "true"})), "[exit 0]");
    // It runs in the working directory.
    assert_eq!(
        s.ok("bash", json!({"command": "pwd"})),
        format!("{}\n[exit 0]", s.path().display())
    );
    let out = s.ok("bash", json!({"command": "kill -9 $$"}));
    assert_eq!(out, "[signal 9]");
}

#[test]
fn a_timeout_ends_the_whole_process_group() {
    let s = Scratch::new("bash-timeout", false);
    let start = Instant::now();
    // The child ignores TERM's default through a trap-less sleep in a subshell: the group is
    // killed, so the sleeping grandchild goes too and the pipes close.
    let out = s.ok(
        "bash",
        json!({"command": "echo before; (sleep 30; echo never) & sleep 30", "timeout_secs": 1}),
    );
    assert_eq!(out, "before\n[timeout after 1s]");
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    // TERM ignored: KILL follows after the 2 s grace period.
    let start = Instant::now();
    let out = s.ok("bash", json!({"command": "trap '' TERM; sleep 30", "timeout_secs": 1}));
    assert_eq!(out, "[timeout after 1s]");
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(6), "{took:?}");
}

#[test]
fn bounds_are_refused_by_name() {
    let s = Scratch::new("bash-bounds", false);
    let out = s.refused("bash", json!({"command": "true", "timeout_secs": 601}));
    assert!(out.contains("601") && out.contains("600"), "{out}");
    assert!(s.refused("bash", json!({"command": "  "})).contains("empty"));
}

#[test]
fn cancel_is_seen_within_a_poll() {
    let s = Scratch::new("bash-cancel", false);
    let cancel = s.cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        cancel.cancel();
    });
    let start = Instant::now();
    let out = s.ok("bash", json!({"command": "sleep 30"}));
    assert_eq!(out, "[cancelled]");
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_hurried_cancel_kills_a_command_that_ignores_term_without_the_grace() {
    let s = Scratch::new("bash-hurry", false);
    let cancel = s.cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        cancel.cancel();
        std::thread::sleep(Duration::from_millis(300));
        cancel.hurry();
    });
    let start = Instant::now();
    let out = s.ok("bash", json!({"command": "trap '' TERM; sleep 30"}));
    assert_eq!(out, "[cancelled]");
    // Without the hurry, KILL would come 2 s after TERM (at 2.3 s).
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(600) && took < Duration::from_millis(1500), "{took:?}");
}

#[test]
fn background_jobs_report_when_they_exit_and_die_with_the_agent() {
    let s = Scratch::new("bash-jobs", false);
    let out = s.ok("bash", json!({"command": "sleep 0.3; echo done", "background": true}));
    assert!(out.starts_with("started job j1"), "{out}");
    let slow = s.ok("bash", json!({"command": "sleep 30", "background": true}));
    assert!(slow.starts_with("started job j2"), "{slow}");
    assert_eq!(s.jobs.running(), 2);
    let started: Vec<String> = s.jobs.take_started().into_iter().map(|(id, _)| id).collect();
    assert_eq!(started, ["j1", "j2"]);
    assert!(s.jobs.take_started().is_empty(), "each start is reported once");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut ended = Vec::new();
    while ended.is_empty() && Instant::now() < deadline {
        ended = s.jobs.take_finished();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].text, "[job j1 exited 0]\ndone");
    assert!(s.jobs.wait_deadline().is_some());
    let killed = s.jobs.kill_all();
    assert_eq!(killed.len(), 1);
    assert_eq!(killed[0].text, "[job j2 cancelled]");
    assert_eq!(s.jobs.running(), 0);
}
