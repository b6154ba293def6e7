//! The HTTP front on a real pool (in this process, on a temporary socket): SmolLM2 members for
//! the generations that need a model (few and short), scripted members for the deterministic
//! ones (stop strings, the event sequences), driven by a plain HTTP client.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use caldrix_http::HttpConfig;
use caldrix_pool::{MemberConfig, Pool, PoolConfig, parse_model_ref};
use caldrix_proto::FrameFormat;
use serde_json::{Value, json};

/// The scripted members' reply: a stop string in the middle.
const REPLY: &str = "Hello there. STOP more text";

/// A pool served on a socket in a private directory, with `members` (alias, reference,
/// window), at most `max_connections` open.
fn start_pool(name: &str, max_connections: u32, members: &[(&str, String, u32)]) -> PathBuf {
    let dir =
        tempfile::Builder::new().prefix(&format!("caldrix-http-{name}")).tempdir().unwrap().keep();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let pool = Pool::new(PoolConfig {
        frames: FrameFormat::Cbor,
        max_connections,
        idle_timeout: None,
        context_budget: 64 << 20,
        memory_limit: caldrix_pool::memory_limit(),
        owner_uid: caldrix_client::trust::current_uid(),
    });
    std::fs::write(dir.join("replies.json"), json!(vec![REPLY; 200]).to_string()).unwrap();
    for (alias, reference, window) in members {
        let reference = reference.replace("{dir}", &dir.display().to_string());
        let (model, script) = parse_model_ref(&reference).unwrap();
        let member = MemberConfig {
            window: Some(*window),
            threads: Some(2),
            script,
            ..MemberConfig::new(*alias, reference.clone(), model)
        };
        pool.load(member).unwrap();
    }
    let socket = dir.join("pool.sock");
    let (tx, rx) = std::sync::mpsc::channel();
    let path = socket.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::UnixListener::bind(&path).unwrap();
            tx.send(()).unwrap();
            pool.serve(listener).await.unwrap();
        });
    });
    rx.recv().unwrap();
    socket
}

/// The shared pool: `smol` and `slow` (SmolLM2; `slow` only for the disconnect test),
/// `script` (scripted), `tiny` (scripted, a window of 64).
fn socket() -> &'static PathBuf {
    static SOCKET: OnceLock<PathBuf> = OnceLock::new();
    SOCKET.get_or_init(|| {
        let smol = test_models::smollm2().display().to_string();
        let script = format!("script:{{dir}}/replies.json@{smol}");
        start_pool(
            "shared",
            16,
            &[
                ("smol", smol.clone(), 2048),
                ("slow", smol.clone(), 2048),
                ("script", script.clone(), 2048),
                ("tiny", script, 64),
            ],
        )
    })
}

/// An HTTP front on 127.0.0.1 for `config`; its base URL.
fn serve(config: HttpConfig) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            caldrix_http::serve(listener, config, std::future::pending()).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

fn front() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| serve(HttpConfig::new(socket().clone(), FrameFormat::Cbor)))
}

/// Status and body of a request (`body`: POST it as JSON, else GET).
fn call(url: &str, body: Option<&Value>, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = match body {
        Some(_) => ureq::post(url).set("content-type", "application/json"),
        None => ureq::get(url),
    };
    for (k, v) in headers {
        request = request.set(k, v);
    }
    let result = match body {
        Some(b) => request.send_string(&b.to_string()),
        None => request.call(),
    };
    match result {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap()),
        Err(e) => panic!("{url}: {e}"),
    }
}

fn post(path: &str, body: Value) -> (u16, Value) {
    let (status, text) = call(&format!("{}{path}", front()), Some(&body), &[]);
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")))
}

/// A streamed request's events: (event name, data).
fn events(path: &str, body: Value) -> Vec<(String, String)> {
    let response = ureq::post(&format!("{}{path}", front()))
        .set("content-type", "application/json")
        .send_string(&body.to_string())
        .unwrap();
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let mut out = Vec::new();
    let mut name = String::new();
    for line in BufReader::new(response.into_reader()).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_owned();
        } else if let Some(d) = line.strip_prefix("data: ") {
            out.push((std::mem::take(&mut name), d.to_owned()));
        }
    }
    out
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

