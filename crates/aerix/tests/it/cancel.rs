//! Cancellation: real signals sent to a real `aerix -p` while its scripted member's `bash` call
//! runs `sleep`.

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{
    World, caldrix, call, calls, group_members, group_survivors, of_type, read_pid, send, smollm2,
    stderr, stdout, wait_for,
};

/// How long the first run waits for the pool to start and the command to run.
const STARTUP: Duration = Duration::from_secs(120);

/// The route, then one turn: an edit (for the diff), a background job (its group's id in
/// `../job.pid`, the world's home) and `command` (which writes its group's id to
/// `../bash.pid`).
fn replies(command: &str) -> Vec<String> {
    let job = "echo $$ > ../job.pid; sleep 30";
    vec![
        "answer".to_owned(),
        calls(
            "Fix add, start the server, then run the slow check.",
            vec![
                call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"})),
                call("bash", json!({"command": job, "background": true})),
                call("bash", json!({"command": command})),
            ],
        ),
    ]
}

const SLEEP: &str = "echo $$ > ../bash.pid; sleep 30; echo after";

fn start(world: &World) -> Child {
    world
        .aerix_command(&["-p", "Fix add."])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The command's process group, once `sleep` runs in it (and the job has started).
fn running_group(world: &World, child: &mut Child) -> i32 {
    wait_for(child, STARTUP, || read_pid(&world.home.join("job.pid")));
    let pgid = wait_for(child, STARTUP, || read_pid(&world.home.join("bash.pid")));
    wait_for(child, Duration::from_secs(5), || (group_members(pgid).len() >= 2).then_some(()));
    pgid
}

/// What every cancelled run shows: the status, the diff of the edit made before the signal,
/// `session.end` last with outcome `cancelled`, the root cancelled, the command's result
/// `[cancelled]` and the job's end, and nothing left of the command's or the job's group.
fn check_cancelled(world: &World, out: &Output, status: i32, pgid: i32) -> Vec<Value> {
    let text = stdout(out);
    assert_eq!(out.status.code(), Some(status), "{text}\n{}", stderr(out));
    assert!(
        text.contains("-add() { echo $(($1 - $2)); }\n+add() { echo $(($1 + $2)); }"),
        "stdout: {text}\nstderr: {}",
        stderr(out)
    );
    let events = world.events();
    let last = events.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("session.end"), Some("cancelled"))
    );
    assert_eq!(last["exit_code"], status);
    assert_eq!(of_type(&events, "session.end").len(), 1);
    let root = of_type(&events, "agent.end");
    assert_eq!(root.last().unwrap()["outcome"], "cancelled", "{root:?}");
    let result = of_type(&events, "message").into_iter().find(|m| m["call"] == "c3").unwrap();
    assert_eq!(result["text"], "[cancelled]");
    assert_eq!(group_survivors(pgid, Duration::from_secs(1)), Vec::<i32>::new());
    let job = read_pid(&world.home.join("job.pid")).unwrap();
    assert_eq!(group_survivors(job, Duration::from_secs(1)), Vec::<i32>::new());
    let jobs = of_type(&events, "job");
    let ended = jobs.iter().find(|j| j["state"] == "ended").unwrap();
    assert_eq!(ended["ending"], "[job j1 cancelled]", "{jobs:?}");
    events
}

/// A signal while `bash` sleeps: the run ends `cancelled` with `status`, within the grace.
fn check(name: &str, signal: &str, status: i32) {
    let world = World::scripted(name, &replies(SLEEP), true);
    let mut child = start(&world);
    let pgid = running_group(&world, &mut child);
    let sent = Instant::now();
    send(signal, i32::try_from(child.id()).unwrap());
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    eprintln!("SIG{signal}: aerix exited after {took:?}");
    // `sleep` takes TERM at once; 100 ms polls, the diff and the index are the rest.
    assert!(took < Duration::from_secs(2), "{took:?}");
    check_cancelled(&world, &out, status, pgid);
    assert_eq!(world.sessions_outcome(), "cancelled");
}

