//! `--max-batch N`: a member's generations decoded together, each as it would be alone.

use std::sync::OnceLock;
use std::time::Duration;

use caldrix_client::Client;
use caldrix_proto::{
    Done, ErrorKind, FrameFormat, Generate, Reply, Request, Role, ServingFlags, TokenLogprob,
};

use crate::pool::{Daemon, generate, runtime, seg};
use crate::smollm2;

const CBOR: FrameFormat = FrameFormat::Cbor;

/// One daemon for the tests that need no store: SmolLM2 and (loaded by the first test that
/// wants it) Gemma 3, both decoding up to 4 generations together, prefills in batches of 32
/// rows so that a long one spans many steps. Its tests take turns (`turn`): each asserts what
/// its own generations did.
fn batched() -> &'static Daemon {
    static DAEMON: OnceLock<Daemon> = OnceLock::new();
    DAEMON.get_or_init(|| {
        let args = ["--max-batch", "4", "--batch", "32", "--context-budget", "0"];
        Daemon::shared("batch", CBOR, &args, 12)
    })
}

/// A greedy generation reporting its tokens with their ten best choices.
fn greedy(context: u64, max_new_tokens: u32) -> Generate {
    Generate { logprobs: Some(10), ..generate(context, max_new_tokens, None) }
}

fn tokens(done: &Done) -> Vec<u32> {
    done.logprobs.iter().flatten().map(|t| t.token).collect()
}

/// Log-probabilities this close are a choice a batched decode may make the other way: llama.cpp's
/// CPU kernels round a batch of several sequences differently, moving a token's log-probability
/// by up to about 0.2 on both test models (the engine's tests use the same rule,
/// `docs/protocol.md` "Forced tokens, drafts and batching").
const NEAR_TIE: f32 = 0.5;

/// `many` is `one`: the same tokens, text and end, or differing first where `one`'s choice
/// and `many`'s were within `NEAR_TIE` in `one`'s or `many`'s own distribution (a wrong row, or rows
/// leaking between sequences, overturns confident choices instead).
fn same(one: &Done, many: &Done, what: &str) {
    let (a, b) =
        (one.logprobs.as_deref().unwrap_or_default(), many.logprobs.as_deref().unwrap_or_default());
    assert!(!a.is_empty(), "{what}: no tokens");
    let Some(d) = a.iter().zip(b).position(|(x, y)| x.token != y.token) else {
        assert_eq!(many.text, one.text, "{what}");
        assert_eq!(tokens(many), tokens(one), "{what}");
        assert_eq!(many.stop, one.stop, "{what}");
        return;
    };
    // A near tie in either distribution: the one that made the choice may see it as one when
    // the other's rounding moved it just past `NEAR_TIE` (Gemma 3 on an AVX-512 BF16/FP16 CPU:
    // three tokens within 0.03 batched, 0.51 apart single-stream).
    let near = |x: &TokenLogprob, y: &TokenLogprob| {
        x.top
            .iter()
            .find(|t| t.token == y.token)
            .is_some_and(|t| (x.logprob - t.logprob).abs() < NEAR_TIE)
    };
    assert!(
        near(&a[d], &b[d]) || near(&b[d], &a[d]),
        "{what}: token {d} differs beyond a near tie: {:?} / {:?}\n{:?}\n{:?}",
        a[d],
        b[d],
        one.text,
        many.text
    );
}

async fn contexts(client: &mut Client, member: &str, prompts: &[&str]) -> Vec<u64> {
    let mut ids = Vec::new();
    for prompt in prompts {
        let c = client.create_context(member, vec![seg("u", Role::User, prompt)]).await.unwrap();
        ids.push(c.context);
    }
    ids
}

/// Each generation alone, one after the other.
async fn alone(daemon: &Daemon, gens: &[Generate]) -> Vec<Done> {
    let mut client = daemon.client(CBOR).await;
    let mut out = Vec::new();
    for g in gens {
        out.push(client.generate(g.clone(), |_| {}).await.unwrap());
    }
    out
}

/// Every generation sent on a connection of its own before any answer is read.
async fn together(daemon: &Daemon, gens: &[Generate]) -> Vec<Client> {
    let mut clients = Vec::new();
    for g in gens {
        let mut client = daemon.client(CBOR).await;
        client.send(&Request::Generate(g.clone())).await.unwrap();
        clients.push(client);
    }
    clients
}

async fn until_done(client: &mut Client) -> Done {
    loop {
        match client.recv(Duration::from_secs(120)).await.unwrap() {
            Reply::Done(done) => return done,
            Reply::Delta { .. } | Reply::Progress { .. } => {}
            other => panic!("{other:?}"),
        }
    }
}

