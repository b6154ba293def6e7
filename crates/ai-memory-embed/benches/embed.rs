//! How long embedding takes, per 128-token window and per query, with the layers' matrices
//! as f16 (what `convert` writes) and as Q8_0, side by side in alternating rounds; and how
//! far Q8_0's vectors are from f16's.
//!
//!     cargo bench -p ai-memory-embed --bench embed [-- --rounds 5 --windows 40]
//!
//! The text is generated (sentences drawn from a fixed vocabulary with a seeded generator),
//! so every run embeds the same windows.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

use std::time::Instant;

use ai_memory_embed::convert::{Matrices, convert_as};
use ai_memory_embed::{Encoder, dot};

const WORDS: &[&str] = &[
    "the",
    "team",
    "moved",
    "queue",
    "worker",
    "database",
    "migration",
    "release",
    "friday",
    "caroline",
    "painting",
    "support",
    "group",
    "camping",
    "trip",
    "adoption",
    "agency",
    "kids",
    "rust",
    "tokio",
    "index",
    "page",
    "memory",
    "session",
    "yesterday",
    "because",
    "decided",
    "library",
    "test",
    "failed",
    "fixed",
    "config",
    "deploy",
    "server",
    "latency",
    "budget",
];

fn text(seed: u64, words: usize) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(words);
    for i in 0..words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(WORDS[(x % WORDS.len() as u64) as usize]);
        if i % 12 == 11 {
            out.push(".");
        }
    }
    out.join(" ")
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let (mut rounds, mut windows) = (5usize, 40usize);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().unwrap().parse().unwrap(),
            "--windows" => windows = args.next().unwrap().parse().unwrap(),
            other => panic!("unknown argument {other}"),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let src = test_models::minilm_dir();
    let kinds = [("f16", Matrices::F16), ("q8_0", Matrices::Q8)];
    let encoders: Vec<(&str, Encoder)> = kinds
        .iter()
        .map(|(name, m)| {
            let out = dir.path().join(format!("{name}.gguf"));
            convert_as(&src, &out, *m).unwrap();
            (*name, Encoder::load(&out, None).unwrap())
        })
        .collect();
    // One page of `windows` windows (126 text tokens each, 16 shared).
    let page = text(7, windows * 80);
    let queries: Vec<String> = (0..20).map(|i| text(100 + i, 10)).collect();
    let mut window_ms: Vec<Vec<f64>> = vec![Vec::new(); encoders.len()];
    let mut query_ms: Vec<Vec<f64>> = vec![Vec::new(); encoders.len()];
    let mut made = vec![0usize; encoders.len()];
    for _ in 0..rounds {
        for (i, (_, e)) in encoders.iter().enumerate() {
            let t = Instant::now();
            let v = e.page(&page).unwrap();
            window_ms[i].push(t.elapsed().as_secs_f64() * 1e3 / v.len() as f64);
            made[i] = v.len();
            let t = Instant::now();
            for q in &queries {
                e.query(q).unwrap();
            }
            query_ms[i].push(t.elapsed().as_secs_f64() * 1e3 / queries.len() as f64);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("| matrices | per 128-token window | per query | windows |");
    println!("|---|---|---|---|");
    for (i, (name, _)) in encoders.iter().enumerate() {
        println!(
            "| {name} | {:.2} ms | {:.2} ms | {} |",
            median(&mut window_ms[i]),
            median(&mut query_ms[i]),
            made[i]
        );
    }
    let mut worst = 1.0f32;
    for q in &queries {
        let a = encoders[0].1.query(q).unwrap();
        let b = encoders[1].1.query(q).unwrap();
        worst = worst.min(dot(&a, &b));
    }
    println!("\nq8_0 against f16, lowest cosine over {} queries: {worst:.5}", queries.len());
}
