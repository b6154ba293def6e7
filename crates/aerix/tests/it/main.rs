//! `aerix` end to end: the binary, a real pool it starts itself, and either the scripted member
//! (deterministic replies through the real protocol, checked against the turn schema) or
//! SmolLM2 through the real engine.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a failed unwrap is a failed test")]

mod acp;
mod agents;
mod attacks;
mod attempts;
mod boundaries;
mod cancel;
mod claude_hooks;
mod cli;
mod compact;
mod crash;
mod delegate;
mod fronts;
mod hooks;
mod mcp;
mod output;
mod parse;
mod permissions;
mod profiles;
mod real;
mod remote;
mod repeats;
mod request;
mod rewind;
mod screen;
mod skills;
mod startup;
mod tools;
mod transcripts;
mod trust;
mod tune;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use test_models::smollm2;

/// The `caldrix` binary beside `aerix`.
pub fn caldrix() -> PathBuf {
    workspace_binary("caldrix")
}

/// A binary of the workspace beside `aerix` (built by `cargo test --workspace`; built here when a
/// test runs this package alone).
pub fn workspace_binary(package: &str) -> PathBuf {
    let aerix = PathBuf::from(env!("CARGO_BIN_EXE_aerix"));
    let binary = aerix.with_file_name(package);
    if !binary.is_file() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", package, "--bin", package])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building {package} failed");
    }
    binary
}

/// A test whose pool runs a model through the real engine holds this: two such pools at once on
/// CI's 2 cores slow each other's spinning llama.cpp threads far past twice (the `caldrix`
/// binary's tests took 336 s two at a time and 145 s one at a time). Scripted members run
/// beside them.
pub fn engine() -> std::sync::MutexGuard<'static, ()> {
    static ENGINE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ENGINE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The text of the last result of `tool` in `events`.
pub fn last_result(events: &[Value], tool: &str) -> String {
    let message = of_type(events, "message")
        .into_iter()
        .rfind(|m| m["role"] == "tool" && m["tool"] == tool)
        .unwrap_or_else(|| panic!("no {tool} result"));
    message["text"].as_str().unwrap().to_owned()
}

/// A home of its own (XDG directories, a pool socket) and a git repository to work in.
pub struct World {
    pub home: PathBuf,
    pub repo: PathBuf,
    pub socket: PathBuf,
}

