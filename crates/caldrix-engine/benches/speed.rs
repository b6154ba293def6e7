//! What fast-forward and prompt-lookup drafting buy, in paired rounds (off and on alternating,
//! same prompts, one process), on one model:
//!
//! - forced tokens: turns under aerix's turn schema, decode tokens/s with fast-forward off and
//!   on (drafting off both times), beside unconstrained decoding on the same prompts;
//! - drafting on ordinary turns: the same turns with drafting on (fast-forward off), against
//!   the run with both off, for what a draft costs where nothing is copied on purpose;
//! - copied text: an `edit` call whose `old` string copies a span of a `read` result in the
//!   context (the turn is begun up to `"old":"`, the model copies), decode tokens/s with
//!   drafting off and on.
//!
//! Each round counts the pairs whose two sides gave the same text.
//!
//!     cargo bench -p caldrix-engine --bench speed -- MODEL [--threads 2] [--rounds 5]
//!
//! Prints one JSON object per round, then a markdown table of the medians.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

use std::path::PathBuf;

use caldrix_engine::{
    Constraint, GenerateParams, Generation, GenerationPrompt, Message, Model, ModelParams, Session,
    SessionParams, Token,
};

const SYSTEM: &str = r#"You are a coding agent. Answer every turn with one JSON object, either
{"thought": "...", "calls": [{"tool": "...", "input": {...}}]} to use tools (read, write, edit, bash, grep, repo_map, plan)
or {"thought": "...", "final": "..."} when you are done. Keep every string short.
Example: {"thought":"Look at the test first.","calls":[{"tool":"read","input":{"path":"tests/math.rs"}}]}"#;

