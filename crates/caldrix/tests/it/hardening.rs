//! The pool's trust boundary and bounds, through the real binary: who may connect, every bad
//! request answered with its documented error, `stop` during another connection's
//! generation, and a cancelled prefill's reused rows.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use caldrix_client::{Client, ClientError};
use caldrix_proto::{
    Constraint, Edit, ErrorKind, FrameFormat, Reply, Request, Role, Sampling, ServingFlags,
    StopReason,
};

use crate::pool::{Daemon, frame, generate, runtime, seg};
use crate::{private_dir, smollm2};

fn caldrix_pool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_caldrix")).arg("pool").args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("caldrix-trust-{}-{name}", std::process::id()));
    private_dir(&dir);
    dir
}

/// A socket directory open to others, or another user's, is refused by name by the daemon
/// (before it loads anything) and by every client.
#[test]
fn a_socket_directory_that_is_not_private_and_yours_is_refused_by_both_ends() {
    let _serial = crate::serial();
    let root = scratch("dirs");
    let open = root.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = open.join("pool.sock");
    let socket = socket.to_str().unwrap();
    let serve = caldrix_pool(&["--socket", socket, "--load", smollm2().to_str().unwrap()]);
    assert!(!serve.status.success());
    let message = format!("{} has mode 0755", open.display());
    assert!(stderr(&serve).contains(&message), "{}", stderr(&serve));
    assert!(!Path::new(socket).exists(), "nothing was bound");
    for command in ["status", "stop"] {
        let out = caldrix_pool(&[command, "--socket", socket]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains(&message), "{command}: {}", stderr(&out));
    }

    if caldrix_client::trust::current_uid() != 0 {
        eprintln!("skipped: a directory owned by another user needs root to make (chown)");
        return;
    }
    let foreign = root.join("foreign");
    private_dir(&foreign);
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    let socket = foreign.join("pool.sock");
    let socket = socket.to_str().unwrap();
    let serve = caldrix_pool(&["--socket", socket, "--load", smollm2().to_str().unwrap()]);
    assert!(!serve.status.success());
    assert!(
        stderr(&serve).contains("belongs to uid 65534, not to you (uid 0)"),
        "{}",
        stderr(&serve)
    );
    let out = caldrix_pool(&["status", "--socket", socket]);
    assert!(stderr(&out).contains("belongs to uid 65534"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&root);
}

/// How to run a command as `nobody`, when this test can.
fn as_nobody() -> Result<Command, String> {
    if caldrix_client::trust::current_uid() != 0 {
        return Err("not root: cannot run a process as another user".into());
    }
    let setpriv = Command::new("setpriv").arg("--version").output();
    if !setpriv.is_ok_and(|o| o.status.success()) {
        return Err("setpriv is not installed".into());
    }
    let mut command = Command::new("setpriv");
    command.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    Ok(command)
}

fn wait_for(path: &Path) {
    let started = Instant::now();
    while std::os::unix::net::UnixStream::connect(path).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "nothing bound {}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Both ends check the other's uid (`SO_PEERCRED`): a pool run by `nobody` closes root's
/// connection unanswered, and root's client refuses that pool even through a socket path in a
/// directory of its own; `nobody` cannot use root's pool either.
#[test]
fn a_process_of_another_uid_is_refused_both_ways() {
    let _serial = crate::serial();
    let mut nobody = match as_nobody() {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let root = scratch("peers");
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711)).unwrap();
    let theirs = root.join("nobody");
    private_dir(&theirs);
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let their_socket = theirs.join("pool.sock");
    // A pool with no member: the trust checks come before any model.
    let daemon = nobody
        .arg(env!("CARGO_BIN_EXE_caldrix"))
        .args(["pool", "--socket", their_socket.to_str().unwrap(), "--idle-timeout", "0"])
        .env("HOME", &theirs)
        .env_remove("XDG_RUNTIME_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _daemon = Killed(daemon);
    wait_for(&their_socket);
    assert_eq!(std::fs::metadata(&their_socket).unwrap().uid(), 65534);

    // The daemon's side: root's hello gets no answer, the connection is closed.
    let mut raw = std::os::unix::net::UnixStream::connect(&their_socket).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let hello = caldrix_proto::encode(
        &Request::Hello { version: 2, client: "root".into() },
        FrameFormat::Cbor,
    )
    .unwrap();
    let _ = raw.write_all(&hello);
    let mut buf = [0u8; 64];
    assert_eq!(raw.read(&mut buf).unwrap_or(0), 0, "another uid's client got bytes back");

    // The client's side: a path in root's own private directory leads to nobody's pool.
    let ours = root.join("root");
    private_dir(&ours);
    let link = ours.join("pool.sock");
    std::os::unix::fs::symlink(&their_socket, &link).unwrap();
    let out = caldrix_pool(&["status", "--socket", link.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("runs as uid 65534, not as you (uid 0)"), "{}", stderr(&out));

    // And the other way: root's pool, nobody's client.
    let mine = root.join("mine");
    private_dir(&mine);
    let my_socket = mine.join("pool.sock");
    let daemon = Command::new(env!("CARGO_BIN_EXE_caldrix"))
        .args(["pool", "--socket", my_socket.to_str().unwrap(), "--idle-timeout", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _mine = Killed(daemon);
    wait_for(&my_socket);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&my_socket), 0o600, "the socket is the owner's only");
    assert_eq!(mode(&mine), 0o700);
    let out = as_nobody()
        .unwrap()
        .arg(env!("CARGO_BIN_EXE_caldrix"))
        .args(["pool", "status", "--socket", my_socket.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("belongs to uid 0, not to you (uid 65534)"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&root);
}

/// A message a person reads: one line, no Rust debug formatting, no template dump.
fn assert_sentence(message: &str) {
    assert!(!message.contains('\n'), "{message}");
    assert!(message.len() < 600, "{message}");
    for debug in ["Semantic(", "Io(", "Error {", "kind: ", "{%", "{{"] {
        assert!(!message.contains(debug), "{message}");
    }
}

async fn refused(client: &mut Client, g: caldrix_proto::Generate) -> (ErrorKind, String) {
    match client.generate(g, |_| {}).await {
        Err(ClientError::Pool { kind, message }) => {
            assert_sentence(&message);
            (kind, message)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Every bound of a request is enforced with the documented error, on one connection that
/// keeps serving; what is in range still works.
#[test]
fn every_bad_request_gets_its_documented_error_and_the_daemon_serves_on() {
    let _serial = crate::serial();
    let daemon = Daemon::start("bounds", FrameFormat::Cbor, &[], None);
    crate::documented::the_documented_rules_hold(&daemon.socket, FrameFormat::Cbor);
    let gemma = crate::gemma3();
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let c = client.create_context("main", vec![seg("u", Role::User, "Say hi.")]).await.unwrap();
        let g = |f: &dyn Fn(&mut caldrix_proto::Generate)| {
            let mut g = generate(c.context, 2, None);
            f(&mut g);
            g
        };

        // logprobs: a bare integer, at most 20.
        for k in [u32::MAX, 21] {
            let (kind, message) = refused(&mut client, g(&|g| g.logprobs = Some(k))).await;
            assert_eq!(kind, ErrorKind::BadRequest, "{message}");
            assert!(message.contains("limit of 20"), "{message}");
        }
        let done = client.generate(g(&|g| g.logprobs = Some(20)), |_| {}).await.unwrap();
        let lps = done.logprobs.unwrap();
        assert!(!lps.is_empty() && lps.iter().all(|t| t.top.len() == 20));

        // Sampling out of range.
        let sampling = |temperature, top_p| Some(Sampling { temperature, top_p, seed: 1 });
        for (t, p) in [(-1.0, 1.0), (f32::NAN, 1.0), (f32::INFINITY, 1.0), (0.7, 0.0), (0.7, 1.5), (0.0, -1.0)] {
            let (kind, message) = refused(&mut client, g(&|g| g.sampling = sampling(t, p))).await;
            assert_eq!(kind, ErrorKind::BadRequest, "{t} {p}: {message}");
        }
        client.generate(g(&|g| g.sampling = sampling(0.7, 0.9)), |_| {}).await.unwrap();

        // OneOf: at most 64 options of at most 4096 bytes.
        let many: Vec<String> = (0..65).map(|i| format!("o{i}")).collect();
        let (kind, message) = refused(
            &mut client,
            g(&|g| g.constraint = Constraint::OneOf { options: many.clone() }),
        )
        .await;
        assert_eq!(kind, ErrorKind::BadConstraint);
        assert!(message.contains("65 options, more than the limit of 64"), "{message}");
        let long = vec!["yes".to_owned(), "x".repeat(5000)];
        let (kind, message) = refused(
            &mut client,
            g(&|g| {
                g.max_new_tokens = 8;
                g.constraint = Constraint::OneOf { options: long.clone() }
            }),
        )
        .await;
        assert_eq!(kind, ErrorKind::BadConstraint);
        assert!(message.contains("5000 bytes, more than the limit of 4096"), "{message}");

        // Schemas: the size bound, llguidance's refusals by name, and x-guidance merged.
        let json = |schema: String| move |g: &mut caldrix_proto::Generate| {
            g.max_new_tokens = 30;
            g.constraint = Constraint::Json { schema: schema.clone() };
        };
        let huge = format!(r#"{{"type":"string","description":"{}"}}"#, "d".repeat(300 << 10));
        let (kind, message) = refused(&mut client, g(&json(huge))).await;
        assert_eq!(kind, ErrorKind::BadConstraint);
        assert!(message.contains("more than the limit of 262144"), "{message}");
        for (schema, named) in [
            (r#"{"not":{"type":"string"}}"#, "not"),
            (r#"{"type":"object","dependencies":{"a":["b"]}}"#, "dependencies"),
            (r#"{"type":"string","format":"ipv9"}"#, "ipv9"),
            (r#"{"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]}"#, "coerce_one_of"),
            (r#"{"type":"object","x-guidance":3}"#, "x-guidance"),
        ] {
            let (kind, message) = refused(&mut client, g(&json(schema.into()))).await;
            assert_eq!(kind, ErrorKind::BadConstraint, "{schema}: {message}");
            assert!(message.contains(named), "{schema}: {message}");
        }
        // Overlapping branches: refused as plain oneOf, generated as anyOf once the caller opts
        // in, and still compact (the caller's options are merged over the default).
        let object = |extra: &str| {
            format!(
                r#"{{"type":"object","properties":{{"a":{{"type":"integer","minimum":0,"maximum":99}}{extra}}},"required":["a"],"additionalProperties":false}}"#
            )
        };
        let branches = format!("[{},{}]", object(""), object(r#","b":{"type":"boolean"}"#));
        let plain = format!(r#"{{"oneOf":{branches}}}"#);
        let (kind, _) = refused(&mut client, g(&json(plain))).await;
        assert_eq!(kind, ErrorKind::BadConstraint);
        let coerced = format!(r#"{{"x-guidance":{{"coerce_one_of":true}},"oneOf":{branches}}}"#);
        let done = client.generate(g(&json(coerced)), |_| {}).await.unwrap();
        assert_eq!(done.stop, StopReason::Complete, "{}", done.text);
        let value: serde_json::Value = serde_json::from_str(&done.text).unwrap();
        assert_eq!(serde_json::to_string(&value).unwrap(), done.text, "compact: no whitespace");

        // The formats llguidance implements besides those, `ipv4` and `ipv6`, and `unknown`
        // (any string).
        let string = |format: &str| format!(r#"{{"type":"string","format":"{format}"}}"#);
        let done = client.generate(g(&json(string("ipv4"))), |_| {}).await.unwrap();
        assert_eq!(done.stop, StopReason::Complete, "{}", done.text);
        let address: String = serde_json::from_str(&done.text).unwrap();
        assert!(address.parse::<std::net::Ipv4Addr>().is_ok(), "{address}");
        for format in ["ipv6", "unknown"] {
            let mut short = g(&json(string(format)));
            short.max_new_tokens = 3;
            client.generate(short, |_| {}).await.unwrap();
        }

        // Unknown keys, inside a `none` constraint too.
        let raw = format!(
            r#"{{"type":"generate","context":{},"max_new_tokens":2,"constraint":{{"kind":"none","schema":"{{}}"}}}}"#,
            c.context
        );
        let value: serde_json::Value = serde_json::from_str(&raw).unwrap();
        let mut cbor = Vec::new();
        ciborium::into_writer(&value, &mut cbor).unwrap();
        client.send_raw(&frame(&cbor)).await.unwrap();
        match client.recv(Duration::from_secs(10)).await {
            Err(ClientError::Pool { kind: ErrorKind::BadRequest, message }) => {
                assert!(message.contains("unknown field `schema`"), "{message}");
                assert_sentence(&message);
            }
            other => panic!("{other:?}"),
        }

        // A template's own rule: Gemma's alternating roles, as one line naming the rule.
        let flags = ServingFlags { ctx: Some(128), threads: Some(2), ..Default::default() };
        client.load_member("gemma", gemma.to_str().unwrap(), flags).await.unwrap();
        let err = client
            .create_context(
                "gemma",
                vec![
                    seg("u", Role::User, "Hi."),
                    seg("a", Role::Assistant, "Hello."),
                    seg("s", Role::System, "Be brief."),
                ],
            )
            .await
            .unwrap_err();
        let ClientError::Pool { kind, message } = err else { panic!("{err:?}") };
        assert_eq!(kind, ErrorKind::BadRequest, "{message}");
        assert_sentence(&message);
        assert!(message.contains("refuses this conversation: Conversation roles must alternate"));
        // The refused create made no context, and a refused edit changes nothing: the edits
        // of a request apply all or nothing, the template's verdict included.
        let on_gemma = |status: &caldrix_proto::PoolStatus| {
            status.members.iter().find(|m| m.info.alias == "gemma").unwrap().contexts
        };
        assert_eq!(on_gemma(&client.status().await.unwrap()), 0, "no context was made");
        let pair = vec![seg("u", Role::User, "Hi."), seg("a", Role::Assistant, "Hello.")];
        let made = client.create_context("gemma", pair).await.unwrap();
        let append = |id: &str, role, text: &str| Edit::Append { segment: seg(id, role, text) };
        // The system segment stands where a user turn must (after an assistant one).
        let edits = vec![
            append("u2", Role::User, "More."),
            append("a2", Role::Assistant, "Sure."),
            append("s", Role::System, "Be brief."),
        ];
        let err = client.edit_context(made.context, edits).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::BadRequest), "{err}");
        assert_eq!(client.context_counts(made.context).await.unwrap(), made, "unchanged");
        // Gemma's rule is alternation after a first system segment, not "system only first":
        // a system segment where an assistant one could stand renders (as a `system` turn)
        // and generates.
        let late = vec![seg("u", Role::User, "Hi."), seg("s", Role::System, "Be brief.")];
        let late = client.create_context("gemma", late).await.unwrap();
        let done = client.generate(generate(late.context, 2, None), |_| {}).await.unwrap();
        assert!(done.usage.completion_tokens >= 1, "{done:?}");
        for id in [made.context, late.context] {
            client.drop_context(id).await.unwrap();
        }
        // Two user segments in a row (aerix's instructions, then the request) are one turn.
        let runs = client
            .create_context(
                "gemma",
                vec![
                    seg("s", Role::System, "Be brief."),
                    seg("i", Role::User, "Project notes."),
                    seg("p", Role::User, "Say hi."),
                ],
            )
            .await
            .unwrap();
        let done = client.generate(generate(runs.context, 4, None), |_| {}).await.unwrap();
        assert!(done.usage.completion_tokens >= 1, "{done:?}");

        // A max_new_tokens past the window is fine: the generation ends at context_full.
        let small = client.create_context("gemma", vec![seg("u", Role::User, "Count.")]).await;
        let small = small.unwrap();
        let done = client.generate(generate(small.context, u32::MAX, None), |_| {}).await;
        let done = done.unwrap();
        assert!(
            matches!(done.stop, StopReason::ContextFull | StopReason::EndOfTurn),
            "{:?}",
            done.stop
        );
        if done.stop == StopReason::ContextFull {
            // Every window row is used; the last token chosen needs no row of its own.
            assert_eq!(done.usage.prompt_tokens + done.usage.completion_tokens, 128 + 1);
        }

        // Still serving, this connection and a new one.
        client.status().await.unwrap();
        let mut next = daemon.client(FrameFormat::Cbor).await;
        next.generate(generate(c.context, 2, None), |_| {}).await.unwrap();
    });
}

/// `stop` on one connection cancels the generation another is streaming and the one queued
/// behind it, each answered with its `done`; the daemon is gone within 2 s, and its socket
/// with it.
#[test]
fn stop_cancels_every_generation_and_the_daemon_exits_within_2_s() {
    let _serial = crate::serial();
    let mut daemon = Daemon::start("stop", FrameFormat::Cbor, &[], None);
    runtime().block_on(async {
        let mut streaming = daemon.client(FrameFormat::Cbor).await;
        let c = streaming
            .create_context(
                "main",
                vec![seg("u", Role::User, "Write a long story about a dragon.")],
            )
            .await
            .unwrap();
        streaming.send(&Request::Generate(generate(c.context, 300, None))).await.unwrap();
        loop {
            match streaming.recv(Duration::from_secs(60)).await.unwrap() {
                Reply::Delta { .. } => break,
                Reply::Progress { .. } => {}
                other => panic!("{other:?}"),
            }
        }
        // A second generation waits in the member's queue (it decodes one at a time).
        let mut queued = daemon.client(FrameFormat::Cbor).await;
        let q = queued.create_context("main", vec![seg("u", Role::User, "Count to 50.")]).await;
        queued.send(&Request::Generate(generate(q.unwrap().context, 300, None))).await.unwrap();
        let mut stopper = daemon.client(FrameFormat::Cbor).await;
        let waited = Instant::now();
        while stopper.members().await.unwrap()[0].queue_depth == 0 {
            assert!(waited.elapsed() < Duration::from_secs(30), "the generation never queued");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stopper.stop().await.unwrap();
        let stopped = Instant::now();
        // Each gets its `done`, cancelled, then the close.
        for (name, client) in [("streaming", &mut streaming), ("queued", &mut queued)] {
            let done = loop {
                match client.recv(Duration::from_secs(5)).await {
                    Ok(Reply::Delta { .. } | Reply::Progress { .. }) => {}
                    Ok(Reply::Done(done)) => break done,
                    other => panic!("{name}: {other:?}"),
                }
            };
            assert_eq!(done.stop, StopReason::Cancelled, "{name}");
            assert!(done.usage.completion_tokens < 300, "{name}");
            if name == "queued" {
                // Still queued: nothing computed, as the page says (by its member, or by its
                // connection at the grace's end when the member was inside a long step).
                assert_eq!(done.usage.recomputed_from, Some(0), "{done:?}");
                assert_eq!((done.usage.prefill_ms, done.usage.decode_ms), (0.0, 0.0));
                assert_eq!(done.usage.completion_tokens, 0);
            }
            let closed = client.recv(Duration::from_secs(5)).await;
            assert!(matches!(closed, Err(ClientError::Closed)), "{name}: {closed:?}");
        }
        let status = loop {
            if let Some(status) = daemon.child.try_wait().unwrap() {
                break status;
            }
            assert!(stopped.elapsed() < Duration::from_secs(2), "the daemon still runs after 2 s");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success());
        assert!(!daemon.socket.exists(), "the socket is removed");
    });
}

/// A generation queued behind a long one whose client closes its connection leaves the queue
/// at once: `queue_depth` drops and its connection's place is free for a new client while the
/// generation ahead still runs (it held both until that one ended: seconds, refusing new
/// clients at the limit meanwhile).
#[test]
fn a_queued_generation_whose_client_left_frees_its_place_at_once() {
    let _serial = crate::serial();
    let daemon = Daemon::start("left", FrameFormat::Cbor, &["--max-connections", "3"], None);
    runtime().block_on(async {
        let mut streaming = daemon.client(FrameFormat::Cbor).await;
        // Counting goes on for as long as it is let (a story may end in a few hundred tokens).
        let count = vec![seg("u", Role::User, "Count from 1 to 5000, one number per line.")];
        let c = streaming.create_context("main", count).await.unwrap();
        streaming.send(&Request::Generate(generate(c.context, 1500, None))).await.unwrap();
        loop {
            match streaming.recv(Duration::from_secs(60)).await.unwrap() {
                Reply::Delta { .. } => break,
                Reply::Progress { .. } => {}
                other => panic!("{other:?}"),
            }
        }
        let mut watcher = daemon.client(FrameFormat::Cbor).await;
        let mut queued = daemon.client(FrameFormat::Cbor).await;
        queued.send(&Request::Generate(generate(c.context, 8, None))).await.unwrap();
        let waited = Instant::now();
        while watcher.members().await.unwrap()[0].queue_depth == 0 {
            assert!(waited.elapsed() < Duration::from_secs(30), "the generation never queued");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(queued);
        let left = Instant::now();
        loop {
            let status = watcher.status().await.unwrap();
            if status.members[0].info.queue_depth == 0 && status.connections == 2 {
                break;
            }
            assert!(left.elapsed() < Duration::from_secs(2), "still held: {status:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The third place is free at once: no retry.
        let mut next = Client::connect(&daemon.socket, FrameFormat::Cbor, "next").await.unwrap();
        next.status().await.unwrap();
        // And the generation ahead was still running all along.
        streaming.send(&Request::Cancel {}).await.unwrap();
        let done = loop {
            match streaming.recv(Duration::from_secs(60)).await.unwrap() {
                Reply::Done(done) => break done,
                Reply::Delta { .. } | Reply::Progress { .. } => {}
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(done.stop, StopReason::Cancelled, "{done:?}");
    });
}

/// A generation cancelled in its prefill reports where it resumed: the rows it found stored.
#[test]
fn a_cancelled_prefill_reports_the_rows_it_reused() {
    let _serial = crate::serial();
    let daemon = Daemon::start("prefill", FrameFormat::Cbor, &["--batch", "32"], None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let system = "You are a careful assistant. ".repeat(20);
        let c = client
            .create_context(
                "main",
                vec![seg("s", Role::System, &system), seg("u", Role::User, "Hi.")],
            )
            .await
            .unwrap();
        let first = client.generate(generate(c.context, 1, None), |_| {}).await.unwrap();
        assert!(first.usage.prompt_tokens > 100);
        let more = "Here is more of the request, line after line. ".repeat(30);
        client
            .edit_context(c.context, vec![Edit::Append { segment: seg("u2", Role::User, &more) }])
            .await
            .unwrap();
        client.send(&Request::Generate(generate(c.context, 8, None))).await.unwrap();
        let mut cancelled = false;
        let mut totals = Vec::new();
        let done = loop {
            match client.recv(Duration::from_secs(60)).await.unwrap() {
                Reply::Progress { total, .. } if !cancelled => {
                    totals.push(total);
                    client.send(&Request::Cancel {}).await.unwrap();
                    cancelled = true;
                }
                Reply::Progress { total, .. } => totals.push(total),
                Reply::Delta { .. } => {}
                Reply::Done(done) => break done,
                other => panic!("{other:?}"),
            }
        };
        assert!(cancelled, "the prefill sent progress");
        // `progress.total` counts the rows this generation computes: the prompt past the rows
        // found stored.
        let reused = done.usage.recomputed_from.unwrap();
        assert!(reused > 0);
        assert!(totals.iter().all(|&t| t + reused == done.usage.prompt_tokens), "{totals:?}");
        assert_eq!(done.stop, StopReason::Cancelled);
        assert_eq!(done.usage.completion_tokens, 0, "cancelled before the first token");
        // Everything up to the first prompt's generation header was stored.
        let reused = done.usage.recomputed_from.unwrap();
        assert!(
            reused + 8 >= first.usage.prompt_tokens && reused < first.usage.prompt_tokens,
            "recomputed_from {reused}, first prompt {}",
            first.usage.prompt_tokens
        );
    });
}
