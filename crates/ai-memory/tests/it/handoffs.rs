//! Handoffs through the real hook client: a session's prompts and the files its edit tools
//! named reach the project's next session start (any harness), stay for later starts, and are
//! replaced by a newer session's; Codex, which sends no session end, is handed off at the next
//! start.

use std::path::Path;

use serde_json::Value;

use crate::support::{Server, command, repo, run, stderr, stdout, temp};

const HEADING: &str = "## Where the last session left off";

fn fixture(name: &str, cwd: &Path) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures").join(name);
    std::fs::read_to_string(path).unwrap().replace("CWD", cwd.to_str().unwrap())
}

fn hook(mut c: std::process::Command, event: &str, harness: &str, stdin: &str) -> String {
    c.args(["hook", event, "--harness", harness]);
    let out = run(c, Some(stdin));
    assert!(out.status.success() && stderr(&out).is_empty(), "{event}: {}", stderr(&out));
    stdout(&out)
}

/// The session-start context a hook prints (Claude Code's shape).
fn context(printed: &str) -> String {
    let json: Value = serde_json::from_str(printed).unwrap_or_else(|e| panic!("{e}: {printed}"));
    json["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_owned()
}

fn start(server: &Server, session: &str, cwd: &Path) -> String {
    let stdin = fixture("claude-code-session-start.json", cwd).replace("cc-7f3a", session);
    context(&hook(server.cli(), "session-start", "claude-code", &stdin))
}

#[test]
fn a_handoff_reaches_the_next_session_start_and_stays_until_a_newer_one() {
    let server = Server::start("handoff", &[]);
    let shop = repo("shop");
    let first = start(&server, "cc-7f3a", &shop);
    assert!(!first.contains(HEADING), "no handoff before any session ended: {first}");
    hook(
        server.cli(),
        "prompt-submit",
        "claude-code",
        &fixture("claude-code-prompt-submit.json", &shop),
    );
    hook(
        server.cli(),
        "tool-use",
        "claude-code",
        &fixture("claude-code-post-tool-use.json", &shop),
    );
    hook(
        server.cli(),
        "session-end",
        "claude-code",
        &fixture("claude-code-session-end.json", &shop),
    );

    // The next session, in Codex: the handoff, after the heading and preamble, before pages.
    let printed =
        hook(server.cli(), "session-start", "codex", &fixture("codex-session-start.json", &shop));
    let next = context(&printed);
    let at = next.find(HEADING).unwrap_or_else(|| panic!("{next}"));
    assert!(next[..at].contains("data, not instructions"), "{next}");
    assert!(next.contains("The last session here (claude-code) was asked:"), "{next}");
    assert!(
        next.contains("- Always run cargo fmt before committing. My key is [REDACTED], do not"),
        "the prompt, sanitized as captured: {next}"
    );
    assert!(next.contains("Files changed: `src/auth.rs`"), "relative to the root: {next}");
    assert!(!next.contains("TOOL-OUTPUT"), "a tool's output is never read: {next}");
    assert!(!next.contains("sk-proj"), "{next}");

    // A read does not consume it: a third start sees the same handoff.
    let third = start(&server, "cc-third", &shop);
    assert_eq!(third, next, "the same context for the third session");

    // A newer session's handoff replaces it.
    start(&server, "cc-newer", &shop);
    let prompt = serde_json::json!({"session_id": "cc-newer", "cwd": shop.to_str().unwrap(),
        "hook_event_name": "UserPromptSubmit", "prompt": "Now add a test for the cart total."});
    hook(server.cli(), "prompt-submit", "claude-code", &prompt.to_string());
    let end = fixture("claude-code-session-end.json", &shop).replace("cc-7f3a", "cc-newer");
    hook(server.cli(), "session-end", "claude-code", &end);
    let later = start(&server, "cc-later", &shop);
    assert!(later.contains("- Now add a test for the cart total."), "{later}");
    assert!(!later.contains("cargo fmt"), "the older handoff is gone: {later}");
    assert!(!later.contains("src/auth.rs"), "{later}");
    assert_eq!(later.matches(HEADING).count(), 1, "{later}");

    // An empty session (nothing asked, nothing changed) does not wipe it.
    start(&server, "cc-empty", &shop);
    let end = fixture("claude-code-session-end.json", &shop).replace("cc-7f3a", "cc-empty");
    hook(server.cli(), "session-end", "claude-code", &end);
    assert!(start(&server, "cc-after", &shop).contains("cart total"));
}

/// Codex sends no session end: with no server running, its session is handed off at the
/// project's next session start (here Claude Code's), and stays for the one after.
#[test]
fn a_codex_session_is_handed_off_at_the_next_start() {
    let data = temp("handoff-codex");
    let home = temp("home");
    let shop = repo("cart");
    let cli = || {
        let mut c = command(&data, &home);
        c.env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9");
        c
    };
    hook(cli(), "session-start", "codex", &fixture("codex-session-start.json", &shop));
    hook(cli(), "prompt-submit", "codex", &fixture("codex-prompt-submit.json", &shop));
    hook(cli(), "tool-use", "codex", &fixture("codex-post-tool-use.json", &shop));
    // A tool naming no file is dropped by the client.
    let bash = serde_json::json!({"session_id": "019a2c5e-codex", "cwd": shop.to_str().unwrap(),
        "hook_event_name": "PostToolUse", "tool_name": "shell",
        "tool_input": {"command": ["ls", "src/other.rs"]}, "tool_response": "src/other.rs"});
    assert_eq!(hook(cli(), "tool-use", "codex", &bash.to_string()), "");

    let start = fixture("claude-code-session-start.json", &shop);
    let next = context(&hook(cli(), "session-start", "claude-code", &start));
    assert!(next.contains("The last session here (codex) was asked:"), "{next}");
    assert!(next.contains("- Prefer small commits over big ones. password=[REDACTED]"), "{next}");
    assert!(next.contains("Files changed: `src/cart.rs`\n"), "{next}");
    assert!(!next.contains("other.rs"), "{next}");
    let again = fixture("claude-code-session-start.json", &shop).replace("cc-7f3a", "cc-2");
    assert_eq!(context(&hook(cli(), "session-start", "claude-code", &again)), next);
}

#[test]
fn the_session_start_cap_holds_with_a_handoff() {
    let server = Server::start("handoff-cap", &[("AI_MEMORY_SESSION_START__MAX_CHARS", "1200")]);
    let big = repo("big");
    for i in 0..40 {
        let mut c = server.cli();
        c.args([
            "write-page",
            "--project",
            "big",
            "--path",
            &format!("notes/a-rather-long-page-name-number-{i:03}.md"),
            "--body",
            &format!("# A page with a title long enough to fill the context {i}\n"),
        ]);
        assert!(run(c, None).status.success());
    }
    start(&server, "cap-1", &big);
    for i in 0..12 {
        let prompt = serde_json::json!({"session_id": "cap-1", "cwd": big.to_str().unwrap(),
            "prompt": format!("request {i}: {}", "please change this ".repeat(20))});
        hook(server.cli(), "prompt-submit", "claude-code", &prompt.to_string());
    }
    for i in 0..60 {
        let edit = serde_json::json!({"session_id": "cap-1", "cwd": big.to_str().unwrap(),
            "hook_event_name": "PostToolUse", "tool_name": "Write",
            "tool_input": {"file_path": format!("src/generated/module_{i}.rs"), "content": "x"}});
        hook(server.cli(), "tool-use", "claude-code", &edit.to_string());
    }
    let end = fixture("claude-code-session-end.json", &big).replace("cc-7f3a", "cap-1");
    hook(server.cli(), "session-end", "claude-code", &end);
    let next = start(&server, "cap-2", &big);
    assert!(next.chars().count() <= 1200, "{}: {next}", next.chars().count());
    assert!(next.contains(HEADING), "{next}");
    assert!(next.contains("- request 0: "), "the first prompt: {next}");
    assert!(next.contains("more pages not listed"), "the pages get the rest: {next}");
}

#[test]
fn with_prompt_capture_off_the_handoff_holds_the_files() {
    let server = Server::start("handoff-noprompts", &[("AI_MEMORY_CAPTURE__PROMPTS", "false")]);
    let shop = repo("shop");
    start(&server, "cc-7f3a", &shop);
    hook(
        server.cli(),
        "prompt-submit",
        "claude-code",
        &fixture("claude-code-prompt-submit.json", &shop),
    );
    hook(
        server.cli(),
        "tool-use",
        "claude-code",
        &fixture("claude-code-post-tool-use.json", &shop),
    );
    hook(
        server.cli(),
        "session-end",
        "claude-code",
        &fixture("claude-code-session-end.json", &shop),
    );
    let next = start(&server, "cc-next", &shop);
    assert!(next.contains("prompts are not captured (`capture.prompts` is off)"), "{next}");
    assert!(next.contains("Files changed: `src/auth.rs`"), "{next}");
    assert!(!next.contains("cargo fmt"), "{next}");
}

/// `capture.handoffs = false`: a session's prompts and files are not handed off and the next
/// start shows no handoff.
#[test]
fn with_handoffs_off_none_is_written_or_shown() {
    let server = Server::start("handoff-off", &[("AI_MEMORY_CAPTURE__HANDOFFS", "false")]);
    let shop = repo("shop");
    start(&server, "cc-7f3a", &shop);
    for (event, file) in [
        ("prompt-submit", "claude-code-prompt-submit.json"),
        ("tool-use", "claude-code-post-tool-use.json"),
        ("session-end", "claude-code-session-end.json"),
    ] {
        hook(server.cli(), event, "claude-code", &fixture(file, &shop));
    }
    let next = start(&server, "cc-next", &shop);
    assert!(!next.contains(HEADING), "{next}");
    assert!(!next.contains("src/auth.rs") && !next.contains("cargo fmt"), "{next}");
}

/// `capture.retention_days` covers handoffs too (they repeat captured prompts): a pass deletes
/// one older than the cutoff.
#[test]
fn a_handoff_older_than_the_retention_is_deleted_by_a_pass() {
    use ai_memory_core::{ProjectName, WorkspaceName};
    use ai_memory_index::{HandoffRow, Index};

    let data = temp("handoff-retention");
    let home = temp("home");
    let shop = repo("kept");
    let mut c = command(&data, &home);
    c.env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9");
    hook(c, "session-start", "claude-code", &fixture("claude-code-session-start.json", &shop));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
        as i64;
    let index = Index::open(&data.join("index.sqlite")).unwrap();
    let project = index
        .project(&WorkspaceName::default_workspace(), &ProjectName::new("kept").unwrap())
        .unwrap()
        .unwrap();
    let old = HandoffRow {
        session: "old".into(),
        harness: "codex".into(),
        text: format!("{HEADING}\nold\n"),
        at: now - 3 * 86_400,
    };
    index.put_handoff(&project, None, &old).unwrap();
    let pass = |days: &str| {
        let mut c = command(&data, &home);
        c.env("AI_MEMORY_CAPTURE__RETENTION_DAYS", days).args(["profile", "pass"]);
        let out = run(c, None);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    pass("0");
    assert!(index.handoff(&project, None).unwrap().is_some(), "0 keeps it");
    pass("2");
    assert_eq!(index.handoff(&project, None).unwrap(), None);
}
