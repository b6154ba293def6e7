//! Delegation's prefix cost, measured through the real programs: `aerix -p` on a replay member
//! of the real model (`replay:REPLIES@MODEL`: every reply forced through llama.cpp, so every
//! row is computed and stored as a real generation's), a root that delegates 4 pieces in one
//! turn (`delegation.parallel = 4`) on a ~3,500-token shared prefix (the system segment and an
//! `AGENTS.md`), each piece 4 implementer turns and a verifier. Then the same prompts, in the
//! order the pool served them, on a fresh pool and on the peer (llama-cpp-python, one slot,
//! `scripts/peer-llama.py`), one request at a time and side by side, alternating which goes
//! first. Prints one JSON object per round; `scripts/bench-delegation` makes the tables.
//!
//!     cargo bench -p aerix --bench delegation -- MODEL --caldrix PATH [--peer PYTHON]
//!         [--threads N] [--prefix TOKENS] [--rounds N]

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use caldrix_client::Client;
use caldrix_engine::{GenerationPrompt, Message, Model, ModelParams, Special};
use caldrix_proto::{Constraint, Edit, FrameFormat, Generate, Reply, Role, Segment};
use serde_json::{Value, json};
use test_models::peer::Peer;

const PIECES: usize = 4;
/// Implementer turns of a piece: three reads, then the final answer.
const TURNS: usize = 4;
const BUDGET: u64 = 1 << 30;

struct Args {
    model: PathBuf,
    caldrix: PathBuf,
    peer: Option<String>,
    threads: u32,
    prefix: usize,
    rounds: usize,
}

fn args() -> Args {
    let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
    let model = PathBuf::from(it.next().expect("usage: delegation MODEL --caldrix PATH"));
    let mut args =
        Args { model, caldrix: PathBuf::new(), peer: None, threads: 2, prefix: 3500, rounds: 1 };
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} takes a value"));
        match arg.as_str() {
            "--caldrix" => args.caldrix = value().into(),
            "--peer" => args.peer = Some(value()),
            "--threads" => args.threads = value().parse().expect("--threads N"),
            "--prefix" => args.prefix = value().parse().expect("--prefix TOKENS"),
            "--rounds" => args.rounds = value().parse().expect("--rounds N"),
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(args.caldrix.is_file(), "--caldrix PATH: the caldrix binary");
    args
}

/// The JSON the turn schema accepts: no whitespace between tokens, as the model writes it.
fn turn(thought: &str, calls: Vec<Value>) -> String {
    json!({"thought": thought, "calls": calls}).to_string()
}

fn call(tool: &str, input: Value) -> Value {
    json!({"tool": tool, "input": input})
}

fn final_turn(thought: &str, answer: &str) -> String {
    json!({"thought": thought, "final": answer}).to_string()
}

/// Every reply in the order the pool serves them: the route, the root's delegating turn; the
/// implementers' turns one of each piece in turn (the member's queue is first come, first
/// served, and each piece's next turn queues behind the others' current one); the verifiers;
/// the root's answer.
fn replies() -> Vec<String> {
    let mut replies = vec!["edit".to_owned()];
    let pieces = (0..PIECES)
        .map(|i| {
            call(
                "agent",
                json!({"brief": format!("Summarize note {i} in notes/{i}.md in one line."),
                       "check": format!("grep -c . notes/{i}.md")}),
            )
        })
        .collect();
    replies.push(turn("Delegate one piece per note.", pieces));
    for t in 1..TURNS {
        for _ in 0..PIECES {
            let path = format!("notes/{t}.md");
            replies.push(turn("Read the next note.", vec![call("read", json!({"path": path}))]));
        }
    }
    for _ in 0..PIECES {
        replies.push(final_turn("Read them.", "The note says how the pool serves a request."));
    }
    for _ in 0..PIECES {
        replies.push(
            json!({"thought": "Checked.", "final": {"verdict": "pass", "reason": "it is one line"}})
                .to_string(),
        );
    }
    replies.push(final_turn("Delegated.", "Each note has its summary."));
    replies
}

/// `text` cut to its first `tokens` tokens.
fn cut(model: &Model, text: &str, tokens: usize) -> String {
    let ids = model.tokenize(text, Special::Plain);
    String::from_utf8_lossy(&model.detokenize(&ids[..tokens.min(ids.len())])).into_owned()
}

const PROJECT_TEXT: [&str; 3] = [
    include_str!("../../../ARCHITECTURE.md"),
    include_str!("../../../docs/protocol.md"),
    include_str!("../../../docs/configuration.md"),
];

struct World {
    home: PathBuf,
    repo: PathBuf,
    socket: PathBuf,
}

