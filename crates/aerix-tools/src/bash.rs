//! `bash`: `sh -c` in its own process group (under bubblewrap with `sandbox.enabled`), in the
//! foreground or as a background job, at most `MAX_JOBS` of them running per agent.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Deserialize;

use crate::{Cancel, Sandbox, ToolEnv, ToolError};

pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// Between `TERM` and `KILL`.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How often a running command's timeout and the cancel flag are checked.
const POLL: Duration = Duration::from_millis(100);
/// Output kept per stream; the runtime caps results far below this.
const STREAM_CAP: usize = 4 << 20;
/// Background jobs one agent may have running; one more is refused by name.
pub const MAX_JOBS: usize = 8;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashInput {
    command: String,
    timeout_secs: Option<u64>,
    #[serde(default)]
    background: bool,
}

pub fn run(input: BashInput, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    let timeout_secs = input.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if timeout_secs == 0 || timeout_secs > MAX_TIMEOUT_SECS {
        return Err(ToolError::new(format!(
            "timeout_secs is {timeout_secs}: it must be 1 to {MAX_TIMEOUT_SECS}"
        )));
    }
    if input.command.trim().is_empty() {
        return Err(ToolError::new("the command is empty"));
    }
    let timeout = Duration::from_secs(timeout_secs);
    let launch = Launch::new(&input.command, env)?;
    if input.background {
        let id = env.jobs.start(&input.command, launch, timeout, env.cancel.clone())?;
        return Ok(format!(
            "started job {id} in the background; its output comes back as [job {id} exited N] \
             when it ends"
        ));
    }
    let finished = execute(&launch, timeout, &[env.cancel])?;
    Ok(finished.render(None))
}

/// `command` run in the foreground as `bash` runs it (the tree, the sandbox, the cancel), up to
/// `timeout`: how it ended and its rendered output (a harness-run check reads the status
/// itself, not a model).
pub fn run_command(
    command: &str,
    timeout: Duration,
    env: &ToolEnv<'_>,
) -> Result<(Ending, String), ToolError> {
    if command.trim().is_empty() {
        return Err(ToolError::new("the command is empty"));
    }
    let launch = Launch::new(command, env)?;
    let finished = execute(&launch, timeout, &[env.cancel])?;
    Ok((finished.ending.clone(), finished.render(None)))
}

/// How a command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    Exit(i32),
    Signal(i32),
    Timeout(u64),
    Cancelled,
}

struct Finished {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    ending: Ending,
}

impl Finished {
    /// stdout, then stderr, then the status line (`job` prefixes it for a background job).
    fn render(&self, job: Option<&str>) -> String {
        let status = match (&self.ending, job) {
            (Ending::Exit(n), None) => format!("[exit {n}]"),
            (Ending::Exit(n), Some(id)) => format!("[job {id} exited {n}]"),
            (Ending::Signal(n), None) => format!("[signal {n}]"),
            (Ending::Signal(n), Some(id)) => format!("[job {id} signal {n}]"),
            (Ending::Timeout(s), None) => format!("[timeout after {s}s]"),
            (Ending::Timeout(s), Some(id)) => format!("[job {id} timeout after {s}s]"),
            (Ending::Cancelled, None) => "[cancelled]".to_owned(),
            (Ending::Cancelled, Some(id)) => format!("[job {id} cancelled]"),
        };
        let mut out = String::new();
        if job.is_some() {
            out.push_str(&status);
            out.push('\n');
        }
        for stream in [&self.stdout, &self.stderr] {
            if !stream.is_empty() {
                out.push_str(&String::from_utf8_lossy(stream));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        if job.is_none() {
            out.push_str(&status);
        }
        out.trim_end().to_owned()
    }
}

/// How a command is started: `sh -c` in the working directory, or the same inside the sandbox.
#[derive(Clone, Debug)]
struct Launch {
    program: OsString,
    args: Vec<OsString>,
    cwd: PathBuf,
    /// Under `bwrap`, whose command runs in a session (and so a process group) of its own.
    sandboxed: bool,
}

impl Launch {
    fn new(command: &str, env: &ToolEnv<'_>) -> Result<Launch, ToolError> {
        let cwd = env.cwd.to_owned();
        let sh = ["sh", "-c", command].map(OsString::from);
        Ok(match env.sandbox {
            None => Launch { program: "sh".into(), args: sh[1..].to_vec(), cwd, sandboxed: false },
            // The setting is on: without bwrap the command does not run at all.
            Some(sandbox) => {
                let bwrap = Sandbox::bwrap().map_err(|e| ToolError::new(e.to_string()))?;
                let mut args = sandbox.args(env.roots, &cwd);
                args.extend(sh);
                Launch { program: bwrap.into(), args, cwd, sandboxed: true }
            }
        })
    }

    fn spawn(&self) -> Result<Child, ToolError> {
        Command::new(&self.program)
            .args(&self.args)
            .current_dir(&self.cwd)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                let program = self.program.to_string_lossy();
                ToolError::new(format!("cannot start {program} in {}: {e}", self.cwd.display()))
            })
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(pipe) = pipe {
            let _ = pipe.take(STREAM_CAP as u64).read_to_end(&mut out);
        }
        out
    })
}

