//! `caldrix pool --http` on SmolLM2, driven by the official OpenAI and Anthropic Python SDKs
//! (pinned, installed by `scripts/setup --tests`; the calls are in `http_sdk.py`, the
//! assertions here).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use caldrix_proto::{FrameFormat, Reply, Request, Role};
use serde_json::Value;

use crate::pool::{generate, runtime, seg};

/// A pool with the HTTP front on an ephemeral loopback port.
pub(crate) struct HttpPool {
    child: Child,
    pub(crate) socket: PathBuf,
    pub(crate) url: String,
    dir: PathBuf,
}

impl HttpPool {
    pub(crate) fn start(name: &str, extra: &[&str]) -> HttpPool {
        let dir = std::env::temp_dir().join(format!("caldrix-http-{}-{name}", std::process::id()));
        crate::private_dir(&dir);
        let socket = dir.join("pool.sock");
        let model = crate::smollm2();
        let mut child = Command::new(env!("CARGO_BIN_EXE_caldrix"))
            .args(["pool", "--socket"])
            .arg(&socket)
            .args(["--max-connections", "4", "--http", "0", "--load"])
            .arg(&model)
            .args(["--ctx", "4096", "--threads", "2", "--context-budget", "64M"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The binary says where it listens; the rest of its log is drained so it never blocks.
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("caldrix: HTTP on ") {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let url = rx.recv_timeout(Duration::from_secs(60)).expect("the HTTP front did not start");
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(started.elapsed() < Duration::from_secs(60), "the pool did not bind");
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpPool { child, socket, url, dir }
    }

    /// Runs `cases` of `http_sdk.py`; its observations, by case (a case may print several).
    pub(crate) fn sdk(&self, cases: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
        let output = self.sdk_command(cases, env).stdin(Stdio::null()).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "http_sdk.py {cases:?} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn sdk_command(&self, cases: &[&str], env: &[(&str, &str)]) -> Command {
        let python = test_models::http_sdk_python();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/http_sdk.py");
        let mut command = Command::new(python);
        command.arg(script).args(cases).env("CALDRIX_URL", &self.url).stdout(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        command
    }

    /// The contexts the member holds (a running or queued generation holds one).
    pub(crate) fn contexts(&self) -> u32 {
        runtime().block_on(async {
            let mut client =
                caldrix_client::Client::connect(&self.socket, FrameFormat::Cbor, "test")
                    .await
                    .unwrap();
            client.status().await.unwrap().members[0].contexts
        })
    }
}

impl Drop for HttpPool {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn case<'a>(seen: &'a [Value], name: &str) -> Vec<&'a Value> {
    let found: Vec<_> = seen.iter().filter(|v| v["case"] == name).collect();
    assert!(!found.is_empty(), "no `{name}` in {seen:?}");
    found
}

fn one<'a>(seen: &'a [Value], name: &str) -> &'a Value {
    case(seen, name)[0]
}

fn validates(schema: &Value, text: &str) -> bool {
    let Ok(value) = serde_json::from_str::<Value>(text) else { return false };
    jsonschema::validator_for(schema).unwrap().is_valid(&value)
}

const READ: &str = r#"{"type":"object","properties":{"path":{"type":"string"},"lines":{"type":"integer","minimum":1}},"required":["path"],"additionalProperties":false}"#;
const BASH: &str = r#"{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}"#;

fn tool_schema(name: &str) -> Value {
    serde_json::from_str(if name == "read_file" { READ } else { BASH }).unwrap()
}

#[test]
fn the_openai_sdk_lists_models_chats_and_follows_a_schema() {
    let _serial = crate::serial();
    let pool = HttpPool::start("chat", &[]);
    let seen = pool.sdk(&["models", "chat", "json_schema"], &[]);
    assert!(one(&seen, "models")["ids"].as_array().unwrap().iter().any(|id| id == "main"));
    let chat = one(&seen, "chat");
    assert!(!chat["text"].as_str().unwrap().is_empty(), "{chat}");
    assert!(chat["completion"].as_u64().unwrap() <= 12 && chat["prompt"].as_u64().unwrap() > 0);
    let streamed = one(&seen, "chat_stream");
    // The same seed, streamed: the same text, in several chunks, with the usage at the end.
    assert_eq!(streamed["text"], chat["text"], "{streamed}");
    assert!(streamed["chunks"].as_u64().unwrap() > 2, "{streamed}");
    assert_eq!(streamed["completion"], chat["completion"]);
    let json = one(&seen, "json_schema");
    assert_eq!(json["finish"], "stop", "{json}");
    assert!(validates(&json["schema"], json["text"].as_str().unwrap()), "{json}");
}

#[test]
fn tool_calls_through_the_sdks_always_parse() {
    let _serial = crate::serial();
    let pool = HttpPool::start("tools", &[]);
    let seen = pool.sdk(&["tools", "responses", "messages"], &[]);
    // 20 of 20 sampled seeds: a call of an offered tool whose arguments validate.
    let calls = case(&seen, "tool_call");
    assert_eq!(calls.len(), 20);
    for c in calls {
        assert_eq!(c["finish"], "tool_calls", "{c}");
        let call = &c["calls"].as_array().unwrap()[0];
        let name = call["name"].as_str().unwrap();
        assert!(["read_file", "bash"].contains(&name), "{c}");
        assert!(validates(&tool_schema(name), call["arguments"].as_str().unwrap()), "{c}");
    }
    let none = one(&seen, "tool_none");
    assert_eq!(none["calls"], 0, "{none}");
    assert!(!none["text"].as_str().unwrap().contains("<tool_call>"), "{none}");
    let streamed = one(&seen, "tool_stream");
    assert_eq!(streamed["finish"], "tool_calls", "{streamed}");
    let call = &streamed["calls"][0];
    assert_eq!(call["name"], "bash", "{streamed}");
    assert!(validates(&tool_schema("bash"), call["arguments"].as_str().unwrap()), "{streamed}");
    assert!(one(&seen, "tool_result")["finish"].is_string());
    // Responses: a function_call item, not streamed and streamed.
    for name in ["responses", "responses_stream"] {
        let r = one(&seen, name);
        let item = r["items"].as_array().unwrap().iter().find(|i| i["type"] == "function_call");
        let item = item.unwrap_or_else(|| panic!("no function call in {r}"));
        assert_eq!(item["name"], "bash", "{r}");
        assert!(validates(&tool_schema("bash"), item["arguments"].as_str().unwrap()), "{r}");
    }
    let events = &one(&seen, "responses_stream")["events"];
    assert!(
        events.as_array().unwrap().iter().any(|e| e == "response.function_call_arguments.done")
    );
    // Anthropic: tool_use blocks whose input validates, not streamed and streamed.
    for name in ["messages", "messages_stream"] {
        let r = one(&seen, name);
        assert_eq!(r["stop"], "tool_use", "{r}");
        let block = r["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use");
        let block = block.unwrap_or_else(|| panic!("no tool_use in {r}"));
        assert_eq!(block["name"], "bash", "{r}");
        let schema = tool_schema("bash");
        assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&block["input"]), "{r}");
    }
    let events = &one(&seen, "messages_stream")["events"];
    assert!(events.as_array().unwrap().iter().any(|e| e == "input_json"), "{events}");
    assert!(one(&seen, "messages_result")["stop"].is_string());
}

