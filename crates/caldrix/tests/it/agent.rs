//! A real coding agent against `caldrix pool --http`: Claude Code (pinned, from the npm
//! registry, installed by `scripts/setup --tests`), headless, offline, in a throwaway home.
//!
//! Its member is scripted on SmolLM2 (`script:REPLIES@SmolLM2`: the prompt is rendered through
//! SmolLM2's template and every reply checked against the request's tools constraint, but the
//! replies are fixed): SmolLM2 sampled at Claude Code's temperature under its prompt writes until
//! the output limit every time (tried by hand: 57 to 101 s, and Claude Code then gives up), so
//! only a scripted member makes the round trip a test that can pass or fail on what the pool
//! does. What the pool does with the real engine is the SDK tests' part (`http.rs`).

use std::process::Command;

use serde_json::Value;

use crate::http::HttpPool;

#[test]
fn claude_code_runs_a_tool_call_round_trip_against_the_pool() {
    let _serial = crate::serial();
    let dir = tempfile::tempdir().unwrap();
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "hi\n").unwrap();
    let call = r#"<tool_call>
{"name":"Bash","arguments":{"command":"ls","description":"List the files"}}
</tool_call>"#;
    let answer = "The directory holds one file, notes.txt.";
    let replies = dir.path().join("replies.json");
    std::fs::write(&replies, serde_json::json!([call, answer]).to_string()).unwrap();
    let script = format!("script:{}@{}", replies.display(), crate::smollm2().display());
    let pool = HttpPool::start("claude-code", &["--load", &script, "--alias", "coder"]);

    let output = Command::new(test_models::claude_code())
        .current_dir(&work)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &home)
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("ANTHROPIC_BASE_URL", &pool.url)
        .env("ANTHROPIC_API_KEY", "unused")
        // Offline: no update check, telemetry or error reports.
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "256")
        .env("MAX_THINKING_TOKENS", "0")
        .env("CLAUDE_CODE_MAX_CONTEXT_TOKENS", "4096")
        .args(["-p", "--bare", "--model", "coder", "--tools", "Bash"])
        // Only `ls` may run: whatever the reply says, nothing else is executed.
        .args(["--allowedTools", "Bash(ls)", "--output-format", "stream-json", "--verbose"])
        .args(["--system-prompt", "You are a coding agent. Use the Bash tool.", "Run ls."])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let context = format!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "claude exited {}: {context}", output.status);
    let events: Vec<Value> = stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let blocks = |role: &str| -> Vec<Value> {
        let messages = events.iter().filter(|e| e["type"] == role);
        messages
            .flat_map(|e| e["message"]["content"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    // The pool's first reply reached Claude Code as a tool_use block it parsed...
    let assistant = blocks("assistant");
    let used = assistant.iter().find(|b| b["type"] == "tool_use");
    let used = used.unwrap_or_else(|| panic!("no tool_use in {context}"));
    assert_eq!(used["name"], "Bash");
    assert_eq!(used["input"]["command"], "ls", "{used}");
    // ... it ran the command and sent the result back with the call's id ...
    let result = blocks("user").into_iter().find(|b| b["type"] == "tool_result");
    let result = result.unwrap_or_else(|| panic!("no tool_result in {context}"));
    assert_eq!(result["tool_use_id"], used["id"]);
    assert!(result["content"].to_string().contains("notes.txt"), "{result}");
    // ... and the second request got the pool's answer.
    let last = events.iter().rfind(|e| e["type"] == "result").expect("a result event");
    assert_eq!(last["result"], answer, "{last}");
    assert_eq!(last["is_error"], false, "{last}");
}