const REQUESTS: [&str; 4] = [
    "The test in tests/math.rs fails. Find out why.",
    "Add a --verbose flag to src/main.rs.",
    "Rename the function parse_line to parse_entry everywhere.",
    "Run the tests and tell me which ones fail.",
];

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let model_path = PathBuf::from(args.next().expect("usage: speed MODEL [--threads N]"));
    let (mut threads, mut rounds) = (2u32, 5usize);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|n| n.parse::<usize>().ok());
        match arg.as_str() {
            "--threads" => threads = value.expect("--threads N") as u32,
            "--rounds" => rounds = value.expect("--rounds N"),
            other => panic!("unknown argument {other}"),
        }
    }
    let model = Model::load(&model_path, &ModelParams::default()).unwrap();
    let mut session = model
        .session(&SessionParams {
            n_ctx: Some(4096),
            threads: Some(threads),
            ..SessionParams::default()
        })
        .unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../tests/fixtures/turn-schema.json")).unwrap();
    let turns: Vec<Vec<Token>> = REQUESTS.iter().map(|r| chat(&model, SYSTEM, r, "")).collect();
    let copies = copy_prompts(&model);
    let json = Constraint::Json(schema);
    // The token environment is built once per model, before anything is timed.
    generate(&mut session, &turns[0], &json, 8, false, false);

    let mut rows = Vec::new();
    for round in 0..rounds {
        // Alternate which side goes first, so drift in the machine's speed is shared.
        let order = if round % 2 == 0 { [false, true] } else { [true, false] };
        // Pairs whose two outputs are the same text (they may differ past a near tie that
        // llama.cpp's batched kernels round the other way: docs/protocol.md).
        let mut same = [0usize; 3];
        let mut forced = [(0usize, 0f64); 2];
        let mut drafted = (0usize, 0f64);
        let mut free = (0usize, 0f64);
        for p in &turns {
            let mut out: [Option<Generation>; 2] = [None, None];
            for on in order {
                let g = generate(&mut session, p, &json, 160, on, false);
                forced[on as usize].0 += g.tokens.len();
                forced[on as usize].1 += g.timings.decode.as_secs_f64();
                out[on as usize] = Some(g);
            }
            same[0] += usize::from(out[0].as_ref().unwrap().text == out[1].as_ref().unwrap().text);
            // Drafting where nothing is copied on purpose: what a draft costs an ordinary turn
            // (the drafting-off side is the fast-forward-off run above, the same generation).
            let g = generate(&mut session, p, &json, 160, false, true);
            drafted.0 += g.tokens.len();
            drafted.1 += g.timings.decode.as_secs_f64();
            same[2] += usize::from(g.text == out[0].as_ref().unwrap().text);
            let g = generate(&mut session, p, &Constraint::None, 160, false, false);
            free.0 += g.tokens.len();
            free.1 += g.timings.decode.as_secs_f64();
        }
        let mut copied = [(0usize, 0f64); 2];
        for (p, n) in &copies {
            let mut out: [Option<Generation>; 2] = [None, None];
            for on in order {
                let g = generate(&mut session, p, &Constraint::None, *n, false, on);
                copied[on as usize].0 += g.tokens.len();
                copied[on as usize].1 += g.timings.decode.as_secs_f64();
                out[on as usize] = Some(g);
            }
            same[1] += usize::from(out[0].as_ref().unwrap().text == out[1].as_ref().unwrap().text);
        }
        let tps = |(n, s): (usize, f64)| n as f64 / s;
        let row = serde_json::json!({
            "round": round + 1,
            "forced_off_tps": tps(forced[0]),
            "forced_on_tps": tps(forced[1]),
            "forced_tokens": forced[0].0,
            "free_tps": tps(free),
            "turn_draft_tps": tps(drafted),
            "turn_draft_same": format!("{} of {}", same[2], turns.len()),
            "copy_off_tps": tps(copied[0]),
            "copy_on_tps": tps(copied[1]),
            "copy_tokens": copied[0].0,
            "forced_same": format!("{} of {}", same[0], turns.len()),
            "copy_same": format!("{} of {}", same[1], copies.len()),
        });
        println!("{row}");
        rows.push(row);
    }
    let median = |key: &str| {
        let mut v: Vec<f64> = rows.iter().map(|r| r[key].as_f64().unwrap()).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratio = |a: &str, b: &str| {
        let mut v: Vec<f64> =
            rows.iter().map(|r| r[a].as_f64().unwrap() / r[b].as_f64().unwrap()).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let name = model_path.file_name().unwrap().to_string_lossy();
    println!("\nmodel: {name}; threads: {threads}; {rounds} paired rounds (medians)\n");
    println!("| workload | off tok/s | on tok/s | on/off (median of pairs) | goal |");
    println!("|---|---|---|---|---|");
    let forced = ratio("forced_on_tps", "forced_off_tps");
    println!(
        "| turns under the turn schema, fast-forward | {:.1} | {:.1} | {forced:.2}× | ≥ 1.25× {} |",
        median("forced_off_tps"),
        median("forced_on_tps"),
        if forced >= 1.25 { "met" } else { "not met" }
    );
    let vs_free = ratio("forced_on_tps", "free_tps");
    println!(
        "| the same prompts unconstrained (step by step) | {:.1} | – | constrained with fast-forward: {vs_free:.2}× | > 1× {} |",
        median("free_tps"),
        if vs_free > 1.0 { "met" } else { "not met" }
    );
    let turn_draft = ratio("turn_draft_tps", "forced_off_tps");
    println!(
        "| the same turns under the turn schema, drafting | {:.1} | {:.1} | {turn_draft:.2}× | ≥ 1× (no cost where nothing is copied) {} |",
        median("forced_off_tps"),
        median("turn_draft_tps"),
        if turn_draft >= 1.0 { "met" } else { "not met" }
    );
    let copy = ratio("copy_on_tps", "copy_off_tps");
    println!(
        "| an edit copying 100–600 tokens, drafting | {:.1} | {:.1} | {copy:.2}× | ≥ 2× {} |",
        median("copy_off_tps"),
        median("copy_on_tps"),
        if copy >= 2.0 { "met" } else { "not met" }
    );
}

fn chat(model: &Model, system: &str, user: &str, begun: &str) -> Vec<Token> {
    let messages = [Message::new("system", system), Message::new("user", user)];
    let text = model.render(&messages, GenerationPrompt::Add).unwrap();
    model.tokenize_prompt(&format!("{text}{begun}"))
}

/// Edit turns begun up to the `old` string, with the file read earlier in the context; the
/// number of tokens to generate is the span to copy (about 100, 300 and 600 tokens).
fn copy_prompts(model: &Model) -> Vec<(Vec<Token>, u32)> {
    let file = include_str!("../src/sampling.rs");
    let lines: Vec<&str> = file.lines().collect();
    [(60usize, 72usize), (86, 120), (86, 160)]
        .iter()
        .map(|&(from, to)| {
            let span = lines[from..to].join("\n");
            let n = model.tokenize(&span, caldrix_engine::Special::Plain).len() as u32;
            let user = format!(
                "Here is src/sampling.rs, as `read` returned it:\n{file}\nIn it, replace lines \
                 {from} to {to} with a faster version."
            );
            let begun = r#"{"thought":"Replace the span.","calls":[{"tool":"edit","input":{"path":"src/sampling.rs","old":""#;
            let first = lines[from];
            (chat(model, SYSTEM, &user, &format!("{begun}{}", &first[..first.len().min(8)])), n)
        })
        .collect()
}

fn generate(
    session: &mut Session<'_>,
    prompt: &[Token],
    constraint: &Constraint,
    max_new_tokens: u32,
    fast_forward: bool,
    draft: bool,
) -> Generation {
    session.clear();
    let params = GenerateParams {
        max_new_tokens,
        constraint: constraint.clone(),
        fast_forward,
        draft,
        ..GenerateParams::default()
    };
    session.generate(prompt, &params).unwrap()
}