impl World {
    /// `main_model` is the main member's reference; `extra` more settings lines.
    pub fn new(name: &str, main_model: &str, extra: &str) -> World {
        let home = std::env::temp_dir().join(format!("aerix-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let repo = home.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let socket = home.join("run/pool.sock");
        let world = World { home, repo, socket };
        world.write_settings(main_model, extra);
        world.git(&["init", "-q"]);
        world.git(&["config", "user.email", "t@example.com"]);
        world.git(&["config", "user.name", "t"]);
        world.write("calc.sh", "add() { echo $(($1 - $2)); }\n");
        world.write(
            "test.sh",
            ". ./calc.sh\n[ \"$(add 2 3)\" = 5 ] && echo ok || { echo FAIL; exit 1; }\n",
        );
        world.git(&["add", "."]);
        world.git(&["commit", "-qm", "init"]);
        world
    }

    /// A world whose main member is scripted with `replies` (`json`: whether it takes the
    /// constraint).
    pub fn scripted(name: &str, replies: &[String], json: bool) -> World {
        World::scripted_with(name, replies, json, "")
    }

    /// As `scripted`, with `extra` settings after the `[pool]` table.
    pub fn scripted_with(name: &str, replies: &[String], json: bool, extra: &str) -> World {
        let world = World::new(name, "", "");
        let model = world.script("replies", replies, json);
        world.write_settings(&model, extra);
        world
    }

    pub fn write_settings(&self, main_model: &str, extra: &str) {
        self.write_settings_with(main_model, "", extra);
    }

    /// `main_lines` go in `[members.main]`, `extra` after the `[pool]` table.
    pub fn write_settings_with(&self, main_model: &str, main_lines: &str, extra: &str) {
        let settings = format!(
            "[members.main]\nmodel = {}\nthreads = 2\n{main_lines}[pool]\ncaldrix = {}\nsocket = {}\nstart_timeout_secs = 120\n{extra}",
            toml_str(main_model),
            toml_str(&caldrix().display().to_string()),
            toml_str(&self.socket.display().to_string()),
        );
        self.write_file(&self.home.join("config/aerix/settings.toml"), &settings);
    }

    /// A scripted main member: `replies` in order, `json` whether it takes the constraint.
    pub fn script(&self, name: &str, replies: &[String], json: bool) -> String {
        let path = self.home.join(format!("{name}.json"));
        let body = if json {
            serde_json::to_string(replies).unwrap()
        } else {
            serde_json::json!({"json": false, "replies": replies}).to_string()
        };
        std::fs::write(&path, body).unwrap();
        format!("script:{}@{}", path.display(), smollm2().display())
    }

    /// Starts `caldrix ARGS` (a `pool` command line) on this world's socket, in a private
    /// directory, and waits until it serves; aerix then finds it instead of starting one.
    pub fn start_pool(&self, args: &[String]) {
        let dir = self.socket.parent().unwrap();
        std::fs::create_dir_all(dir).unwrap();
        let mut mode = std::fs::metadata(dir).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o700);
        std::fs::set_permissions(dir, mode).unwrap();
        let mut pool = Command::new(caldrix())
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.home.join("pool.log")).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.socket.exists() {
            if pool.try_wait().unwrap().is_some() {
                let log = std::fs::read_to_string(self.home.join("pool.log")).unwrap_or_default();
                panic!("the pool exited: {log}");
            }
            assert!(Instant::now() < deadline, "the pool did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::spawn(move || pool.wait());
    }

    pub fn write(&self, path: &str, text: &str) {
        self.write_file(&self.repo.join(path), text);
    }

    fn write_file(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git").args(args).current_dir(&self.repo).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `aerix trust` in the repository: what it would run now runs from now on.
    pub fn trust(&self) {
        let out = self.aerix(&["trust"]);
        assert!(out.status.success(), "aerix trust: {}", stderr(&out));
    }

    /// `aerix` run to its end in the world.
    pub fn aerix(&self, args: &[&str]) -> Output {
        self.aerix_command(args).output().unwrap()
    }

    /// The `aerix` command in the world; `home/bin` leads its `PATH` (hook commands found
    /// there).
    pub fn aerix_command(&self, args: &[&str]) -> Command {
        let path = std::env::join_paths(
            std::iter::once(self.home.join("bin"))
                .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )
        .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_aerix"));
        command
            .args(args)
            .current_dir(&self.repo)
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env("XDG_STATE_HOME", self.home.join("state"))
            .env("XDG_RUNTIME_DIR", self.home.join("run"))
            .env_remove("AERIX_LOG");
        command
    }

    /// The events of the project's only (or latest) session.
    pub fn events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.log_path()).unwrap();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    pub fn log_path(&self) -> PathBuf {
        self.try_log_path().expect("a session log")
    }

    /// The latest session's log, once there is one.
    pub fn try_log_path(&self) -> Option<PathBuf> {
        let project = self.project_dir()?;
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&project)
            .ok()?
            .map(|e| e.unwrap().path())
            // Not the Claude Code transcripts beside the logs (`<id>.claude.jsonl`).
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .filter(|p| !p.to_string_lossy().ends_with(".claude.jsonl"))
            .collect();
        // Two sessions started in the same second differ only by a random suffix: the latest is
        // the one written last.
        logs.sort_by_key(|p| {
            let modified = std::fs::metadata(p).and_then(|m| m.modified()).ok();
            (modified, p.clone())
        });
        logs.pop()
    }

    /// The project's sessions directory, once there is one.
    fn project_dir(&self) -> Option<PathBuf> {
        let sessions = self.home.join("data/aerix/sessions");
        Some(std::fs::read_dir(&sessions).ok()?.next()?.ok()?.path())
    }

    /// The project's `index.json`.
    pub fn index(&self) -> Value {
        let path = self.project_dir().unwrap().join("index.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The outcome `index.json` records for the latest session.
    pub fn sessions_outcome(&self) -> String {
        let index = self.index();
        let last = index["sessions"].as_array().unwrap().last().unwrap().clone();
        last["outcome"].as_str().unwrap_or("").to_owned()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if self.socket.exists() {
            let _ = Command::new(caldrix())
                .args(["pool", "stop", "--socket", self.socket.to_str().unwrap()])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

fn toml_str(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// A tool call in the turn format.
pub fn call(tool: &str, input: Value) -> Value {
    serde_json::json!({"tool": tool, "input": input})
}

pub fn calls(thought: &str, calls: Vec<Value>) -> String {
    serde_json::json!({"thought": thought, "calls": calls}).to_string()
}

pub fn final_turn(thought: &str, text: &str) -> String {
    serde_json::json!({"thought": thought, "final": text}).to_string()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Events of one type.
pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// Waits until `ready` gives a value, looking every 20 ms; panics with what `child` printed if
/// it exits first, or when `timeout` passes.
pub fn wait_for<T>(
    child: &mut Child,
    timeout: Duration,
    mut ready: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = pipe.read_to_string(&mut err);
            }
            panic!("aerix exited ({status}) before it was ready:\n{err}");
        }
        assert!(Instant::now() < deadline, "not ready within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A pid a command wrote to `path` (`echo $$ > path`), once it is there.
pub fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Sends `signal` (`INT`, `TERM`, `KILL`, ...) to `pid`.
pub fn send(signal: &str, pid: i32) {
    let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status();
    assert!(status.unwrap().success(), "kill -{signal} {pid}");
}

/// Sends `signal` to every process of group `pgid`.
pub fn send_group(signal: &str, pgid: i32) {
    let _ = Command::new("kill").args(["-s", signal, "--", &format!("-{pgid}")]).status();
}

/// The live processes (zombies left out) of process group `pgid`, from `/proc`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(") ") else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            members.push(pid);
        }
    }
    members
}

/// Waits up to `timeout` for process group `pgid` to be empty; its members if it is not.
pub fn group_survivors(pgid: i32, timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let members = group_members(pgid);
        if members.is_empty() || Instant::now() >= deadline {
            return members;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
