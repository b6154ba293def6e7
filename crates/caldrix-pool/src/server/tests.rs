//! The server loop's unit tests: message shaping, bounds, slots, and `stop`.

use super::*;

fn pool() -> Arc<Pool> {
    Pool::new(crate::PoolConfig {
        frames: FrameFormat::Cbor,
        max_connections: 4,
        idle_timeout: None,
        context_budget: 0,
        memory_limit: 1 << 30,
        owner_uid: 0,
    })
}

#[test]
fn error_messages_are_one_readable_line() {
    assert_eq!(readable("unknown variant `a\nb\u{1c}`"), "unknown variant `a\\nb\\u{1c}`");
    let exact = "x".repeat(MAX_MESSAGE_BYTES);
    assert_eq!(readable(&exact), exact, "a message at the bound is whole");
    let long = readable(&"x".repeat(5000));
    assert_eq!(long.len(), MAX_MESSAGE_BYTES);
    assert!(long.ends_with("x ..."), "{long}");
    // Escapes count, and an escape is never cut in half.
    let escaped = readable(&"\u{1}".repeat(400));
    assert!(escaped.len() <= MAX_MESSAGE_BYTES && escaped.ends_with("\\u{1} ..."), "{escaped}");
    let edge = readable(&format!("{}\u{1c}", "x".repeat(MAX_MESSAGE_BYTES - 3)));
    assert!(edge.len() <= MAX_MESSAGE_BYTES && edge.ends_with("x ..."), "{edge}");
    let wide = readable(&"é".repeat(800));
    assert!(wide.len() <= MAX_MESSAGE_BYTES && wide.ends_with("é ..."), "{}", wide.len());
}

#[tokio::test]
async fn a_control_request_past_its_bound_is_a_timeout_naming_it() {
    let slow = tokio::task::spawn_blocking(|| {
        std::thread::sleep(Duration::from_millis(300));
        Ok(Reply::Ok)
    });
    let err = answer(slow, Some(Duration::from_millis(20))).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(err.message.contains("not answered within 0 s"), "{}", err.message);
    let quick = tokio::task::spawn_blocking(|| Ok(Reply::Ok));
    assert_eq!(answer(quick, Some(Duration::from_secs(5))).await, Ok(Reply::Ok));
    let failed = tokio::task::spawn_blocking(|| -> Result<Reply, PoolError> { panic!("bug") });
    assert_eq!(answer(failed, None).await.unwrap_err().kind, ErrorKind::Internal);
}

/// A connection task that panics still gives its place back.
#[tokio::test]
async fn a_slot_is_released_when_its_task_panics() {
    let pool = pool();
    let slot = Slot::take(&pool);
    assert_eq!(pool.active.load(Ordering::SeqCst), 1);
    let task = tokio::spawn(async move {
        let _slot = slot;
        panic!("a bug in a connection task");
    });
    assert!(task.await.is_err());
    assert_eq!(pool.active.load(Ordering::SeqCst), 0);
}

/// A blocking client: one request written, one reply read (`None`: the connection closed).
struct Client {
    stream: std::os::unix::net::UnixStream,
    buf: Vec<u8>,
}

impl Client {
    fn send(&mut self, request: &Request) {
        use std::io::Write;
        self.stream.write_all(&proto::encode(request, FrameFormat::Cbor).unwrap()).unwrap();
    }

