//! Prefill cost at depth: a suffix of N rows after a stored prefix of D tokens, the shape of an
//! agent turn on a long context. `cargo run --release -p caldrix-engine --example depth -- MODEL
//! [--depth D] [--rows N] [--runs R] [--flash on|off] [--hole K] [--cells C] [--sequences S]
//! [--others K --turns T [--turn-rows R] [--drop-others on]]`. Prints milliseconds per run.
//! `--hole K` first leaves K free cells below the prefix (another sequence's rows, dropped).
//! `--others K --turns T` grows sequence 0 and K others by T turns of R rows each, one of each in
//! queue order (the cell layout of interleaved implementers), then measures on sequence 0;
//! `--drop-others on` drops the others first, leaving holes.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "an experiment fails loudly")]

use std::time::Instant;

use caldrix_engine::{GenerateParams, Model, ModelParams, SessionParams, Special};

/// Tokens by which each sequence's text is shifted from the previous one's, so none shares a row.
const SHIFT: usize = 7;

fn main() {
    let mut args = std::env::args().skip(1);
    let model_path = args.next().expect("MODEL");
    let (mut depth, mut rows, mut runs, mut flash) = (3500usize, 318usize, 5usize, true);
    // Free cells below the prefix (what a pool leaves after evicting or parking entries).
    let mut hole = 0usize;
    let (mut cells, mut sequences) = (16384u32, 2u32);
    // Turns of `turn_rows` rows on sequence 0 and on `others` more sequences, one of each in
    // queue order, after the shared prefix: the cell layout of interleaved implementers.
    let (mut others, mut turns, mut turn_rows) = (0u32, 0usize, 380usize);
    // Then drop the other sequences: their cells become free holes among sequence 0's.
    let mut drop_others = false;
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
            "--others" => others = v.parse().unwrap(),
            "--turns" => turns = v.parse().unwrap(),
            "--turn-rows" => turn_rows = v.parse().unwrap(),
            "--drop-others" => drop_others = v == "on",
            other => panic!("unknown {other}"),
        }
    }
    let model = Model::load(std::path::Path::new(&model_path), &ModelParams::default()).unwrap();
    let params = SessionParams {
        n_ctx: Some(8192),
        cells: Some(cells),
        threads: Some(2),
        sequences: sequences.max(others + 1),
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
    let grown = turns * turn_rows;
    assert!(
        ids.len() >= depth + grown + others as usize * SHIFT + rows * (runs + 1),
        "{} tokens of text",
        ids.len()
    );
    if hole > 0 {
        // Rows of another sequence in the first cells, then gone: the prefix lands above them.
        let junk: Vec<_> = ids.iter().rev().take(hole).copied().collect();
        session.evaluate(&junk).unwrap();
        session.copy_prefix(0, 1, hole).unwrap();
        session.evaluate(&ids[..depth]).unwrap();
        session.drop_sequence(1).unwrap();
    }
    session.evaluate(&ids[..depth]).unwrap();
    for seq in 1..=others {
        session.copy_prefix(0, seq, depth).unwrap();
    }
    let one = GenerateParams { max_new_tokens: 1, ..GenerateParams::default() };
    let mut held: Vec<Vec<_>> = vec![ids[..depth].to_vec(); others as usize + 1];
    for t in 0..turns {
        for (seq, tokens) in held.iter_mut().enumerate() {
            let at = depth + t * turn_rows + seq * SHIFT;
            tokens.extend_from_slice(&ids[at..at + turn_rows]);
            session.generate_on(seq as u32, tokens, &one, &mut |_| true).unwrap();
        }
    }
    if drop_others {
        for seq in 1..=others {
            session.drop_sequence(seq).unwrap();
        }
    }
    let base = held.swap_remove(0);
    let depth = base.len();
    session.evaluate(&base).unwrap();
    let mut times = Vec::new();
    for r in 0..runs {
        // A different suffix each run: the base is reused, the suffix prefilled.
        let start = depth + others as usize * SHIFT + r * rows;
        let mut prompt = base.clone();
        prompt.extend_from_slice(&ids[start..start + rows]);
        let t = Instant::now();
        session.evaluate(&prompt).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "depth {depth} rows {rows} hole {hole} others {others} flash {flash}: best {:.0} ms, median {:.0} ms ({:.2} ms a row) runs {:?}",
        sorted[0],
        sorted[sorted.len() / 2],
        sorted[sorted.len() / 2] / rows as f64,
        times.iter().map(|t| t.round() as u64).collect::<Vec<_>>()
    );
}
