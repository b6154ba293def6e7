//! Attempts end to end on scripted members: each in a worktree of its own, judged by the
//! repository's test command (`sh test.sh`, detected), the passing one landing in the tree;
//! conflicts, cancels and a killed run's leftovers. Asserted from the session log and the tree.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, of_type, send, stderr, stdout, wait_for};

const FIX: &str = "Fix add in calc.sh so that `sh test.sh` prints ok.";
const TEST: &str = "sh test.sh";
const FIXED: &str = "add() { echo $(($1 + $2)); }\n";
const BROKEN: &str = "add() { echo $(($1 - $2)); }\n";

/// The root's turn: one piece whose check is the test command.
fn delegate() -> String {
    calls("Delegate the fix.", vec![call("agent", json!({"brief": FIX, "check": TEST}))])
}

/// The one agent result the root got, parsed.
fn piece_result(events: &[Value]) -> Value {
    let message = of_type(events, "message")
        .into_iter()
        .find(|m| m["agent"] == "a1" && m["tool"] == "agent")
        .expect("the root's agent result");
    serde_json::from_str(message["text"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {message}"))
}

/// A user hook delaying the start of `agent` by `secs` (so the scripted replies, taken in
/// queue order, go to the attempts one after the other).
pub(crate) fn delay_start(world: &World, agent: &str, secs: u32) {
    let pattern = agent.replace('.', "\\.");
    let hooks = json!({"hooks": {"SubagentStart": [{"hooks": [{"type": "command", "command":
        format!("if grep -q '\"{pattern}\"'; then sleep {secs}; fi; exit 0")}]}]}});
    let path = world.home.join("config/aerix/hooks.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, hooks.to_string()).unwrap();
}

/// The worktrees aerix keeps for the world's project (empty once they are removed).
fn worktree_dirs(world: &World) -> Vec<String> {
    let root = world.home.join("data/aerix/worktrees");
    let mut found = Vec::new();
    for project in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for entry in std::fs::read_dir(project.path()).into_iter().flatten().flatten() {
            if entry.path().is_dir() {
                found.push(entry.path().display().to_string());
            }
        }
    }
    found
}

/// `git worktree list` has the main tree alone, and no attempt's ref is left (the request's
/// checkpoint stays: it is the rewind's).
fn only_the_main_worktree(world: &World) {
    let list = world.git(&["worktree", "list", "--porcelain"]);
    let trees = list.lines().filter(|l| l.starts_with("worktree ")).count();
    assert_eq!(trees, 1, "{list}");
    assert_eq!(world.git(&["for-each-ref", "refs/aerix/worktrees"]).trim(), "", "refs left");
}

fn attempt_trees(events: &[Value]) -> Vec<String> {
    of_type(events, "attempt").iter().map(|a| a["tree"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn attempts_each_work_in_their_own_tree_and_the_passing_one_lands() {
    // Both attempts get the same turns: each appends its tree to seen.txt and reads it back;
    // only the second (its worktree's name ends in `-a2`) fixes calc.sh.
    let work = calls(
        "Record where I am, fix if I am the second.",
        vec![
            call(
                "bash",
                json!({"command": "echo \"$PWD\" >> seen.txt; case \"$PWD\" in *-a2) sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh;; esac"}),
            ),
            call("read", json!({"path": "seen.txt"})),
        ],
    );
    let done = final_turn("Done.", "Worked on calc.sh.");
    let replies = vec![
        "edit".to_owned(),
        delegate(),
        work.clone(),
        done.clone(),
        work,
        done,
        final_turn("Delegated.", "Fixed add."),
    ];
    let settings = "[delegation]\nattempts = 2\nparallel = 1\nretries = 0\n";
    let world = World::scripted_with("attempts-land", &replies, true, settings);
    delay_start(&world, "a1.c1.a2", 3);
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();

    let attempts = of_type(&events, "attempt");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert!(attempts[0]["temperature"].is_null(), "the first attempt is greedy");
    assert_eq!(attempts[1]["temperature"], 0.8);
    assert!(attempts[1]["seed"].is_u64() && attempts[1]["request_seed"].is_u64());
    let trees = attempt_trees(&events);
    let data = world.home.join("data/aerix/worktrees").display().to_string();
    assert!(trees.iter().all(|t| t.starts_with(&data)), "worktrees live under {data}: {trees:?}");
    assert_ne!(trees[0], trees[1]);

    // Each attempt edited seen.txt in its own tree and saw only its own line.
    for (agent, own, other) in
        [("a1.c1.a1", &trees[0], &trees[1]), ("a1.c1.a2", &trees[1], &trees[0])]
    {
        let read = of_type(&events, "message")
            .into_iter()
            .find(|m| m["agent"] == agent && m["input"]["path"] == "seen.txt")
            .unwrap_or_else(|| panic!("no read of {agent}"));
        let text = read["text"].as_str().unwrap();
        assert!(text.contains(own.as_str()) && !text.contains(other.as_str()), "{agent}: {text}");
    }

    // The harness ran the check in each tree; the exit status decided.
    let checks: Vec<(&str, &str, i64, &str)> = of_type(&events, "check")
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap();
            (s("agent"), s("by"), c["exit"].as_i64().unwrap(), s("verdict"))
        })
        .collect();
    assert_eq!(
        checks,
        [("a1.c1.a1", "command", 1, "fail"), ("a1.c1.a2", "command", 0, "pass")],
        "no verifier ran"
    );
    assert!(of_type(&events, "agent.spawn").iter().all(|s| s["kind"] != "verifier"));

    // The second attempt's change landed; the first's did not.
    let land = of_type(&events, "land");
    assert_eq!((&land[0]["state"], &land[0]["attempt"]), (&json!("landed"), &json!(2)));
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), FIXED);
    let seen = std::fs::read_to_string(world.repo.join("seen.txt")).unwrap();
    assert_eq!(seen, format!("{}\n", trees[1]), "only the winner's line");
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "done");
    assert_eq!(
        result["verdicts"],
        json!([
            {"attempt": 1, "round": 1, "by": "command", "exit": 1, "verdict": "fail"},
            {"attempt": 2, "round": 1, "by": "command", "exit": 0, "verdict": "pass"},
        ])
    );
    assert!(result["landed"].as_str().unwrap().starts_with("attempt 2's change"), "{result}");
    assert!(stdout(&out).contains("+add() { echo $(($1 + $2)); }"), "{}", stdout(&out));
    assert!(stderr(&out).contains("a1.c1 landed attempt 2"), "{}", stderr(&out));

    // Every worktree is gone.
    assert!(worktree_dirs(&world).is_empty(), "{:?}", worktree_dirs(&world));
    only_the_main_worktree(&world);
}

