//! The memory server's own costs, through `Memory` (what every entry point calls): writes
//! (sanitize, parse, a git commit, the index row), `memory_query` over 10k pages, and a cold
//! `reindex` of the whole wiki.
//!
//!     cargo bench -p ai-memory-server --bench memory [-- --pages N]
//!
//! Prints a markdown table.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

mod common;

use std::time::Instant;

use ai_memory_core::Settings;
use ai_memory_index::Principal;
use ai_memory_server::{Caller, Memory, Query, WritePage};
use common::{Rng, percentile};

/// Words pages are made of: this repository's own prose.
fn vocabulary() -> Vec<String> {
    let text = concat!(
        include_str!("../../../ARCHITECTURE.md"),
        include_str!("../../../docs/ai-memory.md")
    );
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 3)
        .map(str::to_lowercase)
        .collect();
    words.sort();
    words.dedup();
    words
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mut pages = 10_000usize;
    while let Some(a) = args.next() {
        if a == "--pages" {
            pages = args.next().and_then(|v| v.parse().ok()).expect("--pages N");
        }
    }
    let dir = std::env::temp_dir().join(format!("ai-memory-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let memory = Memory::open(&dir, Settings::default()).unwrap();
    let words = vocabulary();
    let mut rng = Rng(7);
    let caller = |project: &str| Caller {
        who: Principal::Root,
        workspace: None,
        project: Some(ai_memory_core::ProjectName::new(project).unwrap()),
    };

    // Writes: 10 projects, 10 folders each, pages of ~150 words.
    let started = Instant::now();
    for i in 0..pages {
        let title: Vec<&str> = (0..4).map(|_| rng.pick(&words).as_str()).collect();
        let body: Vec<&str> = (0..150).map(|_| rng.pick(&words).as_str()).collect();
        let req = WritePage {
            path: format!("f{}/page-{i}.md", i % 10),
            body: format!("# {}\n\n{}\n", title.join(" "), body.join(" ")),
            ..WritePage::default()
        };
        memory.write_page(&caller(&format!("p{}", i % 10)), &req).unwrap();
    }
    let write_secs = started.elapsed().as_secs_f64();

    // Queries: two or three words, in one project, with global hits.
    let mut times = Vec::new();
    let mut hits = 0usize;
    for q in 0..500 {
        let text: Vec<&str> = (0..2 + q % 2).map(|_| rng.pick(&words).as_str()).collect();
        let req = Query { query: text.join(" "), limit: Some(10), ..Query::default() };
        let t = Instant::now();
        let result = memory.query(&caller(&format!("p{}", q % 10)), &req).unwrap();
        times.push(t.elapsed());
        hits += result.hits.len();
    }
    times.sort();

    // Cold reindex: the index deleted, rebuilt from the wiki.
    drop(memory);
    for f in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let started = Instant::now();
    let memory = Memory::open(&dir, Settings::default()).unwrap();
    let reopen_secs = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let (indexed, broken) = memory.reindex().unwrap();
    let reindex_secs = started.elapsed().as_secs_f64();
    assert_eq!((indexed, broken.len()), (pages, 0));

    println!("| measure | value |");
    println!("|---|---|");
    println!("| pages | {pages} |");
    println!(
        "| write throughput (sanitize, commit, index) | {:.0} pages/s ({:.2} ms a page) |",
        pages as f64 / write_secs,
        write_secs * 1e3 / pages as f64
    );
    println!("| memory_query p50 | {:.2} ms |", percentile(&times, 0.5));
    println!("| memory_query p95 | {:.2} ms |", percentile(&times, 0.95));
    println!("| memory_query hits a query (of 10) | {:.1} |", hits as f64 / times.len() as f64);
    println!("| index rebuilt on open (missing index) | {reopen_secs:.2} s |");
    println!("| reindex (import check + rebuild) | {reindex_secs:.2} s |");
    let _ = std::fs::remove_dir_all(&dir);
}
