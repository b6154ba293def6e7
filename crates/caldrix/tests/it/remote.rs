//! Remote members through the real daemon: `--load openai:URL#MODEL --tokenizer ...` on the
//! real llama-server (built by scripts/fetch-engine) serving SmolLM2, one server for the whole
//! binary, beside a local member of the same model.

use std::sync::OnceLock;
use std::time::Duration;

use caldrix_proto::{
    Constraint, ContextId, ErrorKind, FrameFormat, Generate, Render, Reply, Request, Role,
    ServingFlags, StopReason,
};
use test_models::server::{Server, ServerConfig};

use crate::pool::{Daemon, generate, runtime, seg};
use crate::smollm2;

static SERVER: OnceLock<Server> = OnceLock::new();
/// The generating tests one at a time: one slot, so the cache a test reads is its own.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        let (binary, model) = (test_models::llama_server(), smollm2());
        let config =
            ServerConfig { binary: &binary, model: &model, threads: 2, slots: 1, window: 2048 };
        Server::start_tied(&config).expect("llama-server starts on SmolLM2")
    })
}

/// `openai:URL#MODEL` of the shared server (it serves the model under its `-m` path).
fn reference() -> String {
    format!("openai:{}#{}", server().base_url(), smollm2().display())
}

/// A daemon with the local member `main` and the remote member `remote` of the same model.
fn daemon(name: &str) -> Daemon {
    let (reference, tokenizer) = (reference(), smollm2().display().to_string());
    let extra = [
        "--load",
        reference.as_str(),
        "--alias",
        "remote",
        "--ctx",
        "2048",
        "--tokenizer",
        tokenizer.as_str(),
    ];
    Daemon::start(&format!("remote-{name}"), FrameFormat::Cbor, &extra, None)
}

const SCHEMA: &str = r#"{"type":"object","properties":{"city":{"type":"string","maxLength":30}},"required":["city"],"additionalProperties":false}"#;

/// Counts equal to the local member's, a JSON generation that parses under its schema, a
/// scored OneOf, a streamed reply of several deltas, the engine's cache behind
/// `recomputed_from`, and a footprint of 0 with no prefix store.
#[test]
fn a_remote_member_counts_constrains_streams_and_takes_no_memory() {
    let _serial = crate::serial();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let daemon = daemon("generate");
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let segments = vec![
            seg("sys", Role::System, "You are a helpful assistant. Answer briefly."),
            seg("u1", Role::User, "Name a large city in France, as JSON."),
        ];
        let local = client.create_context("main", segments.clone()).await.unwrap();
        let remote = client.create_context("remote", segments).await.unwrap();
        assert_eq!(remote.segments, local.segments, "per-segment counts are the local member's");
        assert_eq!(remote.total_tokens, local.total_tokens);

        let json = Generate {
            constraint: Constraint::Json { schema: SCHEMA.into() },
            ..generate(remote.context, 40, None)
        };
        let done = client.generate(json, |_| {}).await.unwrap();
        assert_eq!(done.stop, StopReason::Complete, "{done:?}");
        let value: serde_json::Value = serde_json::from_str(&done.text).unwrap();
        assert!(value["city"].is_string() && value.as_object().unwrap().len() == 1, "{value}");
        assert_eq!(done.usage.prompt_tokens, local.total_tokens);
        assert!(done.usage.completion_tokens > 0);

        let options: Vec<String> = ["Paris", "Lyon", "Berlin"].map(String::from).to_vec();
        let one_of = Generate {
            constraint: Constraint::OneOf { options: options.clone() },
            ..generate(remote.context, 8, None)
        };
        let done = client.generate(one_of, |_| {}).await.unwrap();
        let scores = done.one_of.unwrap();
        assert_eq!(options[scores.chosen as usize], done.text);
        assert_eq!(scores.logprobs.len(), 3);
        let chosen = scores.logprobs[scores.chosen as usize];
        assert!(chosen.is_finite() && chosen <= 0.0, "{scores:?}");
        // The same prompt again: the engine reports the rows it kept.
        assert!(done.usage.recomputed_from.is_some_and(|r| r > 0), "{:?}", done.usage);

        let mut deltas = 0;
        let free = Generate { logprobs: Some(2), ..generate(remote.context, 24, None) };
        let done = client
            .generate(free, |frame| deltas += usize::from(matches!(frame, Reply::Delta { .. })))
            .await
            .unwrap();
        assert!(deltas > 1, "{deltas} deltas for {:?}", done.text);
        let logprobs = done.logprobs.unwrap();
        // The engine's count may include an end-of-generation token it streams no text for.
        assert!(logprobs.len().abs_diff(done.usage.completion_tokens as usize) <= 1);
        assert!(logprobs.iter().all(|t| t.top.len() <= 2 && t.logprob <= 0.0));

        let status = client.status().await.unwrap();
        let member = status.members.iter().find(|m| m.info.alias == "remote").unwrap();
        assert_eq!(member.info.footprint_bytes, 0);
        let info = member.info.remote.as_ref().unwrap();
        assert_eq!(
            (info.engine.as_str(), info.url.as_str()),
            ("llama-server", &*server().base_url())
        );
        assert_eq!((member.store.budget_bytes, member.store.rows), (0, 0), "no prefix store");
        let main = status.members.iter().find(|m| m.info.alias == "main").unwrap();
        assert!(main.info.remote.is_none() && main.info.footprint_bytes > 0);
        client.stop().await.unwrap();
    });
}

