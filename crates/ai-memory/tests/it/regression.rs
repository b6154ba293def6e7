//! One regression test per gap found in the profile (issue 22), each named for its bug, through
//! the real binary.

use ai_memory_core::{MARKER_FILE, ProjectName, WorkspaceName};
use ai_memory_index::Index;

use crate::support::{Server, command, post_hook, repo, run, stderr, temp};

/// A hook run with no server (port 9 of loopback has no listener): it writes to `data`.
fn direct_hook(data: &std::path::Path, event: &str, stdin: &str) -> std::process::Output {
    let home = temp("home");
    let mut c = command(data, &home);
    c.env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9").args(["hook", event]);
    let out = run(c, Some(stdin));
    assert!(out.status.success(), "a hook always exits 0: {}", stderr(&out));
    out
}

fn start_json(session: &str, cwd: &std::path::Path) -> String {
    serde_json::json!({
        "session_id": session, "cwd": cwd, "hook_event_name": "SessionStart", "source": "startup"
    })
    .to_string()
}

/// Removing `contribute = false` from the marker turns contribution back on at the next
/// session start: a found marker sends both values explicitly.
#[test]
fn removing_an_opt_out_from_the_marker_turns_it_back_on() {
    let data = temp("marker-01");
    let nda = repo("nda");
    let recorded = || {
        let index = Index::open(&data.join("index.sqlite")).unwrap();
        let row = index
            .project(&WorkspaceName::default_workspace(), &ProjectName::new("nda").unwrap())
            .unwrap()
            .unwrap();
        index.project_opt_outs(&row).unwrap()
    };
    std::fs::write(nda.join(MARKER_FILE), "[profile]\ncontribute = false\nconsume = false\n")
        .unwrap();
    direct_hook(&data, "session-start", &start_json("s1", &nda));
    assert_eq!(recorded(), (Some(false), Some(false)));
    std::fs::write(nda.join(MARKER_FILE), "[profile]\nconsume = false\n").unwrap();
    direct_hook(&data, "session-start", &start_json("s2", &nda));
    assert_eq!(recorded(), (Some(true), Some(false)));
    // No marker at all says nothing: the recorded values stay.
    std::fs::remove_file(nda.join(MARKER_FILE)).unwrap();
    direct_hook(&data, "session-start", &start_json("s3", &nda));
    assert_eq!(recorded(), (Some(true), Some(false)));
}

/// A JSON array is not hook input (serde would read it as a struct, field by field): the hook
/// and the server's endpoint refuse it by name, and no session is recorded.
#[test]
fn a_json_array_as_hook_input_is_refused() {
    let data = temp("hook-array");
    let out = direct_hook(&data, "session-start", r#"["SessionStart", "/tmp"]"#);
    let err = stderr(&out);
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        err.trim(),
        "ai-memory hook session-start: the hook input must be a JSON object, not an array"
    );
    assert!(!data.join("index.sqlite").exists(), "nothing was opened, nothing recorded");

    let server = Server::start("hook-array", &[]);
    let (status, body) = post_hook(
        &server,
        "session-start",
        None,
        &serde_json::json!(["claude-code", "SessionStart", "default", "app"]),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "the hook event must be a JSON object, not an array", "{body}");
}

/// A marker with another tool's table (`[briefing]`) beside `[profile]`: the hook records the
/// session in the project the marker names instead of failing (issue 36).
#[test]
fn a_marker_with_another_tools_table_does_not_break_the_hooks() {
    let data = temp("marker-table");
    let checkout = repo("checkout");
    std::fs::write(
        checkout.join(MARKER_FILE),
        "project = \"shop\"\n[briefing]\nstyle = \"short\"\n[profile]\nconsume = false\n",
    )
    .unwrap();
    let out = direct_hook(&data, "session-start", &start_json("s1", &checkout));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    let index = Index::open(&data.join("index.sqlite")).unwrap();
    let row = index
        .project(&WorkspaceName::default_workspace(), &ProjectName::new("shop").unwrap())
        .unwrap()
        .expect("the marker's project is recorded");
    assert_eq!(index.project_opt_outs(&row).unwrap(), (Some(true), Some(false)));
}

/// `hook --harness` and `install` name every harness ai-memory supports in their help.
#[test]
fn the_help_texts_name_every_harness() {
    let home = temp("help-home");
    for sub in ["hook", "install"] {
        let mut c = command(&home, &home);
        c.args([sub, "--help"]);
        let out = run(c, None);
        let help = String::from_utf8_lossy(&out.stdout).into_owned();
        for harness in ["claude-code", "codex", "opencode", "aerix", "kimi-code"] {
            assert!(help.contains(harness), "`{sub} --help` omits {harness}: {help}");
        }
    }
}

/// `capture.retention_days`: a profile pass deletes the prompts captured before the cutoff and
/// keeps the newer ones (issue 36).
#[test]
fn captured_prompts_older_than_the_retention_are_deleted_by_a_pass() {
    let data = temp("retention");
    let app = repo("kept");
    direct_hook(&data, "session-start", &start_json("r1", &app));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
        as i64;
    let index = Index::open(&data.join("index.sqlite")).unwrap();
    let project = index
        .project(&WorkspaceName::default_workspace(), &ProjectName::new("kept").unwrap())
        .unwrap()
        .unwrap();
    let old = ai_memory_core::sanitize("three days old");
    let new = ai_memory_core::sanitize("an hour old");
    index.capture_prompt(&project, "r1", None, &old, now - 3 * 86_400).unwrap();
    index.capture_prompt(&project, "r1", None, &new, now - 3_600).unwrap();
    let pass = |days: &str| {
        let home = temp("home");
        let mut c = command(&data, &home);
        c.env("AI_MEMORY_CAPTURE__RETENTION_DAYS", days).args(["profile", "pass"]);
        let out = run(c, None);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let texts = || -> Vec<String> {
        index.prompts(&project).unwrap().into_iter().map(|p| p.text).collect()
    };
    pass("0");
    assert_eq!(texts(), ["three days old", "an hour old"], "0 keeps every prompt");
    pass("2");
    assert_eq!(texts(), ["an hour old"]);
}

/// `ai-memory config show | head -1`: the reader is gone before the first line is written, so
/// every write fails with a broken pipe; the command ends with success and says nothing,
/// instead of panicking.
#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let data = temp("pipe");
    let home = temp("pipe-home");
    let mut c = command(&data, &home);
    c.args(["config", "show"]);
    c.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}: {}", out.status, stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}
