//! Engine throughput on one model: prefill, greedy decode, and JSON-constrained decode.
//!
//! `scripts/bench-engine` runs this beside llama-cpp-python on the same GGUF, the same token ids
//! and the same thread count, and prints the comparison table. Alone:
//!
//!     cargo bench -p caldrix-engine --bench engine -- MODEL --threads 2
//!
//! Prints one JSON object: the figures, and the token ids used so the peer can replay them.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

use std::path::PathBuf;
use std::time::Instant;

use caldrix_engine::{
    Constraint, GenerateParams, GenerationPrompt, Message, Model, ModelParams, Sampling,
    SessionParams, Special, Token,
};

const PREFILL_TOKENS: usize = 512;
const DECODE_TOKENS: u32 = 128;
const RUNS: usize = 3;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let usage = "usage: engine MODEL [--threads N] [--gpu-layers N|auto]";
    let model_path = PathBuf::from(args.next().expect(usage));
    let mut threads = 2u32;
    let mut gpu_layers = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--threads" => threads = args.next().and_then(|n| n.parse().ok()).expect(usage),
            "--gpu-layers" => {
                gpu_layers = match args.next().expect(usage).as_str() {
                    "auto" => None,
                    n => Some(n.parse().expect(usage)),
                }
            }
            _ => panic!("{usage}"),
        }
    }
    let model_params = ModelParams { gpu_layers, window: Some(4096), ..ModelParams::default() };
    let model = Model::load(&model_path, &model_params).unwrap();
    let params =
        SessionParams { n_ctx: Some(4096), threads: Some(threads), ..SessionParams::default() };
    let mut session = model.session(&params).unwrap();

    // Prefill: a cold prompt of PREFILL_TOKENS tokens, best of RUNS.
    let source = include_str!("../src/session.rs");
    let mut prefill_ids = model.tokenize(source, Special::Plain);
    prefill_ids.truncate(PREFILL_TOKENS);
    let mut prefill = f64::MAX;
    for _ in 0..RUNS {
        session.clear();
        let t = Instant::now();
        session.evaluate(&prefill_ids).unwrap();
        prefill = prefill.min(t.elapsed().as_secs_f64());
    }

    // Decode: greedy continuation of a short code prompt (no chat template, so the model does
    // not stop early), best of RUNS; the peer replays the same number of tokens.
    let decode_prompt = model.tokenize(&source[..600], Special::Plain);
    let greedy = GenerateParams { max_new_tokens: DECODE_TOKENS, ..GenerateParams::default() };
    let mut decode = (0usize, f64::MAX);
    for _ in 0..RUNS {
        session.clear();
        let out = session.generate(&decode_prompt, &greedy).unwrap();
        let (n, secs) = (out.tokens.len(), out.timings.decode.as_secs_f64());
        if decode.0 == 0 || secs / (n as f64) < decode.1 / (decode.0 as f64) {
            decode = (n, secs);
        }
    }

    // Constrained against unconstrained on the same chat prompt: decode tokens/s.
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../tests/fixtures/turn-schema.json")).unwrap();
    let messages = [
        Message::new(
            "system",
            "Answer with one JSON object: a thought and tool calls, or a final answer.",
        ),
        Message::new("user", "The test in tests/math.rs fails. Find out why and fix it."),
    ];
    let chat = model.tokenize_prompt(&model.render(&messages, GenerationPrompt::Add).unwrap());
    let rate = |session: &mut caldrix_engine::Session<'_>, constraint: &Constraint, seed| {
        session.clear();
        let p = GenerateParams {
            max_new_tokens: DECODE_TOKENS,
            sampling: Sampling::Random { temperature: 0.8, top_p: 0.9, seed },
            constraint: constraint.clone(),
            ..GenerateParams::default()
        };
        let out = session.generate(&chat, &p).unwrap();
        (out.tokens.len(), out.timings.decode.as_secs_f64())
    };
    let json = Constraint::Json(schema);
    // Build the token environment before timing (once per model, not per request).
    rate(&mut session, &json, 99);
    let (mut free, mut constrained) = ((0, 0.0), (0, 0.0));
    for seed in 0..5 {
        let a = rate(&mut session, &Constraint::None, seed);
        let b = rate(&mut session, &json, seed);
        free = (free.0 + a.0, free.1 + a.1);
        constrained = (constrained.0 + b.0, constrained.1 + b.1);
    }

    let ids = |t: &[Token]| t.iter().map(|t| t.0).collect::<Vec<_>>();
    let report = serde_json::json!({
        "model": model_path.file_name().map(|f| f.to_string_lossy().into_owned()),
        "threads": threads,
        "placement": model.placement().describe(),
        "prefill_tokens": prefill_ids.len(),
        "prefill_tps": prefill_ids.len() as f64 / prefill,
        "decode_tokens": decode.0,
        "decode_tps": decode.0 as f64 / decode.1,
        "free_tokens": free.0,
        "free_tps": free.0 as f64 / free.1,
        "json_tokens": constrained.0,
        "json_tps": constrained.0 as f64 / constrained.1,
        "prefill_ids": ids(&prefill_ids),
        "decode_prompt_ids": ids(&decode_prompt),
    });
    println!("{report}");
}
