//! The cross-project profile's costs, through `Memory`: a harvest pass over 10,000 captured
//! prompts (sentences, candidates, converge, entries written to git and the index), a pass with
//! nothing new, a pass after 100 new prompts, and the session-start digest.
//!
//!     cargo bench -p ai-memory-server --bench profile [-- --prompts N]
//!
//! Prints a markdown table.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use ai_memory_core::{ProjectName, Settings, WorkspaceName};
use ai_memory_index::Principal;
use ai_memory_server::{HookEvent, Memory};
use common::{Rng, percentile};

/// Preferences a user repeats across projects (one in five prompts holds one).
const PREFERENCES: &[&str] = &[
    "Always use pnpm, not npm.",
    "In all my projects, keep integration tests in tests/suite.",
    "From now on, never push directly to main.",
    "Prefer small commits over big ones.",
    "Always run cargo clippy before committing.",
    "Use ruff instead of flake8.",
    "Never mock the database in integration tests.",
    "By default, write the changelog entry with the change.",
    "Prefiro usar tabs em vez de espaços.",
    "Sempre rode os testes antes do push.",
    "Always squash commits before merging.",
    "Use uv to manage Python environments from now on.",
];

/// What most prompts are: tasks, questions, pasted output.
const CHATTER: &[&str] = &[
    "Fix the failing test in the parser module.",
    "Why does the build fail on CI?",
    "Add a --verbose flag to the CLI and document it.",
    "Refactor the session store so it takes a clock.",
    "The login page is slow, can you look at it?",
    "Rename the config loader and update the callers.",
    "```\nerror[E0382]: borrow of moved value\n```\nWhat does this mean?",
    "**Summary:** the tests pass now. Please review src/lib.rs:42.",
    "Write a migration for the new users table.",
    "Explain how the cache invalidation works here.",
];

fn event(project: &str, session: &str, prompt: Option<&str>) -> HookEvent {
    HookEvent {
        harness: "claude-code".into(),
        session_id: session.into(),
        workspace: "default".into(),
        project: project.into(),
        prompt: prompt.map(str::to_owned),
        files: vec!["Cargo.toml".into(), "src/main.rs".into()],
        ..HookEvent::default()
    }
}

fn capture(memory: &Memory, clock: &AtomicI64, rng: &mut Rng, n: usize, offset: usize) {
    for i in offset..offset + n {
        // A session of 20 prompts every few hours, in one of 50 projects.
        let project = format!("p{:02}", (i / 20) % 50);
        let session = format!("s{}", i / 20);
        clock.store(1_793_610_000 + (i as i64 / 20) * 3 * 3600 + i as i64, Ordering::SeqCst);
        if i.is_multiple_of(20) {
            memory.session_start(Principal::Root, &event(&project, &session, None)).unwrap();
        }
        let text = if rng.next().is_multiple_of(5) {
            format!("{} {}", rng.pick(CHATTER), rng.pick(PREFERENCES))
        } else {
            rng.pick(CHATTER).to_string()
        };
        memory.prompt_submit(Principal::Root, &event(&project, &session, Some(&text))).unwrap();
    }
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mut prompts = 10_000usize;
    while let Some(a) = args.next() {
        if a == "--prompts" {
            prompts = args.next().and_then(|v| v.parse().ok()).expect("--prompts N");
        }
    }
    let dir = std::env::temp_dir().join(format!("aim-bench-profile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clock = Arc::new(AtomicI64::new(1_793_610_000));
    let c = clock.clone();
    let memory = Memory::open(&dir, Settings::default())
        .unwrap()
        .with_clock(Box::new(move || c.load(Ordering::SeqCst)));
    let mut rng = Rng(7);
    capture(&memory, &clock, &mut rng, prompts, 0);

    let started = Instant::now();
    let first = memory.profile_pass(false).unwrap();
    let first_time = started.elapsed();
    let started = Instant::now();
    let idle = memory.profile_pass(false).unwrap();
    let idle_time = started.elapsed();
    capture(&memory, &clock, &mut rng, 100, prompts);
    let started = Instant::now();
    let more = memory.profile_pass(false).unwrap();
    let more_time = started.elapsed();
    assert_eq!(idle.prompts_read, 0);
    assert_eq!(more.prompts_read, 100);

    let row = memory
        .index()
        .project(&WorkspaceName::default_workspace(), &ProjectName::new("p07").unwrap())
        .unwrap()
        .unwrap();
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..500 {
        let started = Instant::now();
        let digest = memory.profile_digest(Principal::Root, &row).unwrap().expect("a digest");
        times.push(started.elapsed());
        bytes = digest.text.len();
    }
    times.sort();
    let entries = memory
        .profile_entries(
            &memory
                .profile_home(Principal::Root, &WorkspaceName::default_workspace())
                .unwrap()
                .unwrap(),
        )
        .unwrap()
        .len();

    println!("| measure | value |");
    println!("|---|---|");
    println!("| prompts captured | {prompts} |");
    println!(
        "| first pass (harvest {} prompts, {} statements, converge, {} entries written) | {:.2} s ({:.0} prompts/s) |",
        first.prompts_read,
        first.candidates,
        first.written.len(),
        first_time.as_secs_f64(),
        first.prompts_read as f64 / first_time.as_secs_f64()
    );
    println!("| pass with nothing new | {:.1} ms |", idle_time.as_secs_f64() * 1e3);
    println!(
        "| pass after 100 new prompts ({} statements, {} entries rewritten) | {:.1} ms |",
        more.candidates,
        more.written.len(),
        more_time.as_secs_f64() * 1e3
    );
    println!("| profile entries | {entries} |");
    println!("| digest build p50 ({bytes} bytes) | {:.3} ms |", percentile(&times, 0.5));
    println!("| digest build p95 | {:.3} ms |", percentile(&times, 0.95));
    let _ = std::fs::remove_dir_all(&dir);
}
