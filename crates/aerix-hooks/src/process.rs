//! Running one handler: `sh -c COMMAND` in the working directory, in its own process group, with
//! the event's JSON on stdin and `CLAUDE_PROJECT_DIR` set; past its timeout the group gets
//! `TERM`, then `KILL` after [`KILL_GRACE`](crate::KILL_GRACE).

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::KILL_GRACE;

/// Output kept per stream.
const STREAM_CAP: usize = 4 << 20;
/// How often a running handler is looked at.
const POLL: Duration = Duration::from_millis(20);
/// How long the output of a handler that ended may still take to arrive (a process it left
/// behind holds the pipes): then the group is killed and what arrived is kept.
const DRAIN_WAIT: Duration = Duration::from_millis(500);

/// How a handler ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    Exit(i32),
    Signal(i32),
    /// It ran past its timeout; `killed`: it was still there after `TERM` and the grace.
    Timeout {
        after: Duration,
        killed: bool,
    },
    /// The run was cancelled while it ran; `killed` as for a timeout.
    Cancelled {
        killed: bool,
    },
    /// `sh` could not be started.
    NotStarted(String),
}

impl Ending {
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            Ending::Exit(code) => Some(*code),
            _ => None,
        }
    }

    /// `exit 0`, `signal 9`, `timeout after 1s`, `not started: ...`.
    pub fn describe(&self) -> String {
        match self {
            Ending::Exit(code) => format!("exit {code}"),
            Ending::Signal(signal) => format!("signal {signal}"),
            Ending::Timeout { after, .. } => format!("timeout after {after:?}"),
            Ending::Cancelled { .. } => "cancelled".to_owned(),
            Ending::NotStarted(why) => format!("not started: {why}"),
        }
    }
}

/// What to run.
pub(crate) struct Spawn<'a> {
    pub(crate) command: &'a str,
    pub(crate) cwd: &'a Path,
    pub(crate) project_dir: &'a Path,
    pub(crate) env: &'a [(String, String)],
    pub(crate) input: Vec<u8>,
    pub(crate) timeout: Duration,
    /// Polled while it runs: true ends it as a timeout would.
    pub(crate) cancelled: &'a (dyn Fn() -> bool + Sync),
    /// Polled in the grace after `TERM`: true sends `KILL` at once (the process is about to
    /// exit, and a handler that ignores `TERM` must not outlive it).
    pub(crate) hurried: &'a (dyn Fn() -> bool + Sync),
}

pub(crate) struct Finished {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) ending: Ending,
    pub(crate) duration: Duration,
}

pub(crate) fn run(spawn: Spawn<'_>) -> Finished {
    let started = Instant::now();
    let child = Command::new("sh")
        .arg("-c")
        .arg(spawn.command)
        .current_dir(spawn.cwd)
        .env("CLAUDE_PROJECT_DIR", spawn.project_dir)
        .envs(spawn.env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            return Finished {
                stdout: String::new(),
                stderr: String::new(),
                ending: Ending::NotStarted(format!("sh in {}: {e}", spawn.cwd.display())),
                duration: started.elapsed(),
            };
        }
    };
    let pgid = i32::try_from(child.id()).unwrap_or(0);
    if let Some(mut stdin) = child.stdin.take() {
        // On its own thread: a handler that never reads its input must not stall the run.
        // A handler that exits without reading closes the pipe (the write fails, ignored).
        let input = spawn.input;
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let ending = loop {
        match child.try_wait() {
            Ok(Some(status)) => break exit_ending(status),
            Ok(None) => {}
            Err(e) => {
                signal_group(pgid, Signal::SIGKILL);
                let _ = child.wait();
                break Ending::NotStarted(format!("waiting for it: {e}"));
            }
        }
        if started.elapsed() >= spawn.timeout {
            let killed = terminate(&mut child, pgid, spawn.hurried);
            break Ending::Timeout { after: spawn.timeout, killed };
        }
        if (spawn.cancelled)() {
            let killed = terminate(&mut child, pgid, spawn.hurried);
            break Ending::Cancelled { killed };
        }
        std::thread::sleep(POLL.min(spawn.timeout.saturating_sub(started.elapsed())));
    };
    let deadline = Instant::now() + DRAIN_WAIT;
    while !(stdout.done() && stderr.done()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    if !(stdout.done() && stderr.done()) {
        signal_group(pgid, Signal::SIGKILL);
        let deadline = Instant::now() + DRAIN_WAIT;
        while !(stdout.done() && stderr.done()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Finished { stdout: stdout.text(), stderr: stderr.text(), ending, duration: started.elapsed() }
}

/// A stream read on its own thread into a buffer that can be taken at any time (a process
/// outside the group may hold the pipe open forever).
struct Drain {
    buffer: Arc<Mutex<(Vec<u8>, bool)>>,
}

impl Drain {
    fn done(&self) -> bool {
        self.buffer.lock().map(|b| b.1).unwrap_or(true)
    }

    fn text(&self) -> String {
        self.buffer.lock().map(|b| String::from_utf8_lossy(&b.0).into_owned()).unwrap_or_default()
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> Drain {
    let buffer = Arc::new(Mutex::new((Vec::new(), false)));
    let shared = Arc::clone(&buffer);
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        if let Some(mut pipe) = pipe {
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Ok(mut b) = shared.lock() {
                            let room = STREAM_CAP.saturating_sub(b.0.len());
                            b.0.extend_from_slice(&chunk[..n.min(room)]);
                        }
                    }
                }
            }
        }
        if let Ok(mut b) = shared.lock() {
            b.1 = true;
        }
    });
    Drain { buffer }
}