#[test]
fn bad_inputs_are_answered_in_each_api_s_shape_and_the_pool_serves_on() {
    let _serial = crate::serial();
    let pool = HttpPool::start("bad", &[]);
    let seen = pool.sdk(&["bad"], &[]);
    let error = |name: &str, status: u64, says: &[&str]| {
        let r = one(&seen, name);
        assert_eq!(r["status"], status, "{r}");
        let body = r["body"].to_string();
        for s in says {
            assert!(body.contains(s), "{name}: `{s}` not in {body}");
        }
    };
    // OpenAI's SDK hands over the `error` object; Anthropic's the whole body.
    error("unknown_model", 404, &["nope", "main"]);
    error("unknown_model_anthropic", 404, &["not_found_error", "nope", "main"]);
    error("n", 400, &["`n`"]);
    error("over_window", 400, &["4096"]);
    error("over_window_anthropic", 400, &["invalid_request_error", "4096"]);
    error("max_tokens", 400, &["100000", "4096"]);
    error("messages", 400, &["4096"]);
    error("body", 413, &[]);
    error("bad_tool", 400, &["weird"]);
    error("bad_field", 400, &["temperature"]);
    error("connections", 429, &[]);
    assert_eq!(one(&seen, "after")["finish"], "length");
}

#[test]
fn a_prefix_shared_with_a_socket_request_is_reported_cached() {
    let _serial = crate::serial();
    let pool = HttpPool::start("cached", &[]);
    let system = "You are aerix, a coding agent working in a Rust repository. Answer briefly, \
                  run the tests before you say a change works, and never guess a file's content.";
    // An aerix-style request over the socket: its rows enter the prefix store.
    runtime().block_on(async {
        let mut client = caldrix_client::Client::connect(&pool.socket, FrameFormat::Cbor, "aerix")
            .await
            .unwrap();
        let created = client
            .request(&Request::ContextCreate {
                member: "main".into(),
                segments: vec![seg("s", Role::System, system), seg("u", Role::User, "Hello.")],
                tools: Vec::new(),
            })
            .await
            .unwrap();
        let Reply::Context { context, .. } = created else { panic!("{created:?}") };
        client.generate(generate(context, 2, None), |_| {}).await.unwrap();
    });
    let seen = pool.sdk(&["cached"], &[("CALDRIX_SHARED_SYSTEM", system)]);
    let openai = one(&seen, "cached_openai");
    // At least the system turn (some 40 tokens) came from the store.
    assert!(openai["cached"].as_u64().unwrap() >= 30, "{openai}");
    assert!(openai["cached"].as_u64() < openai["prompt"].as_u64(), "{openai}");
    let anthropic = &one(&seen, "cached_anthropic")["usage"];
    assert!(anthropic["cache_read_input_tokens"].as_u64().unwrap() >= 30, "{anthropic}");
}

