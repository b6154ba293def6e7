//! The long fuzz run of the pool (`scripts/fuzz-pool`): the property test's cases
//! (`tests/it/fuzz_cases.rs`), many more of them, against a real daemon on loopback (its Unix
//! socket), bounded in count and time. Prints the figures `docs/reliability.md` records.
//!
//!     cargo run -p caldrix --example fuzz-pool -- --caldrix target/debug/caldrix \
//!         --model MODEL [--cases 5000] [--seconds 900] [--frames cbor|json] [--seed N]

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a harness: a failure ends the run")]

#[path = "../tests/it/fuzz_cases.rs"]
mod fuzz_cases;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fuzz_cases::{Kind, Rng, Target};

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut caldrix, mut model) = (None, None);
    let (mut cases, mut seconds, mut json, mut seed) = (5000u64, 900u64, false, 1u64);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--caldrix" => caldrix = Some(value()),
            "--model" => model = Some(value()),
            "--cases" => cases = value().parse().expect("--cases N"),
            "--seconds" => seconds = value().parse().expect("--seconds N"),
            "--frames" => json = value() == "json",
            "--seed" => seed = value().parse().expect("--seed N"),
            other => panic!("unknown argument {other}"),
        }
    }
    let caldrix = caldrix.expect("--caldrix PATH");
    let model = model.expect("--model PATH");
    let dir = std::env::temp_dir().join(format!("caldrix-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&dir)
        .unwrap();
    let socket = dir.join("pool.sock");
    let frames = if json { "json" } else { "cbor" };
    let mut daemon = Command::new(&caldrix)
        .args(["pool", "--socket", socket.to_str().unwrap(), "--frames", frames])
        .args(["--max-connections", "16", "--context-budget", "64M", "--load", &model])
        .args(["--ctx", "512", "--threads", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = daemon.id();
    let started = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "the pool did not bind");
        std::thread::sleep(Duration::from_millis(50));
    }
    let base_context = fuzz_cases::base_context(&socket, json).unwrap();
    let target = Target { socket: socket.clone(), json, base_context };

    let mut seeds = Rng::new(seed);
    let mut per_kind: BTreeMap<Kind, u64> = BTreeMap::new();
    let (mut frames_sent, mut run) = (0u64, 0u64);
    let mut failures = Vec::new();
    let started = Instant::now();
    while run < cases && started.elapsed() < Duration::from_secs(seconds) {
        let case_seed = seeds.next();
        match fuzz_cases::run(&target, case_seed) {
            Ok(outcome) => {
                *per_kind.entry(outcome.kind).or_default() += 1;
                frames_sent += u64::from(outcome.frames);
            }
            Err(e) => failures.push(e),
        }
        run += 1;
        if daemon.try_wait().unwrap().is_some() {
            failures.push(format!("the daemon exited after case {run}"));
            break;
        }
    }
    let rss = fuzz_cases::peak_rss_kib(pid);
    let alive = daemon.try_wait().unwrap().is_none();
    let elapsed = started.elapsed();
    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all(&dir);

    println!("| frames | cases | failures | frames sent | daemon restarts | peak RSS | time |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {frames} | {run} | {} | {frames_sent} | {} | {} MiB | {:.0} s |",
        failures.len(),
        if alive { 0 } else { 1 },
        rss.map_or_else(|| "?".into(), |k| (k >> 10).to_string()),
        elapsed.as_secs_f64()
    );
    println!();
    println!("| case | count |");
    println!("|---|---|");
    for (kind, count) in &per_kind {
        println!("| {kind:?} | {count} |");
    }
    for f in &failures {
        eprintln!("FAILED: {f}");
    }
    if !failures.is_empty() || !alive {
        std::process::exit(1);
    }
}