impl World {
    fn new(model: &Model, agents_md: &str) -> World {
        let home =
            std::env::temp_dir().join(format!("aerix-bench-delegation-{}", std::process::id()));
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
        for t in 0..TURNS.max(PIECES) {
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

    fn settings(&self, reference: &str) {
        let settings = format!(
            "[members.main]\nmodel = {reference:?}\n[pool]\nsocket = {:?}\n\
             [delegation]\nparallel = {PIECES}\nmax_turns = {}\nretries = 1\ndepth = 1\n",
            self.socket.display().to_string(),
            TURNS + 2,
        );
        std::fs::write(self.home.join("config/aerix/settings.toml"), settings).unwrap();
    }

    /// A fresh pool on the socket (so every round starts cold) with `reference` loaded.
    fn pool(&self, caldrix: &Path, reference: &str, threads: u32) -> Child {
        let _ = std::fs::remove_file(&self.socket);
        let mut child = Command::new(caldrix)
            .args(["pool", "--max-connections", "8", "--context-budget"])
            .arg(BUDGET.to_string())
            .arg("--socket")
            .arg(&self.socket)
            .args(["--load", reference, "--ctx", "8192", "--threads", &threads.to_string()])
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

    fn stop(&self, caldrix: &Path, mut pool: Child) {
        let _ = Command::new(caldrix).args(["pool", "stop", "--socket"]).arg(&self.socket).output();
        let _ = pool.wait();
    }

    /// `aerix -p` in the repository; the session's events.
    fn aerix(&self) -> Vec<Value> {
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
struct Generation {
    agent: String,
    /// The agent's context edits since its previous generation (its whole context before the
    /// first).
    edits: Vec<Edit>,
    /// The id the pool appended the reply as, and the reply.
    turn_id: String,
    reply: String,
    prompt: Vec<u32>,
    recomputed: u64,
    prefill_ms: f64,
}

fn role(name: &str) -> Role {
    serde_json::from_value(json!(name)).unwrap()
}

/// The generations of a session log: each agent's segments mirrored from its `segment`
/// events, each turn's prompt rendered as the pool renders it (checked against the pool's
/// count), its rows and prefill time as the pool reported them.
fn generations(model: &Model, events: &[Value]) -> Vec<Generation> {
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

/// The rows unique to each generation's prompt: past the longest prefix it shares with any
/// earlier generation's prompt and reply (what a perfect store would hold).
fn ideal(model: &Model, gens: &[Generation]) -> Vec<u64> {
    let mut held: Vec<Vec<u32>> = Vec::new();
    gens.iter()
        .map(|g| {
            let shared = held
                .iter()
                .map(|h| h.iter().zip(&g.prompt).take_while(|(a, b)| a == b).count())
                .max()
                .unwrap_or(0);
            let mut seq = g.prompt.clone();
            seq.extend(model.tokenize(&g.reply, Special::Plain).iter().map(|t| t.0));
            held.push(seq);
            (g.prompt.len() - shared) as u64
        })
        .collect()
}

/// The live run's generations again, one at a time on a fresh pool (a replay member with the
/// same replies) and on the peer, side by side.
async fn paired(socket: &Path, gens: &[Generation], peer: &mut Option<Peer>) -> Vec<Value> {
    let mut client = Client::connect(socket, FrameFormat::Cbor, "bench").await.unwrap();
    let mut ids: HashMap<&str, u64> = HashMap::new();
    let mut records = Vec::new();
    for (i, g) in gens.iter().enumerate() {
        match ids.get(g.agent.as_str()) {
            None => {
                let segments = g
                    .edits
                    .iter()
                    .map(|e| match e {
                        Edit::Append { segment } => segment.clone(),
                        other => panic!("{}: a first edit {other:?}", g.agent),
                    })
                    .collect();
                let c = client.create_context("main", segments).await.unwrap();
                ids.insert(&g.agent, c.context);
            }
            Some(&context) if !g.edits.is_empty() => {
                client.edit_context(context, g.edits.clone()).await.unwrap();
            }
            Some(_) => {}
        }
        let context = ids[g.agent.as_str()];
        let peer_first = i % 2 == 1;
        let mut theirs = None;
        if peer_first && let Some(p) = peer {
            theirs = Some(p.prompt(&g.prompt).unwrap());
        }
        let request = Generate {
            context,
            constraint: Constraint::None,
            max_new_tokens: 2048,
            sampling: None,
            logprobs: None,
            append_as: Some(g.turn_id.clone()),
        };
        let started = Instant::now();
        let mut first = None;
        let done = client
            .generate(request, |frame| {
                if matches!(frame, Reply::Delta { .. }) && first.is_none() {
                    first = Some(started.elapsed());
                }
            })
            .await
            .unwrap();
        let ttft = first.unwrap_or_else(|| started.elapsed());
        if !peer_first && let Some(p) = peer {
            theirs = Some(p.prompt(&g.prompt).unwrap());
        }
        assert_eq!(done.usage.prompt_tokens as usize, g.prompt.len(), "{}", g.agent);
        assert_eq!(done.text, g.reply, "{}: the replay's reply", g.agent);
        records.push(json!({
            "recomputed": done.usage.prompt_tokens - done.usage.recomputed_from,
            "ttft_ms": ttft.as_secs_f64() * 1e3,
            "prefill_ms": done.usage.prefill_ms,
            "peer_recomputed": theirs.map(|p| p.recomputed),
            "peer_ttft_ms": theirs.map(|p| p.ttft_ms),
        }));
    }
    records
}

/// The shared prefix (system and instruction segments) of the root's context, in tokens.
fn prefix_tokens(events: &[Value]) -> u64 {
    events
        .iter()
        .filter(|e| e["type"] == "segment" && e["agent"] == "a1" && e["op"] == "append")
        .filter(|e| e["label"] == "system" || e["label"] == "instructions")
        .map(|e| e["tokens"].as_u64().unwrap())
        .sum()
}

fn main() {
    let args = args();
    let model = Model::load(&args.model, &ModelParams::default()).unwrap();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let model_ref = args.model.display().to_string();

    // Size AGENTS.md so that the system and instruction segments come to `--prefix` tokens: a
    // run on a scripted member (no rows computed) counts the system segment.
    let stub = "Project notes.";
    let world = World::new(&model, stub);
    let script = world.home.join("calibrate.json");
    let calibration = json!(["edit", final_turn("Nothing to do.", "Nothing.")]);
    std::fs::write(&script, calibration.to_string()).unwrap();
    let reference = format!("script:{}@{model_ref}", script.display());
    world.settings(&reference);
    let pool = world.pool(&args.caldrix, &reference, args.threads);
    let base = prefix_tokens(&world.aerix());
    world.stop(&args.caldrix, pool);
    let body_tokens = args.prefix as u64 + model.tokenize(stub, Special::Plain).len() as u64 - base;
    let agents_md = format!(
        "# Project notes\n\n{}",
        cut(&model, &PROJECT_TEXT.join("\n\n"), body_tokens.saturating_sub(6) as usize)
    );
    drop(world);
    let world = World::new(&model, &agents_md);
    let script = world.home.join("replies.json");
    std::fs::write(&script, json!(replies()).to_string()).unwrap();
    let reference = format!("replay:{}@{model_ref}", script.display());

    for round in 0..args.rounds {
        world.settings(&reference);
        let pool = world.pool(&args.caldrix, &reference, args.threads);
        let started = Instant::now();
        let events = world.aerix();
        let wall_ms = started.elapsed().as_secs_f64() * 1e3;
        world.stop(&args.caldrix, pool);
        let gens = generations(&model, &events);
        assert_eq!(gens.len(), 1 + PIECES * (TURNS + 1) + 1, "the root, the pieces, the verifiers");
        let ideal = ideal(&model, &gens);

        // The same generations, one at a time, on a fresh pool and the peer.
        let replayed = world.home.join("paired.json");
        let texts: Vec<&str> = gens.iter().map(|g| g.reply.as_str()).collect();
        std::fs::write(&replayed, json!(texts).to_string()).unwrap();
        let paired_ref = format!("replay:{}@{model_ref}", replayed.display());
        let pool = world.pool(&args.caldrix, &paired_ref, args.threads);
        let mut peer =
            args.peer.as_deref().map(|p| Peer::start(p, &args.model, args.threads).unwrap());
        let pairs = runtime.block_on(paired(&world.socket, &gens, &mut peer));
        drop(peer);
        world.stop(&args.caldrix, pool);

        let requests: Vec<Value> = gens
            .iter()
            .zip(&ideal)
            .zip(pairs)
            .map(|((g, ideal), pair)| {
                json!({
                    "agent": g.agent,
                    "prompt_tokens": g.prompt.len(),
                    "ideal": ideal,
                    "live_recomputed": g.recomputed,
                    "live_prefill_ms": g.prefill_ms,
                    "recomputed": pair["recomputed"],
                    "ttft_ms": pair["ttft_ms"],
                    "prefill_ms": pair["prefill_ms"],
                    "peer_recomputed": pair["peer_recomputed"],
                    "peer_ttft_ms": pair["peer_ttft_ms"],
                })
            })
            .collect();
        let outcome = events
            .iter()
            .filter(|e| e["type"] == "agent.end")
            .map(|e| format!("{} {}", e["agent"].as_str().unwrap(), e["outcome"].as_str().unwrap()))
            .collect::<Vec<_>>();
        println!(
            "{}",
            json!({
                "round": round + 1,
                "prefix_tokens": prefix_tokens(&events),
                "aerix_wall_ms": wall_ms,
                "ends": outcome,
                "requests": requests,
            })
        );
    }
    let _ = std::fs::remove_dir_all(&world.home);
}
