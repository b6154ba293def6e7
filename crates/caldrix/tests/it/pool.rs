//! The real daemon (`caldrix pool`) on SmolLM2, driven over its socket with the client, in both
//! frame formats.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use caldrix_client::{Client, ClientError};
use caldrix_engine::{GenerationPrompt, Message, Model, ModelParams};
use caldrix_proto::{
    Constraint, Edit, ErrorKind, FrameFormat, Generate, Reply, Request, Role, Segment, StopReason,
};

use crate::smollm2;

pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) socket: PathBuf,
    pub(crate) dir: PathBuf,
    /// A shared daemon's own connection (`Daemon::shared`).
    held: Option<std::os::unix::net::UnixStream>,
}

impl Daemon {
    pub(crate) fn start(
        name: &str,
        frames: FrameFormat,
        extra: &[&str],
        socket: Option<&Path>,
    ) -> Daemon {
        let dir = std::env::temp_dir().join(format!("caldrix-pool-{}-{name}", std::process::id()));
        crate::private_dir(&dir);
        let socket = socket.map_or_else(|| dir.join("pool.sock"), Path::to_path_buf);
        let model = smollm2();
        let mut args = vec![
            "pool".to_owned(),
            "--socket".into(),
            socket.display().to_string(),
            "--frames".into(),
            frames.name().into(),
            "--load".into(),
            model.display().to_string(),
            "--ctx".into(),
            "2048".into(),
            "--threads".into(),
            "2".into(),
            // Small by default: the default budget (a quarter of memory) is reserved per member.
            "--context-budget".into(),
            "64M".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(env!("CARGO_BIN_EXE_caldrix"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let daemon = Daemon { child, socket, dir, held: None };
        daemon.wait_for_socket();
        daemon
    }

    /// A daemon for a `static`, which is never dropped: it exits 30 s after the test binary
    /// does (its idle timeout), and until then the connection it holds keeps it from idling
    /// out, however long the tests between two of its uses hold the serial lock (on a loaded
    /// machine, more than 30 s: the fuzz test once found its daemon gone). The connection takes
    /// one of `--max-connections`, so it is added to `max_connections`.
    pub(crate) fn shared(
        name: &str,
        frames: FrameFormat,
        extra: &[&str],
        max_connections: u32,
    ) -> Daemon {
        let max = (max_connections + 1).to_string();
        let own = ["--max-connections", max.as_str(), "--idle-timeout", "30"];
        let mut daemon = Daemon::start(name, frames, &[extra, &own[..]].concat(), None);
        daemon.held = Some(std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap());
        daemon
    }

    fn wait_for_socket(&self) {
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            assert!(started.elapsed() < Duration::from_secs(60), "the pool did not bind");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A connected client. A connection just closed may hold its slot for a moment after the
    /// client let go (the daemon notices the close asynchronously, and a connection that left
    /// mid-generation frees its slot once the engine's current step ends and the cancel is
    /// seen: seconds on a loaded 2-core machine): retry a refusal for up to a minute.
    pub(crate) async fn client(&self, frames: FrameFormat) -> Client {
        let started = Instant::now();
        loop {
            match Client::connect(&self.socket, frames, "test").await {
                Err(e)
                    if e.kind() == Some(ErrorKind::TooManyConnections)
                        && started.elapsed() < Duration::from_secs(60) =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => return other.unwrap(),
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn seg(id: &str, role: Role, text: &str) -> Segment {
    Segment { id: id.into(), role, text: text.into(), pinned: false }
}

pub(crate) fn generate(context: u64, max_new_tokens: u32, append_as: Option<&str>) -> Generate {
    Generate {
        context,
        constraint: Constraint::None,
        max_new_tokens,
        sampling: None,
        logprobs: None,
        append_as: append_as.map(str::to_owned),
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Counts match a fresh tokenization of the rendered template; a second turn resumes near the
/// end of the first's stored rows; a fork resumes from its parent's rows.
fn check_contexts_and_reuse(frames: FrameFormat) {
    let daemon = Daemon::start(frames.name(), frames, &["--context-budget", "64M"], None);
    let model = Model::load(&smollm2(), &ModelParams::default()).unwrap();
    runtime().block_on(async {
        let mut client = daemon.client(frames).await;
        let system = "You are a coding agent. Keep answers short and exact.";
        let created = client
            .create_context(
                "main",
                vec![
                    seg("sys", Role::System, system),
                    seg("u1", Role::User, "Name a prime number."),
                ],
            )
            .await
            .unwrap();
        let messages =
            [Message::new("system", system), Message::new("user", "Name a prime number.")];
        let whole = model.tokenize_prompt(&model.render(&messages, GenerationPrompt::Add).unwrap());
        let plain =
            model.tokenize_prompt(&model.render(&messages, GenerationPrompt::Omit).unwrap());
        assert_eq!(created.total_tokens as usize, whole.len());
        assert_eq!(created.segments.iter().map(|s| s.tokens as usize).sum::<usize>(), plain.len());
        let first_only =
            model.tokenize_prompt(&model.render(&messages[..1], GenerationPrompt::Omit).unwrap());
        assert_eq!(created.segments[0].tokens as usize, first_only.len());

        let id = created.context;
        let first = client.generate(generate(id, 12, Some("a1")), |_| {}).await.unwrap();
        assert_eq!(first.usage.recomputed_from.unwrap(), 0, "a cold prefill");
        assert_eq!(first.usage.prompt_tokens, created.total_tokens);
        // The appended reply's counts come with `done`, equal to what `context_counts` says.
        let carried = first.counts.clone().expect("done carries the counts of an appended reply");
        let asked = client.context_counts(id).await.unwrap();
        assert_eq!(asked.segments.last().map(|s| s.id.as_str()), Some("a1"));
        assert_eq!((carried.segments, carried.total_tokens), (asked.segments, asked.total_tokens));

        let edited = client
            .edit_context(
                id,
                vec![Edit::Append { segment: seg("u2", Role::User, "And another one?") }],
            )
            .await
            .unwrap();
        assert_eq!(edited.segments.len(), 4, "system, user, the appended answer, user");
        let stored = first.usage.prompt_tokens + first.usage.completion_tokens;
        let second = client.generate(generate(id, 8, None), |_| {}).await.unwrap();
        assert_eq!(second.counts, None, "nothing appended, no counts");
        let from = second.usage.recomputed_from.unwrap();
        assert!(
            from + 4 >= first.usage.prompt_tokens && from <= stored,
            "resumed at {from}: the first turn stored {stored} rows of which {} were its prompt",
            first.usage.prompt_tokens
        );

        let fork = client.fork_context(id).await.unwrap();
        assert_eq!(fork.total_tokens, edited.total_tokens);
        let forked = client.generate(generate(fork.context, 4, None), |_| {}).await.unwrap();
        assert_eq!(
            forked.usage.recomputed_from.unwrap() + 1,
            forked.usage.prompt_tokens,
            "the fork finds its parent's rows"
        );

        let status = client.status().await.unwrap();
        let store = &status.members[0].store;
        assert!(store.hits >= 2 && store.entries >= 1 && store.bytes_per_row > 1000, "{store:?}");
        assert_eq!(store.bytes, store.rows * store.bytes_per_row);

        client.drop_context(fork.context).await.unwrap();
        let err = client.context_counts(fork.context).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::UnknownContext));
        client.stop().await.unwrap();
    });
}

#[test]
fn contexts_counts_and_prefix_reuse_over_cbor() {
    let _serial = crate::serial();
    check_contexts_and_reuse(FrameFormat::Cbor);
}

#[test]
fn contexts_counts_and_prefix_reuse_over_json() {
    let _serial = crate::serial();
    check_contexts_and_reuse(FrameFormat::Json);
}

/// Rows only an unused context holds are parked in host memory before another context's
/// generation, and come back when their own context generates again: every row found, the
/// same greedy answer.
#[test]
fn an_unused_context_is_parked_and_resumes_from_every_row() {
    let _serial = crate::serial();
    let daemon = Daemon::start("park", FrameFormat::Cbor, &["--context-budget", "64M"], None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let mut contexts = Vec::new();
        for topic in ["rivers", "mountains"] {
            let long: Vec<String> = (1..=120).map(|i| format!("{topic} {i}")).collect();
            let text = format!("Which of these is largest? {}", long.join(", "));
            let c = client.create_context("main", vec![seg("u", Role::User, &text)]).await.unwrap();
            assert!(c.total_tokens > 300, "{} tokens: too few to be parked", c.total_tokens);
            contexts.push(c.context);
        }
        client.generate(generate(contexts[0], 6, None), |_| {}).await.unwrap();
        // Resumed from its own rows, nothing parked yet (the answer of a resume, whose last
        // row is computed alone, may differ from a cold prefill's in a near tie).
        let rivers = client.generate(generate(contexts[0], 6, None), |_| {}).await.unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(status.members[0].store.parked_rows, 0, "nothing else to park yet");

        client.generate(generate(contexts[1], 6, None), |_| {}).await.unwrap();
        let store = client.status().await.unwrap().members[0].store.clone();
        assert!(store.parked_rows >= 256, "the rivers rows are parked: {store:?}");
        assert!(store.parked_rows < store.rows, "{store:?}");

        let again = client.generate(generate(contexts[0], 6, None), |_| {}).await.unwrap();
        assert_eq!(
            again.usage.recomputed_from.unwrap() + 1,
            again.usage.prompt_tokens,
            "every row found"
        );
        assert_eq!(again.text, rivers.text);
        let store = client.status().await.unwrap().members[0].store.clone();
        assert!(store.parked_rows >= 256, "now the mountains rows are: {store:?}");
    });
}

#[test]
fn a_tiny_budget_evicts_and_still_answers() {
    let _serial = crate::serial();
    let daemon = Daemon::start("tiny", FrameFormat::Cbor, &["--context-budget", "512K"], None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let mut texts = Vec::new();
        for topic in ["rivers", "mountains", "rivers"] {
            let c = client
                .create_context(
                    "main",
                    vec![seg("u", Role::User, &format!("One word about {topic}."))],
                )
                .await
                .unwrap();
            let done = client.generate(generate(c.context, 6, None), |_| {}).await.unwrap();
            texts.push(done.text);
        }
        assert_eq!(texts[0], texts[2], "greedy answers do not depend on what the store kept");
        let store = client.status().await.unwrap().members[0].store.clone();
        assert!(store.rows * store.bytes_per_row <= store.budget_bytes, "{store:?}");
    });
}

#[test]
fn bad_input_gets_an_error_and_the_daemon_serves_the_next_client() {
    let _serial = crate::serial();
    let daemon = Daemon::start("bad", FrameFormat::Json, &["--max-connections", "2"], None);
    crate::documented::the_documented_rules_hold(&daemon.socket, FrameFormat::Json);
    runtime().block_on(async {
        let json = FrameFormat::Json;
        let mut client = daemon.client(json).await;
        // An unknown request, and a request with an unknown key: errors, the connection stays.
        client.send_raw(&frame(br#"{"type":"make_coffee"}"#)).await.unwrap();
        assert_eq!(
            client.recv(Duration::from_secs(5)).await.unwrap_err().kind(),
            Some(ErrorKind::BadRequest)
        );
        client.send_raw(&frame(br#"{"type":"status","verbose":true}"#)).await.unwrap();
        assert_eq!(
            client.recv(Duration::from_secs(5)).await.unwrap_err().kind(),
            Some(ErrorKind::BadRequest)
        );
        // A schema that does not compile.
        let c = client.create_context("main", vec![seg("u", Role::User, "hi")]).await.unwrap();
        let mut bad = generate(c.context, 4, None);
        bad.constraint = Constraint::Json { schema: r#"{"type":"strnig"}"#.into() };
        let err = client.generate(bad, |_| {}).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::BadConstraint), "{err}");
        let mut empty = generate(c.context, 4, None);
        empty.constraint = Constraint::OneOf { options: vec![] };
        assert_eq!(
            client.generate(empty, |_| {}).await.unwrap_err().kind(),
            Some(ErrorKind::BadConstraint)
        );
        // Still serving on the same connection.
        client.status().await.unwrap();

        // Garbage, a truncated frame, an oversized length: an error frame or a clean close.
        let cases: [(&[u8], bool); 3] = [
            (b"\x00\x00\x00\x05\xff\xfe\xfd\xfc\xfb", true),
            // A truncated frame: the client leaves in the middle of it.
            (b"\x00\x00\x01\x00{\"type\"", false),
            (b"\xff\xff\xff\xff", true),
        ];
        for (bytes, answered) in cases {
            let mut raw = daemon.client(json).await;
            raw.send_raw(bytes).await.unwrap();
            if !answered {
                drop(raw);
                continue;
            }
            match raw.recv(Duration::from_secs(5)).await {
                Err(ClientError::Pool { kind, .. }) => {
                    assert!(matches!(kind, ErrorKind::BadFrame | ErrorKind::BadRequest), "{kind:?}")
                }
                Err(ClientError::Closed) => {}
                other => panic!("{other:?}"),
            }
        }

        // A client that disconnects mid-generation.
        let mut leaving = daemon.client(json).await;
        leaving.send(&Request::Generate(generate(c.context, 200, None))).await.unwrap();
        drop(leaving);

        // max_connections (2) + 1 is refused by name while two are open.
        let mut second = daemon.client(json).await;
        let third = Client::connect(&daemon.socket, json, "third").await.unwrap_err();
        assert_eq!(third.kind(), Some(ErrorKind::TooManyConnections), "{third}");
        second.status().await.unwrap();
        drop(second);
        tokio::time::sleep(Duration::from_millis(100)).await;

        // The next client is served, generation included.
        let mut next = daemon.client(json).await;
        let done = next.generate(generate(c.context, 3, None), |_| {}).await.unwrap();
        assert!(done.usage.completion_tokens > 0);
        let wrong = Client::connect(&daemon.socket, FrameFormat::Cbor, "cbor").await.unwrap_err();
        drop(wrong);
        drop(client);
        next.stop().await.unwrap();
    });
}

pub(crate) fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

#[test]
fn cancel_stops_a_generation_and_deltas_stream() {
    let _serial = crate::serial();
    // Batches of 8 rows: the prefill sends progress frames before the first token.
    let daemon = Daemon::start("cancel", FrameFormat::Cbor, &["--batch", "8"], None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let c = client
            .create_context(
                "main",
                vec![seg("u", Role::User, "Write a long story about a dragon.")],
            )
            .await
            .unwrap();
        client.send(&Request::Generate(generate(c.context, 400, None))).await.unwrap();
        let mut deltas = String::new();
        let mut progress = Vec::new();
        let done = loop {
            match client.recv(Duration::from_secs(60)).await.unwrap() {
                Reply::Delta { text } => {
                    deltas.push_str(&text);
                    if deltas.len() > 20 {
                        client.send(&Request::Cancel {}).await.unwrap();
                    }
                }
                Reply::Progress { done, total } => {
                    assert!(deltas.is_empty(), "progress comes before the first token");
                    progress.push((done, total));
                }
                Reply::Done(done) => break done,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(done.stop, StopReason::Cancelled);
        assert!(done.usage.completion_tokens < 400);
        assert!(progress.len() >= 2, "{progress:?}");
        assert!(
            progress.iter().all(|&(d, t)| d < t && t == done.usage.prompt_tokens),
            "{progress:?}"
        );
        assert_eq!(done.text, deltas, "the deltas are the text");
    });
}

#[test]
fn idle_exit_and_a_stale_socket_is_replaced_but_a_live_one_refused() {
    let _serial = crate::serial();
    let mut idle = Daemon::start("idle", FrameFormat::Cbor, &["--idle-timeout", "1"], None);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = idle.child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the pool did not exit when idle");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success());
    assert!(!idle.socket.exists(), "the socket file is removed on exit");

    // A socket file nobody listens on (a dead daemon's) is replaced.
    let stale = idle.dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let live = Daemon::start("stale", FrameFormat::Cbor, &[], Some(&stale));
    // A live one is refused by name.
    let second = Command::new(env!("CARGO_BIN_EXE_caldrix"))
        .args(["pool", "--socket", stale.to_str().unwrap(), "--load", smollm2().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("already serving"), "{stderr}");
    let stop = Command::new(env!("CARGO_BIN_EXE_caldrix"))
        .args(["pool", "stop", "--socket", stale.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(stop.status.success(), "{}", String::from_utf8_lossy(&stop.stderr));
    drop(live);
}

#[test]
fn two_members_resident_and_one_queue_per_member() {
    let _serial = crate::serial();
    let daemon = Daemon::start("two", FrameFormat::Cbor, &["--max-connections", "6"], None);
    let gemma = smollm2().with_file_name("gemma-3-270m-q4_k_m.gguf");
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let flags =
            caldrix_proto::ServingFlags { ctx: Some(1024), threads: Some(2), ..Default::default() };
        client.load_member("second", gemma.to_str().unwrap(), flags.clone()).await.unwrap();
        // The member's figures are published before its load is answered.
        let status = client.status().await.unwrap();
        let second = status.members.iter().find(|m| m.info.alias == "second").unwrap();
        assert!(second.store.bytes_per_row > 0 && second.store.budget_bytes > 0, "{second:?}");
        let err = client.load_member("second", gemma.to_str().unwrap(), flags).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::LoadRefused), "{err}");
        let members = client.members().await.unwrap();
        let names: Vec<_> =
            members.iter().map(|m| (m.alias.as_str(), m.architecture.as_str())).collect();
        assert_eq!(names, [("main", "llama"), ("second", "gemma3")]);

        // Both answer.
        for member in ["main", "second"] {
            let c =
                client.create_context(member, vec![seg("u", Role::User, "Say hi.")]).await.unwrap();
            let done = client.generate(generate(c.context, 3, None), |_| {}).await.unwrap();
            assert!(done.usage.completion_tokens > 0, "{member}");
        }

        // Several clients on one member: served one at a time, in the order they queued.
        let c = client
            .create_context("main", vec![seg("u", Role::User, "Count to twenty.")])
            .await
            .unwrap();
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..4u32 {
            let mut other = daemon.client(FrameFormat::Cbor).await;
            let order = order.clone();
            other.send(&Request::Generate(generate(c.context, 10 + i, None))).await.unwrap();
            // Let this request reach the queue before the next one is sent.
            tokio::time::sleep(Duration::from_millis(100)).await;
            tasks.push(tokio::spawn(async move {
                loop {
                    match other.recv(Duration::from_secs(120)).await.unwrap() {
                        Reply::Done(done) => {
                            order.lock().unwrap().push((i, done.usage.completion_tokens));
                            break;
                        }
                        _ => continue,
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        let finished: Vec<u32> = order.iter().map(|(i, _)| *i).collect();
        assert_eq!(finished, [0, 1, 2, 3], "queue order: {order:?}");
        client.stop().await.unwrap();
    });
}

#[test]
fn a_scripted_member_replays_checked_replies_through_the_protocol() {
    let _serial = crate::serial();
    let dir = std::env::temp_dir().join(format!("caldrix-script-{}", std::process::id()));
    crate::private_dir(&dir);
    let script = dir.join("replies.json");
    let turn = r#"{"thought":"Look first.","final":"done"}"#;
    std::fs::write(&script, serde_json::to_string(&[turn, "edit", "not json"]).unwrap()).unwrap();
    let reference = format!("script:{}@{}", script.display(), smollm2().display());
    let daemon = Daemon::start("script", FrameFormat::Json, &[], None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Json).await;
        client.load_member("scripted", &reference, Default::default()).await.unwrap();
        let segments = vec![seg("u", Role::User, "Fix the bug.")];
        let real = client.create_context("main", segments.clone()).await.unwrap();
        let c = client.create_context("scripted", segments).await.unwrap();
        assert_eq!(c.total_tokens, real.total_tokens, "counted with the real model's template");

        let schema = r#"{"type":"object","properties":{"thought":{"type":"string"},"final":{"type":"string"}},"required":["thought","final"],"additionalProperties":false}"#;
        let mut json = generate(c.context, 100, Some("a1"));
        json.constraint = Constraint::Json { schema: schema.into() };
        let mut deltas = String::new();
        let done = client
            .generate(json.clone(), |f| {
                if let Reply::Delta { text } = f {
                    deltas.push_str(text);
                }
            })
            .await
            .unwrap();
        assert_eq!((done.text.as_str(), deltas.as_str()), (turn, turn));
        assert_eq!(done.stop, StopReason::Complete);
        assert_eq!(client.context_counts(c.context).await.unwrap().segments.len(), 2, "appended");

        let mut route = generate(c.context, 8, None);
        route.constraint = Constraint::OneOf { options: vec!["answer".into(), "edit".into()] };
        // A OneOf answers with its options' scores only, `logprobs` asked or not.
        route.logprobs = Some(2);
        let done = client.generate(route, |_| {}).await.unwrap();
        assert_eq!(done.text, "edit");
        assert_eq!(done.logprobs, None, "{done:?}");
        assert_eq!(done.one_of.unwrap().chosen, 1);

        let err = client.generate(json.clone(), |_| {}).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Script), "{err}");
        let err = client.generate(json, |_| {}).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Script), "{err}");
        assert!(err.to_string().contains("no reply left"), "{err}");

        let err = client.load_member("broken", "script:/nonexistent.json@x.gguf", Default::default()).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::LoadRefused), "{err}");

        // A scripted member declared without the json constraint: refuses it, replays free text.
        let free = dir.join("free.json");
        std::fs::write(&free, r#"{"json": false, "replies": ["not json at all"]}"#).unwrap();
        let free_ref = format!("script:{}@{}", free.display(), smollm2().display());
        client.load_member("free", &free_ref, Default::default()).await.unwrap();
        let members = client.members().await.unwrap();
        let info = |alias: &str| members.iter().find(|m| m.alias == alias).unwrap().clone();
        assert_eq!((info("free").reference, info("free").json_constraint), (free_ref, false));
        assert_eq!((info("scripted").reference, info("scripted").json_constraint), (reference.clone(), true));
        // The lane and the threads given to llama.cpp (`--threads 2`); a scripted member runs none.
        assert_eq!((info("main").lane, info("main").threads), (Some(caldrix_proto::Lane::Cpu), Some(2)));
        assert_eq!((info("scripted").lane, info("scripted").threads), (Some(caldrix_proto::Lane::Cpu), None));
        let c = client.create_context("free", vec![seg("u", Role::User, "Hi.")]).await.unwrap();
        let mut refused = generate(c.context, 20, None);
        refused.constraint = Constraint::Json { schema: schema.into() };
        let err = client.generate(refused, |_| {}).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::BadConstraint), "{err}");
        assert!(err.to_string().contains("does not take the json constraint"), "{err}");
        let done = client.generate(generate(c.context, 20, None), |_| {}).await.unwrap();
        assert_eq!(done.text, "not json at all");
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"replies": "one"}"#).unwrap();
        let err = client
            .load_member("bad", &format!("script:{}@{}", bad.display(), smollm2().display()), Default::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("neither a JSON array"), "{err}");
        client.stop().await.unwrap();
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Counts are cached between edits (only new segments are rendered and tokenized): after every
/// append, replace and remove they equal a fresh count through the engine, on both templates.
#[test]
fn cached_counts_equal_fresh_counts_through_every_kind_of_edit() {
    let _serial = crate::serial();
    let gemma = crate::gemma3();
    let daemon = Daemon::start(
        "counts",
        FrameFormat::Cbor,
        &["--load", gemma.to_str().unwrap(), "--alias", "gemma"],
        None,
    );
    for (alias, path) in [("main", smollm2()), ("gemma", gemma)] {
        let model = Model::load(&path, &ModelParams::default()).unwrap();
        let fresh = |segments: &[(String, Role, String)]| -> (Vec<u32>, u32) {
            let messages: Vec<Message> =
                segments.iter().map(|(_, r, t)| Message::new(r.as_str(), t.as_str())).collect();
            let mut before = 0;
            let mut counts = Vec::new();
            for i in 0..messages.len() {
                let n = model
                    .tokenize_prompt(
                        &model.render(&messages[..=i], GenerationPrompt::Omit).unwrap(),
                    )
                    .len();
                counts.push((n - before) as u32);
                before = n;
            }
            let total = model
                .tokenize_prompt(&model.render(&messages, GenerationPrompt::Add).unwrap())
                .len();
            (counts, total as u32)
        };
        runtime().block_on(async {
            let mut client = daemon.client(FrameFormat::Cbor).await;
            let mut mirror: Vec<(String, Role, String)> = Vec::new();
            let text = |i: usize| {
                format!("Turn {i}: the file src/lib.rs:{i} has `fn f{i}() {{}}` — déjà vu {i}.\n")
            };
            let role = |i: usize| if i.is_multiple_of(2) { Role::User } else { Role::Assistant };
            let created =
                client.create_context(alias, vec![seg("s0", Role::User, &text(0))]).await.unwrap();
            mirror.push(("s0".into(), Role::User, text(0)));
            let id = created.context;
            let check = |counts: &caldrix_client::Counts,
                         mirror: &[(String, Role, String)],
                         step: &str| {
                let (expected, total) = fresh(mirror);
                let got: Vec<u32> = counts.segments.iter().map(|s| s.tokens).collect();
                assert_eq!((got, counts.total_tokens), (expected, total), "{alias} after {step}");
            };
            check(&created, &mirror, "create");
            for i in 1..8 {
                let segment = seg(&format!("s{i}"), role(i), &text(i));
                let counts = client.edit_context(id, vec![Edit::Append { segment }]).await.unwrap();
                mirror.push((format!("s{i}"), role(i), text(i)));
                check(&counts, &mirror, &format!("append {i}"));
            }
            let counts = client
                .edit_context(
                    id,
                    vec![Edit::Replace { id: "s3".into(), text: "Changed.".into(), pinned: None }],
                )
                .await
                .unwrap();
            mirror[3].2 = "Changed.".into();
            check(&counts, &mirror, "replace s3");
            // Remove a user/assistant pair so Gemma's roles still alternate.
            let counts = client
                .edit_context(
                    id,
                    vec![Edit::Remove { id: "s4".into() }, Edit::Remove { id: "s5".into() }],
                )
                .await
                .unwrap();
            mirror.retain(|(i, _, _)| i != "s4" && i != "s5");
            check(&counts, &mirror, "remove s4, s5");
            let counts = client
                .edit_context(id, vec![Edit::Append { segment: seg("s8", Role::User, &text(8)) }])
                .await
                .unwrap();
            mirror.push(("s8".into(), Role::User, text(8)));
            check(&counts, &mirror, "append after remove");
            let done = client.generate(generate(id, 4, None), |_| {}).await.unwrap();
            assert_eq!(
                done.usage.prompt_tokens, counts.total_tokens,
                "{alias}: the prompt is what was counted"
            );
        });
    }
}

/// On the CPU-only build (the default), layers asked for on a GPU are a load error naming what
/// is missing, over the socket and on the command line; and a member on the CPU is never
/// reported as on a GPU (issue 46: the lane is where the layers went, not the flag).
#[cfg(not(any(feature = "vulkan", feature = "cuda", feature = "metal", feature = "rocm")))]
#[test]
fn a_gpu_request_on_the_cpu_build_is_a_load_error_naming_the_missing_backend() {
    let _serial = crate::serial();
    let daemon = Daemon::start("no-gpu", FrameFormat::Cbor, &[], None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let flags = caldrix_proto::ServingFlags { gpu_layers: Some(8), ..Default::default() };
        let model = smollm2().display().to_string();
        let err = client.load_member("gpu", &model, flags).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::LoadRefused), "{err}");
        assert!(err.to_string().contains("8 layers were asked for on a GPU"), "{err}");
        assert!(err.to_string().contains("built for the CPU only"), "{err}");
        let members = client.members().await.unwrap();
        assert_eq!(members.len(), 1, "nothing was loaded: {members:?}");
        assert_eq!(
            (members[0].lane, members[0].gpu.clone()),
            (Some(caldrix_proto::Lane::Cpu), None)
        );
    });
    let status = crate::caldrix(&["pool", "status", "--socket", daemon.socket.to_str().unwrap()]);
    let text = crate::stdout(&status);
    assert!(text.contains("    lane: cpu ("), "{text}");
    let out = crate::caldrix(&[
        "run",
        &smollm2().display().to_string(),
        "--gpu-layers",
        "4",
        "--prompt",
        "hi",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("4 layers were asked for on a GPU") && stderr.contains("--features vulkan"),
        "{stderr}"
    );
    // `auto` (the default) offloads what fits, here nothing, and says where the layers went.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_caldrix"))
        .args(["run", &smollm2().display().to_string(), "--gpu-layers", "auto"])
        .args(["--prompt", "hi", "--max-new-tokens", "2"])
        .env("CALDRIX_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("model loaded") && stderr.contains("on=CPU"), "{stderr}");
}
