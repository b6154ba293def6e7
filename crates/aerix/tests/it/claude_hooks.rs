//! Hooks written the way Claude Code documents them, in bash and Python, in Claude Code's own
//! settings files (`~/.claude/settings.json`, `.claude/settings.json`, a broken
//! `.claude/settings.local.json`), around scripted requests: guards on `Bash` and `Edit|Write`,
//! an input rewriter, a context loader, a prompt blocker, a PostToolUse hook, a Stop hook that
//! continues, and a recorder whose inputs are checked field by field against the contract.
//!
//! `bash_command_validator.py` is written here in the style of Claude Code's published example
//! (`examples/hooks/bash_command_validator_example.py` in its public repository, whose license
//! does not allow a copy): the same settings block, input handling and exit-2 contract.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, of_type, stderr, stdout};

/// The recorder: each input a file under `$HOME/rec`, named by the time, so they sort in
/// firing order.
const RECORD: &str = r#"#!/bin/bash
mkdir -p "$HOME/rec"
cat > "$HOME/rec/$(date +%s%N).json"
"#;

const CONTEXT: &str = r#"#!/bin/bash
# SessionStart: load project context for the model.
cat << 'EOF'
{
  "hookSpecificOutput": {
    "hookEventName": "SessionStart",
    "additionalContext": "Tests run with sh test.sh."
  }
}
EOF
exit 0
"#;

const NO_RM: &str = r#"#!/bin/bash
# PreToolUse on Bash: no recursive deletes.
input=$(cat)
command=$(printf '%s' "$input" | jq -r '.tool_input.command // empty')
case "$command" in
  "rm -rf"*) echo "Blocked: rm -rf is not allowed here" >&2; exit 2 ;;
esac
exit 0
"#;

const VALIDATOR: &str = r#"#!/usr/bin/env python3
"""PreToolUse hook for Bash: suggest better commands.

{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
  "command": "python3 /path/to/bash_command_validator.py"}]}]}}
"""
import json
import re
import sys

RULES = [
    (r"^grep\b(?!.*\|)", "Use 'rg' (ripgrep) instead of 'grep'"),
    (r"^find\s+\S+\s+-name\b", "Use 'rg --files -g pattern' instead of 'find -name'"),
]


def main():
    try:
        data = json.load(sys.stdin)
    except json.JSONDecodeError as e:
        print(f"Error: invalid JSON input: {e}", file=sys.stderr)
        sys.exit(1)
    if data.get("tool_name", "") != "Bash":
        sys.exit(0)
    command = data.get("tool_input", {}).get("command", "")
    problems = [message for pattern, message in RULES if re.search(pattern, command)]
    if problems:
        for message in problems:
            print(f"• {message}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
"#;

const PROTECT: &str = r#"#!/usr/bin/env python3
# PreToolUse on Edit|Write: protected files are never written.
import json
import os
import sys

data = json.load(sys.stdin)
path = data.get("tool_input", {}).get("file_path", "")
if os.path.basename(path) == ".env" or "/.git/" in path:
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": f"{os.path.basename(path)} is a protected file",
    }}))
sys.exit(0)
"#;

const REWRITE: &str = r#"#!/usr/bin/env python3
# PreToolUse on bash (aerix's name): rewrite some commands.
import json
import sys

data = json.load(sys.stdin)
command = data["tool_input"].get("command", "")
updated = None
if command == "echo one":
    updated = {"command": "echo rewritten", "description": "say it differently"}
elif command == "echo long":
    updated = {"command": "echo long", "timeout": 900000}
if updated is not None:
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": updated,
    }}))
"#;

const AFTER_EDIT: &str = r#"#!/usr/bin/env python3
# PostToolUse on Edit|Write: tell the model what happened, and what to do next.
import json
import os
import sys

data = json.load(sys.stdin)
name = os.path.basename(data["tool_input"]["file_path"])
print(json.dumps({
    "decision": "block",
    "reason": "Remember to run sh test.sh.",
    "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": f"Formatted {name}."},
}))
"#;

const PROMPT_GUARD: &str = r#"#!/usr/bin/env python3
import json
import sys