#[test]
fn a_client_that_disconnects_mid_stream_frees_the_member_within_a_second() {
    let _serial = crate::serial();
    let pool = HttpPool::start("disconnect", &[]);
    let mut child = pool.sdk_command(&["disconnect"], &[]).stdin(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let closed: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let left = Instant::now();
    assert_eq!(closed["case"], "closed");
    assert!(closed["chunks"].as_u64().unwrap() >= 4, "{closed}");
    while pool.contexts() > 0 {
        assert!(left.elapsed() < Duration::from_secs(1), "the member still holds the context");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.stdin.take().unwrap().write_all(b"").unwrap();
    assert!(child.wait().unwrap().success());
}

/// Headless Chromium (Debian's) with nothing of the user's: a fresh profile, no network beyond
/// the page, no sandbox (the tests may run as root).
fn chromium(profile: &std::path::Path) -> Command {
    let mut command = Command::new("chromium");
    command.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=412,900",
    ]);
    command.arg(format!("--user-data-dir={}", profile.display()));
    command
}

#[test]
fn the_status_page_renders_in_a_browser_at_a_phone_s_width() {
    let _serial = crate::serial();
    let pool = HttpPool::start("page", &[]);
    let profile = tempfile::tempdir().unwrap();
    let url = format!("{}/", pool.url);
    // What the browser rendered: the member, its lane and window, the generations, the store.
    let dom = chromium(profile.path()).arg("--dump-dom").arg(&url).output().unwrap();
    assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout);
    for shown in ["<h2>main</h2>", "SmolLM2", "cpu", "4096 tokens", "0 running, 0 queued", "hit(s)"]
    {
        assert!(dom.contains(shown), "`{shown}` not in {dom}");
    }
    // The screenshot stays for a person to look at (a phone's 412 px).
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("caldrix-status-page.png");
    let _ = std::fs::remove_file(&shot);
    let mut screenshot = chromium(profile.path());
    screenshot.arg(format!("--screenshot={}", shot.display())).arg(&url);
    let out = screenshot.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let (width, height) = (&png[16..20], &png[20..24]);
    assert_eq!(u32::from_be_bytes(width.try_into().unwrap()), 412);
    assert_eq!(u32::from_be_bytes(height.try_into().unwrap()), 900);
    eprintln!("the status page's screenshot: {}", shot.display());
}
