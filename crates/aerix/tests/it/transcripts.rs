//! The Claude Code transcript a hook reads (`transcript_path`), and `aerix import claude`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, stderr, stdout};

/// A hook command copying the file its input's `transcript_path` names to `to`.
fn copier(world: &World, name: &str, to: &Path) -> String {
    let script = world.home.join(format!("{name}.sh"));
    std::fs::write(
        &script,
        "path=$(sed -n 's/.*\"transcript_path\":\"\\([^\"]*\\)\".*/\\1/p'); cp \"$path\" \"$1\"\n",
    )
    .unwrap();
    format!("sh {} {}", script.display(), to.display())
}

/// The lines of a transcript, each checked for what hooks read: the type, the chain of
/// `parentUuid`, the session, and every `tool_result` after its `tool_use`.
fn transcript(path: &Path, session: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines: Vec<Value> = Vec::new();
    let mut calls = Vec::new();
    for line in text.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        let parent = lines.last().map_or(Value::Null, |l: &Value| l["uuid"].clone());
        assert_eq!(line["parentUuid"], parent, "{line}");
        assert_eq!((&line["sessionId"], &line["isSidechain"]), (&json!(session), &json!(false)));
        for block in line["message"]["content"].as_array().into_iter().flatten() {
            match block["type"].as_str().unwrap() {
                "tool_use" => calls.push(block["id"].clone()),
                "tool_result" => assert!(calls.contains(&block["tool_use_id"]), "{line}"),
                _ => {}
            }
        }
        lines.push(line);
    }
    lines
}

#[test]
fn a_hook_reads_the_session_so_far_from_transcript_path() {
    let replies = vec![
        "answer".to_owned(),
        calls("Look first.", vec![call("bash", json!({"command": "echo hi"}))]),
        final_turn("Seen.", "It says hi."),
    ];
    let world = World::scripted("transcript", &replies, true);
    let (at_prompt, at_end) = (world.home.join("prompt.jsonl"), world.home.join("end.jsonl"));
    let hooks = json!({"hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": copier(&world, "prompt", &at_prompt)}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": copier(&world, "end", &at_end)}]}],
    }});
    let path = world.home.join("config/aerix/hooks.json");
    std::fs::write(&path, hooks.to_string()).unwrap();

    let out = world.aerix(&["-p", "What does echo say?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let session = world.log_path().file_stem().unwrap().to_string_lossy().into_owned();
    // At the prompt: the prompt alone.
    let lines = transcript(&at_prompt, &session);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["message"], json!({"role": "user", "content": "What does echo say?"}));
    // At the end: the prompt, the call as Claude Code's Bash, its result, the answer.
    let lines = transcript(&at_end, &session);
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "assistant", "user", "assistant"]);
    let tool_use = &lines[1]["message"]["content"][1];
    assert_eq!(
        (&tool_use["name"], &tool_use["input"]),
        (&json!("Bash"), &json!({"command": "echo hi"}))
    );
    assert!(lines[2]["toolUseResult"]["stdout"].as_str().unwrap().contains("hi"), "{}", lines[2]);
    assert_eq!(lines[3]["message"]["content"][1], json!({"type": "text", "text": "It says hi."}));
    assert!(lines[3]["message"]["usage"]["output_tokens"].as_u64().unwrap() > 0);
    // The projection is the file the hooks were given.
    assert_eq!(
        std::fs::read(&at_end).unwrap(),
        std::fs::read(world.log_path().with_extension("claude.jsonl")).unwrap()
    );
}

/// Copies a directory's files (recursively).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn claude_code_sessions_are_imported_listed_tagged_and_not_resumed() {
    let world = World::scripted("import", &["answer".to_owned()], true);
    let repo = world.repo.canonicalize().unwrap();
    let dir_name: String = repo
        .display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../aerix-claude/tests/fixtures/claude/projects/-work-app");
    copy_tree(&fixtures, &world.home.join(".claude/projects").join(&dir_name));

    let out = world.aerix(&["import", "claude", "--project", repo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let printed = stdout(&out);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 2, "{printed}");
    assert!(
        lines[0].starts_with("imported ")
            && lines[0].contains(
                "(14 of 23 lines: 2 prompt(s), 2 subagent(s)); skipped: 1 malformed (line 7);"
            ),
        "{printed}"
    );
    assert!(lines[1].starts_with("skipped ") && lines[1].ends_with("no user or assistant message on its main line; 1 malformed (line 2); 1 summary of another session"), "{printed}");
    let id = lines[0].split(" as ").nth(1).unwrap().split(' ').next().unwrap().to_owned();
    assert!(id.starts_with("20260301-100000-"), "{id}");

    let list = stdout(&world.aerix(&["sessions", "list"]));
    assert_eq!(
        list.trim_end(),
        format!("{id}  -           2  [claude-code] Fixing the failing add test")
    );
    // The verbatim copy and the subagent's file are kept beside the converted log.
    let log = world.log_path();
    assert!(log.with_extension("claude.jsonl").is_file());
    assert!(log.with_extension("").join("subagents/agent-def456.jsonl").is_file());

    // Again: nothing is added.
    let out = world.aerix(&["import", "claude", "--project", repo.to_str().unwrap()]);
    assert!(stdout(&out).starts_with("unchanged "), "{}", stdout(&out));
    assert_eq!(stdout(&world.aerix(&["sessions", "list"])).lines().count(), 1);

    // Not resumable, in one line; and `--continue` does not take it.
    let out = world.aerix(&["-p", "go on", "--resume", &id]);
    assert_eq!(out.status.code(), Some(64));
    assert_eq!(
        stderr(&out),
        format!("aerix: session {id} was imported (claude-code) and cannot be resumed\n")
    );
    let out = world.aerix(&["-p", "go on", "--continue"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
}
