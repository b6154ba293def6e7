//! Two agent-like replays through the real pool (in this process, over its socket):
//! (a) a linear session with an implementer fork and a verifier, (b) four implementers
//! interleaved. Per request: prompt tokens, rows recomputed, time to first token. Prints JSON;
//! `scripts/bench-pool` makes the table.
//!
//!     cargo bench -p caldrix --bench pool -- MODEL --budget BYTES [--threads N] [--batch N]
//!         [--peer PYTHON] [--only linear|interleaved] [--remote LLAMA_SERVER]
//!
//! `--remote LLAMA_SERVER` makes `main` a remote member (`openai:URL#MODEL`, MODEL its own
//! tokenizer) on a llama-server started for each workload (cold, one slot of the window,
//! `--cache-reuse 256`): the same replay, its rows as the engine reports them (`scripts/bench-remote`).
//!
//! `--peer PYTHON` runs the peer (`scripts/peer-llama.py`, llama-cpp-python) beside the pool on
//! the same prompt ids, one request at a time, alternating which side goes first: the machine's
//! speed drifts by 10-20% over minutes, and a pair of requests sees the same minute.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use caldrix_client::Client;
use caldrix_engine::{GenerationPrompt, Message, Model, ModelParams, Special};
use caldrix_pool::{MemberConfig, Pool, PoolConfig};
use caldrix_proto::{Constraint, Edit, FrameFormat, Generate, Reply, Role, Segment};
use serde_json::json;
use test_models::peer::{Peer, PeerReply};
use test_models::server::{Server, ServerConfig};

const WINDOW: u32 = 8192;
const SYSTEM_TOKENS: usize = 3500;

struct Bench {
    client: Client,
    model: Model,
    /// Each context's segments, mirrored to render the prompts the pool renders.
    contexts: std::collections::HashMap<u64, Vec<Segment>>,
    records: Vec<serde_json::Value>,
    peer: Option<Peer>,
}

/// Blocking on purpose: the pool is idle while the peer runs.
fn peer_prompt(peer: &mut Peer, ids: &[u32]) -> PeerReply {
    tokio::task::block_in_place(|| peer.prompt(ids)).expect("the peer")
}

fn seg(id: &str, role: Role, text: &str) -> Segment {
    Segment { id: id.into(), role, text: text.into(), pinned: false }
}

/// Deterministic filler of about `tokens` tokens, different for every `seed`.
fn filler(model: &Model, seed: usize, tokens: usize) -> String {
    let source = include_str!("../../../docs/protocol.md");
    let ids = model.tokenize(source, Special::Plain);
    let start = (seed * 97) % (ids.len() - tokens.min(ids.len() - 1));
    let text = model.detokenize(&ids[start..(start + tokens).min(ids.len())]);
    format!("[{seed}] {}", String::from_utf8_lossy(&text))
}

impl Bench {
    async fn create(&mut self, segments: Vec<Segment>) -> u64 {
        let c = self.client.create_context("main", segments.clone()).await.unwrap();
        self.contexts.insert(c.context, segments);
        c.context
    }

    async fn append(&mut self, context: u64, segment: Segment) {
        self.client
            .edit_context(context, vec![Edit::Append { segment: segment.clone() }])
            .await
            .unwrap();
        self.contexts.get_mut(&context).unwrap().push(segment);
    }

    async fn fork(&mut self, context: u64) -> u64 {
        let f = self.client.fork_context(context).await.unwrap();
        let segments = self.contexts[&context].clone();
        self.contexts.insert(f.context, segments);
        f.context
    }

