//! Prefill cost at depth: a suffix of N rows after a stored prefix of D tokens, the shape of an
//! agent turn on a long context. `cargo run --release -p caldrix-engine --example depth -- MODEL
//! [--depth D] [--rows N] [--runs R] [--flash on|off] [--hole K] [--cells C] [--sequences S]`.
//! Prints milliseconds per run.
//! `--hole K` first leaves K free cells below the prefix (another sequence's rows, dropped).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "an experiment fails loudly")]

use std::time::Instant;

use caldrix_engine::{Model, ModelParams, SessionParams, Special};

fn main() {
    let mut args = std::env::args().skip(1);
    let model_path = args.next().expect("MODEL");
    let (mut depth, mut rows, mut runs, mut flash) = (3500usize, 318usize, 5usize, true);
    // Free cells below the prefix (what a pool leaves after evicting or parking entries).
    let mut hole = 0usize;
    let (mut cells, mut sequences) = (16384u32, 2u32);
    while let Some(a) = args.next() {
        let v = args.next().expect("a value");
        match a.as_str() {
            "--depth" => depth = v.parse().unwrap(),
            "--rows" => rows = v.parse().unwrap(),
            "--runs" => runs = v.parse().unwrap(),
            "--flash" => flash = v == "on",
            "--hole" => hole = v.parse().unwrap(),
            "--cells" => cells = v.parse().unwrap(),
            "--sequences" => sequences = v.parse().unwrap(),
            other => panic!("unknown {other}"),
        }
    }
    let model = Model::load(std::path::Path::new(&model_path), &ModelParams::default()).unwrap();
    let params = SessionParams {
        n_ctx: Some(8192),
        cells: Some(cells),
        threads: Some(2),
        sequences,
        flash_attention: flash,
        ..SessionParams::default()
    };
    let mut session = model.session(&params).unwrap();
    let text = [
        include_str!("../src/session.rs"),
        include_str!("../src/model.rs"),
        include_str!("../src/constraint.rs"),
    ]
    .concat();
    let ids = model.tokenize(&text, Special::Plain);
    assert!(ids.len() >= depth + rows * (runs + 1), "{} tokens of text", ids.len());
    let base = &ids[..depth];
    if hole > 0 {
        // Rows of another sequence in the first cells, then gone: the prefix lands above them.
        let junk: Vec<_> = ids.iter().rev().take(hole).copied().collect();
        session.evaluate(&junk).unwrap();
        session.copy_prefix(0, 1, hole).unwrap();
        session.evaluate(base).unwrap();
        session.drop_sequence(1).unwrap();
    }
    session.evaluate(base).unwrap();
    let mut times = Vec::new();
    for r in 0..runs {
        // A different suffix each run: the base is reused, the suffix prefilled.
        let start = depth + r * rows;
        let mut prompt = base.to_vec();
        prompt.extend_from_slice(&ids[start..start + rows]);
        let t = Instant::now();
        session.evaluate(&prompt).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "depth {depth} rows {rows} hole {hole} flash {flash}: best {:.0} ms, median {:.0} ms ({:.2} ms a row) runs {:?}",
        sorted[0],
        sorted[sorted.len() / 2],
        sorted[sorted.len() / 2] / rows as f64,
        times.iter().map(|t| t.round() as u64).collect::<Vec<_>>()
    );
}
