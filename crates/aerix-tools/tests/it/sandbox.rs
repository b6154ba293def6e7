//! `bash` under bubblewrap: outside the tree nothing is written, the network is gone unless
//! allowed, the tree stays writable (its `.git` read-only), a timeout or a cancel still ends
//! every process, and the sandbox holds as root and at a terminal: no capability, no
//! controlling terminal, no Unix socket but those allowed. These need `bwrap` and `python3`
//! (`scripts/setup --tests` installs Debian's bubblewrap and python3): without them they fail.

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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
    s.sandbox = Some(Sandbox::new(network));
    s
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
        let dir = base.join(format!("aerix-sandbox-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if std::fs::create_dir_all(&dir).is_ok() {
            return dir;
        }
    }
    panic!("no writable directory outside /tmp: the target's, /var/tmp and ~ all lie under it");
}

#[test]
fn a_write_outside_the_tree_fails_inside_the_sandbox_and_works_without_it() {
    let mut s = sandboxed("sbx-write", false);
    let outside = outside_tmp("write");
    let target = outside.join("escaped.txt");
    let command = format!("echo escaped > {}", target.display());
    let out = s.ok("bash", json!({"command": command}));
    // The outcome first (nothing written, a failure), then why: read-only, not hidden.
    assert!(!target.exists() && !out.ends_with("[exit 0]"), "{out}");
    assert!(out.contains("Read-only file system") && out.ends_with("[exit 2]"), "{out}");
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
    s.sandbox = Some(Sandbox::new(true));
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
    // The command gets its `TERM` first, as outside the sandbox, though it runs in a session
    // of its own (bwrap, whose end ends the sandbox at once, gets only the `KILL`).
    let trapped = "trap 'echo term; exit 0' TERM; sleep 30 & wait";
    let out = s.ok("bash", json!({"command": trapped, "timeout_secs": 1}));
    assert_eq!(out, "term\n[timeout after 1s]");
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
    Sandbox::new(false).check(&Roots::new(s.path())).unwrap();
    Sandbox::new(true).check(&Roots::new(s.path())).unwrap();
    // With everything it can be given: hidden directories, a socket allowed, a `.git`.
    let hidden = outside_tmp("check");
    let socket = hidden.join("s.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    std::fs::create_dir_all(s.path().join(".git")).unwrap();
    let full =
        Sandbox { network: false, hidden: vec![hidden.clone()], allow_unix_sockets: vec![socket] };
    full.check(&Roots::new(s.path())).unwrap();
    // The directory and its socket file stay (under the target's tmp): removed, a sandbox
    // another test is starting at this moment, which listed the socket, would find its path
    // gone and bwrap would fail to cover it.
}

/// The name the terminal probe's environment carries: set, `a_terminal_probe` runs.
const TTY_PROBE: &str = "AERIX_TEST_TTY_PROBE";

/// Opens a terminal and pushes a byte into its input (`TIOCSTI`): the attack that typed a
/// command into the terminal aerix ran in. One line per terminal: `injected into`, or why not.
const TIOCSTI: &str = r##"
import fcntl, os, sys, termios
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    except OSError as e:
        print("open %s: %s" % (path, e.strerror)); continue
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"#"); print("injected into " + path)
    except OSError as e:
        print("ioctl %s: %s" % (path, e.strerror))
"##;

/// `s` quoted for `sh`.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn tiocsti_cannot_reach_the_terminal_aerix_runs_in() {
    // This test binary again, its probe alone, under a terminal of its own (`script` makes a
    // pty its controlling terminal, as a user's shell is aerix's): the `bash` tool then runs
    // with that terminal, as it does for a user.
    let exe = std::env::current_exe().unwrap();
    let inner = format!(
        "{} --exact sandbox::a_terminal_probe --ignored --nocapture --test-threads 1",
        quoted(&exe.to_string_lossy())
    );
    let out = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env(TTY_PROBE, "1")
        .stdin(Stdio::null())
        .output()
        .expect("`script` (util-linux) runs the probe under a terminal");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