async fn all_done(clients: Vec<Client>) -> Vec<Done> {
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mut c| tokio::spawn(async move { until_done(&mut c).await }))
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

const PROMPTS: [&str; 4] = [
    "Name three colours.",
    "Write one sentence about the sea.",
    "What is two plus two?",
    "Give a synonym of quick.",
];

/// Four generations submitted at once to a member decoding 4 together give, each, the text and
/// tokens of its run alone (up to a near tie, `same`), on SmolLM2 and Gemma 3.
#[test]
fn four_batched_generations_each_equal_their_single_stream_run() {
    let _serial = crate::serial();
    let daemon = batched();
    runtime().block_on(async {
        let mut client = daemon.client(CBOR).await;
        let flags = ServingFlags {
            ctx: Some(1024),
            threads: Some(2),
            batch: Some(32),
            max_batch: Some(4),
            ..Default::default()
        };
        let gemma = crate::gemma3();
        client.load_member("gemma", gemma.to_str().unwrap(), flags).await.unwrap();
        for member in ["main", "gemma"] {
            let ids = contexts(&mut client, member, &PROMPTS).await;
            let gens: Vec<_> = ids.iter().map(|&c| greedy(c, 16)).collect();
            let single = alone(daemon, &gens).await;
            let batched = all_done(together(daemon, &gens).await).await;
            for (i, (one, many)) in single.iter().zip(&batched).enumerate() {
                same(one, many, &format!("{member} {i}"));
            }
        }
    });
}

/// Cancelling one of four batched generations ends it alone: the others run to the end they
/// reach alone.
#[test]
fn cancelling_one_batched_generation_leaves_the_others_running() {
    let _serial = crate::serial();
    let daemon = batched();
    runtime().block_on(async {
        let mut client = daemon.client(CBOR).await;
        let prompts = ["Count from one to forty.", PROMPTS[0], PROMPTS[1], PROMPTS[2]];
        let ids = contexts(&mut client, "main", &prompts).await;
        let mut gens: Vec<_> = ids.iter().map(|&c| greedy(c, 24)).collect();
        gens[0].max_new_tokens = 400;
        let single = alone(daemon, &gens[1..]).await;
        let mut clients = together(daemon, &gens).await;
        let mut cancelled = clients.remove(0);
        let others = tokio::spawn(all_done(clients));
        let mut deltas = 0;
        let done = loop {
            match cancelled.recv(Duration::from_secs(120)).await.unwrap() {
                Reply::Delta { .. } => {
                    deltas += 1;
                    if deltas == 3 {
                        cancelled.send(&Request::Cancel {}).await.unwrap();
                    }
                }
                Reply::Progress { .. } => {}
                Reply::Done(done) => break done,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(done.stop, caldrix_proto::StopReason::Cancelled);
        assert!(done.usage.completion_tokens < 400, "{:?}", done.usage);
        for (i, (one, other)) in single.iter().zip(others.await.unwrap()).enumerate() {
            assert_ne!(other.stop, caldrix_proto::StopReason::Cancelled, "{i}");
            same(one, &other, &format!("{i}"));
        }
    });
}

/// What a connection heard, in the order the test read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    Delta(usize),
    Progress(usize),
    Done(usize),
}

/// A long prompt submitted while another generation decodes is prefilled in chunks between the
/// other's tokens: the running one keeps producing tokens while the long one fills, and both
/// end as they do alone.
#[test]
fn a_prefill_joining_a_running_batch_does_not_stall_it() {
    let _serial = crate::serial();
    let daemon = batched();
    runtime().block_on(async {
        let mut client = daemon.client(CBOR).await;
        let long: Vec<String> = (1..=150).map(|i| format!("item {i}")).collect();
        let long = format!("Which of these comes last? {}", long.join(", "));
        let story = "Write a long story about a dragon.";
        let ids = contexts(&mut client, "main", &[story, &long]).await;
        let gens = [greedy(ids[0], 200), greedy(ids[1], 8)];
        let single = alone(daemon, &gens).await;
        // The running one outlasts the long prefill (chunks of 31 rows beside its token).
        let rows = single[1].usage.prompt_tokens;
        assert!(rows > 500, "{:?}", single[1].usage);
        assert!(single[0].usage.completion_tokens > rows / 16, "{:?}", single[0].usage);

        let mut running = daemon.client(CBOR).await;
        running.send(&Request::Generate(gens[0].clone())).await.unwrap();
        // Decoding already: its first token is out.
        let mut heard = Vec::new();
        loop {
            if let Reply::Delta { .. } = running.recv(Duration::from_secs(60)).await.unwrap() {
                heard.push(Heard::Delta(0));
                break;
            }
        }
        let mut joining = daemon.client(CBOR).await;
        joining.send(&Request::Generate(gens[1].clone())).await.unwrap();
        let mut dones: [Option<Done>; 2] = [None, None];
        while dones.iter().any(Option::is_none) {
            let (i, reply) = tokio::select! {
                r = running.recv(Duration::from_secs(120)), if dones[0].is_none() => (0, r),
                r = joining.recv(Duration::from_secs(120)), if dones[1].is_none() => (1, r),
            };
            match reply.unwrap() {
                Reply::Delta { .. } => heard.push(Heard::Delta(i)),
                Reply::Progress { .. } => heard.push(Heard::Progress(i)),
                Reply::Done(done) => {
                    heard.push(Heard::Done(i));
                    dones[i] = Some(done);
                }
                other => panic!("{other:?}"),
            }
        }
        let first_progress = heard.iter().position(|h| *h == Heard::Progress(1));
        let first_token = heard.iter().position(|h| matches!(h, Heard::Delta(1) | Heard::Done(1)));
        let (Some(from), Some(to)) = (first_progress, first_token) else {
            panic!("the long prefill sent progress, then ended: {heard:?}")
        };
        let during = heard[from..to].iter().filter(|h| **h == Heard::Delta(0)).count();
        let chunks = heard[from..to].iter().filter(|h| **h == Heard::Progress(1)).count();
        assert!(chunks >= 10, "a prefill of many chunks: {heard:?}");
        assert!(during * 2 >= chunks, "tokens kept coming between the chunks: {heard:?}");
        for (i, (one, done)) in single.iter().zip(dones.iter().flatten()).enumerate() {
            same(one, done, &format!("{i}"));
        }
    });
}

/// `--max-batch` and `max_batch` outside 1 to 16 are refused by name, before anything loads;
/// the daemon serves on after a refused `member_load`.
#[test]
fn max_batch_out_of_its_range_is_refused_by_name() {
    let _serial = crate::serial();
    let model = smollm2();
    for n in ["0", "17"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_caldrix"))
            .args(["pool", "--socket", "/nonexistent/pool.sock", "--load"])
            .arg(&model)
            .args(["--max-batch", n])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains(&format!("--max-batch {n} is out of range")), "{stderr}");
    }
    let daemon = batched();
    runtime().block_on(async {
        let mut client = daemon.client(CBOR).await;
        for n in [0, 17] {
            let flags = ServingFlags { max_batch: Some(n), ..Default::default() };
            let err = client.load_member("wide", model.to_str().unwrap(), flags).await.unwrap_err();
            assert_eq!(err.kind(), Some(ErrorKind::LoadRefused), "{err}");
            assert!(err.to_string().contains(&format!("max_batch {n} is out of range")), "{err}");
        }
        let members = client.members().await.unwrap();
        assert!(members.iter().all(|m| m.alias != "wide"), "{members:?}");
    });
}

