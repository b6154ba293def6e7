//! The boundaries through the binary: the file tools refuse what lies outside the tree and what
//! is no regular file, at once; `sandbox.enabled` runs `bash` under bubblewrap, and without
//! `bwrap` nothing starts.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, of_type, stderr};

/// `aerix -p PROMPT` in `world`, failed (and killed) if it takes over `secs`: a guard removed
/// must fail its test, not hang the run.
fn run_within(world: &World, secs: u64) -> Output {
    let mut child = world
        .aerix_command(&["-p", "Go."])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(secs) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("aerix ran past {secs} s:\n{}", stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// The result text of call `id`.
fn result(events: &[Value], id: &str) -> String {
    let message = of_type(events, "message").into_iter().find(|m| m["call"] == id);
    message.unwrap_or_else(|| panic!("no result for {id}"))["text"].as_str().unwrap().to_owned()
}

#[test]
fn the_file_tools_refuse_escapes_devices_and_fifos_at_once() {
    let replies = vec![
        "answer".to_owned(),
        calls(
            "Look everywhere.",
            vec![
                call("read", json!({"path": "/dev/zero"})),
                call("read", json!({"path": "pipe"})),
                call("read", json!({"path": "../outside.txt"})),
                call("write", json!({"path": "out-link/planted.txt", "content": "x"})),
                call("grep", json!({"pattern": "secret", "path": ".."})),
                call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"})),
            ],
        ),
        final_turn("Done.", "looked"),
    ];
    let world = World::scripted("bounds-files", &replies, true);
    std::fs::write(world.home.join("outside.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(&world.home, world.repo.join("out-link")).unwrap();
    let fifo = world.repo.join("pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = run_within(&world, 120);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let expected = [
        ("c1", "error: refused: /dev/zero is outside the working tree"),
        ("c2", "error: refused: pipe is a FIFO: only regular files are read or changed"),
        ("c3", "error: refused: ../outside.txt is outside the working tree"),
        ("c4", "error: refused: out-link/planted.txt resolves to"),
        ("c5", "error: refused: .. is outside the working tree"),
    ];
    for (id, start) in expected {
        let text = result(&events, id);
        assert!(text.starts_with(start), "{id}: {text}");
    }
    assert!(!world.home.join("planted.txt").exists());
    // Inside the tree the tools work as before.
    assert_eq!(result(&events, "c6"), "edited calc.sh at line 1");
}

/// A directory outside the tree and outside `/tmp`, wherever the checkout lies: one under the
/// sandbox's fresh `/tmp` would be hidden rather than read-only (a write there fails with
/// `Directory nonexistent`, not `Read-only file system`). The target's scratch directory when
/// it lies outside `/tmp` (a checkout under `/tmp` puts it there), else `/var/tmp`, else `~`.
fn outside_tmp(name: &str) -> PathBuf {
    let tmp: Vec<PathBuf> = [PathBuf::from("/tmp"), std::env::temp_dir()]
        .into_iter()
        .map(|t| t.canonicalize().unwrap_or(t))
        .collect();
    let bases = [
        Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR"))),
        Some(PathBuf::from("/var/tmp")),
        std::env::var_os("HOME").map(PathBuf::from),
    ];
    for base in bases.into_iter().flatten() {
        let Ok(base) = base.canonicalize() else { continue };
        if tmp.iter().any(|t| base.starts_with(t)) {
            continue;
        }
        let dir = base.join(format!("aerix-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if std::fs::create_dir_all(&dir).is_ok() {
            return dir;
        }
    }
    panic!("no writable directory outside /tmp: the target's, /var/tmp and ~ all lie under it");
}

/// A scripted run of two commands: one writing outside the tree, one inside; their results.
fn two_writes(name: &str, sandbox: &str, outside: &std::path::Path) -> (World, String, String) {
    let replies = vec![
        "answer".to_owned(),
        calls(
            "Write both.",
            vec![
                call(
                    "bash",
                    json!({"command": format!("echo out > {}/escaped.txt", outside.display())}),
                ),
                call("bash", json!({"command": "echo kept > kept.txt && cat kept.txt"})),
            ],
        ),
        final_turn("Done.", "wrote"),
    ];
    let world = World::scripted_with(name, &replies, true, sandbox);
    let out = run_within(&world, 120);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let (c1, c2) = (result(&events, "c1"), result(&events, "c2"));
    (world, c1, c2)
}

#[test]
fn sandbox_enabled_runs_bash_under_bubblewrap_through_the_binary() {
    let outside = outside_tmp("sandbox");
    let (world, escaped, kept) = two_writes("sandbox-on", "[sandbox]\nenabled = true\n", &outside);
    // The outcome first (nothing written, a failure), then why: read-only, not hidden.
    assert!(!outside.join("escaped.txt").exists() && !escaped.ends_with("[exit 0]"), "{escaped}");
    assert!(
        escaped.contains("Read-only file system") && escaped.ends_with("[exit 2]"),
        "{escaped}"
    );
    assert!(!outside.join("escaped.txt").exists());
    assert_eq!(kept, "kept\n[exit 0]");
    assert_eq!(std::fs::read_to_string(world.repo.join("kept.txt")).unwrap(), "kept\n");
    drop(world);
    // The setting off (the default): the same command writes outside.
    let (_world, escaped, _) = two_writes("sandbox-off", "", &outside);
    assert_eq!(escaped, "[exit 0]");
    assert_eq!(std::fs::read_to_string(outside.join("escaped.txt")).unwrap(), "out\n");
    std::fs::remove_dir_all(&outside).unwrap();
}

/// A scripted run of one command connecting to the pool's socket, which lies outside `/tmp` (in
/// `$XDG_RUNTIME_DIR` on a desktop): its result.
fn pool_connect(name: &str, sandbox: &str, outside: &std::path::Path) -> String {
    let mut world = World::new(name, "", "");
    world.socket = outside.join(name).join("pool.sock");
    let connect = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); \
         print(\"connected\")'",
        world.socket.display()
    );
    let replies = vec![
        "answer".to_owned(),
        calls("Connect.", vec![call("bash", json!({"command": connect}))]),
        final_turn("Done.", "tried"),
    ];
    let model = world.script("replies", &replies, true);
    world.write_settings(&model, sandbox);
    let out = run_within(&world, 120);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    result(&world.events(), "c1")
}

/// The attack that made the pool send a remote member's request (the user's key with it) from
/// a command without network: the pool's socket directory is empty inside the sandbox.
#[test]
fn sandbox_enabled_hides_the_pools_socket_through_the_binary() {
    let outside = outside_tmp("pool");
    let hidden = pool_connect("pool-sandboxed", "[sandbox]\nenabled = true\n", &outside);
    assert!(!hidden.contains("connected") && !hidden.ends_with("[exit 0]"), "{hidden}");
    assert!(hidden.contains("FileNotFoundError"), "{hidden}");
    // The setting off: the same command reaches the pool.
    let reached = pool_connect("pool-open", "", &outside);
    assert_eq!(reached, "connected\n[exit 0]");
    std::fs::remove_dir_all(&outside).unwrap();
}

#[test]
fn sandbox_enabled_without_bwrap_is_a_startup_error_naming_the_package() {
    let world = World::scripted_with(
        "sandbox-missing",
        &[final_turn("Done.", "ran")],
        true,
        "[sandbox]\nenabled = true\n",
    );
    let empty = world.home.join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let out = world.aerix_command(&["-p", "Go."]).env("PATH", &empty).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains(
            "sandbox.enabled is set but bwrap is not installed: install Debian's bubblewrap"
        ),
        "{err}"
    );
    // Nothing ran: no session was started.
    assert!(world.try_log_path().is_none(), "{err}");
}

/// One `read` of `outside.txt` in the world's home, beside the repository.
fn read_outside(name: &str, user_settings: &str, project_settings: Option<&str>) -> String {
    let replies = vec![
        "answer".to_owned(),
        calls("Read it.", vec![call("read", json!({"path": "../outside.txt"}))]),
        final_turn("Done.", "read"),
    ];
    let world = World::scripted_with(name, &replies, true, user_settings);
    std::fs::write(world.home.join("outside.txt"), "beside the tree\n").unwrap();
    if let Some(text) = project_settings {
        world.write(".aerix/settings.toml", text);
    }
    let out = run_within(&world, 120);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    result(&world.events(), "c1")
}

#[test]
fn an_added_directory_is_a_root_of_the_file_tools_and_a_projects_only_once_trusted() {
    let home =
        |name: &str| std::env::temp_dir().join(format!("aerix-e2e-{name}-{}", std::process::id()));
    // Without it: refused, naming the setting.
    let text = read_outside("bounds-added-none", "", None);
    assert!(text.contains("outside the working tree"), "{text}");
    assert!(text.contains("permissions.additionalDirectories"), "{text}");
    // The user's setting adds the home (the file's directory): the read works.
    let name = "bounds-added-user";
    let dir = home(name);
    let setting =
        format!("[permissions]\nadditional_directories = [{:?}]\n", dir.display().to_string());
    let text = read_outside(name, &setting, None);
    assert!(text.contains("beside the tree"), "{text}");
    // The same from an untrusted project's settings: not applied.
    let name = "bounds-added-project";
    let dir = home(name);
    let setting =
        format!("[permissions]\nadditional_directories = [{:?}]\n", dir.display().to_string());
    let text = read_outside(name, "", Some(&setting));
    assert!(text.contains("outside the working tree"), "an untrusted project added a root: {text}");
}