#[test]
fn a_check_that_fails_never_reaches_the_tree_and_its_output_reaches_the_retry() {
    let spoil = calls(
        "Change it.",
        vec![call("bash", json!({"command": "printf 'add() { echo 4; }\\n' > calc.sh"}))],
    );
    let replies = vec![
        "edit".to_owned(),
        delegate(),
        spoil.clone(),
        final_turn("Fixed.", "It is fixed."),
        spoil,
        final_turn("Fixed.", "It is fixed now."),
        final_turn("Delegated.", "It failed."),
    ];
    let settings = "[delegation]\nparallel = 1\nretries = 1\n";
    let world = World::scripted_with("attempts-fail", &replies, true, settings);
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let retry = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1.c1.r1" && s["id"] == "brief")
        .unwrap();
    let text = retry["text"].as_str().unwrap();
    assert!(text.contains("`sh test.sh` exited 1") && text.contains("FAIL"), "{text}");
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "failed");
    assert_eq!(of_type(&events, "land")[0]["state"], "none");
    // The tree is as it was: the failing edit stayed in its worktree.
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), BROKEN);
    assert_eq!(world.git(&["status", "--porcelain"]), "");
    assert!(worktree_dirs(&world).is_empty());
}

#[test]
fn an_implementer_opens_with_its_check_run_and_the_files_it_names_read() {
    let replies = vec![
        "edit".to_owned(),
        delegate(),
        final_turn("Seen.", "Nothing changed."),
        final_turn("Delegated.", "It failed."),
    ];
    let settings = "[delegation]\nparallel = 1\nretries = 0\n";
    let world = World::scripted_with("attempts-opening", &replies, true, settings);
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let messages: Vec<&Value> =
        of_type(&events, "message").into_iter().filter(|m| m["agent"] == "a1.c1").collect();
    let shape = shape_of(&events, "a1.c1");
    // aerix's two opening turns, then the member's own (a final), which saw their results.
    assert_eq!(
        shape[..5],
        [
            ("assistant", "opening"),
            ("tool", "bash"),
            ("assistant", "opening"),
            ("tool", "read"),
            ("tool", "read")
        ],
        "{messages:?}"
    );
    assert_eq!(shape.len(), 6, "{messages:?}");
    assert!(shape[5].0 == "assistant" && shape[5].1 != "opening", "{messages:?}");
    let opening: Value = serde_json::from_str(messages[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(opening["calls"][0], json!({"tool": "bash", "input": {"command": TEST}}));
    assert!(messages[1]["text"].as_str().unwrap().contains("FAIL"), "{}", messages[1]);
    let read: Vec<&str> =
        messages[3..5].iter().map(|m| m["input"]["path"].as_str().unwrap()).collect();
    assert_eq!(read, ["calc.sh", "test.sh"]);
    assert!(messages[3]["text"].as_str().unwrap().contains("$1 - $2"), "{}", messages[3]);
    // The opening takes none of the budget: the member's one turn is the only one counted.
    let end = of_type(&events, "agent.end").into_iter().find(|e| e["agent"] == "a1.c1").unwrap();
    assert_eq!(end["turns"], 1, "{end}");
}

#[test]
fn a_check_passed_by_emptying_its_test_fails_and_never_lands() {
    let empty = calls("Empty it.", vec![call("write", json!({"path": "test.sh", "content": ""}))]);
    let replies = vec![
        "edit".to_owned(),
        delegate(),
        empty,
        final_turn("Done.", "The check passes."),
        final_turn("Delegated.", "It failed."),
    ];
    let settings = "[delegation]\nparallel = 1\nretries = 0\n";
    let world = World::scripted_with("attempts-tests-kept", &replies, true, settings);
    let test = std::fs::read_to_string(world.repo.join("test.sh")).unwrap();
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let checks = checks_of(&events);
    assert_eq!(checks, [("command", "pass"), ("tests", "fail")]);
    let reason = of_type(&events, "check")[1]["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains("edits test.sh, the check's own tests"), "{reason}");
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "failed", "{result}");
    assert_eq!(result["verdicts"][1]["by"], "tests", "{result}");
    assert_eq!(of_type(&events, "land")[0]["state"], "none");
    assert_eq!(std::fs::read_to_string(world.repo.join("test.sh")).unwrap(), test);
    assert_eq!(world.git(&["status", "--porcelain"]), "");
}

/// An implementer with one turn: `change` writes calc.sh, and its budget ends it there, before
/// it says `done`.
fn out_of_turns(name: &str, content: &str) -> (World, std::process::Output) {
    let change =
        calls("Change it.", vec![call("write", json!({"path": "calc.sh", "content": content}))]);
    let replies =
        vec!["edit".to_owned(), delegate(), change, final_turn("Delegated.", "It ended.")];
    let settings = "[delegation]\nparallel = 1\nretries = 0\nmax_turns = 1\n";
    let world = World::scripted_with(name, &replies, true, settings);
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (world, out)
}

#[test]
fn an_implementer_out_of_turns_is_still_checked_and_its_passing_fix_lands() {
    let (world, _) = out_of_turns("attempts-budget-pass", FIXED);
    let events = world.events();
    let end = of_type(&events, "agent.end").into_iter().find(|e| e["agent"] == "a1.c1").unwrap();
    assert_eq!(end["outcome"], "budget", "{end}");
    let checks = checks_of(&events);
    assert_eq!(checks, [("command", "pass")]);
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "done", "{result}");
    assert!(result["summary"].as_str().unwrap().contains("ended budget"), "{result}");
    assert_eq!(of_type(&events, "land")[0]["state"], "landed");
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), FIXED);
    assert!(worktree_dirs(&world).is_empty());
}

