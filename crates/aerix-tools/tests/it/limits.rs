//! The bounds: only regular files are read or changed (a device, a FIFO, a socket refused at
//! once, by name), a read's memory stays small on a 2 GiB file, `edit` refuses a file over its
//! cap, an agent's background jobs are bounded. Each guard's test fails, never hangs, without
//! it.

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use aerix_tools::{EDIT_MAX_BYTES, MAX_JOBS, Roots};
use serde_json::json;

use crate::{Scratch, within};

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Whatever a call of `tool` at `path` does, it returns within 5 s, refused naming `kind`.
fn refused_at_once(
    s: Scratch,
    tool: &'static str,
    input: serde_json::Value,
    kind: &'static str,
) -> Scratch {
    let what = format!("{tool} {input}");
    let (s, error) = within(5, &what, move || {
        let error = s.refused(tool, input);
        (s, error)
    });
    assert!(
        error.starts_with("refused: ")
            && error.contains(kind)
            && error.contains("only regular files"),
        "{what}: {error}"
    );
    s
}

#[test]
fn a_fifo_in_the_tree_is_refused_at_once_by_every_file_tool() {
    let s = Scratch::new("fifo", false);
    mkfifo(&s.path().join("pipe"));
    let s = refused_at_once(s, "read", json!({"path": "pipe"}), "pipe is a FIFO");
    let s = refused_at_once(s, "edit", json!({"path": "pipe", "old": "a", "new": "b"}), "a FIFO");
    let s = refused_at_once(s, "write", json!({"path": "pipe", "content": "x"}), "a FIFO");
    let s = refused_at_once(s, "grep", json!({"pattern": "x", "path": "pipe"}), "a FIFO");
    // A listing skips it, and a search over the tree does not wait on it.
    s.write("a.txt", "x\n");
    let out =
        within(5, "grep over a tree holding a FIFO", move || s.ok("grep", json!({"pattern": "x"})));
    assert_eq!(out, "a.txt:1:x");
}

#[test]
fn a_socket_is_refused_by_name() {
    let s = Scratch::new("socket", false);
    let _listener = UnixListener::bind(s.path().join("sock")).unwrap();
    let s = refused_at_once(s, "read", json!({"path": "sock"}), "sock is a socket");
    let s = refused_at_once(s, "edit", json!({"path": "sock", "old": "a", "new": "b"}), "a socket");
    refused_at_once(s, "write", json!({"path": "sock", "content": "x"}), "a socket");
}

#[test]
fn dev_zero_is_refused_outside_the_tree_and_as_a_device_when_allowed() {
    let mut s = Scratch::new("dev-zero", false);
    let error = s.refused("read", json!({"path": "/dev/zero"}));
    assert!(error.contains("/dev/zero is outside the working tree"), "{error}");
    std::os::unix::fs::symlink("/dev/zero", s.path().join("zero")).unwrap();
    let error = s.refused("read", json!({"path": "zero"}));
    assert!(error.contains("resolves to /dev/zero, which is outside"), "{error}");
    // Even inside the roots a device is no file to read.
    s.roots = Roots::new(s.path()).with_dir(Path::new("/dev"));
    let s = refused_at_once(s, "read", json!({"path": "/dev/zero"}), "a character device");
    let s = refused_at_once(s, "read", json!({"path": "zero"}), "a character device");
    refused_at_once(
        s,
        "edit",
        json!({"path": "/dev/zero", "old": "a", "new": "b"}),
        "a character device",
    );
}

#[test]
fn edit_refuses_a_file_over_its_cap_by_name() {
    let s = Scratch::new("edit-cap", false);
    let big = "x".repeat(usize::try_from(EDIT_MAX_BYTES).unwrap() + 1);
    s.write("big.txt", &big);
    let error = s.refused("edit", json!({"path": "big.txt", "old": "x", "new": "y"}));
    assert_eq!(
        error,
        format!(
            "refused: big.txt is {} bytes, over the 8 MiB edit loads; change it with bash",
            EDIT_MAX_BYTES + 1
        )
    );
    s.write("small.txt", "x\n");
    assert_eq!(
        s.ok("edit", json!({"path": "small.txt", "old": "x", "new": "y"})),
        "edited small.txt at line 1"
    );
}