fn signal_group(pgid: i32, signal: Signal) {
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// The process group of the sandboxed command below `bwrap` (`pid`): the first descendant in
/// a session other than `bwrap`'s (`--new-session`). `None` before the sandbox is made, or
/// where `/proc` lists no children.
fn sandboxed_group(pid: i32) -> Option<i32> {
    let session = |pid: i32| stat_fields(pid).map(|(_, session)| session);
    let outer = session(pid)?;
    let mut level = vec![pid];
    // bwrap, its init (PID 1 inside), the command: the depth is bwrap's, with one to spare.
    for _ in 0..3 {
        let mut next = Vec::new();
        for parent in level {
            let path = format!("/proc/{parent}/task/{parent}/children");
            let children = std::fs::read_to_string(path).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
                match stat_fields(child) {
                    Some((group, session)) if session != outer => return Some(group),
                    Some(_) => next.push(child),
                    None => {}
                }
            }
        }
        level = next;
    }
    None
}

/// A process's group and session (`/proc/PID/stat`, after the name in parentheses, which may
/// hold anything: state, parent, group, session).
fn stat_fields(pid: i32) -> Option<(i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(2);
    let group = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some((group, session))
}

/// `TERM` to the group, then `KILL` after the grace period (or once any of `cancels` is
/// hurried) if the shell is still there. In the sandbox the `TERM` goes to the command's own
/// group (bwrap, which would end the sandbox at once, is not in it), else to bwrap's.
fn terminate(
    launch: &Launch,
    child: &mut Child,
    pgid: i32,
    cancels: &[&Cancel],
) -> Option<ExitStatus> {
    let inner = if launch.sandboxed { sandboxed_group(pgid) } else { None };
    signal_group(inner.unwrap_or(pgid), Signal::SIGTERM);
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline && !cancels.iter().any(|c| c.is_hurried()) {
        if let Ok(Some(status)) = child.try_wait() {
            // The shell is gone; anything it left in the group goes too.
            signal_group(pgid, Signal::SIGKILL);
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_group(pgid, Signal::SIGKILL);
    child.wait().ok()
}

/// Runs to its end, its timeout, or until any of `cancels` is set.
fn execute(launch: &Launch, timeout: Duration, cancels: &[&Cancel]) -> Result<Finished, ToolError> {
    let mut child = launch.spawn()?;
    let pgid = i32::try_from(child.id()).unwrap_or(0);
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let started = Instant::now();
    let ending = loop {
        match child.try_wait() {
            Ok(Some(status)) => break exit_ending(status),
            Ok(None) => {}
            Err(e) => return Err(ToolError::new(format!("waiting for the command: {e}"))),
        }
        if cancels.iter().any(|c| c.is_cancelled()) {
            terminate(launch, &mut child, pgid, cancels);
            break Ending::Cancelled;
        }
        if started.elapsed() >= timeout {
            terminate(launch, &mut child, pgid, cancels);
            break Ending::Timeout(timeout.as_secs());
        }
        std::thread::sleep(
            POLL.min(timeout.saturating_sub(started.elapsed())).max(Duration::from_millis(5)),
        );
    };
    // A process the command left running in its group still holds the pipes: give it a moment,
    // then end the group so the output can be read.
    let deadline = Instant::now() + Duration::from_millis(500);
    while !(stdout.is_finished() && stderr.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if !(stdout.is_finished() && stderr.is_finished()) {
        signal_group(pgid, Signal::SIGKILL);
    }
    Ok(Finished {
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
        ending,
    })
}

fn exit_ending(status: ExitStatus) -> Ending {
    match (status.code(), status.signal()) {
        (Some(code), _) => Ending::Exit(code),
        (None, Some(signal)) => Ending::Signal(signal),
        (None, None) => Ending::Exit(-1),
    }
}

/// A background job that ended: its result text starts with `[job jN exited N]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEnd {
    pub id: String,
    pub command: String,
    pub ending: Ending,
    pub text: String,
}

/// A running background job.
#[derive(Debug)]
pub struct Job {
    pub id: String,
    pub command: String,
    pub deadline: Instant,
    cancel: Cancel,
    handle: Option<JoinHandle<JobEnd>>,
}

/// One agent's background jobs.
#[derive(Debug, Default)]
pub struct Jobs {
    inner: Mutex<JobsInner>,
}

#[derive(Debug, Default)]
struct JobsInner {
    next: u32,
    running: Vec<Job>,
    /// Jobs started since the last `take_started`: (id, command).
    started: Vec<(String, String)>,
}

impl Jobs {
    fn start(
        &self,
        command: &str,
        launch: Launch,
        timeout: Duration,
        cancel: Cancel,
    ) -> Result<String, ToolError> {
        let mut inner =
            self.inner.lock().map_err(|_| ToolError::new("the job table is poisoned"))?;
        // A job that ended but whose result is not taken yet no longer counts.
        let running = inner
            .running
            .iter()
            .filter(|j| j.handle.as_ref().is_some_and(|h| !h.is_finished()))
            .count();
        if running >= MAX_JOBS {
            return Err(ToolError::new(format!(
                "refused: {running} background jobs are running, the most an agent may have \
                 ({MAX_JOBS}); wait for one to end (its output comes back as [job jN exited N]) \
                 or run this command in the foreground"
            )));
        }
        inner.next += 1;
        let id = format!("j{}", inner.next);
        // A job is cancelled with the agent, or on its own when the agent ends.
        let own = Cancel::default();
        let (job_id, text, watch) = (id.clone(), command.to_owned(), own.clone());
        let handle = std::thread::spawn(move || {
            let finished = match execute(&launch, timeout, &[&cancel, &watch]) {
                Ok(f) => f,
                Err(e) => Finished {
                    stdout: Vec::new(),
                    stderr: e.0.into_bytes(),
                    ending: Ending::Exit(-1),
                },
            };
            JobEnd {
                id: job_id.clone(),
                command: text,
                ending: finished.ending.clone(),
                text: finished.render(Some(&job_id)),
            }
        });
        inner.started.push((id.clone(), command.to_owned()));
        inner.running.push(Job {
            id: id.clone(),
            command: command.to_owned(),
            deadline: Instant::now() + timeout,
            cancel: own,
            handle: Some(handle),
        });
        Ok(id)
    }

    /// The jobs started since the last call: (id, command).
    pub fn take_started(&self) -> Vec<(String, String)> {
        self.inner.lock().map(|mut i| std::mem::take(&mut i.started)).unwrap_or_default()
    }

    /// The jobs that ended since the last call, in the order they were started.
    pub fn take_finished(&self) -> Vec<JobEnd> {
        let Ok(mut inner) = self.inner.lock() else { return Vec::new() };
        let mut ended = Vec::new();
        inner.running.retain_mut(|job| {
            if job.handle.as_ref().is_some_and(|h| h.is_finished()) {
                if let Some(end) = job.handle.take().and_then(|h| h.join().ok()) {
                    ended.push(end);
                }
                false
            } else {
                true
            }
        });
        ended
    }

    pub fn running(&self) -> usize {
        self.inner.lock().map(|i| i.running.len()).unwrap_or(0)
    }

    /// How long a final waits for jobs: the latest job's timeout plus 10 s.
    pub fn wait_deadline(&self) -> Option<Instant> {
        let inner = self.inner.lock().ok()?;
        inner.running.iter().map(|j| j.deadline + Duration::from_secs(10)).max()
    }

    /// Ends every running job (the agent ended) and returns how each ended.
    pub fn kill_all(&self) -> Vec<JobEnd> {
        if let Ok(inner) = self.inner.lock() {
            inner.running.iter().for_each(|job| job.cancel.cancel());
        }
        let mut ended = Vec::new();
        let deadline = Instant::now() + KILL_GRACE + Duration::from_secs(1);
        while self.running() > 0 && Instant::now() < deadline {
            ended.extend(self.take_finished());
            std::thread::sleep(Duration::from_millis(20));
        }
        ended.extend(self.take_finished());
        ended
    }
}