data = json.load(sys.stdin)
if "password" in data.get("prompt", "").lower():
    print(json.dumps({"decision": "block", "reason": "Prompts must not contain passwords."}))
sys.exit(0)
"#;

/// Continues the agent twice (JSON `decision: block`), or always when `$HOME/always` exists
/// (exit 2).
const STOP: &str = r#"#!/bin/bash
cat > /dev/null
if [ -f "$HOME/always" ]; then
  echo "Keep going." >&2
  exit 2
fi
n=$(cat "$HOME/stops" 2>/dev/null || echo 0)
if [ "$n" -lt 2 ]; then
  echo $((n + 1)) > "$HOME/stops"
  echo '{"decision": "block", "reason": "Run sh test.sh before you stop."}'
fi
exit 0
"#;

fn hook(command: &str) -> Value {
    json!({"type": "command", "command": command})
}

/// A script under `<repo>/.claude/hooks`, executable; its command as Claude Code's docs write
/// it (`"$CLAUDE_PROJECT_DIR"/.claude/hooks/NAME`, Python ones run with `python3`).
fn script(world: &World, name: &str, body: &str) -> String {
    let path = world.repo.join(".claude/hooks").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, body).unwrap();
    let mut mode = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&path, mode).unwrap();
    let command = format!("\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/{name}");
    if name.ends_with(".py") { format!("python3 {command}") } else { command }
}

/// The recorded inputs, in firing order.
fn recorded(world: &World) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(world.home.join("rec"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

fn of_event<'a>(inputs: &'a [Value], event: &str) -> Vec<&'a Value> {
    inputs.iter().filter(|i| i["hook_event_name"] == event).collect()
}

/// The root's tool result of call `id` in the latest session.
fn result<'a>(events: &'a [Value], id: &str) -> &'a Value {
    of_type(events, "message")
        .into_iter()
        .find(|m| m["agent"] == "a1" && m["role"] == "tool" && m["call"] == id)
        .unwrap_or_else(|| panic!("no result of {id}"))
}

fn text<'a>(events: &'a [Value], id: &str) -> &'a str {
    result(events, id)["text"].as_str().unwrap()
}