#[test]
fn an_implementer_out_of_turns_whose_tree_fails_its_check_stops_and_nothing_lands() {
    let (world, _) = out_of_turns("attempts-budget-fail", "add() { echo 4; }\n");
    let events = world.events();
    let checks = checks_of(&events);
    assert_eq!(checks, [("command", "fail")]);
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "budget", "{result}");
    assert_eq!(of_type(&events, "land")[0]["state"], "none");
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), BROKEN);
    assert_eq!(world.git(&["status", "--porcelain"]), "");
    assert!(worktree_dirs(&world).is_empty());
}

#[test]
fn a_change_made_meanwhile_to_the_same_lines_is_a_conflict_and_the_patch_is_kept() {
    let world = World::new("attempts-conflict", "", "");
    let meanwhile = "add() { echo $(($1 * $2)); }\n";
    let work = calls(
        "Fix it; the user edits the same line meanwhile.",
        vec![call(
            "bash",
            json!({"command": format!(
                "sed -i 's/\\$1 - \\$2/$1 + $2/' calc.sh; printf '%s\\n' 'add() {{ echo $(($1 * $2)); }}' > {}",
                world.repo.join("calc.sh").display()
            )}),
        )],
    );
    let replies = vec![
        "edit".to_owned(),
        delegate(),
        work,
        final_turn("Fixed.", "add adds."),
        final_turn("Delegated.", "Conflict."),
    ];
    let model = world.script("replies", &replies, true);
    world.write_settings(&model, "[delegation]\nparallel = 1\n");
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let result = piece_result(&events);
    assert_eq!(result["outcome"], "conflict", "{result}");
    let land = &of_type(&events, "land")[0];
    assert_eq!(land["state"], "conflict");
    let patch = land["patch"].as_str().expect("the patch's path");
    let kept = std::fs::read_to_string(patch).unwrap();
    assert!(kept.contains("+add() { echo $(($1 + $2)); }"), "{kept}");
    assert!(result["landed"].as_str().unwrap().contains(patch), "{result}");
    // Nothing was written: the user's edit stands, without conflict markers.
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), meanwhile);
    assert!(worktree_dirs(&world).is_empty());
}