fn signal_group(pgid: i32, signal: Signal) {
    if pgid > 0 {
        let _ = killpg(Pid::from_raw(pgid), signal);
    }
}

/// `TERM` to the group, then `KILL` after the grace if the shell is still there; whether it
/// took `KILL`.
fn terminate(child: &mut Child, pgid: i32, hurried: &(dyn Fn() -> bool + Sync)) -> bool {
    signal_group(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline && !hurried() {
        if let Ok(Some(_)) = child.try_wait() {
            // The shell is gone; anything it left in the group goes too.
            signal_group(pgid, Signal::SIGKILL);
            return false;
        }
        std::thread::sleep(POLL);
    }
    signal_group(pgid, Signal::SIGKILL);
    let _ = child.wait();
    true
}

fn exit_ending(status: ExitStatus) -> Ending {
    match (status.code(), status.signal()) {
        (Some(code), _) => Ending::Exit(code),
        (None, Some(signal)) => Ending::Signal(signal),
        (None, None) => Ending::Exit(-1),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::{Ending, Spawn, run};

    fn sh(command: &str, input: &str, timeout: Duration) -> super::Finished {
        sh_until(command, input, timeout, &|| false)
    }

    fn sh_until(
        command: &str,
        input: &str,
        timeout: Duration,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> super::Finished {
        run(Spawn {
            command,
            cwd: Path::new("/tmp"),
            project_dir: Path::new("/the/project"),
            env: &[],
            input: input.as_bytes().to_vec(),
            timeout,
            cancelled,
            hurried: &|| false,
        })
    }

    #[test]
    fn stdin_environment_output_and_status() {
        let out = sh(
            "cat; echo \" $CLAUDE_PROJECT_DIR\"; echo oops >&2; exit 3",
            "{\"a\":1}",
            Duration::from_secs(10),
        );
        assert_eq!(out.stdout, "{\"a\":1} /the/project\n");
        assert_eq!(out.stderr, "oops\n");
        assert_eq!(out.ending, Ending::Exit(3));
    }

    #[test]
    fn a_handler_that_ignores_term_is_killed() {
        let out = sh("trap '' TERM; sleep 30", "", Duration::from_millis(200));
        assert_eq!(out.ending, Ending::Timeout { after: Duration::from_millis(200), killed: true });
        assert!(out.duration < Duration::from_secs(5), "{:?}", out.duration);
        let out = sh("sleep 30", "", Duration::from_millis(200));
        assert_eq!(
            out.ending,
            Ending::Timeout { after: Duration::from_millis(200), killed: false }
        );
        assert!(out.duration < Duration::from_secs(2), "{:?}", out.duration);
    }

    #[test]
    fn a_cancelled_handler_gets_term_then_kill() {
        let since = std::time::Instant::now();
        let after_200ms = || since.elapsed() >= Duration::from_millis(200);
        let out = sh_until("sleep 30", "", Duration::from_secs(60), &after_200ms);
        assert_eq!(out.ending, Ending::Cancelled { killed: false });
        assert!(out.duration < Duration::from_secs(2), "{:?}", out.duration);
        let since = std::time::Instant::now();
        let after_200ms = || since.elapsed() >= Duration::from_millis(200);
        let out = sh_until("trap '' TERM; sleep 30", "", Duration::from_secs(60), &after_200ms);
        assert_eq!(out.ending, Ending::Cancelled { killed: true });
        assert!(out.duration < Duration::from_secs(5), "{:?}", out.duration);
    }

    #[test]
    fn a_hurried_handler_in_its_grace_is_killed_at_once() {
        let since = std::time::Instant::now();
        let cancelled = || since.elapsed() >= Duration::from_millis(200);
        let hurried = || since.elapsed() >= Duration::from_millis(400);
        let out = run(Spawn {
            command: "trap '' TERM; sleep 30",
            cwd: Path::new("/tmp"),
            project_dir: Path::new("/the/project"),
            env: &[],
            input: Vec::new(),
            timeout: Duration::from_secs(60),
            cancelled: &cancelled,
            hurried: &hurried,
        });
        assert_eq!(out.ending, Ending::Cancelled { killed: true });
        // Without the hurry, `KILL` would come after the 2 s grace.
        assert!(out.duration < Duration::from_secs(1), "{:?}", out.duration);
    }

    #[test]
    fn a_missing_command_exits_127_and_a_large_input_unread_does_not_stall() {
        let out = sh("no-such-command-aerix-test", &"x".repeat(1 << 20), Duration::from_secs(10));
        assert_eq!(out.ending, Ending::Exit(127));
        assert!(out.stderr.contains("not found"), "{}", out.stderr);
    }
}
