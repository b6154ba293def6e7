//! `caldrix run` end to end: the binary, a real model, stdout and the exit status.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a failed unwrap is a failed test")]

mod agent;
mod batch;
mod documented;
mod fuzz;
mod fuzz_cases;
mod hardening;
mod http;
mod pool;
mod remote;
mod replay;
mod tools;

use std::process::{Command, Output};

pub use test_models::{gemma3, smollm2};

/// Every test of this binary takes this first, so they run one at a time: a pool's llama.cpp
/// threads spin while they wait for one another, and two tests' pools at once on CI's 2 cores
/// slowed the binary 2.3-fold (336 s with libtest's two threads here, 145 s one at a time).
pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fresh directory of mode 0700 (a socket's directory must be private), emptied first.
fn private_dir(dir: &std::path::Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .unwrap();
}

fn caldrix(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_caldrix")).args(args).output().expect("caldrix runs")
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "caldrix failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn one_of_prints_the_choice_then_the_scores() {
    let _serial = crate::serial();
    let path = smollm2();
    let out = caldrix(&[
        "run",
        path.to_str().unwrap(),
        "--system",
        "Classify the request: answer, edit, investigate or plan.",
        "--prompt",
        "Rename foo to bar",
        "--one-of",
        "answer,edit,investigate,plan",
        "--logprobs",
        "--threads",
        "2",
    ]);
    let text = stdout(&out);
    let mut lines = text.lines();
    let choice = lines.next().unwrap();
    let scores: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(scores["chosen"], choice);
    let per_option = scores["logprobs"].as_object().unwrap();
    let keys: Vec<&str> = per_option.keys().map(String::as_str).collect();
    assert_eq!(keys, ["answer", "edit", "investigate", "plan"]);
    assert!(per_option.values().all(|v| v.as_f64().unwrap() < 0.0));
}

#[test]
fn json_schema_output_is_json_of_that_shape() {
    let _serial = crate::serial();
    let path = smollm2();
    let dir = std::env::temp_dir().join(format!("caldrix-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"city":{"type":"string","maxLength":40},"population":{"type":"integer"}},"required":["city","population"],"additionalProperties":false}"#,
    )
    .unwrap();
    let out = caldrix(&[
        "run",
        path.to_str().unwrap(),
        "--prompt",
        "Name a large city and its population as JSON.",
        "--json-schema",
        schema.to_str().unwrap(),
        "--max-new-tokens",
        "60",
        "--temperature",
        "0.7",
        "--seed",
        "9",
        "--threads",
        "2",
    ]);
    let text = stdout(&out);
    let value: serde_json::Value = serde_json::from_str(text.trim_end_matches('\n')).unwrap();
    assert!(value["city"].is_string() && value["population"].is_i64(), "{value}");
    assert_eq!(value.as_object().unwrap().len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_is_one_clear_line_and_a_failure_status() {
    let _serial = crate::serial();
    let path = smollm2();
    let model = path.to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (&["run", "/nonexistent/model.gguf", "--prompt", "hi"], "does not exist"),
        (&["run", model, "--prompt", "hi", "--one-of", ""], "option \"\" is empty"),
        (&["run", model, "--prompt", "hi", "--json-schema", "/nonexistent.json"], "cannot read"),
        (
            &["run", model, "--prompt", &"word ".repeat(200), "--ctx", "64"],
            "context window holds 64",
        ),
        (
            &["run", model, "--prompt", "hi", "--repeat-penalty", "0"],
            "the repeat penalty must be a number above 0, not 0",
        ),
        (
            &["run", model, "--prompt", "hi", "--logprobs", "--top-logprobs", "21"],
            "21 alternatives per token, more than the limit of 20",
        ),
        (&["run", model, "--prompt", "hi", "--temperature=-1"], "--temperature must be"),
        (&["run", model, "--prompt", "hi", "--max-batch", "0"], "--max-batch 0 is out of range"),
    ];
    for (args, expected) in cases {
        let out = caldrix(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// A Hugging Face reference found in the hub cache runs with downloads off; one that is missing
/// while the hub cannot be reached fails naming the reference and the cache, before the pool
/// binds anything.
#[test]
fn hub_references_resolve_through_the_cache_and_name_what_is_missing() {
    let _serial = crate::serial();
    let home = std::env::temp_dir().join(format!("caldrix-hf-home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let repo = home.join("hub/models--aerix-test--SmolLM2-GGUF");
    let commit = "5f5b0c1e4b1e3a0c9d8e7f6a5b4c3d2e1f0a9b8c";
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    let snapshot = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::os::unix::fs::symlink(smollm2(), snapshot.join("SmolLM2-135M-Instruct.Q4_1.gguf"))
        .unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_caldrix"))
        .args(["run", "aerix-test/SmolLM2-GGUF:q4_1", "--prompt", "Say hi.", "--max-new-tokens"])
        .args(["4", "--threads", "2"])
        .env("HF_HOME", &home)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    assert!(!stdout(&out).trim().is_empty());

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let socket = home.join("pool.sock");
    let out = Command::new(env!("CARGO_BIN_EXE_caldrix"))
        .args(["pool", "--socket", socket.to_str().unwrap(), "--load"])
        .arg("aerix-test/SmolLM2-GGUF:Q8_0")
        .env("HF_HOME", &home)
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_ENDPOINT", &endpoint)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("aerix-test/SmolLM2-GGUF:Q8_0"), "{stderr}");
    assert!(stderr.contains(&home.join("hub").display().to_string()), "{stderr}");
    assert!(!socket.exists());
    std::fs::remove_dir_all(home).unwrap();
}
