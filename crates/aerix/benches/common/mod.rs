//! What the aerix benches share: the delegation workload's world (a repository of notes and an
//! `AGENTS.md` sized so that the system and instruction segments come to a given number of
//! tokens), pools on its socket, `aerix -p` in it, and the generations of its session log.

#![allow(dead_code, reason = "each bench uses a part")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use caldrix_engine::{GenerationPrompt, Message, Model, Special};
use caldrix_proto::{Edit, Role, Segment};
use serde_json::{Value, json};

/// The pieces a root delegates in one turn (`delegation.parallel`).
pub const PIECES: usize = 4;
/// Notes in the repository, `notes/0.md` ...: about 280 tokens each.
const NOTES: usize = 4;
/// A piece's turns (`delegation.max_turns`): the delegation bench's 4 implementer turns, and two.
const MAX_TURNS: usize = 6;
const BUDGET: u64 = 1 << 30;

/// The JSON the turn schema accepts: no whitespace between tokens, as the model writes it.
pub fn turn(thought: &str, calls: Vec<Value>) -> String {
    json!({"thought": thought, "calls": calls}).to_string()
}

/// The replies that open both benches' runs: the route (`edit`) and the root's turn
/// delegating one piece per note, each with its check.
pub fn delegating_opening() -> Vec<String> {
    let pieces = (0..PIECES)
        .map(|i| {
            call(
                "agent",
                json!({"brief": format!("Summarize note {i} in notes/{i}.md in one line."),
                       "check": format!("grep -c . notes/{i}.md")}),
            )
        })
        .collect();
    vec!["edit".to_owned(), turn("Delegate one piece per note.", pieces)]
}

pub fn call(tool: &str, input: Value) -> Value {
    json!({"tool": tool, "input": input})
}

pub fn final_turn(thought: &str, answer: &str) -> String {
    json!({"thought": thought, "final": answer}).to_string()
}

/// `text` cut to its first `tokens` tokens.
pub fn cut(model: &Model, text: &str, tokens: usize) -> String {
    let ids = model.tokenize(text, Special::Plain);
    String::from_utf8_lossy(&model.detokenize(&ids[..tokens.min(ids.len())])).into_owned()
}

pub const PROJECT_TEXT: [&str; 3] = [
    include_str!("../../../../ARCHITECTURE.md"),
    include_str!("../../../../docs/protocol.md"),
    include_str!("../../../../docs/configuration.md"),
];

/// A home, a git repository with the notes and an `AGENTS.md`, and a pool's socket, under the
/// temporary directory.
pub struct World {
    pub home: PathBuf,
    pub repo: PathBuf,
    pub socket: PathBuf,
}

impl World {
    /// `name` tells the benches' homes apart.
    pub fn new(name: &str, model: &Model, agents_md: &str) -> World {
        let home = std::env::temp_dir().join(format!("aerix-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let repo = home.join("repo");
        std::fs::create_dir_all(repo.join("notes")).unwrap();
        std::fs::create_dir_all(home.join("config/aerix")).unwrap();
        // Private, as the client requires of a socket's directory.
        let run = home.join("run");
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&run)
            .unwrap();
        let text = PROJECT_TEXT.join("\n\n");
        for t in 0..NOTES {
            // About 300 tokens of a read result each, from different places of the text.
            let start = (t * 7919) % (text.len() / 2);
            let start = (start..text.len()).find(|&i| text.is_char_boundary(i)).unwrap();
            let note = cut(model, &text[start..], 280);
            std::fs::write(repo.join(format!("notes/{t}.md")), note).unwrap();
        }
        std::fs::write(repo.join("AGENTS.md"), agents_md).unwrap();
        let git = |args: &[&str]| {
            let ok = Command::new("git").args(args).current_dir(&repo).output().unwrap();
            assert!(ok.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&ok.stderr));
        };
        git(&["init", "-q"]);
        git(&["-c", "user.email=b@example.com", "-c", "user.name=b", "add", "."]);
        git(&["-c", "user.email=b@example.com", "-c", "user.name=b", "commit", "-qm", "notes"]);
        World { socket: run.join("pool.sock"), home, repo }
    }

