//! Batched generations (issue 20): the delegation workload's 4 pieces arriving at once on one
//! member, each generating for real. The pieces' contexts are aerix's own: `aerix -p` on a
//! scripted member delegates 4 pieces in one turn (`delegation.parallel = 4`) on a ~3,500-token
//! shared prefix (the system segment and an `AGENTS.md`, as the delegation bench builds them),
//! and each implementer reads a note, then answers. From its session log come each implementer's
//! first context and the read's result segment.
//!
//! Then, per side, on a fresh server: 4 clients at once, each creating its piece's context and
//! generating `--tokens` tokens greedy (turn 1); then each appends its reply and its result and
//! generates again (turn 2), so prefix reuse shows. Unconstrained, and under the turn schema.
//! The sides: our pool at `--max-batch 1` and at `--max-batch 4` (run only when `caldrix pool`
//! accepts the flag), and llama.cpp's own server (`--server PATH`: `llama-server -np 4 -kvu
//! --cache-reuse 256`, given the same token ids, rendered as the pool renders them, on
//! `/completion` with `cache_prompt`). Every round runs each side once, the order rotating from
//! round to round, so the sides of a round see the machine in the same minutes.
//!
//! Prints one JSON line per side and round (after a `meta` line); `scripts/bench-batch` makes
//! the tables.
//!
//!     cargo bench -p aerix --bench batch -- MODEL --caldrix PATH [--server LLAMA_SERVER]
//!         [--threads N] [--prefix TOKENS] [--rounds N] [--tokens N] [--only plain|json]

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use caldrix_client::Client;
use caldrix_engine::{GenerationPrompt, Message, Model, ModelParams};
use caldrix_proto::{Constraint, Done, Edit, FrameFormat, Generate, Reply, Role, Segment};
use common::{PIECES, World, call, final_turn, generations, prefix_tokens, turn};
use serde_json::{Value, json};
use test_models::server::{Completion, Server, ServerConfig, ServerReply};

/// Each side's window per generation (the peer gets `-c` of 4 of them, one per slot).
const WINDOW: u32 = 8192;

struct Args {
    model: PathBuf,
    caldrix: PathBuf,
    server: Option<PathBuf>,
    threads: u32,
    prefix: usize,
    rounds: usize,
    tokens: u32,
    variants: Vec<Variant>,
}

fn args() -> Args {
    let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
    let model = PathBuf::from(it.next().expect("usage: batch MODEL --caldrix PATH"));
    let mut args = Args {
        model,
        caldrix: PathBuf::new(),
        server: None,
        threads: 2,
        prefix: 3500,
        rounds: 3,
        tokens: 96,
        variants: vec![Variant::Plain, Variant::Json],
    };
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} takes a value"));
        match arg.as_str() {
            "--caldrix" => args.caldrix = value().into(),
            "--server" => args.server = Some(value().into()),
            "--threads" => args.threads = value().parse().expect("--threads N"),
            "--prefix" => args.prefix = value().parse().expect("--prefix TOKENS"),
            "--rounds" => args.rounds = value().parse().expect("--rounds N"),
            "--tokens" => args.tokens = value().parse().expect("--tokens N"),
            "--only" => {
                args.variants = match value().as_str() {
                    "plain" => vec![Variant::Plain],
                    "json" => vec![Variant::Json],
                    other => panic!("--only takes plain or json, not {other}"),
                }
            }
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(args.caldrix.is_file(), "--caldrix PATH: the caldrix binary");
    args
}

#[derive(Clone, Copy, Debug)]
enum Variant {
    /// No constraint.
    Plain,
    /// Under the implementer's turn schema (the peer: the same schema as `json_schema`).
    Json,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Json => "json",
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Side {
    /// Our pool; `--max-batch N`, passed only when the pool accepts the flag (without it, the
    /// pool serves one generation at a time: `--max-batch 1`).
    Pool { max_batch: u32 },
    /// `llama-server -np 4 -kvu --cache-reuse 256`.
    Server,
}

impl Side {
    fn name(self) -> String {
        match self {
            Side::Pool { max_batch } => format!("pool --max-batch {max_batch}"),
            Side::Server => "llama-server -np 4".into(),
        }
    }
}

/// One implementer: its context at its first generation, and the result segment appended after
/// its first turn.
struct Piece {
    segments: Vec<Segment>,
    result: Vec<Segment>,
}

/// One piece's turn on one side.
struct Served {
    text: String,
    prompt_tokens: usize,
    recomputed: u64,
    generated: u64,
    ttft_ms: f64,
    done_ms: f64,
}

impl Served {
    fn json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "recomputed": self.recomputed,
            "generated": self.generated,
            "ttft_ms": self.ttft_ms,
            "done_ms": self.done_ms,
            "text": self.text,
        })
    }
}