fn write_json(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

#[test]
fn claude_code_hooks_in_claude_codes_settings_files_guard_and_extend_aerix() {
    let tool_turn = calls(
        "Clean up, look, and fix.",
        vec![
            call("bash", json!({"command": "rm -rf build"})),
            call("bash", json!({"command": "grep -r add ."})),
            call("write", json!({"path": ".env", "content": "SECRET=1\n"})),
            call("bash", json!({"command": "echo one"})),
            call("bash", json!({"command": "echo long", "timeout_secs": 5})),
            call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"})),
            call("read", json!({"path": "missing.txt"})),
        ],
    );
    let mut replies = vec![
        "answer".to_owned(),
        tool_turn,
        final_turn("Done.", "first stop"),
        final_turn("Done.", "second stop"),
        final_turn("Done.", "All done."),
    ];
    // The third run: a Stop hook that always blocks continues the root 5 times, no more.
    replies.push("answer".to_owned());
    replies.extend((1..=6).map(|n| final_turn("Stop?", &format!("final {n}"))));
    // The fourth: Claude Code's settings switched off.
    replies.extend(["answer".to_owned(), final_turn("A.", "plain")]);
    let world = World::scripted("claude-hooks", &replies, true);
    world.write("CLAUDE.md", "Keep changes small.\n");

    let record = script(&world, "record.sh", RECORD);
    let project = json!({
        // Other keys of Claude Code's settings are ignored.
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {
            "SessionStart": [{"matcher": "startup", "hooks": [hook(&script(&world, "context.sh", CONTEXT)), hook(&record)]}],
            "InstructionsLoaded": [{"hooks": [hook(&record)]}],
            "UserPromptSubmit": [{"hooks": [hook(&script(&world, "prompt_guard.py", PROMPT_GUARD)), hook(&record)]}],
            "RouteDecision": [{"hooks": [hook(&record)]}],
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [
                    hook(&script(&world, "no-rm.sh", NO_RM)),
                    hook(&script(&world, "bash_command_validator.py", VALIDATOR)),
                ]},
                {"matcher": "Edit|Write", "hooks": [hook(&script(&world, "protect_files.py", PROTECT))]},
                {"matcher": "bash", "hooks": [hook(&script(&world, "rewrite.py", REWRITE))]},
                {"matcher": "*", "hooks": [hook(&record)]},
            ],
            "PostToolUse": [
                {"matcher": "Edit|Write", "hooks": [hook(&script(&world, "after_edit.py", AFTER_EDIT))]},
                {"hooks": [hook(&record)]},
            ],
            "PostToolUseFailure": [{"hooks": [hook(&record)]}],
            "Stop": [{"hooks": [hook(&script(&world, "stop.sh", STOP)), hook(&record)]}],
        }
    });
    write_json(&world.repo.join(".claude/settings.json"), &project);
    let user_settings = world.home.join(".claude/settings.json");
    write_json(
        &user_settings,
        &json!({"model": "opus", "hooks": {
            "SessionEnd": [{"hooks": [hook(&record)]}],
            "Notification": [{"matcher": "startup_note", "hooks": [hook(&record)]}],
            "PermissionRequest": [{"hooks": [hook("true")]}],
            "TeammateIdle": [{"hooks": [hook("true")]}],
        }}),
    );
    let local = world.repo.join(".claude/settings.local.json");
    std::fs::write(&local, "{\"hooks\": {\"Stop\": [").unwrap();

    world.trust();
    let out = world.aerix(&["-p", "Fix calc.sh."]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{err}", stdout(&out));
    assert!(stdout(&out).starts_with("All done."), "{}", stdout(&out));
    // The broken file is one line naming it; the never-fired events one line for all files.
    let broken = format!("hooks: {}: not valid JSON", local.display());
    assert_eq!(err.lines().filter(|l| l.starts_with(&broken)).count(), 1, "{err}");
    let never = format!(
        "hooks: aerix never fires PermissionRequest, TeammateIdle (in {}); those hooks are not run",
        user_settings.display()
    );
    assert_eq!(err.lines().filter(|l| *l == never).count(), 1, "{err}");
    let loaded = format!(
        "loaded: instructions {}; hooks {}, {}",
        world.repo.join("CLAUDE.md").display(),
        user_settings.display(),
        world.repo.join(".claude/settings.json").display()
    );
    assert_eq!(err.lines().filter(|l| *l == loaded).count(), 1, "{err}");

    let events = world.events();
    // The guards: exit 2 on Bash (stderr to the model), the validator, a JSON deny on Write.
    assert_eq!(text(&events, "c1"), "refused: Blocked: rm -rf is not allowed here");
    assert_eq!(text(&events, "c2"), "refused: • Use 'rg' (ripgrep) instead of 'grep'");
    assert_eq!(text(&events, "c3"), "refused: .env is a protected file");
    assert!(!world.repo.join(".env").exists());
    assert_eq!(result(&events, "c3")["error"], true);
    // The rewriter (matched by aerix's name `bash`): the call ran with the new input.
    assert_eq!(result(&events, "c4")["input"], json!({"command": "echo rewritten"}));
    assert_eq!(text(&events, "c4"), "rewritten\n[exit 0]");
    // A mapped-back input aerix's schema refuses: the call is refused, saying why.
    assert_eq!(
        text(&events, "c5"),
        "refused: a PreToolUse hook's updatedInput for Bash cannot be used: `timeout_secs` must be at most 600"
    );
    // PostToolUse: the context and the block's reason follow the result, for the model.
    let edit = text(&events, "c6");
    assert!(
        edit.ends_with(
            "\n\n[hook context] Formatted calc.sh.\n\n[PostToolUse hook] Remember to run sh test.sh."
        ),
        "{edit}"
    );
    assert!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap().contains("$1 + $2"));
    assert!(text(&events, "c7").starts_with("error: "), "{}", text(&events, "c7"));
    // Stop continued the root twice, its reason the next instruction.
    let notes: Vec<&str> = of_type(&events, "segment")
        .into_iter()
        .filter(|s| s["agent"] == "a1" && s["label"] == "note")
        .filter_map(|s| s["text"].as_str())
        .collect();
    assert_eq!(notes, ["[Stop hook] Run sh test.sh before you stop."; 2]);
    // SessionStart's additionalContext is the root's hook context.
    let hooks = of_type(&events, "segment").into_iter().rfind(|s| s["id"] == "hooks").unwrap();
    assert_eq!(hooks["text"], "# Hook context\n\nTests run with sh test.sh.");

    // What the hooks were given, field by field.
    let inputs = recorded(&world);
    let session = of_type(&events, "session.start")[0]["session"].as_str().unwrap().to_owned();
    let transcript = world.log_path().with_extension("claude.jsonl").display().to_string();
    let cwd = world.repo.display().to_string();
    for input in &inputs {
        assert_eq!(input["session_id"], session.as_str(), "{input}");
        assert_eq!(input["transcript_path"], transcript.as_str(), "{input}");
        assert_eq!(input["cwd"], cwd.as_str(), "{input}");
        // The session's mode: a headless run with no flag and no defaultMode is `default`.
        assert_eq!(input["permission_mode"], "default", "{input}");
        // The root is no subagent.
        assert!(input.get("agent_id").is_none() && input.get("agent_type").is_none(), "{input}");
    }
    let names: Vec<&str> = inputs.iter().map(|i| i["hook_event_name"].as_str().unwrap()).collect();
    let first = |name: &str| names.iter().position(|n| *n == name).unwrap();
    assert!(first("SessionStart") < first("InstructionsLoaded"), "{names:?}");
    assert!(first("InstructionsLoaded") < first("Notification"), "{names:?}");
    assert!(first("Notification") < first("UserPromptSubmit"), "{names:?}");
    assert!(first("UserPromptSubmit") < first("RouteDecision"), "{names:?}");
    assert!(first("RouteDecision") < first("PreToolUse"), "{names:?}");
    assert_eq!(names.last(), Some(&"SessionEnd"), "{names:?}");
    assert_eq!(of_event(&inputs, "SessionStart")[0]["source"], "startup");
    let instructions = of_event(&inputs, "InstructionsLoaded");
    assert_eq!(instructions.len(), 1);
    assert_eq!(
        (
            &instructions[0]["file_path"],
            &instructions[0]["memory_type"],
            &instructions[0]["load_reason"]
        ),
        (
            &json!(world.repo.join("CLAUDE.md").display().to_string()),
            &json!("Project"),
            &json!("session_start")
        )
    );
    // Each startup note is a Notification (the matcher takes `startup_note`).
    let notifications = of_event(&inputs, "Notification");
    assert!(notifications.iter().any(|n| n["message"].as_str().unwrap().starts_with(&broken)));
    assert!(notifications.iter().any(|n| n["message"] == never.as_str()));
    for n in &notifications {
        assert_eq!(
            (&n["title"], &n["notification_type"]),
            (&json!("aerix"), &json!("startup_note"))
        );
    }
    assert_eq!(of_event(&inputs, "UserPromptSubmit")[0]["prompt"], "Fix calc.sh.");
    let route = of_event(&inputs, "RouteDecision")[0];
    assert_eq!(route["route"], "answer");
    assert!(route["scores"].is_object(), "{route}");

    let pre = of_event(&inputs, "PreToolUse");
    let pre_of = |id: &str| {
        *pre.iter().find(|p| p["tool_use_id"] == id).unwrap_or_else(|| panic!("no {id}: {pre:?}"))
    };
    assert_eq!(pre.len(), 7, "every call goes through PreToolUse");
    assert_eq!(
        (&pre_of("a1.c1")["tool_name"], &pre_of("a1.c1")["tool_input"]),
        (&json!("Bash"), &json!({"command": "rm -rf build"}))
    );
    assert_eq!(
        pre_of("a1.c3")["tool_input"],
        json!({"file_path": world.repo.join(".env").display().to_string(), "content": "SECRET=1\n"})
    );
    assert_eq!(pre_of("a1.c5")["tool_input"], json!({"command": "echo long", "timeout": 5000}));
    assert_eq!(
        (&pre_of("a1.c6")["tool_name"], &pre_of("a1.c6")["tool_input"]),
        (
            &json!("Edit"),
            &json!({"file_path": world.repo.join("calc.sh").display().to_string(),
                "old_string": "$1 - $2", "new_string": "$1 + $2", "replace_all": false})
        )
    );
    assert_eq!(
        (&pre_of("a1.c7")["tool_name"], &pre_of("a1.c7")["tool_input"]),
        (
            &json!("Read"),
            &json!({"file_path": world.repo.join("missing.txt").display().to_string()})
        )
    );
    // PostToolUse for the calls that ran and succeeded, PostToolUseFailure for the one that
    // failed; a refused call is neither.
    let post = of_event(&inputs, "PostToolUse");
    let ids: Vec<&str> = post.iter().map(|p| p["tool_use_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a1.c4", "a1.c6"]);
    assert_eq!(post[0]["tool_input"], json!({"command": "echo rewritten"}));
    assert_eq!(
        post[0]["tool_response"],
        json!({"stdout": "rewritten", "stderr": "", "interrupted": false, "isImage": false})
    );
    assert_eq!(
        post[1]["tool_response"]["filePath"],
        world.repo.join("calc.sh").display().to_string()
    );
    assert_eq!(
        (&post[1]["tool_response"]["oldString"], &post[1]["tool_response"]["newString"]),
        (&json!("$1 - $2"), &json!("$1 + $2"))
    );
    let failed = of_event(&inputs, "PostToolUseFailure");
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (&failed[0]["tool_name"], &failed[0]["tool_use_id"]),
        (&json!("Read"), &json!("a1.c7"))
    );
    assert!(failed[0]["error"].as_str().unwrap().contains("missing.txt"), "{}", failed[0]);
    assert_eq!(failed[0]["is_interrupt"], false);
    let stops: Vec<(&Value, &Value)> = of_event(&inputs, "Stop")
        .iter()
        .map(|s| (&s["stop_hook_active"], &s["last_assistant_message"]))
        .collect();
    assert_eq!(
        stops,
        [
            (&json!(false), &json!("first stop")),
            (&json!(true), &json!("second stop")),
            (&json!(true), &json!("All done."))
        ]
    );
    assert_eq!(of_event(&inputs, "SessionEnd")[0]["reason"], "other");

    // A UserPromptSubmit block ends the request before routing, its reason on stderr.
    let out = world.aerix(&["-p", "My password is hunter2."]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("): Prompts must not contain passwords."), "{}", stderr(&out));

    // A Stop hook that always blocks: 5 continues, then the agent ends.
    std::fs::write(world.home.join("always"), "").unwrap();
    std::fs::remove_dir_all(world.home.join("rec")).unwrap();
    let out = world.aerix(&["-p", "Stop when you can."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("final 6"), "{}", stdout(&out));
    let events = world.events();
    let notes = of_type(&events, "segment")
        .into_iter()
        .filter(|s| s["label"] == "note" && s["text"] == "[Stop hook] Keep going.")
        .count();
    assert_eq!(notes, 5);
    let inputs = recorded(&world);
    let active: Vec<bool> = of_event(&inputs, "Stop")
        .iter()
        .map(|s| s["stop_hook_active"].as_bool().unwrap())
        .collect();
    assert_eq!(active, [false, true, true, true, true, true]);

    // `hooks.claude_settings = false`: Claude Code's files are not read.
    let model = world.script("replies", &replies, true);
    world.write_settings(&model, "[hooks]\nclaude_settings = false\n");
    let out = world.aerix(&["-p", "Anything else?"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // (The plugins' reading of `enabledPlugins` is `plugins.claude_code`'s, and the permission
    // rules are read either way: each still names the broken file, for its own part.)
    let theirs = |l: &str| l.starts_with("plugins: ") || l.starts_with("permissions: ");
    assert!(!err.lines().any(|l| l.contains(".claude/settings") && !theirs(l)), "{err}");
    assert!(of_type(&world.events(), "hook").is_empty());
}