/// Processes whose command line holds `marker`.
fn with_marker(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let zombie = stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

/// A world whose attempts each run a long `sleep` tagged with `marker`; aerix started on it.
fn sleeping(
    name: &str,
    marker: &str,
    attempts: u32,
    after: &[String],
) -> (World, std::process::Child) {
    // `sleep 86399 <marker>` never ends in a test's time; the marker finds it in /proc.
    let nap = calls(
        "Wait.",
        vec![call("bash", json!({"command": format!("sleep 86399 || true # {marker}")}))],
    );
    let mut replies = vec!["edit".to_owned(), delegate()];
    for _ in 0..attempts {
        replies.push(nap.clone());
    }
    replies.extend_from_slice(after);
    let settings = format!("[delegation]\nattempts = {attempts}\nparallel = 1\n");
    let world = World::scripted_with(name, &replies, true, &settings);
    let child = world
        .aerix_command(&["-p", "Fix calc.sh."])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (world, child)
}

#[test]
fn sigint_during_attempts_leaves_no_worktree_and_no_process() {
    let marker = format!("aerix-attempts-int-{}", std::process::id());
    let (world, mut child) = sleeping("attempts-int", &marker, 2, &[]);
    wait_for(&mut child, Duration::from_secs(60), || {
        (with_marker(&marker).len() >= 2 && worktree_dirs(&world).len() == 2).then_some(())
    });
    send("INT", i32::try_from(child.id()).unwrap());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "aerix did not end after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    assert!(with_marker(&marker).is_empty(), "left running: {:?}", with_marker(&marker));
    assert!(worktree_dirs(&world).is_empty(), "{:?}", worktree_dirs(&world));
    only_the_main_worktree(&world);
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), BROKEN);
}

#[test]
fn after_kill_9_the_next_run_removes_what_the_dead_run_left() {
    let marker = format!("aerix-attempts-kill-{}", std::process::id());
    // The next run's replies: its route and its answer.
    let after = ["answer".to_owned(), final_turn("Hello.", "Hello.")];
    let (world, mut child) = sleeping("attempts-kill", &marker, 1, &after);
    wait_for(&mut child, Duration::from_secs(60), || {
        (!with_marker(&marker).is_empty() && worktree_dirs(&world).len() == 1).then_some(())
    });
    let left = worktree_dirs(&world);
    send("KILL", i32::try_from(child.id()).unwrap());
    let _ = child.wait();
    // The dead run's command outlives it (its own process group): end it as a user would.
    for pid in with_marker(&marker) {
        send("KILL", pid);
    }
    assert_eq!(worktree_dirs(&world), left, "kill -9 leaves the worktree");
    let out = world.aerix(&["-p", "Say hello."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("removed 1 worktree(s) a stopped run of aerix left"), "{err}");
    assert!(err.contains(&left[0]), "{err}");
    assert!(worktree_dirs(&world).is_empty(), "{:?}", worktree_dirs(&world));
    only_the_main_worktree(&world);
}

#[test]
fn outside_a_git_work_tree_pieces_run_in_place_and_say_so() {
    let fix = calls(
        "Fix the operator.",
        vec![call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"}))],
    );
    let replies = vec![
        "edit".to_owned(),
        delegate(),
        fix,
        final_turn("Fixed.", "add adds."),
        final_turn("Delegated.", "Fixed."),
    ];
    let world =
        World::scripted_with("attempts-in-place", &replies, true, "[delegation]\nattempts = 4\n");
    std::fs::remove_dir_all(world.repo.join(".git")).unwrap();
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("is not a git work tree: pieces run in place, one at a time"), "{err}");
    let events = world.events();
    let attempts = of_type(&events, "attempt");
    assert_eq!(attempts.len(), 1, "one attempt in place, whatever delegation.attempts says");
    assert_eq!(attempts[0]["tree"], world.repo.display().to_string());
    assert_eq!(of_type(&events, "land")[0]["state"], "in place");
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), FIXED);
    assert!(worktree_dirs(&world).is_empty());
}

