//! `bash` under bubblewrap: outside the tree nothing is written, the network is gone unless
//! allowed, the tree stays writable, and a timeout or a cancel still ends every process. These
//! need `bwrap` (`scripts/setup --tests` installs Debian's bubblewrap): without it they fail.

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use aerix_tools::{Roots, Sandbox};
use serde_json::json;

use crate::Scratch;

fn sandboxed(name: &str, network: bool) -> Scratch {
    assert!(
        Sandbox::bwrap().is_ok(),
        "bwrap is not installed: scripts/setup --tests installs Debian's bubblewrap"
    );
    let mut s = Scratch::new(name, false);
    s.sandbox = Some(Sandbox { network });
    s
}

/// A directory outside the tree and outside `/tmp` (which the sandbox replaces with its own).
fn outside_tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("aerix-sandbox-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_write_outside_the_tree_fails_inside_the_sandbox_and_works_without_it() {
    let mut s = sandboxed("sbx-write", false);
    let outside = outside_tmp("write");
    let target = outside.join("escaped.txt");
    let command = format!("echo escaped > {}", target.display());
    let out = s.ok("bash", json!({"command": command}));
    assert!(out.contains("Read-only file system") && out.ends_with("[exit 2]"), "{out}");
    assert!(!target.exists());
    // The tree stays writable, and its files are the host's.
    let out = s.ok("bash", json!({"command": "echo kept > in-tree.txt && cat in-tree.txt"}));
    assert_eq!(out, "kept\n[exit 0]");
    assert_eq!(s.read("in-tree.txt"), "kept\n");
    // `/tmp` is the sandbox's own: what is written there never reaches the host's.
    let stray = std::env::temp_dir().join(format!("aerix-sandbox-stray-{}", std::process::id()));
    let out = s.ok("bash", json!({"command": format!("echo x > {} && echo ok", stray.display())}));
    assert_eq!(out, "ok\n[exit 0]");
    assert!(!stray.exists());
    // A directory added to the roots is writable inside too.
    s.roots = Roots::new(s.path()).with_dir(&outside);
    assert_eq!(s.ok("bash", json!({"command": command})), "[exit 0]");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "escaped\n");
    std::fs::remove_file(&target).unwrap();
    // Without the sandbox the same command writes outside.
    s.roots = Roots::new(s.path());
    s.sandbox = None;
    assert_eq!(s.ok("bash", json!({"command": command})), "[exit 0]");
    assert!(target.exists());
    std::fs::remove_dir_all(&outside).unwrap();
}

/// `bash`'s /dev/tcp: connects to the test's listener on the host's loopback.
fn connect(port: u16) -> String {
    format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}' && echo connected")
}

#[test]
fn the_network_is_refused_inside_unless_allowed() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let s = sandboxed("sbx-net", false);
    let out = s.ok("bash", json!({"command": connect(port)}));
    assert!(!out.contains("connected") && out.ends_with("[exit 1]"), "{out}");
    assert!(listener.accept().is_err(), "nothing reached the listener");
    // `sandbox.network = true`: the host's network, loopback included.
    let mut s = s;
    s.sandbox = Some(Sandbox { network: true });
    let out = s.ok("bash", json!({"command": connect(port)}));
    assert_eq!(out, "connected\n[exit 0]");
    let (mut stream, _) = listener.accept().unwrap();
    stream.set_nonblocking(false).unwrap();
    let mut got = String::new();
    stream.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hello\n");
}

#[test]
fn a_timeout_and_a_cancel_end_every_process_of_a_sandboxed_command() {
    let s = sandboxed("sbx-kill", false);
    let start = Instant::now();
    // A grandchild that would outlive its shell: the sandbox's PID namespace ends with it.
    let out = s.ok(
        "bash",
        json!({"command": "echo before; (sleep 30; echo never) & sleep 30", "timeout_secs": 1}),
    );
    assert_eq!(out, "before\n[timeout after 1s]");
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    // One that left the process group (`setsid`): outside a sandbox the group's `KILL` misses
    // it; inside, it ends with the sandbox's PID namespace.
    let escaped = "setsid sh -c 'sleep 2; echo alive > late.txt' >/dev/null 2>&1 & sleep 30";
    let out = s.ok("bash", json!({"command": escaped, "timeout_secs": 1}));
    assert_eq!(out, "[timeout after 1s]");
    std::thread::sleep(Duration::from_secs(3));
    assert!(!s.path().join("late.txt").exists(), "a process outlived its sandboxed command");
    let cancel = s.cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        cancel.cancel();
    });
    let start = Instant::now();
    assert_eq!(s.ok("bash", json!({"command": "trap '' TERM; sleep 30"})), "[cancelled]");
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    // Background jobs run inside too.
    let s2 = sandboxed("sbx-job", false);
    let outside = outside_tmp("job");
    let command = format!("touch {}/job.txt", outside.display());
    s2.ok("bash", json!({"command": command, "background": true}));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut ended = Vec::new();
    while ended.is_empty() && Instant::now() < deadline {
        ended = s2.jobs.take_finished();
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ended[0].text.starts_with("[job j1 exited 1]"), "{:?}", ended);
    assert!(!outside.join("job.txt").exists());
    std::fs::remove_dir_all(&outside).unwrap();
}

#[test]
fn the_startup_check_makes_the_sandbox_here() {
    // Its failure without bwrap is tested through the binary (`aerix`'s tests), which can be
    // given a PATH without it.
    let s = sandboxed("sbx-check", false);
    Sandbox { network: false }.check(&Roots::new(s.path())).unwrap();
    Sandbox { network: true }.check(&Roots::new(s.path())).unwrap();
}