#[test]
fn models_are_listed_in_both_shapes() {
    let (status, text) = call(&format!("{}/v1/models", front()), None, &[]);
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&text).unwrap();
    let ids: Vec<&str> =
        list["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"smol") && ids.contains(&"script"), "{ids:?}");
    assert_eq!(list["data"][0]["owned_by"], "caldrix");
    let (_, text) =
        call(&format!("{}/v1/models", front()), None, &[("anthropic-version", "2023-06-01")]);
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["data"][0]["type"], "model");
    let (status, _) = call(&format!("{}/v1/models/smol", front()), None, &[]);
    assert_eq!(status, 200);
}

#[test]
fn a_chat_completion_on_smollm2_streamed_and_not() {
    let body =
        json!({"model": "smol", "messages": user("Say hello."), "max_tokens": 6, "temperature": 0});
    let (status, r) = post("/v1/chat/completions", body.clone());
    assert_eq!(status, 200, "{r}");
    let content = r["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(!content.is_empty());
    assert!(["stop", "length"].contains(&r["choices"][0]["finish_reason"].as_str().unwrap()));
    assert!(r["usage"]["prompt_tokens"].as_u64().unwrap() > 5);
    assert!(r["usage"]["completion_tokens"].as_u64().unwrap() <= 6);

    let mut streamed = body;
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let ev = events("/v1/chat/completions", streamed);
    assert_eq!(ev.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> =
        ev[..ev.len() - 1].iter().map(|(_, d)| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0).and_then(|c| c["delta"]["content"].as_str()))
        .collect();
    assert_eq!(text, content, "greedy: the same text streamed");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    // The same prompt again: its rows came from the prefix store.
    assert!(
        usage["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap() > 0,
        "{usage}"
    );
}

#[test]
fn a_completion_and_json_schema_output_on_smollm2() {
    let (status, r) = post(
        "/v1/completions",
        json!({"model": "smol", "prompt": "One, two,", "max_tokens": 4, "temperature": 0}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["object"], "text_completion");
    assert!(r["choices"][0]["text"].is_string());

    let schema = json!({"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                        "required": ["city"], "additionalProperties": false});
    let body = json!({"model": "smol", "messages": user("Name a city as JSON."), "max_tokens": 40, "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": true}}});
    let (status, r) = post("/v1/chat/completions", body);
    assert_eq!(status, 200, "{r}");
    let value: Value =
        serde_json::from_str(r["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert!(jsonschema::is_valid(&schema, &value), "{value}");
}

#[test]
fn stop_strings_cut_the_text_in_every_api() {
    let (_, r) = post(
        "/v1/chat/completions",
        json!({"model": "script", "messages": user("hi"), "stop": "STOP"}),
    );
    assert_eq!(r["choices"][0]["message"]["content"], "Hello there. ");
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    let (_, r) = post(
        "/v1/messages",
        json!({"model": "script", "max_tokens": 50, "messages": user("hi"),
        "stop_sequences": ["STOP"]}),
    );
    assert_eq!(r["content"][0]["text"], "Hello there. ");
    assert_eq!(
        (r["stop_reason"].clone(), r["stop_sequence"].clone()),
        (json!("stop_sequence"), json!("STOP"))
    );
    let ev = events(
        "/v1/chat/completions",
        json!({"model": "script", "messages": user("hi"), "stop": ["STOP"], "stream": true}),
    );
    let text: String = ev
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, "Hello there. ");
}

#[test]
fn anthropic_messages_streamed_and_not() {
    let body = json!({"model": "script", "max_tokens": 50, "system": [{"type": "text", "text": "Be kind."}],
                      "messages": user("hi")});
    let (status, r) = post("/v1/messages", body.clone());
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["type"], "message");
    assert_eq!(r["content"][0]["text"], REPLY);
    assert_eq!(r["stop_reason"], "end_turn");
    assert!(r["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let mut streamed = body;
    streamed["stream"] = json!(true);
    let ev = events("/v1/messages", streamed);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert!(
        names.contains(&"content_block_delta") && names.contains(&"message_delta"),
        "{names:?}"
    );
    let text: String = ev
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| {
            serde_json::from_str::<Value>(d).unwrap()["delta"]["text"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(text, REPLY);
}

#[test]
fn responses_streamed_and_not() {
    let body = json!({"model": "script", "instructions": "Be kind.", "input": "hi", "store": false,
                      "reasoning": {}, "include": ["reasoning.encrypted_content"]});
    let (status, r) = post("/v1/responses", body.clone());
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["output"][0]["content"][0]["text"], REPLY);
    let mut streamed = body;
    streamed["stream"] = json!(true);
    let ev = events("/v1/responses", streamed);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        &names[..3],
        ["response.created", "response.in_progress", "response.output_item.added"]
    );
    assert_eq!(names.last(), Some(&"response.completed"));
    let done: Value = serde_json::from_str(&ev.last().unwrap().1).unwrap();
    assert_eq!(done["response"]["output"][0]["content"][0]["text"], REPLY);
}

#[test]
fn bad_requests_are_named_in_each_api_s_shape() {
    let (status, r) =
        post("/v1/chat/completions", json!({"model": "gpt-4o", "messages": user("hi")}));
    assert_eq!(status, 404);
    assert_eq!(r["error"]["code"], "model_not_found");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("`gpt-4o`") && message.contains("`smol`"), "{message}");
    let (status, r) =
        post("/v1/messages", json!({"model": "claude", "max_tokens": 5, "messages": user("hi")}));
    assert_eq!(status, 404);
    assert_eq!(r["error"]["type"], "not_found_error");

    let (status, r) =
        post("/v1/chat/completions", json!({"model": "smol", "messages": user("hi"), "n": 2}));
    assert_eq!((status, r["error"]["param"].clone()), (400, json!("n")));

    let (status, text) = call(&format!("{}/v1/chat/completions", front()), Some(&json!("x")), &[]);
    assert_eq!(status, 400, "{text}");
    let response = ureq::post(&format!("{}/v1/messages", front())).send_string("{not json");
    let Err(ureq::Error::Status(400, r)) = response else { panic!("bad JSON accepted") };
    let r: Value = serde_json::from_str(&r.into_string().unwrap()).unwrap();
    assert_eq!(r["type"], "error");
    assert!(r["error"]["message"].as_str().unwrap().contains("not JSON"), "{r}");

    // A prompt over the window, and max_tokens past it: the counts named.
    let (status, r) = post(
        "/v1/chat/completions",
        json!({"model": "tiny", "messages": user(&"word ".repeat(200))}),
    );
    assert_eq!(status, 400, "{r}");
    assert_eq!(r["error"]["code"], "context_length_exceeded");
    assert!(r["error"]["message"].as_str().unwrap().contains("64"), "{r}");
    let (status, r) = post(
        "/v1/chat/completions",
        json!({"model": "tiny", "messages": user("hi"), "max_tokens": 500}),
    );
    assert_eq!((status, r["error"]["param"].clone()), (400, json!("max_tokens")), "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("500"), "{r}");

    // The pool serves on.
    let (status, _) =
        post("/v1/chat/completions", json!({"model": "script", "messages": user("hi")}));
    assert_eq!(status, 200);
}

#[test]
fn a_body_over_the_limit_is_a_413_in_shape() {
    let config =
        HttpConfig { max_body_bytes: 1000, ..HttpConfig::new(socket().clone(), FrameFormat::Cbor) };
    let url = serve(config);
    let big = json!({"model": "script", "messages": user(&"x".repeat(2000))});
    let (status, text) = call(&format!("{url}/v1/chat/completions"), Some(&big), &[]);
    assert_eq!(status, 413);
    let r: Value = serde_json::from_str(&text).unwrap();
    assert!(r["error"]["message"].as_str().unwrap().contains("limit of 1000 bytes"), "{r}");
    let (status, text) = call(&format!("{url}/v1/messages"), Some(&big), &[]);
    assert_eq!(status, 413);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["error"]["type"], "request_too_large");
}

#[test]
fn a_key_is_required_when_set() {
    let config = HttpConfig {
        api_key: Some("s3cret".into()),
        ..HttpConfig::new(socket().clone(), FrameFormat::Cbor)
    };
    let url = serve(config);
    let body = json!({"model": "script", "max_tokens": 5, "messages": user("hi")});
    let (status, text) = call(&format!("{url}/v1/chat/completions"), Some(&body), &[]);
    assert_eq!(status, 401);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["error"]["type"],
        "authentication_error"
    );
    let (status, text) =
        call(&format!("{url}/v1/messages"), Some(&body), &[("x-api-key", "wrong")]);
    assert_eq!(status, 401);
    let r: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (r["type"].clone(), r["error"]["type"].clone()),
        (json!("error"), json!("authentication_error"))
    );
    assert_eq!(call(&format!("{url}/"), None, &[]).0, 401, "the status page too");
    assert_eq!(call(&format!("{url}/health"), None, &[]).0, 200);
    assert_eq!(call(&format!("{url}/v1/messages"), Some(&body), &[("x-api-key", "s3cret")]).0, 200);
    let bearer = [("authorization", "Bearer s3cret")];
    assert_eq!(call(&format!("{url}/v1/models"), None, &bearer).0, 200);
}

#[test]
fn the_status_page_shows_the_members() {
    let (status, html) = call(&format!("{}/", front()), None, &[]);
    assert_eq!(status, 200);
    assert!(html.contains("<meta name=viewport"));
    for shown in [
        "<h2>smol</h2>",
        "<h2>script</h2>",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "2048 tokens",
        "prefix store",
    ] {
        assert!(html.contains(shown), "{shown}: {html}");
    }
    assert!(!html.contains("<script"));
}

#[test]
fn the_pool_s_connection_bound_is_a_429() {
    let smol = test_models::smollm2().display().to_string();
    let socket =
        start_pool("busy", 1, &[("script", format!("script:{{dir}}/replies.json@{smol}"), 256)]);
    let url = serve(HttpConfig::new(socket.clone(), FrameFormat::Cbor));
    let held = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let body = json!({"model": "script", "messages": user("hi")});
    let (status, text) = call(&format!("{url}/v1/chat/completions"), Some(&body), &[]);
    assert_eq!(status, 429, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["error"]["type"], "rate_limit_error");
    let (status, text) = call(
        &format!("{url}/v1/messages"),
        Some(&json!({"model": "script", "max_tokens": 5, "messages": user("hi")})),
        &[],
    );
    assert_eq!(status, 429);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["error"]["type"], "rate_limit_error");
    drop(held);
}

/// The contexts `member` holds in the pool.
fn contexts(member: &str) -> u32 {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut client =
            caldrix_client::Client::connect(socket(), FrameFormat::Cbor, "test").await.unwrap();
        let status = client.status().await.unwrap();
        status.members.iter().find(|m| m.info.alias == member).unwrap().contexts
    })
}

