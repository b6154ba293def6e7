//! The cross-project profile through the real binary: a harvest pass a few seconds after a
//! session ends (the server's own), the digest in the next session start, `ai-memory profile`'s
//! commands, and `profile apply` round trips on a repository's rules files.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;

use crate::support::{Server, call, command, ok, repo, run, runtime, stderr, stdout, temp};

fn hook(server: &Server, event: &str, body: &Value) -> String {
    let out = run(
        {
            let mut c = server.cli();
            c.args(["hook", event, "--harness", "claude-code"]);
            c
        },
        Some(&body.to_string()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

fn session(server: &Server, dir: &Path, id: &str, prompts: &[&str]) -> String {
    let cwd = dir.to_str().unwrap();
    let start = hook(
        server,
        "session-start",
        &json!({"session_id": id, "cwd": cwd, "hook_event_name": "SessionStart", "source": "startup"}),
    );
    for p in prompts {
        hook(
            server,
            "prompt-submit",
            &json!({"session_id": id, "cwd": cwd, "hook_event_name": "UserPromptSubmit", "prompt": p}),
        );
    }
    hook(
        server,
        "session-end",
        &json!({"session_id": id, "cwd": cwd, "hook_event_name": "SessionEnd", "reason": "other"}),
    );
    start
}

fn cli(mut c: Command, cwd: &Path, args: &[&str]) -> (bool, String) {
    c.current_dir(cwd).args(args);
    let out = run(c, None);
    (out.status.success(), format!("{}{}", stdout(&out), stderr(&out)))
}

#[test]
fn a_session_end_brings_a_pass_and_the_next_session_starts_with_the_digest() {
    let server = Server::start("profile-pass", &[]);
    let app = repo("app");
    std::fs::write(app.join("Cargo.toml"), "[package]\n").unwrap();
    // Past the startup pass (1 s after start): the next one comes only from a session end
    // (or an hour later).
    std::thread::sleep(Duration::from_millis(2_500));
    session(
        &server,
        &app,
        "s1",
        &["In all my projects, keep integration tests in tests/suite.", "What does this do?"],
    );
    // The server's pass runs a few seconds after the session end.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, list) = cli(server.cli(), &app, &["profile", "list"]);
        assert!(ok, "{list}");
        if list.contains("profile/testing/") {
            assert!(list.contains("Keep integration tests in tests/suite."), "{list}");
            break;
        }
        assert!(Instant::now() < deadline, "no entry after 30 s: {list}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let other = repo("other");
    let context = session(&server, &other, "s2", &[]);
    let context: Value = serde_json::from_str(&context).unwrap();
    let text = context["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(text.starts_with("<ai-memory-profile>\n> 🧭 ai-memory: your usual choices"), "{text}");
    assert!(text.contains("- Keep integration tests in tests/suite. (`profile/testing/"), "{text}");
    assert!(text.contains("profile apply"), "a new project gets the baseline note: {text}");
    // The digest line's path, given to memory_read_page as printed (no scope), from the other
    // project's stdio MCP server: the profile page, not "no page" in the caller's project.
    let path = text.split("(`").nth(1).and_then(|t| t.split('`').next()).unwrap().to_owned();
    assert!(path.starts_with("profile/testing/"), "{path}");
    runtime().block_on(async {
        let mut c = tokio::process::Command::from(command(&server.data, &server.home));
        c.arg("mcp").current_dir(&other);
        let stdio = ().serve(TokioChildProcess::new(c).unwrap()).await.unwrap();
        let page = ok(&stdio, "memory_read_page", json!({ "path": path })).await;
        assert_eq!(page["path"], path.as_str(), "{page}");
        assert!(page["text"].as_str().unwrap().contains("tests/suite"), "{page}");
        let (err, text) =
            call(&stdio, "memory_read_page", json!({ "path": "profile/testing/none.md" })).await;
        assert!(err && text.contains("nor in your profile"), "{text}");
        stdio.cancel().await.unwrap();
    });
}

#[test]
fn the_profile_commands() {
    let data = temp("profile-cli");
    let home = temp("home");
    let app = repo("cli-app");
    let write = |path: &str, body: &str, extra: &[&str]| {
        let mut args = vec!["write-page", "--scope", "profile", "--path", path, "--body", body];
        args.extend_from_slice(extra);
        let (ok, out) = cli(command(&data, &home), &app, &args);
        assert!(ok, "{out}");
    };
    write(
        "tools/pnpm.md",
        "# Pnpm\n\nUse pnpm, not npm.\n\nWhy: workspaces.",
        &["--applies-to", "javascript"],
    );
    write(
        "workflow/fmt.md",
        "# Fmt\n\nRun the formatter before pushing.\n",
        &["--enforced-by", "pre-push hook"],
    );
    // Not a digest page: refused with the reason, nothing stored.
    let (ok, out) = cli(
        command(&data, &home),
        &app,
        &["write-page", "--scope", "profile", "--path", "misc/x.md", "--body", "x"],
    );
    assert!(!ok && out.contains("category folder"), "{out}");
    let (ok, out) = cli(
        command(&data, &home),
        &app,
        &[
            "write-page",
            "--scope",
            "profile",
            "--path",
            "tools/x.md",
            "--body",
            "x",
            "--applies-to",
            "cobol",
        ],
    );
    assert!(!ok && out.contains("unknown stack tag `cobol`"), "{out}");

    let (ok, status) = cli(command(&data, &home), &app, &["profile", "status"]);
    assert!(ok, "{status}");
    assert!(status.contains("profile: on (single operator; share global)"), "{status}");
    assert!(
        status.contains("entries: 2 (0 learned, 0 edited by hand, 2 written by hand)"),
        "{status}"
    );
    assert!(status.contains("digest_max_bytes = 3000"), "{status}");
    let (_, list) = cli(command(&data, &home), &app, &["profile", "list"]);
    assert!(list.contains("profile/tools/pnpm.md\t[javascript]\tUse pnpm, not npm."), "{list}");
    assert!(list.contains("(enforced by pre-push hook; not in the digest)"), "{list}");
    let (ok, show) = cli(command(&data, &home), &app, &["profile", "show", "tools/pnpm.md"]);
    assert!(ok && show.contains("Why: workspaces."), "{show}");

    // apply: no rules file → AGENTS.md created; again → unchanged; --remove → deleted.
    let (ok, dry) = cli(command(&data, &home), &app, &["profile", "apply", "--dry-run"]);
    assert!(
        ok && dry.contains("<!-- ai-memory:profile:start -->") && !app.join("AGENTS.md").exists(),
        "{dry}"
    );
    assert!(!dry.contains("fmt.md"), "entries enforced elsewhere are skipped: {dry}");
    let (ok, out) = cli(command(&data, &home), &app, &["profile", "apply"]);
    assert!(ok, "{out}");
    let agents = std::fs::read_to_string(app.join("AGENTS.md")).unwrap();
    assert!(
        agents.contains("- [javascript] Use pnpm, not npm. (`profile/tools/pnpm.md`)"),
        "{agents}"
    );
    let (_, again) = cli(command(&data, &home), &app, &["profile", "apply"]);
    assert!(again.contains("unchanged"), "{again}");
    let (ok, out) = cli(command(&data, &home), &app, &["profile", "apply", "--remove"]);
    assert!(ok && !app.join("AGENTS.md").exists(), "{out}");

    // An existing AGENTS.md: only the block changes, --remove restores the bytes, the old
    // version goes to the backups directory.
    let original = "# Rules\n\nUse tabs.\n<!-- ai-memory:routing:start -->\nrouting\n<!-- ai-memory:routing:end -->\n";
    std::fs::write(app.join("AGENTS.md"), original).unwrap();
    cli(command(&data, &home), &app, &["profile", "apply"]);
    let applied = std::fs::read_to_string(app.join("AGENTS.md")).unwrap();
    assert!(applied.starts_with(original), "{applied}");
    let (ok, _) = cli(command(&data, &home), &app, &["profile", "apply", "--remove"]);
    assert!(ok);
    assert_eq!(std::fs::read_to_string(app.join("AGENTS.md")).unwrap(), original);
    let backups = std::fs::read_dir(data.join("backups/profile-apply")).unwrap().count();
    // One per change of an existing file: the deletion of the created one, then these two.
    assert_eq!(backups, 3);
    std::fs::remove_file(app.join("AGENTS.md")).unwrap();

    // CLAUDE.md importing @AGENTS.md: the block goes to a new AGENTS.md; CLAUDE.md untouched.
    std::fs::write(app.join("CLAUDE.md"), "@AGENTS.md\n").unwrap();
    cli(command(&data, &home), &app, &["profile", "apply"]);
    assert!(std::fs::read_to_string(app.join("AGENTS.md")).unwrap().contains("pnpm"));
    assert_eq!(std::fs::read_to_string(app.join("CLAUDE.md")).unwrap(), "@AGENTS.md\n");
    cli(command(&data, &home), &app, &["profile", "apply", "--remove"]);
    assert!(!app.join("AGENTS.md").exists());

    // forget: gone, and stays gone through a rebuild.
    let (ok, out) = cli(command(&data, &home), &app, &["profile", "forget", "tools/pnpm.md"]);
    assert!(ok, "{out}");
    let (ok, out) = cli(command(&data, &home), &app, &["profile", "rebuild"]);
    assert!(ok, "{out}");
    let (_, list) = cli(command(&data, &home), &app, &["profile", "list"]);
    assert!(!list.contains("pnpm"), "{list}");
    let (ok, review) = cli(command(&data, &home), &app, &["profile", "review"]);
    assert!(ok && review.contains("# Not in the profile yet"), "{review}");

    // consume = false refuses apply.
    std::fs::write(app.join(".ai-memory.toml"), "[profile]\nconsume = false\n").unwrap();
    let (ok, out) = cli(command(&data, &home), &app, &["profile", "apply"]);
    assert!(!ok && out.contains("consume = false"), "{out}");

    // Off: status says why.
    let mut c = command(&data, &home);
    c.env("AI_MEMORY_PROFILE__ENABLED", "false");
    let (_, status) = cli(c, &app, &["profile", "status"]);
    assert!(status.contains("profile: off (single operator; enabled = false)"), "{status}");
}

/// With no server, the session-end hook starts the pass itself (detached): the entry appears
/// without anything else running.
#[test]
fn without_a_server_a_session_end_starts_the_pass() {
    let data = temp("profile-noserver");
    let home = temp("home");
    let app = repo("noserver-app");
    let hook = |event: &str, body: Value| {
        let mut c = command(&data, &home);
        c.env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9").args(["hook", event]);
        let out = run(c, Some(&body.to_string()));
        assert!(out.status.success() && stderr(&out).is_empty(), "{}", stderr(&out));
    };
    let cwd = app.to_str().unwrap();
    hook(
        "session-start",
        json!({"session_id": "n1", "cwd": cwd, "hook_event_name": "SessionStart"}),
    );
    hook(
        "prompt-submit",
        json!({"session_id": "n1", "cwd": cwd, "hook_event_name": "UserPromptSubmit",
        "prompt": "In all my projects, keep the changelog in CHANGES.md."}),
    );
    hook("session-end", json!({"session_id": "n1", "cwd": cwd, "hook_event_name": "SessionEnd"}));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, list) = cli(command(&data, &home), &app, &["profile", "list"]);
        assert!(ok, "{list}");
        if list.contains("changelog") {
            break;
        }
        assert!(Instant::now() < deadline, "no entry after 30 s: {list}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A Codex-only user (no session-end event, never runs `serve`): the stdio `ai-memory mcp` the
/// harness starts runs a pass shortly after it starts, and the profile learns (issue 36).
#[test]
fn the_stdio_server_runs_profile_passes_and_memory_forget_keeps_an_entry_out() {
    let data = temp("stdio-pass");
    let home = temp("home");
    let app = repo("codex-app");
    let cwd = app.to_str().unwrap();
    let hook = |event: &str, body: Value| {
        let mut c = command(&data, &home);
        // No server listens on port 9: the hook writes to the data directory itself.
        c.env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9").args(["hook", event, "--harness", "codex"]);
        let out = run(c, Some(&body.to_string()));
        assert!(out.status.success(), "{}", stderr(&out));
    };
    hook(
        "session-start",
        json!({"session_id": "c1", "cwd": cwd, "hook_event_name": "SessionStart", "source": "startup"}),
    );
    hook(
        "prompt-submit",
        json!({"session_id": "c1", "cwd": cwd, "hook_event_name": "UserPromptSubmit",
               "prompt": "In all my projects, keep integration tests in tests/suite."}),
    );
    let listed = || {
        let (ok, list) = cli(command(&data, &home), &app, &["profile", "list"]);
        assert!(ok, "{list}");
        list
    };
    assert!(!listed().contains("profile/testing/"), "no pass has run yet");
    runtime().block_on(async {
        let mut c = tokio::process::Command::from(command(&data, &home));
        c.arg("mcp").current_dir(&app);
        let stdio = ().serve(TokioChildProcess::new(c).unwrap()).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let list = listed();
            if list.contains("profile/testing/") {
                assert!(list.contains("Keep integration tests in tests/suite."), "{list}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no entry 30 s after the stdio server started: {list}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        // memory_forget removes the learned entry and records it: a pass over the same
        // prompts does not bring it back.
        let list = listed();
        let path = list.lines().find(|l| l.starts_with("profile/testing/")).unwrap();
        let path = path.split('\t').next().unwrap().to_owned();
        let forgot = ok(&stdio, "memory_forget", json!({ "path": path })).await;
        assert_eq!(forgot["forgotten"], path.as_str(), "{forgot}");
        let (err, text) = call(&stdio, "memory_forget", json!({ "path": path })).await;
        assert!(err && text.contains("no entry"), "{text}");
        stdio.cancel().await.unwrap();
        let (passed, out) = cli(command(&data, &home), &app, &["profile", "rebuild"]);
        assert!(passed, "{out}");
        assert!(!listed().contains("profile/testing/"), "the forgotten entry came back");
    });
}