/// A cancel mid-stream ends the generation as `cancelled` and the member serves the next one;
/// a schema the engine refuses is `bad_constraint` with its message, and the local member
/// still answers after it.
#[test]
fn cancel_and_a_refused_schema_leave_every_member_serving() {
    let _serial = crate::serial();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let daemon = daemon("cancel");
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let segments = vec![seg("u1", Role::User, "Write a long story about a lighthouse.")];
        let context = client.create_context("remote", segments.clone()).await.unwrap().context;
        cancel_mid_stream_then_answer(&mut client, context).await;

        let refused = Generate {
            constraint: Constraint::Json { schema: r#"{"type":"no-such-type"}"#.into() },
            ..generate(context, 8, None)
        };
        let e = client.generate(refused, |_| {}).await.unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::BadConstraint), "{e}");
        assert!(e.to_string().contains(&server().base_url()), "names the engine: {e}");
        let local = client.create_context("main", segments).await.unwrap().context;
        let done = client.generate(generate(local, 4, None), |_| {}).await.unwrap();
        assert!(done.usage.completion_tokens > 0, "the local member still answers");
        client.stop().await.unwrap();
    });
}

/// `member_load` of a remote member is refused by name: an unreachable URL, a model the engine
/// does not serve, a tokenizer of another model.
#[test]
fn a_remote_member_that_cannot_serve_is_refused_at_load_by_name() {
    let _serial = crate::serial();
    let daemon = daemon("load");
    let smol = smollm2().display().to_string();
    let gemma = crate::gemma3().display().to_string();
    let served = format!("openai:{}#nothing-by-this-name", server().base_url());
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let with = |tokenizer: Option<&str>| ServingFlags {
            tokenizer: tokenizer.map(str::to_owned),
            ..ServingFlags::default()
        };
        let cases = [
            ("openai:http://127.0.0.1:9#m".to_owned(), with(Some(&smol)), "is unreachable"),
            (served, with(Some(&smol)), "does not serve the model \"nothing-by-this-name\""),
            (reference(), with(Some(&gemma)), "is not the same model as the tokenizer"),
        ];
        for (i, (model, flags, said)) in cases.into_iter().enumerate() {
            let e = client.load_member(&format!("r{i}"), &model, flags).await.unwrap_err();
            assert_eq!(e.kind(), Some(ErrorKind::LoadRefused), "{model}: {e}");
            assert!(e.to_string().contains(said), "{model}: {e}");
        }
        let members = client.members().await.unwrap();
        assert_eq!(members.len(), 2, "nothing loaded: {members:?}");
        client.stop().await.unwrap();
    });
}