#[test]
fn worktree_hooks_fire_around_an_attempt_and_a_handler_may_choose_its_path() {
    let chosen = |world: &World| world.home.join("chosen-tree");
    let fix = calls(
        "Fix the operator.",
        vec![call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"}))],
    );
    let replies = vec![
        "edit".to_owned(),
        delegate(),
        fix,
        final_turn("Fixed.", "add adds."),
        final_turn("Delegated.", "Fixed."),
    ];
    let world =
        World::scripted_with("attempts-hooks", &replies, true, "[delegation]\nparallel = 1\n");
    let record =
        |event: &str| format!("cat > {}", world.home.join(format!("{event}.json")).display());
    let hooks = json!({"hooks": {
        "WorktreeCreate": [{"hooks": [{"type": "command", "command": format!(
            "{}; echo {}", record("create"), chosen(&world).display()
        )}]}],
        "WorktreeRemove": [{"hooks": [{"type": "command", "command": record("remove")}]}],
    }});
    let path = world.home.join("config/aerix/hooks.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, hooks.to_string()).unwrap();
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let chosen = chosen(&world).display().to_string();
    assert_eq!(attempt_trees(&events), std::slice::from_ref(&chosen), "the handler's path");
    let read = |event: &str| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(world.home.join(format!("{event}.json"))).unwrap(),
        )
        .unwrap()
    };
    let create = read("create");
    assert_eq!(
        (&create["hook_event_name"], &create["agent_id"]),
        (&json!("WorktreeCreate"), &json!("a1.c1"))
    );
    assert!(create["name"].as_str().unwrap().ends_with("-a1-c1"), "{create}");
    assert_eq!(create["base_commit"].as_str().unwrap().len(), 40, "{create}");
    let remove = read("remove");
    assert_eq!(
        (&remove["hook_event_name"], &remove["worktree_path"]),
        (&json!("WorktreeRemove"), &json!(chosen))
    );
    assert!(!world.home.join("chosen-tree").exists(), "removed with its piece");
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), FIXED);
    only_the_main_worktree(&world);
}

#[test]
fn a_check_the_permission_rules_refuse_fails_and_never_runs() {
    // The check would leave a mark if it ran.
    let settings = "[delegation]\nparallel = 1\nretries = 0\n[verify]\ncommands = [\"touch ran && sh test.sh\"]\n[permissions]\ndeny = [\"Bash(touch ran && sh test.sh)\"]\n";
    let world = World::new("attempts-denied", "", "");
    let delegate = calls(
        "Delegate the fix.",
        vec![call("agent", json!({"brief": FIX, "check": "touch ran && sh test.sh"}))],
    );
    let replies = vec![
        "edit".to_owned(),
        delegate,
        final_turn("Done.", "Nothing to do."),
        final_turn("Delegated.", "It failed."),
    ];
    let model = world.script("replies", &replies, true);
    world.write_settings(&model, settings);
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let check = &of_type(&events, "check")[0];
    assert_eq!((&check["by"], &check["verdict"]), (&json!("command"), &json!("fail")));
    assert!(check["reason"].as_str().unwrap().contains("was refused"), "{check}");
    assert!(check["exit"].is_null(), "it never ran: {check}");
    assert!(!world.repo.join("ran").exists() && worktree_dirs(&world).is_empty());
    assert_eq!(piece_result(&events)["outcome"], "failed");
}

/// The `(role, stop or tool)` of an agent's messages, in order.
fn shape_of<'a>(events: &'a [Value], agent: &str) -> Vec<(&'a str, &'a str)> {
    of_type(events, "message")
        .into_iter()
        .filter(|m| m["agent"] == agent)
        .map(|m| {
            let what = if m["role"] == "tool" { &m["tool"] } else { &m["stop"] };
            (m["role"].as_str().unwrap(), what.as_str().unwrap_or_default())
        })
        .collect()
}