/// The capture run's replies: the route, the root's delegating turn; each piece in turn (the
/// run delegates one at a time, so the order is fixed) reads its note and answers, and its
/// verifier passes it; the root's answer.
fn replies() -> Vec<String> {
    let mut replies = common::delegating_opening();
    for i in 0..PIECES {
        let path = format!("notes/{i}.md");
        replies.push(turn("Read the note.", vec![call("read", json!({"path": path}))]));
        replies.push(final_turn("Read it.", "The note says how the pool serves a request."));
        // The verifier's schema asks for the reason first.
        replies.push(
            json!({"thought": "Checked.", "final": {"reason": "it is one line", "verdict": "pass"}})
                .to_string(),
        );
    }
    replies.push(final_turn("Delegated.", "Each note has its summary."));
    replies
}

/// The implementers of a scripted `aerix -p` run: their first contexts and results, in agent
/// order; and the shared prefix's tokens.
fn pieces(model: &Model, world: &World, caldrix: &Path, threads: u32) -> (Vec<Piece>, u64) {
    let script = world.home.join("replies.json");
    std::fs::write(&script, json!(replies()).to_string()).unwrap();
    let reference = format!("script:{}@{}", script.display(), model.path().display());
    // One piece at a time: a scripted member answers in queue order, and pieces at once would
    // take each other's replies. The contexts are the same.
    world.settings(&reference, 1);
    let pool = world.pool(caldrix, &reference, threads);
    let events = world.aerix();
    world.stop(caldrix, pool);
    let gens = generations(model, &events);
    let mut agents: Vec<&str> = gens
        .iter()
        .filter(|g| g.reply.contains(r#""tool":"read""#))
        .map(|g| g.agent.as_str())
        .collect();
    agents.sort();
    assert_eq!(agents.len(), PIECES, "every implementer read a note");
    let pieces = agents
        .iter()
        .map(|agent| {
            let mut own = gens.iter().filter(|g| g.agent == *agent);
            let (first, second) = (own.next().unwrap(), own.next().unwrap());
            let appended = |edits: &[Edit]| -> Vec<Segment> {
                edits
                    .iter()
                    .map(|e| match e {
                        Edit::Append { segment } => segment.clone(),
                        other => panic!("{agent}: an edit {other:?}"),
                    })
                    .collect()
            };
            Piece { segments: appended(&first.edits), result: appended(&second.edits) }
        })
        .collect();
    (pieces, prefix_tokens(&events))
}

/// The prompt the pool renders for `segments`, as token ids.
fn prompt(model: &Model, segments: &[Segment]) -> Vec<u32> {
    let messages: Vec<Message> =
        segments.iter().map(|s| Message::new(s.role.as_str(), s.text.as_str())).collect();
    model
        .tokenize_prompt(&model.render(&messages, GenerationPrompt::Add).unwrap())
        .iter()
        .map(|t| t.0)
        .collect()
}

/// Each piece's turn-2 context: its first, its reply on this side, its result.
fn second_contexts(pieces: &[Piece], replies: &[Served]) -> Vec<Vec<Segment>> {
    pieces
        .iter()
        .zip(replies)
        .map(|(p, r)| {
            let mut segments = p.segments.clone();
            segments.push(Segment {
                id: "t1".into(),
                role: Role::Assistant,
                text: r.text.clone(),
                pinned: false,
            });
            segments.extend(p.result.iter().cloned());
            segments
        })
        .collect()
}

/// Does `caldrix pool` take `--max-batch`?
fn pool_batches(caldrix: &Path) -> bool {
    let out = Command::new(caldrix).args(["pool", "--help"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).contains("--max-batch")
}

async fn generate(
    client: &mut Client,
    context: u64,
    constraint: Constraint,
    tokens: u32,
    id: &str,
    started: Instant,
) -> (Done, f64) {
    let request = Generate {
        context,
        constraint,
        max_new_tokens: tokens,
        sampling: None,
        logprobs: None,
        append_as: Some(id.into()),
    };
    let mut first = None;
    let done = client
        .generate(request, |frame| {
            if matches!(frame, Reply::Delta { .. }) && first.is_none() {
                first = Some(started.elapsed());
            }
        })
        .await
        .unwrap();
    (done, first.unwrap_or_else(|| started.elapsed()).as_secs_f64() * 1e3)
}

fn served(done: &Done, ttft_ms: f64, started: Instant) -> Served {
    Served {
        text: done.text.clone(),
        prompt_tokens: done.usage.prompt_tokens as usize,
        recomputed: u64::from(done.usage.prompt_tokens - done.usage.recomputed_from.unwrap()),
        generated: u64::from(done.usage.completion_tokens),
        ttft_ms,
        done_ms: started.elapsed().as_secs_f64() * 1e3,
    }
}

/// Both turns of the 4 pieces at once on the pool at `socket`; per turn its wall time and each
/// piece's figures.
async fn pool_turns(
    socket: &Path,
    model: &Model,
    pieces: &[Piece],
    constraint: &Constraint,
    tokens: u32,
) -> Vec<(f64, Vec<Served>)> {
    let mut clients = Vec::new();
    for _ in pieces {
        clients.push(Client::connect(socket, FrameFormat::Cbor, "bench").await.unwrap());
    }
    let started = Instant::now();
    let tasks: Vec<_> = pieces
        .iter()
        .zip(clients)
        .map(|(piece, mut client)| {
            let (segments, constraint) = (piece.segments.clone(), constraint.clone());
            tokio::spawn(async move {
                let context = client.create_context("main", segments).await.unwrap().context;
                let (done, ttft) =
                    generate(&mut client, context, constraint, tokens, "t1", started).await;
                (client, context, served(&done, ttft, started))
            })
        })
        .collect();
    let mut first = Vec::new();
    for task in tasks {
        first.push(task.await.unwrap());
    }
    let wall1 = started.elapsed().as_secs_f64() * 1e3;
    let (mut clients, mut turn1) = (Vec::new(), Vec::new());
    for (client, context, s) in first {
        clients.push((client, context));
        turn1.push(s);
    }
    for (piece, s) in pieces.iter().zip(&turn1) {
        assert_eq!(
            s.prompt_tokens,
            prompt(model, &piece.segments).len(),
            "the pool renders what we render"
        );
    }
    let seconds = second_contexts(pieces, &turn1);

    let started = Instant::now();
    let tasks: Vec<_> = pieces
        .iter()
        .zip(clients)
        .map(|(piece, (mut client, context))| {
            let (result, constraint) = (piece.result.clone(), constraint.clone());
            tokio::spawn(async move {
                let edits = result.into_iter().map(|segment| Edit::Append { segment }).collect();
                client.edit_context(context, edits).await.unwrap();
                let (done, ttft) =
                    generate(&mut client, context, constraint, tokens, "t2", started).await;
                served(&done, ttft, started)
            })
        })
        .collect();
    let mut turn2 = Vec::new();
    for task in tasks {
        turn2.push(task.await.unwrap());
    }
    let wall2 = started.elapsed().as_secs_f64() * 1e3;
    for (segments, s) in seconds.iter().zip(&turn2) {
        assert_eq!(
            s.prompt_tokens,
            prompt(model, segments).len(),
            "the pool renders what we render"
        );
    }
    vec![(wall1, turn1), (wall2, turn2)]
}

/// The prompts at once on the server, each on a thread of its own.
fn server_turn(
    server: &Server,
    prompts: &[Vec<u32>],
    schema: Option<&Value>,
    tokens: u32,
) -> Result<(f64, Vec<Served>), String> {
    let started = Instant::now();
    let replies: Vec<std::io::Result<ServerReply>> = std::thread::scope(|scope| {
        let threads: Vec<_> = prompts
            .iter()
            .map(|ids| {
                scope.spawn(move || {
                    let request =
                        Completion { prompt: ids, n_predict: tokens, json_schema: schema };
                    server.complete(&request, started)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let wall = started.elapsed().as_secs_f64() * 1e3;
    let mut out = Vec::new();
    for (ids, reply) in prompts.iter().zip(replies) {
        let r = reply.map_err(|e| e.to_string())?;
        out.push(Served {
            text: r.text,
            prompt_tokens: ids.len(),
            recomputed: r.recomputed,
            generated: r.generated,
            ttft_ms: r.ttft_ms,
            done_ms: r.done_ms,
        });
    }
    Ok((wall, out))
}

fn server_turns(
    server: &Server,
    model: &Model,
    pieces: &[Piece],
    schema: Option<&Value>,
    tokens: u32,
) -> Result<Vec<(f64, Vec<Served>)>, String> {
    let firsts: Vec<Vec<u32>> = pieces.iter().map(|p| prompt(model, &p.segments)).collect();
    let (wall1, turn1) = server_turn(server, &firsts, schema, tokens)?;
    let seconds: Vec<Vec<u32>> =
        second_contexts(pieces, &turn1).iter().map(|s| prompt(model, s)).collect();
    let (wall2, turn2) = server_turn(server, &seconds, schema, tokens)?;
    Ok(vec![(wall1, turn1), (wall2, turn2)])
}

fn main() {
    let args = args();
    let model = Model::load(&args.model, &ModelParams::default()).unwrap();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let agents_md = common::agents_md(&model, &args.caldrix, args.threads, args.prefix);
    let world = World::new("batch", &model, &agents_md);
    let (pieces, prefix) = pieces(&model, &world, &args.caldrix, args.threads);

    // The implementer's turn schema: every tool but `agent` (the pieces are at the depth limit).
    let tools: Vec<String> =
        aerix_turn::ALL_TOOLS.iter().filter(|t| **t != "agent").map(|t| (*t).to_owned()).collect();
    let schema = aerix_turn::schema(&tools);

    let batches = pool_batches(&args.caldrix);
    let mut sides = vec![Side::Pool { max_batch: 1 }];
    if batches {
        sides.push(Side::Pool { max_batch: 4 });
    }
    if args.server.is_some() {
        sides.push(Side::Server);
    }
    let server_version = args.server.as_deref().map(|s| Server::version(s).unwrap());
    println!(
        "{}",
        json!({"meta": {
            "model": args.model.file_name().unwrap().to_string_lossy(),
            "threads": args.threads,
            "prefix_tokens": prefix,
            "first_prompt_tokens": pieces.iter().map(|p| prompt(&model, &p.segments).len()).collect::<Vec<_>>(),
            "tokens": args.tokens,
            "max_batch_accepted": batches,
            "server": server_version,
        }})
    );
    let model_ref = args.model.display().to_string();
    for round in 0..args.rounds {
        for &variant in &args.variants {
            let mut order = sides.clone();
            order.rotate_left(round % sides.len());
            for side in order {
                let turns = match side {
                    Side::Pool { max_batch } => {
                        let flag = max_batch.to_string();
                        let flags: &[&str] = if batches { &["--max-batch", &flag] } else { &[] };
                        let pool = world.pool_with(&args.caldrix, &model_ref, args.threads, flags);
                        let constraint = match variant {
                            Variant::Plain => Constraint::None,
                            Variant::Json => Constraint::Json { schema: schema.to_string() },
                        };
                        let turns = runtime.block_on(pool_turns(
                            &world.socket,
                            &model,
                            &pieces,
                            &constraint,
                            args.tokens,
                        ));
                        world.stop(&args.caldrix, pool);
                        Ok(turns)
                    }
                    Side::Server => {
                        let config = ServerConfig {
                            binary: args.server.as_deref().unwrap(),
                            model: &args.model,
                            threads: args.threads,
                            slots: PIECES as u32,
                            window: WINDOW,
                        };
                        let server = Server::start(&config).unwrap();
                        let schema = match variant {
                            Variant::Plain => None,
                            Variant::Json => Some(&schema),
                        };
                        server_turns(&server, &model, &pieces, schema, args.tokens)
                    }
                };
                if let Ok(turns) = &turns {
                    let walls: Vec<String> =
                        turns.iter().map(|(w, _)| format!("{w:.0} ms")).collect();
                    eprintln!(
                        "round {} {} {}: {}",
                        round + 1,
                        variant.name(),
                        side.name(),
                        walls.join(", ")
                    );
                }
                let turns = match turns {
                    Ok(turns) => json!(
                        turns
                            .iter()
                            .map(|(wall, served)| json!({
                                "wall_ms": wall,
                                "pieces": served.iter().map(Served::json).collect::<Vec<_>>(),
                            }))
                            .collect::<Vec<_>>()
                    ),
                    Err(e) => json!({"error": e}),
                };
                println!(
                    "{}",
                    json!({
                        "round": round + 1,
                        "variant": variant.name(),
                        "side": side.name(),
                        "flag": batches,
                        "turns": turns,
                    })
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&world.home);
}