    /// One generation of at most 60 tokens, appended as `answer`.
    async fn turn(&mut self, label: &str, context: u64, answer: &str) {
        let messages: Vec<Message> = self.contexts[&context]
            .iter()
            .map(|s| Message::new(s.role.as_str(), s.text.as_str()))
            .collect();
        let prompt = self
            .model
            .tokenize_prompt(&self.model.render(&messages, GenerationPrompt::Add).unwrap());
        let request = Generate {
            context,
            constraint: Constraint::None,
            max_new_tokens: 60,
            sampling: None,
            logprobs: None,
            append_as: Some(answer.into()),
        };
        let ids: Vec<_> = prompt.iter().map(|t| t.0).collect();
        // Alternate which side goes first, so neither always follows the other's work.
        let peer_first = self.records.len() % 2 == 1;
        let mut peer = None;
        if peer_first && let Some(p) = &mut self.peer {
            peer = Some(peer_prompt(p, &ids));
        }
        let started = Instant::now();
        let mut first = None;
        let done = self
            .client
            .generate(request, |frame| {
                if matches!(frame, Reply::Delta { .. }) && first.is_none() {
                    first = Some(started.elapsed());
                }
            })
            .await
            .unwrap();
        let ttft = first.unwrap_or_else(|| started.elapsed());
        if !peer_first && let Some(p) = &mut self.peer {
            peer = Some(peer_prompt(p, &ids));
        }
        assert_eq!(
            done.usage.prompt_tokens as usize,
            prompt.len(),
            "the pool renders what we render"
        );
        self.contexts.get_mut(&context).unwrap().push(seg(answer, Role::Assistant, &done.text));
        self.records.push(json!({
            "label": label,
            "prompt_tokens": prompt.len(),
            // A remote engine that reports no cached tokens: null.
            "recomputed": done.usage.recomputed_from.map(|r| done.usage.prompt_tokens - r),
            "ttft_ms": ttft.as_secs_f64() * 1e3,
            "prefill_ms": done.usage.prefill_ms,
            "peer_recomputed": peer.map(|p| p.recomputed),
            "peer_ttft_ms": peer.map(|p| p.ttft_ms),
        }));
    }
}

async fn linear(b: &mut Bench, system: &str) {
    let root = b
        .create(vec![
            seg("sys", Role::System, system),
            seg("task", Role::User, "Fix the failing test in crates/engine."),
        ])
        .await;
    for turn in 1..=10 {
        b.turn(&format!("root {turn}"), root, &format!("a{turn}")).await;
        let result = filler(&b.model, turn, 100);
        b.append(root, seg(&format!("r{turn}"), Role::User, &result)).await;
        if turn == 5 {
            let implementer = b.fork(root).await;
            b.append(implementer, seg("brief", Role::User, "Implement the fix for the parser."))
                .await;
            for k in 1..=3 {
                b.turn(&format!("implementer {k}"), implementer, &format!("i{k}")).await;
                let result = filler(&b.model, 50 + k, 100);
                b.append(implementer, seg(&format!("ir{k}"), Role::User, &result)).await;
            }
            let verifier = b
                .create(vec![
                    seg("sys", Role::System, system),
                    seg("check", Role::User, "Verify: cargo test passes."),
                ])
                .await;
            b.turn("verifier", verifier, "v1").await;
        }
    }
}