/// Each `check` event's `by` and `verdict`, in order.
fn checks_of(events: &[Value]) -> Vec<(&str, &str)> {
    of_type(events, "check")
        .iter()
        .map(|c| (c["by"].as_str().unwrap(), c["verdict"].as_str().unwrap()))
        .collect()
}

const WHOLE: &str = "[delegation]\nparallel = 1\nretries = 0\nedit_format = \"whole\"\n";

#[test]
fn a_whole_file_reply_is_written_checked_and_lands_when_the_check_passes() {
    let replies = vec![
        "edit".to_owned(),
        delegate(),
        // The whole-file ask, answered in plain text: a fence holding calc.sh fixed.
        format!("Here it is:\n```sh\n{FIXED}```\n"),
        final_turn("Done.", "Fixed add."),
        final_turn("Delegated.", "Fixed add."),
    ];
    let world = World::scripted_with("attempts-whole-lands", &replies, true, WHOLE);
    let test = std::fs::read_to_string(world.repo.join("test.sh")).unwrap();
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let shape = shape_of(&events, "a1.c1");
    // The check, the reads, the write aerix asked for, the check again: all the agent's,
    // logged as opening turns through the tool path; then the member's own final.
    assert_eq!(
        shape,
        [
            ("assistant", "opening"),
            ("tool", "bash"),
            ("assistant", "opening"),
            ("tool", "read"),
            ("tool", "read"),
            ("assistant", "opening"),
            ("tool", "write"),
            ("assistant", "opening"),
            ("tool", "bash"),
            ("assistant", "complete"),
        ],
        "{events:?}"
    );
    let messages: Vec<&Value> =
        of_type(&events, "message").into_iter().filter(|m| m["agent"] == "a1.c1").collect();
    let write: Value = serde_json::from_str(messages[5]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        write["calls"][0],
        json!({"tool": "write", "input": {"path": "calc.sh", "content": FIXED}})
    );
    assert!(messages[8]["text"].as_str().unwrap().contains("ok"), "{}", messages[8]);
    let checks = of_type(&events, "check");
    assert_eq!((&checks[0]["by"], &checks[0]["verdict"]), (&json!("command"), &json!("pass")));
    assert_eq!(of_type(&events, "land")[0]["state"], "landed");
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), FIXED);
    assert_eq!(std::fs::read_to_string(world.repo.join("test.sh")).unwrap(), test);
}

#[test]
fn a_failing_whole_file_never_lands_and_a_test_file_is_never_rewritten() {
    // The first piece names calc.sh: its whole-file write fails the check. The second names
    // only the check's test file: no whole-file ask at all, its member's own turn comes next.
    let brief = "`sh test.sh` fails: make it print ok.";
    let root = calls(
        "Delegate both.",
        vec![
            call("agent", json!({"brief": FIX, "check": TEST})),
            call("agent", json!({"brief": brief, "check": TEST})),
        ],
    );
    let replies = vec![
        "edit".to_owned(),
        root,
        "```sh\nadd() { echo 0; }\n```\n".to_owned(),
        final_turn("Done.", "Tried."),
        final_turn("Done.", "Looked."),
        final_turn("Delegated.", "It failed."),
    ];
    let world = World::scripted_with("attempts-whole-fails", &replies, true, WHOLE);
    let test = std::fs::read_to_string(world.repo.join("test.sh")).unwrap();
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let first = shape_of(&events, "a1.c1");
    assert_eq!(first.iter().filter(|s| **s == ("tool", "write")).count(), 1, "{first:?}");
    let second = shape_of(&events, "a1.c2");
    assert!(!second.contains(&("tool", "write")), "{second:?}");
    assert_eq!(second.iter().filter(|s| s.1 == "opening").count(), 2, "{second:?}");
    let verdicts: Vec<&Value> = of_type(&events, "check").iter().map(|c| &c["verdict"]).collect();
    assert_eq!(verdicts, [&json!("fail"), &json!("fail")]);
    assert!(of_type(&events, "land").iter().all(|l| l["state"] != "landed"));
    assert_eq!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap(), BROKEN);
    assert_eq!(std::fs::read_to_string(world.repo.join("test.sh")).unwrap(), test);
    assert_eq!(world.git(&["status", "--porcelain"]), "");
}