/// Run by `tiocsti_cannot_reach_the_terminal_aerix_runs_in` under a terminal; nothing without
/// its variable.
#[test]
#[ignore = "run under a terminal by tiocsti_cannot_reach_the_terminal_aerix_runs_in"]
fn a_terminal_probe() {
    if std::env::var_os(TTY_PROBE).is_none() {
        return;
    }
    // The terminal `script` gave this process, by name, and as the controlling `/dev/tty`.
    let tty = std::fs::read_link("/proc/self/fd/0").unwrap();
    let mut s = sandboxed("sbx-tty", false);
    s.write("tiocsti.py", TIOCSTI);
    let command = format!("python3 tiocsti.py /dev/tty {}", tty.display());
    let inside = s.ok("bash", json!({"command": command}));
    s.sandbox = None;
    let outside = s.ok("bash", json!({"command": command}));
    println!("inside: {inside:?}\noutside: {outside:?}");
    // The probe is real: outside, the command has the terminal (and, as root or where
    // `dev.tty.legacy_tiocsti` is 1, injects into it).
    assert!(!outside.contains("open /dev/tty:"), "{outside}");
    // Inside: no controlling terminal (`--new-session`), the host's ptys not in the fresh
    // `/dev`, and no capability to push into a terminal that is not its own.
    assert!(inside.contains("open /dev/tty: No such device or address"), "{inside}");
    assert!(!inside.contains("injected"), "{inside}");
    // A terminal handed in anyway (as stdin: the `bash` tool gives none) is refused too: no
    // capability to push into a terminal that is not the process's own (`--cap-drop ALL`).
    let mut args = Sandbox::new(false).args(&s.roots, s.path());
    args.extend(["python3", "tiocsti.py", "/proc/self/fd/0"].map(Into::into));
    let stdin = std::fs::OpenOptions::new().read(true).write(true).open(&tty).unwrap();
    let out = Command::new(Sandbox::bwrap().unwrap())
        .args(args)
        .current_dir(s.path())
        .stdin(stdin)
        .output()
        .unwrap();
    let handed = String::from_utf8_lossy(&out.stdout);
    println!("handed in: {handed:?}");
    assert!(handed.contains("ioctl /proc/self/fd/0: Operation not permitted"), "{handed}");
}

#[test]
fn every_capability_is_dropped_even_as_root() {
    let s = sandboxed("sbx-caps", false);
    let out =
        s.ok("bash", json!({"command": "grep -E '^Cap(Inh|Prm|Eff|Amb):' /proc/self/status"}));
    let sets: Vec<&str> = out.lines().filter(|l| l.starts_with("Cap")).collect();
    assert_eq!(sets.len(), 4, "{out}");
    assert!(sets.iter().all(|l| l.ends_with("\t0000000000000000")), "{out}");
    // Root with CAP_SYS_ADMIN remounted `/` read-write and wrote outside; without it, no.
    let outside = outside_tmp("caps");
    let target = outside.join("escaped.txt");
    let command = format!(
        "mount -o remount,bind,rw / 2>&1; echo remount=$?; echo x > {} && echo written",
        target.display()
    );
    let out = s.ok("bash", json!({"command": command}));
    assert!(out.contains("remount=") && !out.contains("remount=0\n"), "{out}");
    assert!(!out.contains("written") && !target.exists(), "{out}");
    std::fs::remove_dir_all(&outside).unwrap();
}

/// Connects to the Unix socket `argv[1]` (`@NAME`: an abstract one) and says so.
const CONNECT: &str = r#"
import socket, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0" + path[1:] if path.startswith("@") else path)
    s.sendall(b"hello"); print("connected")
except OSError as e:
    print("refused: %s" % e.strerror); sys.exit(1)
"#;

/// Whether `listener` got a connection, and then `hello` on it.
fn reached(listener: &UnixListener) -> bool {
    match listener.accept() {
        Ok((mut stream, _)) => {
            stream.set_nonblocking(false).unwrap();
            let mut got = String::new();
            stream.read_to_string(&mut got).unwrap();
            got == "hello"
        }
        Err(_) => false,
    }
}

