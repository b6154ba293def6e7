//! Session hooks end to end: `SessionStart`, `UserPromptSubmit` and `SessionEnd` handlers
//! (small shell scripts) around a scripted request.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{World, final_turn, of_type, stderr, stdout};

/// A handler script in the world's home, and the command that runs it with `args`.
fn script(world: &World, name: &str, body: &str, args: &[&Path]) -> String {
    let path = world.home.join("hooks").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, body).unwrap();
    let mut command = format!("sh {}", path.display());
    for arg in args {
        command.push_str(&format!(" {}", arg.display()));
    }
    command
}

/// Writes its input to `$1` and `CLAUDE_PROJECT_DIR` to `$1.dir`.
const RECORD: &str = "cat > \"$1\"; printf '%s' \"$CLAUDE_PROJECT_DIR\" > \"$1.dir\"\n";

fn handler(command: &str) -> Value {
    json!({"type": "command", "command": command, "timeout": 30})
}

fn group(matcher: Option<&str>, handlers: Vec<Value>) -> Value {
    match matcher {
        Some(m) => json!({"matcher": m, "hooks": handlers}),
        None => json!({"hooks": handlers}),
    }
}

fn write_hooks(path: &Path, hooks: Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(&json!({"hooks": hooks})).unwrap()).unwrap();
}

fn user_hooks(world: &World) -> PathBuf {
    world.home.join("config/aerix/hooks.json")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The root's segment with this id, as its last `segment` event left it.
fn segment<'a>(events: &'a [Value], id: &str) -> Option<&'a Value> {
    of_type(events, "segment").into_iter().rfind(|s| s["agent"] == "a1" && s["id"] == id)
}