    fn recv(&mut self) -> Option<Reply> {
        use std::io::Read;
        loop {
            if let Some((payload, used)) = proto::split_frame(&self.buf).unwrap() {
                let reply = proto::decode(payload, FrameFormat::Cbor).unwrap();
                self.buf.drain(..used);
                return Some(reply);
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk).unwrap() {
                0 => return None,
                n => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// A pool served as the binary serves it (the runtime's shutdown after `serve`), with one
/// held member (`Member::held`: the test answers its jobs, or never does), a client past its
/// hello, and a context of one segment: its id and tokens.
struct Served {
    pool: Arc<Pool>,
    jobs: std::sync::mpsc::Receiver<crate::member::Job>,
    serving: std::thread::JoinHandle<std::io::Result<()>>,
    client: Client,
    context: u64,
    total_tokens: u32,
    dir: std::path::PathBuf,
}

fn served(name: &str) -> Served {
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir().join(format!("caldrix-pool-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("pool.sock");
    let _ = std::fs::remove_file(&socket);
    let owner_uid = std::fs::metadata(&dir).unwrap().uid();
    let pool = Pool::new(crate::PoolConfig { owner_uid, ..pool().config.clone() });
    let params = caldrix_engine::ModelParams {
        gpu_layers: Some(0),
        window: None,
        generations: 1,
        vocab_only: true,
    };
    let model = Arc::new(caldrix_engine::Model::load(&test_models::smollm2(), &params).unwrap());
    let (member, jobs) = crate::member::Member::held("main", model);
    pool.members.lock().unwrap().insert("main".into(), Arc::new(member));

    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = {
        let _entered = runtime.enter();
        UnixListener::bind(&socket).unwrap()
    };
    let server = Arc::clone(&pool);
    let serving = std::thread::spawn(move || {
        let served = runtime.block_on(server.serve(listener));
        runtime.shutdown_timeout(Duration::from_millis(500));
        served
    });

    let mut client = connect(&dir);
    let segment = proto::Segment {
        id: "u".into(),
        role: proto::Role::User,
        text: "Tell a story.".into(),
        pinned: false,
    };
    client.send(&Request::ContextCreate {
        member: "main".into(),
        segments: vec![segment],
        tools: vec![],
    });
    let Some(Reply::Context { context, total_tokens, .. }) = client.recv() else {
        panic!("no context")
    };
    Served { pool, jobs, serving, client, context, total_tokens, dir }
}

/// A client past its hello on the socket in `dir`.
fn connect(dir: &std::path::Path) -> Client {
    let stream = std::os::unix::net::UnixStream::connect(dir.join("pool.sock")).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut client = Client { stream, buf: Vec::new() };
    client.send(&Request::Hello { version: PROTOCOL_VERSION, client: "test".into() });
    assert!(matches!(client.recv(), Some(Reply::Hello { .. })));
    client
}

/// Waits (at most 5 s) until `done` holds.
#[track_caller]
fn eventually(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(5), "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn generate(context: u64) -> Request {
    Request::Generate(proto::Generate {
        context,
        constraint: proto::Constraint::None,
        max_new_tokens: 300,
        sampling: None,
        logprobs: None,
        append_as: None,
    })
}

/// A generation `stop` finds still being prepared (its context's lock held here, as a remote
/// tokenizer that does not answer would hold it) is waited for like a running one and, not
/// prepared by the grace's end, gets its cancelled `done` from its connection, with nothing
/// of it known; it never reaches its member.
#[test]
fn a_generation_still_being_prepared_at_stop_gets_its_cancelled_done() {
    let Served { pool, jobs, serving, mut client, context, dir, .. } = served("preparing");
    let held = pool.contexts.lock().unwrap();
    client.send(&generate(context));
    let registered = Instant::now();
    while pool.generations() == 0 {
        assert!(registered.elapsed() < Duration::from_secs(10), "never registered");
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopped = Instant::now();
    pool.stop();
    let Some(Reply::Done(done)) = client.recv() else {
        panic!("the connection closed without the generation's done")
    };
    assert!(stopped.elapsed() >= STOP_GRACE, "waited for like a running generation");
    assert_eq!(done.stop, proto::StopReason::Cancelled);
    assert_eq!((done.text.as_str(), done.usage.completion_tokens), ("", 0));
    assert_eq!(done.usage.prompt_tokens, 0, "not rendered yet");
    assert!(client.recv().is_none(), "the close follows, no second done");
    assert!(serving.join().unwrap().is_ok());
    assert!(stopped.elapsed() < Duration::from_secs(2), "{:?}", stopped.elapsed());
    drop(held);
    assert!(jobs.recv_timeout(Duration::from_millis(200)).is_err(), "no job reached the member");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A generation its member has not ended when `stop`'s grace passes (its engine stuck)
/// still gets exactly one `done`, cancelled, with the text it streamed, before its
/// connection closes; the member's late result goes nowhere, and `serve` returns within
/// its bound. Served as the binary serves: the runtime's shutdown drops the connections.
#[test]
fn a_generation_its_member_has_not_ended_by_the_grace_s_end_gets_its_cancelled_done() {
    let Served { pool, jobs, serving, mut client, context, total_tokens, dir } = served("grace");
    client.send(&generate(context));
    let job = jobs.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(job.place.take(), "the member runs it");
    job.events.send(MemberEvent::Delta("Once upon".into())).unwrap();
    assert_eq!(client.recv(), Some(Reply::Delta { text: "Once upon".into() }));

    let stopped = Instant::now();
    pool.stop();
    assert!(job.cancel.load(Ordering::SeqCst), "stop cancelled the generation");
    // The member never ends the generation: the connection answers it.
    let Some(Reply::Done(done)) = client.recv() else {
        panic!("the connection closed without the generation's done")
    };
    assert!(stopped.elapsed() >= STOP_GRACE, "written at the grace's end, not before");
    assert_eq!(done.stop, proto::StopReason::Cancelled);
    assert_eq!(done.text, "Once upon");
    assert_eq!(done.usage.prompt_tokens, total_tokens);
    assert_eq!(done.usage.completion_tokens, 1, "one delta was sent");
    assert_eq!(done.usage.recomputed_from, None, "the member reported none");
    assert!(client.recv().is_none(), "the close follows, no second done");
    assert!(serving.join().unwrap().is_ok());
    assert!(stopped.elapsed() < Duration::from_secs(2), "{:?}", stopped.elapsed());
    assert_eq!(pool.generations(), 0);
    // The member's late result has nowhere to go.
    let late = job.events.send(MemberEvent::Delta("late".into()));
    assert!(late.is_err(), "the connection dropped the generation's events");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stop_cancels_every_registered_generation_and_later_ones_start_cancelled() {
    let pool = pool();
    let a = pool.register_generation();
    let b = pool.register_generation();
    drop(b);
    pool.stop();
    assert!(a.cancel.load(Ordering::SeqCst));
    assert_eq!(pool.running.lock().unwrap().len(), 1, "a finished generation deregisters");
    let late = pool.register_generation();
    assert!(late.cancel.load(Ordering::SeqCst));
}

/// A generation whose client leaves while it is still queued (behind one its member runs)
/// leaves the queue at once: its `queue_depth` entry, its registration and its connection's
/// place are freed then, not when the generation ahead ends, and the member drops it unrun.
/// One the member already runs is cancelled and waited for, as before.
#[test]
fn a_queued_generation_whose_client_left_frees_its_place_at_once() {
    let Served { pool, jobs, serving, client: mut running, context, dir, .. } = served("left");
    let member = pool.member("main").unwrap();
    running.send(&generate(context));
    let ahead = jobs.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(ahead.place.take(), "the member runs the first");
    let mut queued = connect(&dir);
    queued.send(&generate(context));
    let behind = jobs.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((member.queue_depth(), pool.active.load(Ordering::SeqCst)), (1, 2));

    drop(queued);
    eventually("the queued generation's place is freed", || {
        member.queue_depth() == 0 && pool.active.load(Ordering::SeqCst) == 1
    });
    assert_eq!(pool.generations(), 1, "only the running one is registered");
    assert!(!behind.place.take(), "withdrawn: the member drops it unrun");
    assert!(behind.events.send(MemberEvent::Delta("x".into())).is_err(), "nobody listens");

    // The running one is cancelled when its client leaves, and keeps its place until its
    // member ends it (its rows are stored).
    drop(running);
    eventually("the running generation is cancelled", || ahead.cancel.load(Ordering::SeqCst));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(pool.active.load(Ordering::SeqCst), 1, "waits for its member's done");
    let finished = crate::member::Finished::local(
        caldrix_engine::Generation {
            text: String::new(),
            tokens: Vec::new(),
            stop: caldrix_engine::StopReason::Cancelled,
            logprobs: None,
            one_of: None,
            prompt_tokens: 3,
            reused_tokens: 0,
            timings: caldrix_engine::Timings::default(),
        },
        0,
    );
    ahead.events.send(MemberEvent::Done(Ok(finished))).unwrap();
    eventually("the running one's place is freed", || pool.active.load(Ordering::SeqCst) == 0);

    pool.stop();
    assert!(serving.join().unwrap().is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `stop` while the member is stuck in a long step (a prefill's batch): the generation it
/// runs gets its connection's `done` at the grace's end, and the one still queued behind it
/// the `done` of a generation that computed nothing, as the member's own would be
/// (`recomputed_from` 0, no time), not the connection's fallback with its waiting time.
#[test]
fn a_generation_still_queued_when_stop_s_grace_passes_gets_the_queued_done() {
    let Served { pool, jobs, serving, client: mut running, context, total_tokens, dir } =
        served("queued-stop");
    let member = pool.member("main").unwrap();
    running.send(&generate(context));
    let ahead = jobs.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(ahead.place.take());
    let mut queued = connect(&dir);
    queued.send(&generate(context));
    let behind = jobs.recv_timeout(Duration::from_secs(10)).unwrap();
    // Time queued, which the fallback would have reported as its prefill.
    std::thread::sleep(Duration::from_millis(300));

    let stopped = Instant::now();
    pool.stop();
    for (name, client) in [("running", &mut running), ("queued", &mut queued)] {
        let Some(Reply::Done(done)) = client.recv() else { panic!("{name}: no done") };
        assert_eq!(done.stop, proto::StopReason::Cancelled, "{name}");
        assert_eq!(done.usage.prompt_tokens, total_tokens, "{name}");
        assert_eq!((done.text.as_str(), done.usage.completion_tokens), ("", 0), "{name}");
        if name == "queued" {
            assert_eq!(done.usage.recomputed_from, Some(0), "computed nothing");
            assert_eq!((done.usage.prefill_ms, done.usage.decode_ms), (0.0, 0.0));
        } else {
            assert_eq!(done.usage.recomputed_from, None, "the member reported none");
        }
        assert!(client.recv().is_none(), "{name}: the close follows, no second done");
    }
    assert!(stopped.elapsed() >= STOP_GRACE);
    assert!(serving.join().unwrap().is_ok());
    assert!(!behind.place.take(), "the connection answered it; the member drops it");
    assert_eq!(member.queue_depth(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