/// A round of generations submitted at once leaves a batched member's store with the figures
/// (hits, misses, entries, rows) and answers a single-stream member's gets from the same round.
#[test]
fn a_batched_round_leaves_the_store_as_a_single_stream_round_does() {
    let _serial = crate::serial();
    let daemon = Daemon::start("batch-store", CBOR, &["--max-connections", "10"], None);
    runtime().block_on(async {
        let mut client = daemon.client(CBOR).await;
        let flags = ServingFlags {
            ctx: Some(2048),
            threads: Some(2),
            max_batch: Some(4),
            ..Default::default()
        };
        client.load_member("batched", smollm2().to_str().unwrap(), flags).await.unwrap();
        let system = "You are a careful assistant. Answer in one short sentence.";
        let mut rounds = Vec::new();
        for member in ["main", "batched"] {
            let mut ids = Vec::new();
            for prompt in PROMPTS {
                let segments = vec![seg("s", Role::System, system), seg("u", Role::User, prompt)];
                ids.push(client.create_context(member, segments).await.unwrap().context);
            }
            // The first turn one at a time, the second all at once.
            let first: Vec<_> = ids.iter().map(|&c| generate(c, 8, Some("a1"))).collect();
            alone(&daemon, &first).await;
            for &c in &ids {
                let turn = seg("u2", Role::User, "And why?");
                client
                    .edit_context(c, vec![caldrix_proto::Edit::Append { segment: turn }])
                    .await
                    .unwrap();
            }
            let second: Vec<_> = ids.iter().map(|&c| greedy(c, 8)).collect();
            let done = all_done(together(&daemon, &second).await).await;
            rounds.push(done);
        }
        let status = client.status().await.unwrap();
        let store = |alias: &str| {
            let m = status.members.iter().find(|m| m.info.alias == alias).unwrap();
            let s = &m.store;
            (s.hits, s.misses, s.entries, s.rows)
        };
        assert_eq!(store("batched"), store("main"));
        assert_eq!(store("main").0, 7, "every generation but the very first resumed");
        for (i, (one, many)) in rounds[0].iter().zip(&rounds[1]).enumerate() {
            same(one, many, &format!("{i}"));
            assert_eq!(
                many.usage.recomputed_from.unwrap(),
                one.usage.recomputed_from.unwrap(),
                "{i}"
            );
        }
    });
}

