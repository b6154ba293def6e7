//! Trust: a repository's hooks and program settings run only once the user trusts its root,
//! and again only after a change is trusted too. Through the real binary: `aerix -p` (skips,
//! one note each; `--trust` for one run), `aerix trust` and its `--list` and `--revoke`, and
//! the screen's question (tmux).

use std::path::Path;

use serde_json::json;

use crate::screen::{Pane, STARTUP, STEP};
use crate::{World, caldrix, final_turn, stderr, stdout};

fn replies(runs: usize) -> Vec<String> {
    (0..runs)
        .flat_map(|i| ["answer".to_owned(), final_turn("Done.", &format!("answer {i}"))])
        .collect()
}

/// The repository's `.claude/settings.json`: one `SessionStart` hook, `command`.
fn project_hook(world: &World, command: &str) {
    let settings =
        json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": command}]}]}});
    world.write(".claude/settings.json", &settings.to_string());
}

fn trust_notes(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with("trust: ")).collect()
}

/// `aerix -p` in the world; its status must be 0.
fn run(world: &World, extra: &[&str]) -> String {
    let mut args = vec!["-p", "Hello."];
    args.extend(extra);
    let out = world.aerix(&args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    err
}

fn root(world: &World) -> String {
    world.repo.canonicalize().unwrap().display().to_string()
}

#[test]
fn a_session_start_hook_of_the_repository_runs_only_once_trusted_and_its_change_asks_again() {
    let world = World::scripted("trust-hook", &replies(7), true);
    let marker = world.home.join("hook-ran");
    let command = format!("touch {}", marker.display());
    project_hook(&world, &command);

    // Untrusted: the hook does not run, and one note says what was skipped and how to trust.
    let err = run(&world, &[]);
    assert!(!marker.exists(), "an untrusted project's hook ran");
    let notes = trust_notes(&err);
    assert_eq!(
        notes,
        [format!(
            "trust: this project is not trusted: the hook `SessionStart: {command}` of \
             .claude/settings.json is not run; `aerix trust {}` trusts it (`--trust` for one run)",
            root(&world)
        )],
        "{err}"
    );

    // `aerix trust` lists what it trusts; the hook then runs.
    let out = world.aerix(&["trust"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed = stdout(&out);
    assert!(listed.starts_with(&format!("trusted {}\n", root(&world))), "{listed}");
    assert!(listed.contains(&format!("hook SessionStart: {command} (.claude/settings.json)")));
    let err = run(&world, &[]);
    assert!(marker.exists(), "a trusted project's hook did not run: {err}");
    assert!(trust_notes(&err).is_empty(), "{err}");

    // The command changes (a pulled commit): skipped again, saying it changed.
    std::fs::remove_file(&marker).unwrap();
    let changed = format!("touch {} && true", marker.display());
    project_hook(&world, &changed);
    let err = run(&world, &[]);
    assert!(!marker.exists(), "a changed hook ran on the old trust");
    let notes = trust_notes(&err);
    assert_eq!(notes.len(), 1, "{err}");
    assert!(
        notes[0].starts_with("trust: this project is not trusted since it changed (trusted 20")
    );
    assert!(notes[0].contains(&format!("the hook `SessionStart: {changed}`")), "{err}");

    // `--trust` runs it for this run only: nothing is recorded.
    let err = run(&world, &["--trust"]);
    assert!(marker.exists(), "--trust did not run the hook: {err}");
    std::fs::remove_file(&marker).unwrap();
    run(&world, &[]);
    assert!(!marker.exists(), "--trust was recorded");

    // Trusted again, it runs; `--list` shows it current; `--revoke` ends it.
    assert_eq!(world.aerix(&["trust"]).status.code(), Some(0));
    run(&world, &[]);
    assert!(marker.exists());
    let list = stdout(&world.aerix(&["trust", "--list"]));
    assert!(list.starts_with(&format!("{}  trusted 20", root(&world))), "{list}");
    assert!(list.lines().next().unwrap().ends_with("1 part(s)  current"), "{list}");
    let out = world.aerix(&["trust", "--revoke", world.repo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    std::fs::remove_file(&marker).unwrap();
    let err = run(&world, &[]);
    assert!(!marker.exists(), "a revoked project's hook ran");
    assert_eq!(trust_notes(&err).len(), 1, "{err}");
    let out = world.aerix(&["trust", "--revoke", world.repo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(64), "revoking twice: {}", stdout(&out));
}

/// A `caldrix` that records that it ran, then is the real one.
fn wrapper(world: &World, marker: &Path) -> String {
    let path = world.home.join("bin/caldrix-wrapper");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let body =
        format!("#!/bin/sh\ntouch {}\nexec {} \"$@\"\n", marker.display(), caldrix().display());
    std::fs::write(&path, body).unwrap();
    let mut mode = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&path, mode).unwrap();
    path.display().to_string()
}

fn stop_pool(world: &World) {
    let socket = world.socket.to_str().unwrap();
    let _ =
        std::process::Command::new(caldrix()).args(["pool", "stop", "--socket", socket]).output();
}

#[test]
fn a_projects_pool_caldrix_is_not_run_until_trusted() {
    let world = World::scripted("trust-pool", &replies(3), true);
    let marker = world.home.join("wrapper-ran");
    let program = wrapper(&world, &marker);
    world.write(".aerix/settings.toml", &format!("[pool]\ncaldrix = {program:?}\n"));

    // Untrusted: the pool is started with the user's `caldrix`, and the note names the setting.
    let err = run(&world, &[]);
    assert!(!marker.exists(), "an untrusted project's pool.caldrix ran");
    assert_eq!(
        trust_notes(&err),
        [format!(
            "trust: this project is not trusted: its settings that run or reach something are not \
             applied until it is trusted: `pool.caldrix = {program:?}` of .aerix/settings.toml; \
             `aerix trust {}` trusts it (`--trust` for one run)",
            root(&world)
        )],
        "{err}"
    );
    stop_pool(&world);

    // Trusted, autostart runs the project's program.
    let out = world.aerix(&["trust"]);
    assert!(
        stdout(&out)
            .contains(&format!("setting pool.caldrix = {program:?} (.aerix/settings.toml)"))
    );
    let err = run(&world, &[]);
    assert!(marker.exists(), "a trusted project's pool.caldrix did not run: {err}");
    stop_pool(&world);

    // Another program: not run until trusted again.
    std::fs::remove_file(&marker).unwrap();
    let other = format!("{program}-2");
    std::fs::copy(&program, &other).unwrap();
    world.write(".aerix/settings.toml", &format!("[pool]\ncaldrix = {other:?}\n"));
    let err = run(&world, &[]);
    assert!(!marker.exists(), "a changed pool.caldrix ran on the old trust");
    assert!(trust_notes(&err)[0].contains("since it changed"), "{err}");
}

#[test]
fn the_screen_asks_listing_what_would_run_and_y_trusts_it() {
    let world = World::scripted("trust-screen", &replies(2), true);
    let marker = world.home.join("hook-ran");
    let command = format!("touch {}", marker.display());
    project_hook(&world, &command);

    // `n` runs the screen without the hook, and records nothing.
    let pane = Pane::start(&world, "trust-n", "true", &|aerix| {
        format!("'{aerix}' 2>../screen.err; echo \"aerix exited $?\"; exec sleep 60")
    });
    let text = pane.wait_for("trust this project?", STARTUP);
    assert!(text.contains("is not trusted. It would run 1"), "{text}");
    assert!(text.contains("hook SessionStart: touch"), "{text}");
    pane.keys(&["n"]);
    let text = pane.wait_for("ready in", STARTUP);
    assert!(text.contains("trust: this project is not trusted"), "{text}");
    pane.keys(&["C-d"]);
    pane.wait_for("aerix exited 0", STEP);
    assert!(!marker.exists(), "the hook ran after `n`");

    // `y` trusts it (recorded), and the hook runs.
    let pane = Pane::start(&world, "trust-y", "true", &|aerix| {
        format!("'{aerix}' 2>../screen.err; echo \"aerix exited $?\"; exec sleep 60")
    });
    pane.wait_for("trust this project?", STARTUP);
    pane.keys(&["y"]);
    pane.wait_for("ready in", STARTUP);
    pane.keys(&["C-d"]);
    pane.wait_for("aerix exited 0", STEP);
    assert!(marker.exists(), "the hook did not run after `y`");
    let list = stdout(&world.aerix(&["trust", "--list"]));
    assert!(list.lines().next().unwrap().ends_with("1 part(s)  current"), "{list}");
}

#[test]
fn a_plugin_the_repository_brings_loads_only_once_trusted() {
    let world = World::scripted("trust-plugin", &replies(2), true);
    let marker = world.home.join("plugin-hook-ran");
    let hooks = json!({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": format!("touch {}", marker.display())}
    ]}]}});
    world.write(".aerix/plugins/lint/hooks/hooks.json", &hooks.to_string());
    world.write(".aerix/settings.toml", "[plugins]\nenabled = [\"lint\"]\n");

    let err = run(&world, &[]);
    assert!(!marker.exists(), "an untrusted project's plugin hook ran");
    let notes = trust_notes(&err);
    assert_eq!(notes.len(), 3, "the plugin, its hook and the setting, one note each: {err}");
    assert!(notes[0].contains("the plugin lint (.aerix/plugins/lint) is not loaded"), "{err}");
    assert!(notes[1].contains("of .aerix/plugins/lint/hooks/hooks.json is not run"), "{err}");
    assert!(notes[2].contains("`plugins.enabled = [\"lint\"]` of .aerix/settings.toml"), "{err}");

    world.trust();
    let err = run(&world, &[]);
    assert!(marker.exists(), "a trusted project's plugin hook did not run: {err}");
}