async fn interleaved(b: &mut Bench, system: &str) {
    let mut pieces = Vec::new();
    for i in 0..4 {
        let brief = format!("Implement piece {i} of the refactor.");
        pieces.push(
            b.create(vec![seg("sys", Role::System, system), seg("brief", Role::User, &brief)])
                .await,
        );
    }
    for turn in 1..=6 {
        for (i, &piece) in pieces.iter().enumerate() {
            b.turn(&format!("piece {i} turn {turn}"), piece, &format!("a{turn}")).await;
            let result = filler(&b.model, 100 + 10 * i + turn, 300);
            b.append(piece, seg(&format!("r{turn}"), Role::User, &result)).await;
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let model_path =
        PathBuf::from(args.next().expect("usage: pool MODEL --budget BYTES [--threads N]"));
    let (mut budget, mut threads, mut batch, mut peer) = (256u64 << 20, 2u32, None, None);
    let mut remote: Option<PathBuf> = None;
    // `--render engine`: the remote member has the engine render (no tokenizer).
    let mut engine_renders = false;
    let mut workloads = vec!["linear", "interleaved"];
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--budget" => {
                budget = args.next().and_then(|v| v.parse().ok()).expect("--budget BYTES")
            }
            "--threads" => threads = args.next().and_then(|v| v.parse().ok()).expect("--threads N"),
            "--batch" => batch = Some(args.next().and_then(|v| v.parse().ok()).expect("--batch N")),
            "--peer" => peer = Some(args.next().expect("--peer PYTHON")),
            "--remote" => remote = Some(args.next().expect("--remote LLAMA_SERVER").into()),
            "--render" => {
                engine_renders = match args.next().as_deref() {
                    Some("engine") => true,
                    Some("pool") => false,
                    other => panic!("--render takes pool or engine, not {other:?}"),
                }
            }
            "--only" => {
                workloads = match args.next().as_deref() {
                    Some("linear") => vec!["linear"],
                    Some("interleaved") => vec!["interleaved"],
                    other => panic!("--only takes linear or interleaved, not {other:?}"),
                }
            }
            other => panic!("unknown argument {other}"),
        }
    }
    // `BENCH_LOG=debug LLAMA_KV_CACHE_DEBUG=1` shows llama.cpp's cell layout per batch.
    if let Ok(filter) = std::env::var("BENCH_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = std::env::temp_dir().join(format!("caldrix-bench-{}", std::process::id()));
    // Private, as the client requires of a socket's directory.
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .unwrap();
    let socket = dir.join("pool.sock");
    let mut output = serde_json::Map::new();
    for workload in workloads {
        // A fresh pool per workload: each starts cold.
        let pool = Pool::new(PoolConfig {
            frames: FrameFormat::Cbor,
            max_connections: 4,
            idle_timeout: None,
            context_budget: budget,
            memory_limit: caldrix_pool::memory_limit(),
            owner_uid: caldrix_client::trust::current_uid(),
        });
        // Kept until the workload ends: dropping it stops the engine.
        let engine = remote.as_deref().map(|binary| {
            let config =
                ServerConfig { binary, model: &model_path, threads, slots: 1, window: WINDOW };
            Server::start(&config).expect("llama-server starts")
        });
        let reference = match &engine {
            Some(engine) => format!("openai:{}#{}", engine.base_url(), model_path.display()),
            None => model_path.display().to_string(),
        };
        let tokenizer =
            engine.as_ref().filter(|_| !engine_renders).map(|_| model_path.display().to_string());
        let settings = caldrix_pool::RemoteSettings {
            tokenizer: tokenizer.as_deref(),
            render: engine_renders.then_some(caldrix_proto::Render::Engine),
            ..Default::default()
        };
        let (model, _, remote_spec) = caldrix_pool::member_source(&reference, &settings).unwrap();
        pool.load(MemberConfig {
            window: Some(WINDOW),
            threads: Some(threads),
            batch,
            budget_bytes: budget,
            remote: remote_spec,
            ..MemberConfig::new("main", reference, model)
        })
        .unwrap();
        let records = runtime.block_on(async {
            let _ = std::fs::remove_file(&socket);
            let listener = tokio::net::UnixListener::bind(&socket).unwrap();
            let server = {
                let pool = Arc::clone(&pool);
                tokio::spawn(async move { pool.serve(listener).await })
            };
            let model = Model::load(&model_path, &ModelParams::default()).unwrap();
            // Project text as long as an agent's system + tools prefix.
            let source = [
                include_str!("../../../ARCHITECTURE.md"),
                include_str!("../../../docs/protocol.md"),
            ];
            let ids = model.tokenize(&source.join("\n\n"), Special::Plain);
            let system =
                String::from_utf8_lossy(&model.detokenize(&ids[..SYSTEM_TOKENS.min(ids.len())]))
                    .into_owned();
            let client = Client::connect(&socket, FrameFormat::Cbor, "bench").await.unwrap();
            let peer = peer.as_deref().map(|python| {
                Peer::start(python, &model_path, threads).expect("the peer's python")
            });
            let mut bench =
                Bench { client, model, contexts: Default::default(), records: Vec::new(), peer };
            match workload {
                "linear" => linear(&mut bench, &system).await,
                _ => interleaved(&mut bench, &system).await,
            }
            pool.stop();
            let _ = server.await;
            bench.records
        });
        drop(engine);
        output.insert(workload.into(), json!(records));
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{}", serde_json::Value::Object(output));
}