#[test]
fn sigint_during_bash_cancels_the_run_with_130() {
    check("sigint", "INT", 130);
}

#[test]
fn sigterm_during_bash_cancels_the_run_with_143() {
    check("sigterm", "TERM", 143);
}

#[test]
fn sighup_during_bash_cancels_the_run_with_130() {
    check("sighup", "HUP", 130);
}

#[test]
fn a_second_sigint_ends_a_slow_session_end_hook_and_exits_at_once() {
    let world = World::scripted("second-sigint", &replies(SLEEP), true);
    let hooks = json!({"hooks": {"SessionEnd": [{"hooks": [
        {"type": "command", "command": "echo $$ > ../end.pid; sleep 30"}
    ]}]}});
    std::fs::write(world.home.join("config/aerix/hooks.json"), hooks.to_string()).unwrap();
    let mut child = start(&world);
    let pid = i32::try_from(child.id()).unwrap();
    let bash = running_group(&world, &mut child);
    send("INT", pid);
    // `session.end` is written, then SessionEnd runs (its 30 s bound) until the second signal.
    let hook =
        wait_for(&mut child, Duration::from_secs(10), || read_pid(&world.home.join("end.pid")));
    let sent = Instant::now();
    send("INT", pid);
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    eprintln!("second SIGINT: aerix exited after {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(group_survivors(hook, Duration::from_secs(1)), Vec::<i32>::new());
    let events = world.events();
    let ends = of_type(&events, "session.end");
    assert_eq!(ends.len(), 1);
    assert_eq!(
        (ends[0]["outcome"].as_str(), ends[0]["exit_code"].as_i64()),
        (Some("cancelled"), Some(130))
    );
    assert_eq!(group_survivors(bash, Duration::from_secs(1)), Vec::<i32>::new());
}

#[test]
fn a_second_sigint_kills_a_command_ignoring_term_and_still_writes_session_end() {
    let command = "trap '' TERM; echo $$ > ../bash.pid; sleep 30; echo after";
    let world = World::scripted("second-sigint-trap", &replies(command), true);
    let mut child = start(&world);
    let pid = i32::try_from(child.id()).unwrap();
    let bash = running_group(&world, &mut child);
    send("INT", pid);
    // The command ignores TERM: without a second signal its KILL comes after 2 s.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!group_members(bash).is_empty(), "the command took TERM");
    assert!(child.try_wait().unwrap().is_none(), "aerix waits out the grace");
    let sent = Instant::now();
    send("INT", pid);
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    eprintln!("second SIGINT: aerix exited after {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(group_survivors(bash, Duration::from_secs(1)), Vec::<i32>::new());
    let events = world.events();
    let ends = of_type(&events, "session.end");
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["outcome"], "cancelled");
    assert_eq!(world.sessions_outcome(), "cancelled");
}

#[test]
fn sigint_during_a_generation_cancels_it_and_the_connection_stays_in_step() {
    let _engine = crate::engine();
    // SmolLM2 through the real engine: a turn takes long enough to be cancelled inside.
    let model = smollm2().display().to_string();
    let world = World::new("sigint-generation", &model, "[context]\nmax_new_tokens = 64\n");
    // A first run of the same prompt warms the member: its first `json` generation builds
    // the constraint's parser factory, which does not look at a cancel (seconds here).
    let warm = world.aerix(&["-p", "Fix add.", "--max-turns", "1"]);
    assert!(matches!(warm.status.code(), Some(0..=3)), "{}", stderr(&warm));
    world.write_settings(&model, "[context]\nmax_new_tokens = 400\n");
    std::fs::remove_file(world.log_path()).unwrap();
    let mut child = start(&world);
    wait_for(&mut child, STARTUP, || {
        let text = std::fs::read_to_string(world.try_log_path()?).ok()?;
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|e| e["type"] == "segment" && e["agent"] == "a1" && e["label"] == "prompt")
            .then_some(())
    });
    std::thread::sleep(Duration::from_millis(200));
    let before = world.events();
    assert!(
        !of_type(&before, "message").iter().any(|m| m["agent"] == "a1"),
        "the first turn ended before the signal: {before:?}"
    );
    let sent = Instant::now();
    send("INT", i32::try_from(child.id()).unwrap());
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    eprintln!("SIGINT mid-generation: aerix exited after {took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let events = world.events();
    assert!(!of_type(&events, "message").iter().any(|m| m["agent"] == "a1"));
    assert_eq!(of_type(&events, "agent.end")[0]["outcome"], "cancelled");
    assert_eq!(events.last().unwrap()["type"], "session.end");
    // The pool answered the `cancel` with its `done`, so the root's context could still be
    // dropped on that connection (a context outlives a connection that just closes).
    let status = std::process::Command::new(caldrix())
        .args(["pool", "status", "--json", "--socket", world.socket.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", stderr(&status));
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let contexts: Vec<&Value> =
        status["members"].as_array().unwrap().iter().map(|m| &m["contexts"]).collect();
    assert_eq!(contexts, [&json!(0)], "{status}");
}

#[test]
fn sigint_during_a_session_start_hook_ends_it_and_the_run() {
    let world = World::scripted("sigint-hook", &replies(SLEEP), true);
    let hooks = json!({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": "echo $$ > ../start.pid; sleep 30"}
    ]}]}});
    std::fs::write(world.home.join("config/aerix/hooks.json"), hooks.to_string()).unwrap();
    let mut child = start(&world);
    let hook = wait_for(&mut child, STARTUP, || read_pid(&world.home.join("start.pid")));
    wait_for(&mut child, Duration::from_secs(5), || (group_members(hook).len() >= 2).then_some(()));
    let sent = Instant::now();
    send("INT", i32::try_from(child.id()).unwrap());
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(group_survivors(hook, Duration::from_secs(1)), Vec::<i32>::new());
    let events = world.events();
    let runs = of_type(&events, "hook");
    assert_eq!((runs.len(), runs[0]["ending"].as_str()), (1, Some("cancelled")), "{runs:?}");
    assert!(stderr(&out).contains("was cancelled: sent TERM"), "{}", stderr(&out));
    let last = events.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("session.end"), Some("cancelled"))
    );
    // The request never ran: no route, no turn, nothing in the tree.
    assert!(of_type(&events, "route").is_empty());
    assert_eq!(world.git(&["status", "--porcelain"]), "");
}

