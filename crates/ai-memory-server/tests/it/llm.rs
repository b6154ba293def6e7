//! The profile's LLM path through a real caldrix pool (in this process, on a Unix socket): the
//! scripted member for exact classify and merge answers and a refused one (the batch falls back
//! to the word lists), and SmolLM2 through the real engine under the same JSON schema.

use std::path::PathBuf;
use std::sync::OnceLock;

use ai_memory_core::{Llm, Settings, WorkspaceName};
use ai_memory_index::Principal;
use caldrix_pool::{MemberConfig, Pool, PoolConfig, parse_model_ref};
use serde_json::json;

use crate::support::{DAY, DAY1, Lab, temp};

const ROOT: Principal = Principal::Root;

/// The scripted member's replies, in the order the test below asks.
fn replies() -> Vec<String> {
    vec![
        // Classify the first batch: one sentence the word lists would miss, one that is not a
        // preference.
        json!({"items": [
            {"id": 0, "preference": true, "general": true, "category": "tools", "stack": "python",
             "entry": "new", "line": "Lint with ruff before every commit."},
            {"id": 1, "preference": false, "general": false, "category": "habits", "stack": "none",
             "entry": "new", "line": "Not a preference."},
        ]})
        .to_string(),
        // The second batch: an answer the schema refuses (the pool checks it).
        json!({"items": "not a list"}).to_string(),
        // Classify the later restatement, then merge: the newest words only confirm the entry.
        json!({"items": [
            {"id": 0, "preference": true, "general": true, "category": "tools", "stack": "python",
             "entry": "profile/tools/ruff-commit.md", "line": "Use ruff to lint before each commit."},
        ]})
        .to_string(),
        json!({"changed": false, "line": "Lint with ruff before every commit."}).to_string(),
    ]
}

/// One pool for the tests of this binary: a scripted member and SmolLM2.
fn pool_socket() -> PathBuf {
    static SOCKET: OnceLock<PathBuf> = OnceLock::new();
    SOCKET
        .get_or_init(|| {
            // The pool lives as long as the test binary: so does its directory.
            let dir = temp("pool").keep();
            // The client refuses a socket directory others can enter (the pool's trust rule).
            std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .unwrap();
            let script = dir.join("replies.json");
            std::fs::write(&script, serde_json::to_string(&replies()).unwrap()).unwrap();
            let config = PoolConfig {
                frames: caldrix_proto::FrameFormat::Cbor,
                max_connections: 8,
                idle_timeout: None,
                context_budget: 64 << 20,
                memory_limit: caldrix_pool::memory_limit(),
                owner_uid: caldrix_client::trust::current_uid(),
            };
            let pool = Pool::new(config);
            let smol = test_models::smollm2().display().to_string();
            for (alias, reference) in
                [("script", format!("script:{}@{smol}", script.display())), ("smol", smol.clone())]
            {
                let (model, script) = parse_model_ref(&reference).unwrap();
                let member = MemberConfig {
                    window: Some(2048),
                    threads: Some(2),
                    script,
                    ..MemberConfig::new(alias, reference, model)
                };
                pool.load(member).unwrap();
            }
            let socket = dir.join("pool.sock");
            let (tx, rx) = std::sync::mpsc::channel();
            let path = socket.clone();
            std::thread::spawn(move || {
                let rt =
                    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                rt.block_on(async {
                    let listener = tokio::net::UnixListener::bind(&path).unwrap();
                    tx.send(()).unwrap();
                    pool.serve(listener).await.unwrap();
                });
            });
            rx.recv().unwrap();
            socket
        })
        .clone()
}

fn settings(member: &str) -> Settings {
    Settings {
        llm: Llm {
            provider: "pool".into(),
            socket: pool_socket().display().to_string(),
            model: member.into(),
            timeout_secs: 120,
            ..Llm::default()
        },
        ..Settings::default()
    }
}

