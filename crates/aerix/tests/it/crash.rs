//! Crash safety, by killing real processes: `aerix -p` in the middle of a turn, and the pool
//! in the middle of a generation.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{
    World, call, calls, final_turn, group_members, of_type, read_pid, send, send_group, smollm2,
    stderr, stdout, wait_for,
};

#[test]
fn kill_9_of_aerix_mid_turn_leaves_a_log_and_index_that_continue_resumes() {
    let replies = vec![
        "answer".to_owned(),
        calls(
            "Read, then run the slow check.",
            vec![
                call("read", json!({"path": "calc.sh"})),
                call("bash", json!({"command": "echo $$ > ../bash.pid; sleep 30"})),
            ],
        ),
        "answer".to_owned(),
        final_turn("The earlier turn is in my context.", "resumed answer"),
    ];
    let world = World::scripted("kill-aerix", &replies, true);
    let mut child = world
        .aerix_command(&["-p", "Check calc.sh."])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bash =
        wait_for(&mut child, Duration::from_secs(120), || read_pid(&world.home.join("bash.pid")));
    send("KILL", i32::try_from(child.id()).unwrap());
    let status = child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
    // A command in its own group outlives a SIGKILLed aerix (nothing can end it): clean up.
    send_group("KILL", bash);

    // Every line is a complete event, read back in order; the run stopped inside turn 1.
    let path = world.log_path();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<&str> = text.lines().collect();
    let events: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(of_type(&events, "session.end").is_empty());
    let result = of_type(&events, "message").into_iter().rfind(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["call"], "c1", "the read ran, the bash call did not end");
    // The index is intact: it parses and lists the session, not yet ended.
    let index = world.index();
    let sessions = index["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    let id = sessions[0]["id"].as_str().unwrap().to_owned();
    assert!(sessions[0].get("outcome").is_none(), "{index}");
    let listed = world.aerix(&["sessions", "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(stdout(&listed).contains(&id), "{}", stdout(&listed));

    // --continue rebuilds the root from those events: the new prompt is p2, the turn is 2.
    let out = world.aerix(&["-p", "Go on.", "--continue"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("resumed answer"), "{}", stdout(&out));
    assert!(!stderr(&out).contains("not complete events"), "{}", stderr(&out));
    let after = world.events();
    assert_eq!(after[..events.len()], events[..], "the first run's events, unchanged");
    let resumed = &after[events.len()..];
    assert_eq!(resumed[0]["type"], "session.start");
    assert_eq!(resumed[0]["resumed"], true);
    let prompt =
        of_type(resumed, "segment").into_iter().find(|s| s["label"] == "prompt").unwrap().clone();
    assert_eq!(prompt["id"], "p2");
    let turn = of_type(resumed, "message").into_iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(turn["turn"], 2);
    let index = world.index();
    let sessions = index["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        (
            sessions[0]["id"].as_str(),
            sessions[0]["outcome"].as_str(),
            sessions[0]["requests"].as_u64()
        ),
        (Some(id.as_str()), Some("done"), Some(2))
    );
}

/// The pid of the pool an `aerix` run says it started (`started the pool (pid N)`).
fn started_pool(lines: &[String]) -> Option<i32> {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("started the pool (pid ")?.split(')').next()?.parse().ok())
}

#[test]
fn kill_9_of_the_pool_mid_generation_ends_aerix_at_once_and_the_next_run_starts_a_pool() {
    let _engine = crate::engine();
    // SmolLM2 through the real engine: a turn takes long enough to be killed inside.
    let world = World::new(
        "kill-pool",
        &smollm2().display().to_string(),
        "[context]\nmax_new_tokens = 400\n",
    );
    let mut child = world
        .aerix_command(&["-p", "What does the add function in calc.sh do?", "--max-turns", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = Arc::clone(&lines);
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                lines.lock().unwrap().push(line.unwrap());
            }
        })
    };
    let pool =
        wait_for(&mut child, Duration::from_secs(300), || started_pool(&lines.lock().unwrap()));
    // The root's prompt is in its context: the next thing aerix does is its first turn.
    wait_for(&mut child, Duration::from_secs(120), || {
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
        "the first turn ended before the pool was killed: {before:?}"
    );
    let killed = Instant::now();
    send("KILL", pool);
    let status = child.wait().unwrap();
    let took = killed.elapsed();
    reader.join().unwrap();
    let err = lines.lock().unwrap().join("\n");
    eprintln!("pool killed: aerix exited after {took:?}\n{err}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("pool gone"), "{err}");
    let events = world.events();
    let end = of_type(&events, "agent.end")[0];
    assert_eq!(end["outcome"], "failed");
    assert!(end["reason"].as_str().unwrap().starts_with("pool gone"), "{end}");
    let last = events.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["outcome"].as_str()),
        (Some("session.end"), Some("failed"))
    );
    assert!(group_members(pool).is_empty(), "the pool is gone");

    // The socket is stale: the next run starts a fresh pool and is served by it (scripted,
    // to be quick).
    let replies = ["answer".to_owned(), final_turn("Served.", "served by a fresh pool")];
    let model = world.script("after", &replies, true);
    world.write_settings(&model, "");
    let out = world.aerix(&["-p", "What does calc.sh define?"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(stdout(&out).starts_with("served by a fresh pool"), "{}", stdout(&out));
    let lines: Vec<String> = err.lines().map(String::from).collect();
    let fresh = started_pool(&lines).unwrap_or_else(|| panic!("no pool started:\n{err}"));
    assert_ne!(fresh, pool);
}