/// A second SIGINT while the startup still runs (a SessionStart hook that ignores `TERM`, in
/// its grace): aerix exits at once, and the session's log still holds its request's
/// `session.start` and a `session.end` `cancelled`, as the index does.
#[test]
fn a_second_sigint_during_the_startup_still_ends_the_sessions_log() {
    let world = World::scripted("second-sigint-startup", &replies(SLEEP), true);
    let hooks = json!({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": "trap '' TERM; echo $$ > ../start.pid; sleep 30"}
    ]}]}});
    std::fs::write(world.home.join("config/aerix/hooks.json"), hooks.to_string()).unwrap();
    let mut child = start(&world);
    let hook = wait_for(&mut child, STARTUP, || read_pid(&world.home.join("start.pid")));
    wait_for(&mut child, Duration::from_secs(5), || (group_members(hook).len() >= 2).then_some(()));
    let pid = i32::try_from(child.id()).unwrap();
    send("INT", pid);
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "aerix waits out the hook's grace");
    let sent = Instant::now();
    send("INT", pid);
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(group_survivors(hook, Duration::from_secs(1)), Vec::<i32>::new());
    let events = world.events();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"session.start"), "{kinds:?}");
    assert_eq!(events[0]["prompt"], "Fix add.");
    let ends = of_type(&events, "session.end");
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(
        (ends[0]["outcome"].as_str(), ends[0]["exit_code"].as_i64()),
        (Some("cancelled"), Some(130))
    );
    assert_eq!(world.sessions_outcome(), "cancelled");
}