#[test]
fn the_scripted_member_classifies_and_merges_and_a_refused_answer_falls_back() {
    let lab = Lab::new("llm-script", settings("script"));
    // The model restates it (its line, category and stack); the user's scope phrase lets it
    // in from one project.
    lab.session(
        ROOT,
        "default/a",
        &[],
        &["We should lint with ruff before each commit in all my projects. Then fix the login page."],
    );
    let report = lab.memory.profile_pass(false).unwrap();
    assert_eq!((report.llm_calls, report.llm_failures), (1, 0), "{report:?}");
    let home = lab.memory.profile_home(ROOT, &WorkspaceName::default_workspace()).unwrap().unwrap();
    let entries = lab.memory.profile_entries(&home).unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry.summary, "Lint with ruff before every commit.");
    assert_eq!(entry.applies_to, ["python"]);
    // The model's category, the slug of its line.
    assert_eq!(entry.path, "profile/tools/ruff-commit.md");
    let learned = entry.learned.as_ref().unwrap();
    assert!(learned.general);
    // Evidence is the user's sentence, never the model's line.
    assert_eq!(
        learned.evidence[0].words,
        "We should lint with ruff before each commit in all my projects."
    );

    // The next batch's answer does not fit the schema: the word lists decide it.
    lab.at(DAY1 + DAY);
    lab.session(ROOT, "default/b", &[], &["Always use pnpm, not npm."]);
    let report = lab.memory.profile_pass(false).unwrap();
    assert_eq!((report.llm_calls, report.llm_failures), (1, 1), "{report:?}");
    assert_eq!(report.candidates, 1, "the zero-LLM path recorded the statement");

    // A restatement in other words: the model calls it a preference, merge says it only
    // confirms the entry, so the line stays exactly as written.
    lab.at(DAY1 + 2 * DAY);
    lab.session(
        ROOT,
        "default/c",
        &[],
        &["Please make sure ruff lints everything before I commit."],
    );
    let report = lab.memory.profile_pass(false).unwrap();
    assert_eq!((report.llm_calls, report.llm_failures), (2, 0), "{report:?}");
    let entries = lab.memory.profile_entries(&home).unwrap();
    let ruff: Vec<_> = entries.iter().filter(|e| e.summary.contains("ruff")).collect();
    assert_eq!(ruff.len(), 1, "{entries:?}");
    assert_eq!(ruff[0].summary, "Lint with ruff before every commit.");
    assert!(ruff[0].learned.as_ref().unwrap().evidence.iter().any(|e| e.project == "default/c"));
}

#[test]
fn smollm2_classifies_under_the_schema() {
    let lab = Lab::new("llm-smol", settings("smol"));
    lab.session(ROOT, "default/a", &[], &["In all my projects, always use pnpm instead of npm."]);
    let report = lab.memory.profile_pass(false).unwrap();
    // The real engine's answer parsed under the schema: no fallback.
    assert_eq!((report.llm_calls, report.llm_failures), (1, 0), "{report:?}");
}

/// A one-request HTTP server answering `answer` as a chat completion; returns its base URL and
/// the request it received (once it has).
fn endpoint(answer: serde_json::Value) -> (String, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let (mut head, mut length) = (String::new(), 0usize);
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let reply = json!({"choices": [{"finish_reason": "stop",
            "message": {"role": "assistant", "content": answer.to_string()}}]})
        .to_string();
        let mut stream = stream;
        write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}", reply.len()).unwrap();
        tx.send(format!("{head}{}", String::from_utf8(body).unwrap())).unwrap();
    });
    (url, rx)
}

#[test]
fn an_openai_compatible_endpoint_classifies_under_the_schema() {
    let answer = json!({"items": [{"id": 0, "preference": true, "general": true,
        "category": "testing", "stack": "none", "entry": "new",
        "line": "Write the failing test first."}]});
    let (url, request) = endpoint(answer);
    let settings = Settings {
        llm: Llm {
            provider: "openai".into(),
            endpoint: url,
            model: "local".into(),
            api_key: "sk-test".into(),
            ..Llm::default()
        },
        ..Settings::default()
    };
    let lab = Lab::new("llm-openai", settings);
    lab.session(
        ROOT,
        "default/a",
        &[],
        &["In every project, I want us to write the failing test before the fix."],
    );
    let report = lab.memory.profile_pass(false).unwrap();
    assert_eq!((report.llm_calls, report.llm_failures), (1, 0), "{report:?}");
    let request = request.recv().unwrap();
    assert!(request.starts_with("POST /v1/chat/completions"), "{request}");
    assert!(request.contains("Bearer sk-test"), "{request}");
    let body: serde_json::Value =
        serde_json::from_str(&request[request.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["model"], "local");
    assert!(body["messages"][1]["content"].as_str().unwrap().contains("failing test"));
    let home = lab.memory.profile_home(ROOT, &WorkspaceName::default_workspace()).unwrap().unwrap();
    let entries = lab.memory.profile_entries(&home).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].summary, "Write the failing test first.");
    assert!(entries[0].path.starts_with("profile/testing/"));
}

/// The model's `general` alone does not skip `min_projects`: a sentence without an explicit
/// scope phrase waits for a second project, as on the zero-LLM path.
#[test]
fn the_models_general_flag_alone_does_not_skip_min_projects() {
    let answer = json!({"items": [{"id": 0, "preference": true, "general": true,
        "category": "testing", "stack": "none", "entry": "new",
        "line": "Write the failing test first."}]});
    let (url, _request) = endpoint(answer);
    let settings = Settings {
        llm: Llm {
            provider: "openai".into(),
            endpoint: url,
            model: "local".into(),
            ..Llm::default()
        },
        ..Settings::default()
    };
    let lab = Lab::new("llm-general", settings);
    lab.session(ROOT, "default/a", &[], &["Always write the failing test before the fix."]);
    let report = lab.memory.profile_pass(false).unwrap();
    assert_eq!((report.llm_calls, report.llm_failures), (1, 0), "{report:?}");
    let home = lab.memory.profile_home(ROOT, &WorkspaceName::default_workspace()).unwrap().unwrap();
    assert!(lab.memory.profile_entries(&home).unwrap().is_empty());
    let pending = lab.memory.profile_review(&home).unwrap().pending;
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!((pending[0].projects, pending[0].needs_projects), (1, 1));
}