    /// aerix's settings: the member `reference`, the pool's socket, `parallel` pieces at once.
    pub fn settings(&self, reference: &str, parallel: usize) {
        let settings = format!(
            "[members.main]\nmodel = {reference:?}\n[pool]\nsocket = {:?}\n\
             [delegation]\nparallel = {parallel}\nmax_turns = {MAX_TURNS}\nretries = 1\ndepth = 1\n",
            self.socket.display().to_string(),
        );
        std::fs::write(self.home.join("config/aerix/settings.toml"), settings).unwrap();
    }

    /// A fresh pool on the socket (so every round starts cold) with `reference` loaded.
    pub fn pool(&self, caldrix: &Path, reference: &str, threads: u32) -> Child {
        self.pool_with(caldrix, reference, threads, &[])
    }

    /// `pool`, with more serving flags for the member (`--max-batch 4`).
    pub fn pool_with(
        &self,
        caldrix: &Path,
        reference: &str,
        threads: u32,
        flags: &[&str],
    ) -> Child {
        let _ = std::fs::remove_file(&self.socket);
        let mut child = Command::new(caldrix)
            .args(["pool", "--max-connections", "8", "--context-budget"])
            .arg(BUDGET.to_string())
            .arg("--socket")
            .arg(&self.socket)
            .args(["--load", reference, "--ctx", "8192", "--threads", &threads.to_string()])
            .args(flags)
            // Not the bench's stdout, which its script reads to the end: a pool left behind by
            // a failed round would hold it open.
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !self.socket.exists() {
            assert!(child.try_wait().unwrap().is_none(), "the pool exited");
            assert!(started.elapsed() < Duration::from_secs(60), "the pool did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }

    pub fn stop(&self, caldrix: &Path, mut pool: Child) {
        let _ = Command::new(caldrix).args(["pool", "stop", "--socket"]).arg(&self.socket).output();
        let _ = pool.wait();
    }

    /// `aerix -p` in the repository; the session's events.
    pub fn aerix(&self) -> Vec<Value> {
        let sessions = self.home.join("data/aerix/sessions");
        let _ = std::fs::remove_dir_all(&sessions);
        let out = Command::new(env!("CARGO_BIN_EXE_aerix"))
            .args(["-q", "-p", "Write a one-line summary of each note.", "--max-turns", "3"])
            .current_dir(&self.repo)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env("XDG_STATE_HOME", self.home.join("state"))
            .output()
            .unwrap();
        assert!(out.status.success(), "aerix failed: {}", String::from_utf8_lossy(&out.stderr));
        let mut logs = Vec::new();
        for project in std::fs::read_dir(&sessions).unwrap() {
            for file in std::fs::read_dir(project.unwrap().path()).unwrap() {
                let path = file.unwrap().path();
                if path.extension().is_some_and(|e| e == "jsonl") {
                    logs.push(path);
                }
            }
        }
        assert_eq!(logs.len(), 1, "one session: {logs:?}");
        let text = std::fs::read_to_string(&logs[0]).unwrap();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

/// One generation of the live run, in the order the pool served it.
pub struct Generation {
    pub agent: String,
    /// The agent's context edits since its previous generation (its whole context before the
    /// first).
    pub edits: Vec<Edit>,
    /// The id the pool appended the reply as, and the reply.
    pub turn_id: String,
    pub reply: String,
    pub prompt: Vec<u32>,
    pub recomputed: u64,
    pub prefill_ms: f64,
}

pub fn role(name: &str) -> Role {
    serde_json::from_value(json!(name)).unwrap()
}

/// The generations of a session log: each agent's segments mirrored from its `segment`
/// events, each turn's prompt rendered as the pool renders it (checked against the pool's
/// count), its rows and prefill time as the pool reported them.
pub fn generations(model: &Model, events: &[Value]) -> Vec<Generation> {
    let mut contexts: HashMap<String, Vec<Segment>> = HashMap::new();
    let mut pending: HashMap<String, Vec<Edit>> = HashMap::new();
    let mut prefill: HashMap<String, Vec<f64>> = HashMap::new();
    for e in events.iter().filter(|e| e["type"] == "message" && e["role"] == "assistant") {
        let ms = e["usage"]["prefill_ms"].as_f64().unwrap();
        prefill.entry(e["agent"].as_str().unwrap().into()).or_default().push(ms);
    }
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e["type"] == "segment") {
        let agent = e["agent"].as_str().unwrap().to_owned();
        let id = e["id"].as_str().unwrap().to_owned();
        let segments = contexts.entry(agent.clone()).or_default();
        let edits = pending.entry(agent.clone()).or_default();
        let text = e["text"].as_str().unwrap_or_default().to_owned();
        match e["op"].as_str().unwrap() {
            "append" if e["recomputed_from"].is_u64() => {
                let messages: Vec<Message> = segments
                    .iter()
                    .map(|s| Message::new(s.role.as_str(), s.text.as_str()))
                    .collect();
                let prompt: Vec<u32> = model
                    .tokenize_prompt(&model.render(&messages, GenerationPrompt::Add).unwrap())
                    .iter()
                    .map(|t| t.0)
                    .collect();
                let prompt_tokens = e["prompt_tokens"].as_u64().unwrap();
                assert_eq!(
                    prompt.len() as u64,
                    prompt_tokens,
                    "{agent}: the pool renders what we render"
                );
                let n = out.iter().filter(|g: &&Generation| g.agent == agent).count();
                out.push(Generation {
                    agent: agent.clone(),
                    edits: std::mem::take(edits),
                    turn_id: id.clone(),
                    reply: text.clone(),
                    prompt,
                    recomputed: prompt_tokens - e["recomputed_from"].as_u64().unwrap(),
                    prefill_ms: prefill[&agent][n],
                });
                segments.push(Segment { id, role: Role::Assistant, text, pinned: false });
            }
            "append" => {
                let segment = Segment {
                    id,
                    role: role(e["role"].as_str().unwrap()),
                    text,
                    pinned: e["pinned"].as_bool().unwrap_or(false),
                };
                edits.push(Edit::Append { segment: segment.clone() });
                segments.push(segment);
            }
            "replace" => {
                let pinned = e["pinned"].as_bool();
                edits.push(Edit::Replace { id: id.clone(), text: text.clone(), pinned });
                let s = segments.iter_mut().find(|s| s.id == id).unwrap();
                s.text = text;
                if let Some(p) = pinned {
                    s.pinned = p;
                }
            }
            "remove" => {
                edits.push(Edit::Remove { id: id.clone() });
                segments.retain(|s| s.id != id);
            }
            other => panic!("segment op {other}"),
        }
    }
    out
}

/// The shared prefix (system and instruction segments) of the root's context, in tokens.
pub fn prefix_tokens(events: &[Value]) -> u64 {
    events
        .iter()
        .filter(|e| e["type"] == "segment" && e["agent"] == "a1" && e["op"] == "append")
        .filter(|e| e["label"] == "system" || e["label"] == "instructions")
        .map(|e| e["tokens"].as_u64().unwrap())
        .sum()
}

/// `AGENTS.md` sized so that the system and instruction segments of a root's context come to
/// `prefix` tokens: a run on a scripted member (no rows computed) counts the system segment.
pub fn agents_md(model: &Model, caldrix: &Path, threads: u32, prefix: usize) -> String {
    let stub = "Project notes.";
    let world = World::new("calibrate", model, stub);
    let script = world.home.join("calibrate.json");
    let calibration = json!(["edit", final_turn("Nothing to do.", "Nothing.")]);
    std::fs::write(&script, calibration.to_string()).unwrap();
    let reference = format!("script:{}@{}", script.display(), model.path().display());
    world.settings(&reference, PIECES);
    let pool = world.pool(caldrix, &reference, threads);
    let base = prefix_tokens(&world.aerix());
    world.stop(caldrix, pool);
    let _ = std::fs::remove_dir_all(&world.home);
    let body_tokens = prefix as u64 + model.tokenize(stub, Special::Plain).len() as u64 - base;
    format!(
        "# Project notes\n\n{}",
        cut(model, &PROJECT_TEXT.join("\n\n"), body_tokens.saturating_sub(6) as usize)
    )
}
