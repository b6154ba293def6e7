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

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use caldrix_client::Client;
use caldrix_engine::{Model, ModelParams, Special};
use caldrix_proto::{Constraint, Edit, FrameFormat, Generate, Reply};
use common::{Generation, PIECES, World, call, final_turn, generations, prefix_tokens, turn};
use serde_json::{Value, json};
use test_models::peer::Peer;

/// Implementer turns of a piece: three reads, then the final answer.
const TURNS: usize = 4;

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

/// Every reply in the order the pool serves them: the route, the root's delegating turn; the
/// implementers' turns one of each piece in turn (the member's queue is first come, first
/// served, and each piece's next turn queues behind the others' current one); the verifiers;
/// the root's answer.
fn replies() -> Vec<String> {
    let mut replies = common::delegating_opening();
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
            json!({"thought": "Checked.", "final": {"reason": "it is one line", "verdict": "pass"}})
                .to_string(),
        );
    }
    replies.push(final_turn("Delegated.", "Each note has its summary."));
    replies
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
            "recomputed": done.usage.prompt_tokens - done.usage.recomputed_from.unwrap(),
            "ttft_ms": ttft.as_secs_f64() * 1e3,
            "prefill_ms": done.usage.prefill_ms,
            "peer_recomputed": theirs.map(|p| p.recomputed),
            "peer_ttft_ms": theirs.map(|p| p.ttft_ms),
        }));
    }
    records
}

fn main() {
    let args = args();
    let model = Model::load(&args.model, &ModelParams::default()).unwrap();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let model_ref = args.model.display().to_string();

    let agents_md = common::agents_md(&model, &args.caldrix, args.threads, args.prefix);
    let world = World::new("delegation", &model, &agents_md);
    let script = world.home.join("replies.json");
    std::fs::write(&script, json!(replies()).to_string()).unwrap();
    let reference = format!("replay:{}@{model_ref}", script.display());

    for round in 0..args.rounds {
        world.settings(&reference, PIECES);
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