#[test]
fn no_unix_socket_is_reachable_inside_but_those_allowed() {
    let mut s = sandboxed("sbx-unix", false);
    s.write("connect.py", CONNECT);
    let connect = |s: &Scratch, path: &Path| {
        s.ok("bash", json!({"command": format!("python3 connect.py {}", path.display())}))
    };
    // A runtime directory outside `/tmp`, as `$XDG_RUNTIME_DIR` is on a desktop, with a socket
    // like the pool's in it.
    let run = outside_tmp("unix");
    let socket = run.join("pool.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    // Without the sandbox the socket is reachable.
    s.sandbox = None;
    assert_eq!(connect(&s, &socket), "connected\n[exit 0]");
    assert!(reached(&listener));
    // The directory hidden (the pool's, `$XDG_RUNTIME_DIR`): there is nothing there.
    let hiding = Sandbox { hidden: vec![run.clone()], ..Sandbox::new(false) };
    s.sandbox = Some(hiding.clone());
    let out = connect(&s, &socket);
    assert!(
        out.contains("refused: No such file or directory") && out.ends_with("[exit 1]"),
        "{out}"
    );
    assert!(!reached(&listener));
    // Not hidden, still unreachable: every socket the host shows is covered, and the network
    // kept (`sandbox.network`) changes nothing for a socket with a path.
    for network in [false, true] {
        s.sandbox = Some(Sandbox::new(network));
        let out = connect(&s, &socket);
        assert!(out.contains("refused: Connection refused") && out.ends_with("[exit 1]"), "{out}");
        assert!(!reached(&listener));
    }
    // One in the tree, bound by the host, too.
    let in_tree = s.path().join("app.sock");
    let tree_listener = UnixListener::bind(&in_tree).unwrap();
    tree_listener.set_nonblocking(true).unwrap();
    let out = connect(&s, &in_tree);
    assert!(out.contains("refused: Connection refused"), "{out}");
    assert!(!reached(&tree_listener));
    // Listed in `sandbox.allow_unix_sockets`: bound back in, reachable, even from a hidden
    // directory; the others stay out.
    s.sandbox = Some(Sandbox { allow_unix_sockets: vec![socket.clone()], ..hiding });
    assert_eq!(connect(&s, &socket), "connected\n[exit 0]");
    assert!(reached(&listener));
    assert!(connect(&s, &in_tree).contains("refused"));
    assert!(!reached(&tree_listener));
    // Abstract sockets live in the network namespace: gone without the network, reachable
    // with it (`sandbox.network = true`, as documented).
    use std::os::linux::net::SocketAddrExt;
    let name = format!("aerix-sbx-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let abstract_listener = UnixListener::bind_addr(&addr).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    let at = PathBuf::from(format!("@{name}"));
    s.sandbox = Some(Sandbox::new(false));
    assert!(connect(&s, &at).contains("refused: Connection refused"));
    assert!(!reached(&abstract_listener));
    s.sandbox = Some(Sandbox::new(true));
    assert_eq!(connect(&s, &at), "connected\n[exit 0]");
    assert!(reached(&abstract_listener));
    std::fs::remove_dir_all(&run).unwrap();
}

#[test]
fn git_is_read_only_inside_the_sandbox_and_the_tree_writable() {
    let mut s = Scratch::new("sbx-git", true);
    s.sandbox = Some(Sandbox::new(false));
    let before = s.read(".git/config");
    // A hook or a `core.fsmonitor` planted here would run outside at the next git command.
    let out = s.ok("bash", json!({"command": "echo '[core] fsmonitor = evil' >> .git/config"}));
    assert!(out.contains("Read-only file system") && !out.ends_with("[exit 0]"), "{out}");
    let out = s.ok("bash", json!({"command": "echo evil > .git/hooks/pre-commit"}));
    assert!(out.contains("Read-only file system"), "{out}");
    let gone =
        "rm -rf .git 2>/dev/null; mv .git moved 2>/dev/null; test -f .git/config && echo kept";
    assert_eq!(s.ok("bash", json!({"command": gone})), "kept\n[exit 0]");
    assert_eq!(s.read(".git/config"), before);
    assert!(!s.path().join(".git/hooks/pre-commit").exists());
    let out = s.ok("bash", json!({"command": "echo kept > tree.txt && cat tree.txt"}));
    assert_eq!(out, "kept\n[exit 0]");
    // A worktree's `.git` is a file: read-only too.
    let w = Scratch::new("sbx-git-file", false);
    w.write(".git", "gitdir: /nowhere\n");
    let mut w = w;
    w.sandbox = Some(Sandbox::new(false));
    let out = w.ok("bash", json!({"command": "echo 'gitdir: /evil' > .git"}));
    assert!(out.contains("Read-only file system"), "{out}");
    assert_eq!(w.read(".git"), "gitdir: /nowhere\n");
}