/// Four pieces of one brief sent at once (a long shared system segment, each its own request)
/// compute the shared rows once: the first prefills them, the other three wait for its prefill
/// to pass them and start from a copy (here with no store at all), each still ending as it
/// does alone.
#[test]
fn pieces_sharing_a_prefix_compute_it_once() {
    let _serial = crate::serial();
    let daemon = batched();
    runtime().block_on(async {
        let mut client = daemon.client(CBOR).await;
        let rules: Vec<String> =
            (1..=60).map(|i| format!("Rule {i}: keep the code tidy.")).collect();
        let system = rules.join(" ");
        let mut ids = Vec::new();
        for prompt in PROMPTS {
            let segments = vec![seg("s", Role::System, &system), seg("u", Role::User, prompt)];
            ids.push(client.create_context("main", segments).await.unwrap().context);
        }
        let gens: Vec<_> = ids.iter().map(|&c| greedy(c, 8)).collect();
        let single = alone(daemon, &gens).await;
        assert!(
            single.iter().all(|d| d.usage.recomputed_from.unwrap() == 0),
            "no store: all computed"
        );
        let shared = single[0].usage.prompt_tokens - 40;
        let batched = all_done(together(daemon, &gens).await).await;
        let from: Vec<usize> =
            batched.iter().map(|d| d.usage.recomputed_from.unwrap() as usize).collect();
        assert_eq!(
            from.iter().filter(|&&n| n == 0).count(),
            1,
            "one computes the prefix: {from:?}"
        );
        assert_eq!(
            from.iter().filter(|&&n| n >= shared as usize).count(),
            3,
            "the others copy it: {from:?} (shared ≥ {shared})"
        );
        for (i, (one, many)) in single.iter().zip(&batched).enumerate() {
            same(one, many, &format!("{i}"));
        }
    });
}

/// `fit_max_batch`: a ceiling, not a demand. In a pool whose memory limit leaves room for one
/// more window of SmolLM2's rows, a member asking for 4 with the ceiling loads decoding 2
/// together (its footprint counting that one window), while the same load without it is
/// refused naming `max_batch`. The window's size is measured on the real model first.
#[test]
fn a_max_batch_ceiling_takes_the_generations_whose_windows_fit() {
    let _serial = crate::serial();
    let pool = |memory_limit| {
        caldrix_pool::Pool::new(caldrix_pool::PoolConfig {
            frames: CBOR,
            max_connections: 1,
            idle_timeout: None,
            context_budget: 0,
            memory_limit,
            owner_uid: 0,
        })
    };
    let model = smollm2();
    let member = |max_batch, fit_max_batch| caldrix_pool::MemberConfig {
        window: Some(1024),
        threads: Some(1),
        max_batch,
        fit_max_batch,
        ..caldrix_pool::MemberConfig::new("main", model.display().to_string(), model.clone())
    };
    let listed = |pool: &caldrix_pool::Pool| {
        let infos = pool.member_infos().unwrap();
        (infos[0].max_batch, infos[0].footprint_bytes)
    };
    let roomy = pool(1 << 40);
    roomy.load(member(1, false)).unwrap();
    let (one, base) = listed(&roomy);
    assert_eq!(one, Some(1));
    let roomy = pool(1 << 40);
    roomy.load(member(2, false)).unwrap();
    let window = listed(&roomy).1 - base;
    assert!(window > 1 << 20, "a window of 1,024 rows is more than a MiB: {window}");

    let tight = base + window + window / 2;
    let fitted = pool(tight);
    fitted.load(member(4, true)).unwrap();
    assert_eq!(listed(&fitted), (Some(2), base + window), "one more window fits, not two");

    let e = pool(tight).load(member(4, false)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::LoadRefused);
    assert!(e.message.contains("for the windows of max_batch 4"), "{e}");

    let none = pool(base + window / 2);
    none.load(member(4, true)).unwrap();
    assert_eq!(listed(&none).0, Some(1), "at least one generation");
}