#[test]
fn the_background_jobs_of_an_agent_are_bounded() {
    let s = Scratch::new("jobs-bound", false);
    for i in 1..=MAX_JOBS {
        let out = s.ok("bash", json!({"command": "sleep 30", "background": true}));
        assert!(out.starts_with(&format!("started job j{i}")), "{out}");
    }
    let error = s.refused("bash", json!({"command": "sleep 30", "background": true}));
    assert!(
        error.starts_with("refused: 8 background jobs are running, the most an agent may have (8)"),
        "{error}"
    );
    assert_eq!(s.jobs.running(), MAX_JOBS);
    // The foreground still runs, and a job that ended frees its place.
    assert_eq!(s.ok("bash", json!({"command": "echo fg"})), "fg\n[exit 0]");
    s.jobs.kill_all();
    let out = s.ok("bash", json!({"command": "true", "background": true}));
    assert!(out.starts_with("started job j9"), "{out}");
}

/// The sparse file of the memory test: text lines, a 2 GiB hole, text lines.
const HEAD_LINES: usize = 1000;
const SIZE: u64 = 2 << 30;

fn sparse(dir: &Path) -> PathBuf {
    let path = dir.join("huge.log");
    let mut file = std::fs::File::create(&path).unwrap();
    for i in 1..=HEAD_LINES {
        writeln!(file, "head {i}").unwrap();
    }
    file.seek(SeekFrom::Start(SIZE - 64)).unwrap();
    file.write_all(b"\ntail 1\ntail 2\n").unwrap();
    path
}

/// Run as a child of `a_read_of_a_2_gib_file_keeps_its_memory_small`: reads the file's first
/// lines and a line past the hole, then prints its peak resident memory.
#[test]
fn huge_read_child() {
    let Some(dir) = std::env::var_os("AERIX_TOOLS_HUGE_READ") else { return };
    let s = Scratch::new("huge-read", false);
    let path = sparse(Path::new(&dir));
    let mut s = s;
    s.roots = Roots::new(s.path()).with_dir(Path::new(&dir));
    let path = path.display().to_string();
    let first = s.ok("read", json!({"path": path, "limit": 3}));
    assert_eq!(
        first,
        "1\thead 1\n2\thead 2\n3\thead 3\n[lines 1-3 of a 2.0 GiB file; read with offset=4 for more]\n"
    );
    let mid = s.ok("read", json!({"path": path, "offset": 999, "limit": 1}));
    assert!(mid.starts_with("999\thead 999\n"), "{mid}");
    // Line 1001 is the hole: 2 GiB of zeros, one line. Read, it is cut without being held;
    // skipped, it is passed without being held, and the last line is found.
    let hole = s.ok("read", json!({"path": path, "offset": HEAD_LINES + 1, "limit": 1}));
    assert!(
        hole.starts_with(&format!(
            "1001\t{}[... line cut at 2000 characters]\n",
            "\0".repeat(2000)
        ))
    );
    assert!(
        hole.ends_with("[lines 1001-1001 of a 2.0 GiB file; read with offset=1002 for more]\n")
    );
    let far = s.ok("read", json!({"path": path, "offset": HEAD_LINES + 3, "limit": 5}));
    assert_eq!(far, "1003\ttail 2\n");
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let peak = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    println!("PEAK {peak}");
}

#[test]
fn a_read_of_a_2_gib_file_keeps_its_memory_small() {
    let s = Scratch::new("huge", false);
    let dir = s.outside("huge");
    let start = Instant::now();
    // A child of its own: its peak memory is this read's alone, not the other tests'.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["limits::huge_read_child", "--exact", "--nocapture", "--test-threads=1"])
        .env("AERIX_TOOLS_HUGE_READ", &dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("the read of a 2 GiB file took over 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout
        .lines()
        .find_map(|l| l.split("PEAK VmHWM:").nth(1))
        .unwrap_or_else(|| panic!("{stdout}"));
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().unwrap();
    // A whole-file read would hold 2 GiB; the streamed one holds a buffer and a few lines.
    assert!(kib < 64 * 1024, "peak resident memory {kib} KiB reading a 2 GiB file");
}