/// A remote member loads into a pool whose memory limit nothing else fits: its footprint is 0
/// and the fit never counts it, while a local member there is still refused.
#[test]
fn a_remote_member_never_counts_against_the_memory_fit() {
    let _serial = crate::serial();
    let pool = caldrix_pool::Pool::new(caldrix_pool::PoolConfig {
        frames: FrameFormat::Cbor,
        max_connections: 1,
        idle_timeout: None,
        context_budget: 0,
        memory_limit: 1 << 20,
        owner_uid: 0,
    });
    let tokenizer = smollm2().display().to_string();
    let member = |alias: &str, reference: &str, tokenizer: Option<&str>| {
        let settings = caldrix_pool::RemoteSettings { tokenizer, ..Default::default() };
        let (model, script, remote) = caldrix_pool::member_source(reference, &settings).unwrap();
        caldrix_pool::MemberConfig {
            script,
            remote,
            window: Some(1024),
            threads: Some(1),
            ..caldrix_pool::MemberConfig::new(alias, reference, model)
        }
    };
    pool.load(member("remote", &reference(), Some(&tokenizer))).unwrap();
    pool.load(member("remote2", &reference(), Some(&tokenizer))).unwrap();
    let e = pool.load(member("local", &tokenizer, None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::LoadRefused);
    assert!(e.message.contains("but 0 MiB of the 1 MiB limit are taken"), "{e}");
}

/// Without `--tokenizer`, a member on llama-server renders with the template the engine serves
/// (`/props`, compiled by the pool) and counts with its `/tokenize`: every segment's count and
/// the prompt's are the local member's, through appends and edits; generations constrained,
/// scored and with logprobs work as with a tokenizer; the window is the engine's slot.
#[test]
fn without_a_tokenizer_the_engine_s_template_and_tokenizer_count_exactly() {
    let _serial = crate::serial();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    counts_and_generations_match_the_local_member("bare", &[], Render::Pool);
}

/// `--render engine`: the engine renders with its own template (the route of engines that
/// serve none, vLLM's) and counts conversations itself (llama-server's `/apply-template`, then
/// `/tokenize`): counts are still the local member's through appends and edits (but for
/// llama-server's continuing a final assistant message, below), generations go to its chat
/// endpoint constrained, scored and with logprobs, and a cancel stops one.
#[test]
fn when_the_engine_renders_counts_and_generations_are_the_local_member_s() {
    let _serial = crate::serial();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    counts_and_generations_match_the_local_member("chat", &["--render", "engine"], Render::Engine);
}

fn counts_and_generations_match_the_local_member(alias: &str, flags: &[&str], render: Render) {
    let reference = reference();
    let mut extra = vec!["--load", reference.as_str(), "--alias", alias];
    extra.extend(flags);
    let daemon = Daemon::start(&format!("remote-{alias}"), FrameFormat::Cbor, &extra, None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let members = client.members().await.unwrap();
        let bare = members.iter().find(|m| m.alias == alias).unwrap();
        assert_eq!(bare.context_window, 2048, "the engine's window: {bare:?}");
        assert_eq!(bare.architecture, "remote");
        assert!(bare.model.starts_with(&server().base_url()), "{bare:?}");
        assert_eq!(bare.remote.as_ref().map(|r| r.render), Some(render));
        let segments = vec![
            seg("sys", Role::System, "You are a helpful assistant. Answer briefly."),
            seg("u1", Role::User, "Name a large city in France, as JSON."),
            seg("a1", Role::Assistant, "{\"city\": \"Lyon\"}"),
            seg("u2", Role::User, "And one in Spain? caf\u{e9} \u{2014} 1234"),
        ];
        let local = client.create_context("main", segments.clone()).await.unwrap();
        let remote = client.create_context(alias, segments).await.unwrap();
        assert_same_counts(&remote.segments, &local.segments, render);
        assert_eq!(remote.total_tokens, local.total_tokens);
        let edits = vec![
            caldrix_proto::Edit::Replace {
                id: "u1".into(),
                text: "Name a city.".into(),
                pinned: None,
            },
            caldrix_proto::Edit::Append { segment: seg("u3", Role::User, "Thanks!") },
        ];
        let local = client.edit_context(local.context, edits.clone()).await.unwrap();
        let remote = client.edit_context(remote.context, edits).await.unwrap();
        assert_same_counts(&remote.segments, &local.segments, render);
        assert_eq!(remote.total_tokens, local.total_tokens, "after an edit and an append");

        let json = Generate {
            constraint: Constraint::Json { schema: SCHEMA.into() },
            logprobs: Some(1),
            ..generate(remote.context, 40, None)
        };
        let done = client.generate(json, |_| {}).await.unwrap();
        assert_eq!(done.stop, StopReason::Complete, "{done:?}");
        let value: serde_json::Value = serde_json::from_str(&done.text).unwrap();
        assert!(value["city"].is_string(), "{value}");
        assert_eq!(done.usage.prompt_tokens, local.total_tokens);
        let logprobs = done.logprobs.unwrap();
        let text: String = logprobs.iter().map(|t| t.text.as_str()).collect();
        assert!(text.starts_with(done.text.trim_end()), "{text:?} against {:?}", done.text);

        let options: Vec<String> = ["Madrid", "Seville"].map(String::from).to_vec();
        let one_of = Generate {
            constraint: Constraint::OneOf { options: options.clone() },
            ..generate(remote.context, 8, None)
        };
        let done = client.generate(one_of, |_| {}).await.unwrap();
        let scores = done.one_of.unwrap();
        assert_eq!(options[scores.chosen as usize], done.text);
        assert!(scores.logprobs.iter().all(|l| l.is_finite() && *l <= 0.0), "{scores:?}");

        let story = vec![seg("u1", Role::User, "Write a long story about a lighthouse.")];
        let context = client.create_context(alias, story).await.unwrap().context;
        cancel_mid_stream_then_answer(&mut client, context).await;
        client.stop().await.unwrap();
    });
}