#[test]
fn session_start_context_is_pinned_prompt_context_appended_and_a_slow_hook_killed() {
    let replies = vec![
        "answer".to_owned(),
        final_turn("Answer.", "first answer"),
        "answer".to_owned(),
        final_turn("Answer.", "second answer"),
    ];
    let world = World::scripted("hooks", &replies, true);
    let out_dir = world.home.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let (start, prompt, end) =
        (out_dir.join("start.json"), out_dir.join("prompt.json"), out_dir.join("end.json"));
    let context = script(
        &world,
        "context.sh",
        r#"printf '%s' '{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"Remember the blue door."}}'"#,
        &[],
    );
    let resumed = script(&world, "resumed.sh", "echo 'Welcome back.'\n", &[]);
    let slow = script(&world, "slow.sh", "sleep 30\n", &[]);
    let plain = script(&world, "plain.sh", "echo 'The user prefers short answers.'\n", &[]);
    let record = |name: &str, path: &Path| script(&world, name, RECORD, &[path]);
    let mut slow_handler = handler(&slow);
    slow_handler["timeout"] = json!(1);
    write_hooks(
        &user_hooks(&world),
        json!({
            "SessionStart": [
                group(Some("startup"), vec![handler(&context), slow_handler]),
                group(Some("resume"), vec![handler(&resumed)]),
                group(None, vec![handler(&record("start.sh", &start))]),
            ],
            "UserPromptSubmit": [group(None, vec![handler(&plain), handler(&record("prompt.sh", &prompt))])],
            "SessionEnd": [group(Some("other"), vec![handler(&record("end.sh", &end))])],
        }),
    );

    let out = world.aerix(&["-p", "What is here?"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{err}", stdout(&out));
    assert!(stdout(&out).starts_with("first answer"), "{}", stdout(&out));
    // The slow hook was ended at its timeout, in one line, and the run went on.
    let timeout_notes: Vec<&str> = err.lines().filter(|l| l.contains("timed out")).collect();
    assert_eq!(
        timeout_notes,
        [format!("hooks: SessionStart hook `{slow}` timed out after 1s: sent TERM")],
        "{err}"
    );

    let events = world.events();
    // SessionStart's context is a pinned `# Hook context` segment of a1, before the prompt.
    let ids: Vec<&str> = of_type(&events, "segment")
        .iter()
        .filter(|s| s["agent"] == "a1")
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(&ids[..3], ["system", "hooks", "p1"], "{ids:?}");
    let hooks = segment(&events, "hooks").unwrap();
    assert_eq!(
        (&hooks["label"], &hooks["pinned"], &hooks["role"]),
        (&json!("hook"), &json!(true), &json!("user"))
    );
    assert_eq!(hooks["text"], "# Hook context\n\nRemember the blue door.");
    assert!(hooks["tokens"].as_u64().unwrap() > 0);
    // UserPromptSubmit's plain stdout is appended to the prompt; routing saw the prompt alone.
    assert_eq!(
        segment(&events, "p1").unwrap()["text"],
        "What is here?\n\n# Hook context\n\nThe user prefers short answers."
    );

    // Each run is a `hook` event.
    let runs: Vec<(String, String, bool)> = of_type(&events, "hook")
        .iter()
        .map(|h| {
            let command = h["command"].as_str().unwrap();
            let name = Path::new(command.split(' ').nth(1).unwrap()).file_name().unwrap();
            (
                format!("{} {}", h["event"].as_str().unwrap(), name.to_str().unwrap()),
                h["ending"].as_str().unwrap().to_owned(),
                h["blocked"].as_bool().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("SessionStart context.sh", "exit 0"),
        ("SessionStart slow.sh", "timeout after 1s"),
        ("SessionStart start.sh", "exit 0"),
        ("UserPromptSubmit plain.sh", "exit 0"),
        ("UserPromptSubmit prompt.sh", "exit 0"),
        ("SessionEnd end.sh", "exit 0"),
    ];
    let expected: Vec<(String, String, bool)> =
        expected.iter().map(|(a, b)| (a.to_string(), b.to_string(), false)).collect();
    assert_eq!(runs, expected);
    let slow_run = of_type(&events, "hook").into_iter().find(|h| h["command"] == slow).unwrap();
    let ms = slow_run["duration_ms"].as_u64().unwrap();
    assert!((1000..4000).contains(&ms), "{slow_run}");
    assert_eq!(slow_run.get("exit_code"), None);
    // SessionEnd fires after `session.end`.
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(&kinds[kinds.len() - 2..], ["session.end", "hook"]);

    // What the handlers read on stdin, and their environment.
    let session = of_type(&events, "session.start")[0]["session"].as_str().unwrap().to_owned();
    let transcript = world.log_path().with_extension("claude.jsonl");
    let input = read_json(&start);
    assert_eq!(input["session_id"], session.as_str());
    assert_eq!(input["transcript_path"], transcript.display().to_string());
    assert_eq!(input["cwd"], world.repo.display().to_string());
    assert_eq!(
        (&input["hook_event_name"], &input["source"]),
        (&json!("SessionStart"), &json!("startup"))
    );
    let project_dir = std::fs::read_to_string(start.with_extension("json.dir")).unwrap();
    assert_eq!(project_dir, world.repo.display().to_string());
    let input = read_json(&prompt);
    assert_eq!(
        (&input["hook_event_name"], &input["prompt"]),
        (&json!("UserPromptSubmit"), &json!("What is here?"))
    );
    assert_eq!(input["session_id"], session.as_str());
    let input = read_json(&end);
    assert_eq!(
        (&input["hook_event_name"], &input["reason"]),
        (&json!("SessionEnd"), &json!("other"))
    );

    // Resumed: source `resume`, and the hook context replaced in place.
    let out = world.aerix(&["-p", "And now?", "--continue"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read_json(&start)["source"], "resume");
    let events = world.events();
    let replaced = of_type(&events, "segment").into_iter().rfind(|s| s["id"] == "hooks").unwrap();
    assert_eq!(
        (&replaced["op"], &replaced["text"]),
        (&json!("replace"), &json!("# Hook context\n\nWelcome back."))
    );
    assert_eq!(of_type(&events, "hook").iter().filter(|h| h["command"] == slow).count(), 1);
}

#[test]
fn a_blocked_prompt_or_continue_false_ends_the_run_with_status_3() {
    let world =
        World::scripted("hooks-block", &["answer".to_owned(), final_turn("A.", "no")], true);
    let ended = world.home.join("ended.json");
    let block = script(
        &world,
        "block.sh",
        "cat > /dev/null; echo 'No secrets in prompts.' >&2; exit 2\n",
        &[],
    );
    let record = script(&world, "end.sh", RECORD, &[&ended]);
    write_hooks(
        &world.repo.join(".aerix/hooks.json"),
        json!({
            "UserPromptSubmit": [group(None, vec![handler(&block)])],
            "SessionEnd": [group(None, vec![handler(&record)])],
        }),
    );
    world.trust();
    let out = world.aerix(&["-p", "My password is hunter2."]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "aerix: the prompt was blocked by a UserPromptSubmit hook (`{block}`): No secrets in prompts."
        )),
        "{err}"
    );
    assert_eq!(stdout(&out), "");
    let events = world.events();
    assert!(of_type(&events, "route").is_empty() && of_type(&events, "segment").is_empty());
    let hooks = of_type(&events, "hook");
    assert_eq!(
        (&hooks[0]["event"], &hooks[0]["exit_code"], &hooks[0]["blocked"]),
        (&json!("UserPromptSubmit"), &json!(2), &json!(true))
    );
    let end = &of_type(&events, "session.end")[0];
    assert_eq!((&end["outcome"], &end["exit_code"]), (&json!("killed"), &json!(3)));
    // SessionEnd still fires.
    assert_eq!(read_json(&ended)["reason"], "other");
    assert_eq!(hooks[1]["event"], "SessionEnd");

    // `continue: false` from SessionStart ends the run before the prompt is submitted.
    let stop = script(
        &world,
        "stop.sh",
        r#"echo '{"continue": false, "stopReason": "Maintenance window."}'"#,
        &[],
    );
    write_hooks(
        &world.repo.join(".aerix/hooks.json"),
        json!({
            "SessionStart": [group(None, vec![handler(&stop)])],
            "UserPromptSubmit": [group(None, vec![handler(&block)])],
        }),
    );
    world.trust();
    let out = world.aerix(&["-p", "Anything."]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "aerix: a SessionStart hook (`{stop}`) ended the run: Maintenance window."
        )),
        "{err}"
    );
    let events = world.events();
    let last = of_type(&events, "hook").into_iter().next_back().unwrap();
    assert_eq!((&last["command"], &last["blocked"]), (&json!(stop), &json!(true)));
}

#[test]
fn a_broken_hooks_file_is_a_note_and_the_other_files_still_run() {
    let replies = vec!["answer".to_owned(), final_turn("A.", "done")];
    let world = World::scripted("hooks-broken", &replies, true);
    std::fs::create_dir_all(world.home.join("config/aerix")).unwrap();
    std::fs::write(user_hooks(&world), "{\"hooks\": {\"SessionStart\": [\n").unwrap();
    let local = world.repo.join(".aerix/hooks.local.json");
    write_hooks(&local, json!({"SessionEnd": [{"matcher": "(", "hooks": [handler("true")]}]}));
    let context = script(&world, "context.sh", "echo 'Project context.'\n", &[]);
    write_hooks(
        &world.repo.join(".aerix/hooks.json"),
        json!({
            "SessionStart": [group(None, vec![handler(&context)])],
            "UserPromptSubmit": [group(None, vec![handler("no-such-hook-command-aerix")])],
        }),
    );
    world.trust();
    let out = world.aerix(&["-p", "Hello."]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let user = user_hooks(&world);
    let broken: Vec<&str> = err.lines().filter(|l| l.contains("its hooks are not run")).collect();
    assert_eq!(broken.len(), 2, "{err}");
    assert!(
        broken[0]
            .starts_with(&format!("hooks: {}: not valid JSON: EOF while parsing", user.display())),
        "{err}"
    );
    assert!(
        broken[1].starts_with(&format!(
            "hooks: {}: `hooks.SessionEnd[0].matcher`: `(` is not a valid regular expression",
            local.display()
        )),
        "{err}"
    );
    // A missing command is a one-line note naming the hook, and the prompt goes on.
    assert!(
        err.lines().any(|l| l.starts_with(
            "hooks: UserPromptSubmit hook `no-such-hook-command-aerix` exited 127, command not found"
        )),
        "{err}"
    );
    let events = world.events();
    assert_eq!(segment(&events, "hooks").unwrap()["text"], "# Hook context\n\nProject context.");
    assert_eq!(segment(&events, "p1").unwrap()["text"], "Hello.");
}

/// `ai-memory install aerix`, then a session: the cross-project profile's digest reaches a1 as
/// its pinned hook context (the real `ai-memory` binary, no server: its data directory).
#[test]
fn ai_memorys_profile_digest_reaches_aerix_through_its_session_start_hook() {
    let replies = vec!["answer".to_owned(), final_turn("Answer.", "done")];
    let world = World::scripted("ai-memory", &replies, true);
    let bin = world.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(crate::workspace_binary("ai-memory"), bin.join("ai-memory"))
        .unwrap();
    let ai_memory = |args: &[&str]| {
        let out = std::process::Command::new(bin.join("ai-memory"))
            .args(args)
            .current_dir(&world.repo)
            .env("HOME", &world.home)
            .env("XDG_CONFIG_HOME", world.home.join("config"))
            .env("XDG_DATA_HOME", world.home.join("data"))
            // No server answers here: the hook writes to the data directory.
            .env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9")
            .output()
            .unwrap();
        assert!(out.status.success(), "ai-memory {args:?}: {}", stderr(&out));
    };
    ai_memory(&["install", "aerix"]);
    ai_memory(&[
        "write-page",
        "--scope",
        "profile",
        "--path",
        "tools/pnpm.md",
        "--body",
        "# Pnpm\n\nUse pnpm, not npm.\n",
    ]);
    let hooks = read_json(&user_hooks(&world));
    assert!(hooks["hooks"]["SessionStart"].is_array(), "{hooks}");

    // The hook finds no server on its default address either, and uses the data directory.
    let out = world.aerix(&["-p", "What is here?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let hook = segment(&events, "hooks").expect("a hook context segment");
    let text = hook["text"].as_str().unwrap();
    assert!(text.starts_with("# Hook context\n\n<ai-memory-profile>"), "{text}");
    assert!(text.contains("- Use pnpm, not npm. (`profile/tools/pnpm.md`)"), "{text}");
    assert_eq!(hook["pinned"], json!(true));
}