#[test]
fn a_client_that_leaves_mid_stream_frees_the_member() {
    let front = front().strip_prefix("http://").unwrap().to_owned();
    let body =
        json!({"model": "slow", "stream": true, "max_tokens": 1500, "temperature": 1, "seed": 3,
                      "messages": user("Count from 1 to 1000, one number per line.")})
        .to_string();
    let mut stream = std::net::TcpStream::connect(&front).unwrap();
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {front}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read until a few content chunks came.
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while seen.matches("\"content\"").count() < 4 {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(!seen.contains("[DONE]"), "{seen}");
    drop(stream);
    let left = Instant::now();
    // The context is dropped once the cancelled generation's `done` came (without it, only
    // after a 5 s grace): the member is free. 4 s, not less: the other tests' generations share
    // the 2 cores, and at 2 s this failed once in a full run here.
    while contexts("slow") > 0 {
        assert!(left.elapsed() < Duration::from_secs(4), "the context was not dropped");
        std::thread::sleep(Duration::from_millis(50));
    }
    // And serves the next request (its time is the other tests' too: they share 2 cores).
    let (status, r) = post(
        "/v1/chat/completions",
        json!({"model": "slow", "messages": user("Hi"), "max_tokens": 2}),
    );
    assert_eq!(status, 200, "{r}");
}

/// `docs/http.md`'s tables are `fields::markdown()` (`UPDATE_DOCS=1` rewrites them).
#[test]
fn the_docs_list_every_field_as_the_code_decides_it() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/http.md");
    let page = std::fs::read_to_string(path).unwrap();
    let (start, end) = ("<!-- fields:start -->\n", "<!-- fields:end -->");
    let (before, rest) = page.split_once(start).expect("docs/http.md has a fields:start marker");
    let (tables, after) = rest.split_once(end).expect("docs/http.md has a fields:end marker");
    let want = caldrix_http::fields::markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(path, format!("{before}{start}{want}{end}{after}")).unwrap();
        return;
    }
    assert_eq!(tables, want, "docs/http.md's field tables are stale: UPDATE_DOCS=1 rewrites them");
}