/// An engine that cannot give the pool its counts is refused at load, naming what it lacks:
/// no `/tokenize`, or a tokenizer without a template served, or no vocabulary size to check
/// ids against (loopback fakes of such engines).
#[test]
fn an_engine_that_cannot_count_without_a_tokenizer_is_refused_by_name() {
    let _serial = crate::serial();
    let models = r#"{"data":[{"id":"m","object":"model"}]}"#;
    let sized = r#"{"data":[{"id":"m","object":"model","meta":{"n_vocab":100,"n_ctx":512}}]}"#;
    let cases: [(&str, Option<&str>, &str); 3] = [
        (models, None, "has no /tokenize"),
        (sized, Some(r#"{"build_info":"b1"}"#), "does not serve its template"),
        (
            models,
            Some(r#"{"build_info":"b1","chat_template":"{{ messages[0].content }}"}"#),
            "does not say its vocabulary's size",
        ),
    ];
    let daemon = daemon("count");
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        for (i, (models, props, said)) in cases.into_iter().enumerate() {
            let (models, props) = (models.to_owned(), props.map(str::to_owned));
            let url = fake_engine(move |path, _| match (path, &props) {
                ("/v1/models", _) => Some(models.clone()),
                ("/props", Some(props)) => Some(props.clone()),
                ("/tokenize", Some(_)) => Some(r#"{"tokens":[5]}"#.to_owned()),
                _ => None,
            });
            let reference = format!("openai:{url}#m");
            let e = client
                .load_member(&format!("f{i}"), &reference, ServingFlags::default())
                .await
                .unwrap_err();
            assert_eq!(e.kind(), Some(ErrorKind::LoadRefused), "{reference}: {e}");
            assert!(e.to_string().contains(said), "{said}: {e}");
        }
        assert_eq!(client.members().await.unwrap().len(), 2, "nothing loaded");
        client.stop().await.unwrap();
    });
}

/// Per-segment counts equal to the local member's. Where llama-server renders, a conversation
/// that ends in an assistant message is that reply's start (it continues it: its end-of-turn
/// tokens are not there yet), so the assistant segment `a1` counts those tokens fewer and the
/// segment after it holds them: the two together are the local member's.
fn assert_same_counts(
    remote: &[caldrix_proto::SegmentCount],
    local: &[caldrix_proto::SegmentCount],
    render: Render,
) {
    if render == Render::Pool {
        return assert_eq!(remote, local, "per-segment counts are the local member's");
    }
    let a1 = local.iter().position(|s| s.id == "a1").unwrap();
    let (ours, theirs): (Vec<_>, Vec<_>) = (remote.iter().collect(), local.iter().collect());
    assert_eq!(ours[..a1], theirs[..a1], "before the assistant segment");
    assert_eq!(ours[a1 + 2..], theirs[a1 + 2..], "after the segment following it");
    assert_eq!(ours[a1].tokens + ours[a1 + 1].tokens, theirs[a1].tokens + theirs[a1 + 1].tokens);
    assert_eq!(theirs[a1].tokens - ours[a1].tokens, 2, "<|im_end|> and its newline");
}

/// An engine shaped as vLLM (it serves no template, and counts conversations through
/// `/tokenize` of messages): without a tokenizer the engine renders. Its template refuses two
/// messages of one role in a row (as Gemma's does), so the pool sends such runs joined, and
/// counts what it sends.
#[test]
fn an_engine_that_serves_no_template_renders_and_counts_conversations_itself() {
    let _serial = crate::serial();
    // One token per message, one per word in it, one for the generation prompt.
    let url = fake_engine(|path, body| {
        let body: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        match path {
            "/v1/models" => Some(r#"{"data":[{"id":"m","max_model_len":1024}]}"#.to_owned()),
            "/version" => Some(r#"{"version":"0.11.2"}"#.to_owned()),
            "/tokenize" if body["messages"].is_array() => {
                let messages = body["messages"].as_array().unwrap();
                let roles: Vec<_> = messages.iter().map(|m| m["role"].as_str()).collect();
                if roles.windows(2).any(|w| w[0] == w[1]) {
                    return None;
                }
                let words: usize = messages
                    .iter()
                    .map(|m| 1 + m["content"].as_str().unwrap_or("").split_whitespace().count())
                    .sum();
                let n = words + usize::from(body["add_generation_prompt"] == true);
                Some(serde_json::json!({"tokens": vec![7; n]}).to_string())
            }
            "/tokenize" => Some(r#"{"tokens":[5]}"#.to_owned()),
            _ => None,
        }
    });
    let reference = format!("openai:{url}#m");
    let extra = ["--load", reference.as_str(), "--alias", "vllm"];
    let daemon = Daemon::start("remote-vllm", FrameFormat::Cbor, &extra, None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let members = client.members().await.unwrap();
        let info = members.iter().find(|m| m.alias == "vllm").unwrap();
        assert_eq!(info.context_window, 1024, "vLLM's max_model_len");
        let remote = info.remote.as_ref().unwrap();
        assert_eq!((remote.engine.as_str(), remote.render), ("vllm 0.11.2", Render::Engine));
        let segments = vec![
            seg("sys", Role::System, "Be brief."),
            seg("instructions", Role::User, "# Instructions"),
            seg("request", Role::User, "Fix the failing test."),
        ];
        let counted = client.create_context("vllm", segments).await.unwrap();
        // system: 1 + 2; the two user segments as one message: 1 + 2 + 4.
        let counts: Vec<u32> = counted.segments.iter().map(|s| s.tokens).collect();
        assert_eq!(counts, [3, 3, 4]);
        assert_eq!(counted.total_tokens, 11, "and the generation prompt");
        client.stop().await.unwrap();
    });
}

/// A long generation on `context` cancelled at its first delta ends `cancelled`, and the
/// member then answers the next one.
async fn cancel_mid_stream_then_answer(client: &mut caldrix_client::Client, context: ContextId) {
    client.send(&Request::Generate(generate(context, 400, None))).await.unwrap();
    let mut sent = false;
    let done = loop {
        match client.recv(Duration::from_secs(60)).await.unwrap() {
            // Once: a cancel after the end would be an error of its own.
            Reply::Delta { .. } if !sent => {
                client.send(&Request::Cancel {}).await.unwrap();
                sent = true;
            }
            Reply::Delta { .. } | Reply::Progress { .. } => {}
            Reply::Done(done) => break done,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(done.stop, StopReason::Cancelled, "{done:?}");
    assert!(done.usage.completion_tokens < 400);
    let again = client.generate(generate(context, 4, None), |_| {}).await.unwrap();
    assert!(again.usage.completion_tokens > 0);
}

/// A loopback engine: `answer(path, body)` is the JSON body of a 200, or `None` for a 404;
/// one request per connection.
fn fake_engine(answer: impl Fn(&str, &str) -> Option<String> + Send + 'static) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            // The whole request (head and body) before answering: closing on unread bytes
            // would reset the connection under the reply.
            let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
            let head = loop {
                let n = stream.read(&mut chunk).unwrap_or(0);
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).into_owned();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length: usize = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if n == 0 || buf.len() >= end + 4 + length {
                        break text;
                    }
                } else if n == 0 {
                    break text;
                }
            };
            let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
            let body = head.split_once("\r\n\r\n").map_or("", |(_, body)| body);
            let (status, body) = match answer(&path, body) {
                Some(body) => ("200 OK", body),
                None => ("404 Not Found", r#"{"error":"not found"}"#.to_owned()),
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    url
}
