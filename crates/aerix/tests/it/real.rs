//! Through the real engine: SmolLM2 routes and takes turns under the turn schema.

use crate::{World, of_type, smollm2, stderr};

#[test]
fn smollm2_routes_takes_parsing_turns_and_a_later_request_resumes_the_stored_prefix() {
    let _engine = crate::engine();
    let world = World::new(
        "smollm2",
        &smollm2().display().to_string(),
        // The root's own turns: no delegation (an edit route's planner would delegate, and its
        // pieces run on SmolLM2 for minutes; the next test delegates), and every call runs (the
        // repeat guard would end a model that repeats a call as `stuck`: not what this tests).
        "[context]\nmax_new_tokens = 400\nrepeat_guard = false\n[delegation]\ndepth = 0\n",
    );
    let out = world.aerix(&["-p", "What does the add function in calc.sh do?", "--max-turns", "2"]);
    let code = out.status.code();
    assert!(matches!(code, Some(0) | Some(2)), "a named outcome: {code:?}\n{}", stderr(&out));
    let events = world.events();
    let route = &of_type(&events, "route")[0];
    assert!(["answer", "edit", "investigate", "plan"].contains(&route["route"].as_str().unwrap()));
    let end = of_type(&events, "agent.end").into_iter().find(|e| e["agent"] == "a1").unwrap();
    assert!(end["turns"].as_u64().unwrap() <= 2);
    // Under the constraint every turn parses: no parse-error notes, no failure.
    assert!(
        of_type(&events, "segment")
            .iter()
            .all(|s| !s["text"].as_str().unwrap_or("").starts_with("[parse error]"))
    );
    assert_ne!(end["outcome"], "failed", "{end}");
    // The pool aerix started decodes a turn's pieces together: `delegation.parallel` (4) with
    // `max_batch` unset, the windows of SmolLM2 fitting this machine's memory.
    let status = std::process::Command::new(crate::caldrix())
        .args(["pool", "status", "--json", "--socket", world.socket.to_str().unwrap()])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let main = status["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["info"]["alias"] == "main")
        .unwrap();
    assert_eq!(main["info"]["max_batch"], 4, "{main}");
    let first_turns: Vec<_> = of_type(&events, "segment")
        .into_iter()
        .filter(|s| s["agent"] == "a1" && s["label"] == "turn" && s["op"] == "append")
        .cloned()
        .collect();
    let last_prompt = first_turns.last().unwrap()["prompt_tokens"].as_u64().unwrap();

    // A second request in the same session: the root's first generation resumes from the rows
    // the first request stored, near the end of that context.
    let out = world.aerix(&["-p", "And what should it do?", "--continue", "--max-turns", "1"]);
    assert!(matches!(out.status.code(), Some(0) | Some(2)), "{}", stderr(&out));
    let events = world.events();
    let turns: Vec<_> = of_type(&events, "segment")
        .into_iter()
        .filter(|s| s["agent"] == "a1" && s["label"] == "turn" && s["op"] == "append")
        .collect();
    let resumed = turns[first_turns.len()];
    let from = resumed["recomputed_from"].as_u64().unwrap();
    let prompt = resumed["prompt_tokens"].as_u64().unwrap();
    eprintln!("first request's last prompt {last_prompt} tokens; resumed at {from} of {prompt}");
    assert!(
        from >= last_prompt,
        "resumed at {from}, the first request's last prompt had {last_prompt} tokens"
    );
    assert!(from <= prompt && from > prompt / 2, "resumed at {from} of {prompt}");
}

/// Delegation on SmolLM2 through the real pool: the root (a scripted member, which calls
/// `agent` for sure) sends two pieces to the SmolLM2 member one after the other; the second
/// implementer's first generation resumes from the system rows the first one stored, and so
/// does any verifier's.
#[test]
fn smollm2_pieces_resume_the_stored_system_prefix() {
    let _engine = crate::engine();
    let brief = |n: u32| {
        crate::call(
            "agent",
            serde_json::json!({"brief": format!("Piece {n}: say what add in calc.sh does."), "check": "it says what add does", "member": "smol"}),
        )
    };
    let replies = vec![
        "edit".to_owned(),
        crate::calls("Two pieces.", vec![brief(1), brief(2)]),
        crate::final_turn("Delegated.", "done"),
    ];
    let world = World::new("smollm2-pieces", "", "");
    let root = world.script("replies", &replies, true);
    world.write_settings(
        &root,
        "[context]\nmax_new_tokens = 200\n[delegation]\nparallel = 1\nmax_turns = 1\n",
    );
    start_scripted_and_smol(&world, &root, 4096);
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let first_usage = |agent: &str| {
        of_type(&events, "message")
            .into_iter()
            // The first generated: an implementer's opening turns are aerix's, not generated.
            .find(|m| m["agent"] == agent && m["role"] == "assistant" && m["stop"] != "opening")
            .map(|m| m["usage"].clone())
    };
    let system_tokens = |agent: &str| {
        of_type(&events, "segment")
            .into_iter()
            .find(|s| s["agent"] == agent && s["id"] == "system")
            .and_then(|s| s["tokens"].as_u64())
            .unwrap()
    };
    let cold = first_usage("a1.c1").unwrap();
    assert!(cold["recomputed_from"].as_u64().unwrap() < 8, "the first piece is cold: {cold}");
    let second = first_usage("a1.c2").unwrap();
    let resumed = second["recomputed_from"].as_u64().unwrap();
    assert!(resumed >= system_tokens("a1.c2"), "resumed at {resumed}: {second}");
    for verifier in ["a1.c1.v1", "a1.c2.v1"] {
        if let Some(usage) = first_usage(verifier) {
            let from = usage["recomputed_from"].as_u64().unwrap();
            assert!(from >= system_tokens(verifier), "{verifier} resumed at {from}");
        }
    }
}

/// SmolLM2 as `tune.member` through the real engine: loaded for the run, asked about the two
/// artifacts a plain session gives evidence for, under the Json constraint, and unloaded after.
/// Whatever it answers, each artifact gets one of the spec's lines and the run ends in a commit
/// or `nothing to revise`.
#[test]
fn smollm2_reflects_as_the_tune_member_and_is_unloaded_after() {
    let _engine = crate::engine();
    let replies = ["answer".to_owned(), crate::final_turn("Done.", "calc.sh subtracts")];
    let smol = smollm2().display().to_string();
    let extra = format!(
        "[context]\nmax_new_tokens = 64\n[tune]\nmember = {smol:?}\n[tune.flags]\nctx = 4096\nthreads = 2\n"
    );
    let world = World::scripted_with("smollm2-tune", &replies, true, &extra);
    let out = world.aerix(&["-p", "What does calc.sh do?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let started = std::time::Instant::now();
    let out = world.aerix(&["tune"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = crate::stdout(&out);
    eprintln!("tune took {:?}:\n{text}{}", started.elapsed(), stderr(&out));
    let lines: Vec<&str> = text.lines().collect();
    for (line, path) in lines.iter().zip(["routing.md", "system.md"]) {
        let ok = [format!("revised {path}: "), format!("kept {path}"), format!("refused {path}: ")];
        assert!(ok.iter().any(|p| line.starts_with(p.as_str())), "{text}");
    }
    assert!(
        lines[2].starts_with("committed ") || lines[2].starts_with("nothing to revise ("),
        "{text}"
    );
    let status = std::process::Command::new(crate::caldrix())
        .args(["pool", "status", "--json", "--socket", world.socket.to_str().unwrap()])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let aliases: Vec<&str> = status["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["info"]["alias"].as_str().unwrap())
        .collect();
    assert_eq!(aliases, ["main"], "the reflection member is unloaded after the run");
}

/// Sampled attempts through the real engine: a piece of two attempts on SmolLM2 (the first
/// greedy, the second sampled at 0.8 with the seed `delegation.seed` makes), run twice from the
/// same start and on the same schedule: each attempt's turn is the same in both runs, and the
/// log holds the sampling.
#[test]
fn smollm2_sampled_attempts_replay_with_the_logged_seed() {
    let _engine = crate::engine();
    let turns = |run: u32, seed: u64| -> (Vec<serde_json::Value>, Vec<String>) {
        let piece = crate::call(
            "agent",
            // A command check: no verifier's turns to wait for.
            serde_json::json!({"brief": "Say what add in calc.sh does.", "check": "true", "member": "smol"}),
        );
        let replies = vec![
            "edit".to_owned(),
            crate::calls("One piece.", vec![piece]),
            crate::final_turn("Delegated.", "done"),
        ];
        let world = World::new(&format!("smollm2-seeds-{run}"), "", "");
        let root = world.script("replies", &replies, true);
        world.write_settings(
            &root,
            &format!(
                "[context]\nmax_new_tokens = 64\n[delegation]\nparallel = 1\nmax_turns = 1\nretries = 0\nattempts = 2\nseed = {seed}\n[verify]\ncommands = [\"true\"]\n"
            ),
        );
        start_scripted_and_smol(&world, &root, 2048);
        // The same schedule in both runs: the second attempt starts once the first has ended,
        // so it resumes the stored brief's rows each time (a prompt computed in another order
        // may differ in its last bits, and a sampled token at a near-tie with it).
        crate::attempts::delay_start(&world, "a1.c1.a2", 8);
        let out = world.aerix(&["-p", "Explain calc.sh."]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let events = world.events();
        let attempts = of_type(&events, "attempt").into_iter().cloned().collect();
        let texts = ["a1.c1.a1", "a1.c1.a2"]
            .iter()
            .map(|agent| {
                of_type(&events, "message")
                    .into_iter()
                    .find(|m| m["agent"] == *agent && m["role"] == "assistant")
                    .map(|m| m["text"].as_str().unwrap().to_owned())
                    .unwrap_or_else(|| panic!("no turn of {agent}"))
            })
            .collect();
        (attempts, texts)
    };
    let (attempts, first) = turns(1, 7);
    assert!(attempts[0]["seed"].is_null() && attempts[0]["temperature"].is_null());
    assert_eq!(attempts[1]["temperature"], 0.8);
    assert_eq!(attempts[1]["request_seed"], 7);
    let (again, second) = turns(2, 7);
    assert_eq!(again[1]["seed"], attempts[1]["seed"], "the same seed from the same request seed");
    assert_eq!(first, second, "each attempt's turn replays");
}

/// The whole-file turn through the real engine: a piece on SmolLM2 with `edit_format =
/// "whole"` is asked for calc.sh in a code fence after its opening; whatever it writes, the
/// run ends and the tree is untouched or passes its test, never left failing.
#[test]
fn smollm2_whole_file_turn_runs_and_leaves_the_tree_untouched_or_passing() {
    let _engine = crate::engine();
    let piece = crate::call(
        "agent",
        serde_json::json!({"brief": "sh test.sh fails. Fix add in calc.sh.", "check": "sh test.sh", "member": "smol"}),
    );
    let replies = vec![
        "edit".to_owned(),
        crate::calls("One piece.", vec![piece]),
        crate::final_turn("Delegated.", "done"),
    ];
    let world = World::new("smollm2-whole", "", "");
    let root = world.script("replies", &replies, true);
    world.write_settings(
        &root,
        "[context]\nmax_new_tokens = 64\n[delegation]\nparallel = 1\nmax_turns = 1\nretries = 0\nattempts = 1\nedit_format = \"whole\"\n",
    );
    start_scripted_and_smol(&world, &root, 2048);
    let before = std::fs::read_to_string(world.repo.join("calc.sh")).unwrap();
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let opening = of_type(&events, "message")
        .into_iter()
        .filter(|m| m["agent"] == "a1.c1" && m["stop"] == "opening")
        .count();
    // The check and the reads, then the write and the check again when the reply held a file.
    assert!(opening == 2 || opening == 4, "{opening} opening turns");
    let end = of_type(&events, "agent.end").into_iter().find(|e| e["agent"] == "a1.c1");
    assert!(end.is_some(), "{events:?}");
    let after = std::fs::read_to_string(world.repo.join("calc.sh")).unwrap();
    let passes = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&world.repo)
        .status()
        .unwrap()
        .success();
    assert!(after == before || passes, "a failing change was left: {after}");
    let landed = of_type(&events, "land").iter().any(|l| l["state"] == "landed");
    assert_eq!(after != before, landed, "only a landed change is in the tree");
}

/// Starts the world's pool with the scripted `root` member and SmolLM2 as `smol` (a window of
/// `ctx` tokens), both on two threads.
fn start_scripted_and_smol(world: &World, root: &str, ctx: u32) {
    let (smol, socket, ctx) =
        (smollm2().display().to_string(), world.socket.display().to_string(), ctx.to_string());
    let args: Vec<String> = [
        "pool",
        "--socket",
        &socket,
        "--context-budget",
        "64M",
        "--load",
        root,
        "--threads",
        "2",
        "--load",
        &smol,
        "--alias",
        "smol",
        "--ctx",
        &ctx,
        "--threads",
        "2",
    ]
    .map(String::from)
    .to_vec();
    world.start_pool(&args);
}
