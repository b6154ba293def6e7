//! Fuzz cases against a running pool, each with the reply the protocol documents: malformed,
//! truncated and oversized frames, the wrong format, valid-shaped requests with wrong types,
//! huge numbers and unknown keys, random valid requests, and clients that leave mid-frame or
//! mid-generation. After every case a new connection must be served its `hello` within 1 s.
//!
//! Shared by the property test (`fuzz.rs`, bounded for CI) and the long run
//! (`examples/fuzz-pool.rs`, `scripts/fuzz-pool`), so both assert the same things.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What a case does, for the per-kind counts of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Garbage,
    Oversized,
    Truncated,
    WrongFormat,
    WrongType,
    HugeNumber,
    UnknownKey,
    RandomRequest,
    LeaveMidFrame,
    LeaveMidGeneration,
}

pub const KINDS: [Kind; 10] = [
    Kind::Garbage,
    Kind::Oversized,
    Kind::Truncated,
    Kind::WrongFormat,
    Kind::WrongType,
    Kind::HugeNumber,
    Kind::UnknownKey,
    Kind::RandomRequest,
    Kind::LeaveMidFrame,
    Kind::LeaveMidGeneration,
];

/// A pool to fuzz, and a context on its `main` member that cases fork from.
#[derive(Debug, Clone)]
pub struct Target {
    pub socket: PathBuf,
    /// The daemon's frame format; `false` is CBOR.
    pub json: bool,
    pub base_context: u64,
}

/// One case's result: its kind and how many frames it sent.
#[derive(Debug)]
pub struct Outcome {
    pub kind: Kind,
    pub frames: u32,
}

/// SplitMix64: the same seed, the same case, in the test and in the long run.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A connection that speaks raw frames.
struct Conn {
    stream: UnixStream,
    json: bool,
    buf: Vec<u8>,
    frames: u32,
}

/// What came back.
#[derive(Debug)]
enum Got {
    Reply(Value),
    /// The daemon closed the connection.
    Closed,
}

impl Conn {
    fn open(target: &Target) -> Result<Conn, String> {
        let stream = UnixStream::connect(&target.socket).map_err(|e| format!("connect: {e}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
        Ok(Conn { stream, json: target.json, buf: Vec::new(), frames: 0 })
    }

    /// Connects and shakes hands, within `limit`.
    fn ready(target: &Target, limit: Duration) -> Result<Conn, String> {
        let started = Instant::now();
        let mut conn = Conn::open(target)?;
        conn.stream.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
        conn.send_value(&json!({"type": "hello", "version": 2, "client": "fuzz"}))?;
        match conn.recv()? {
            Got::Reply(v) if v["type"] == "hello" => {}
            other => return Err(format!("the handshake got {other:?}")),
        }
        if started.elapsed() > limit {
            return Err(format!("hello took {:?}", started.elapsed()));
        }
        conn.stream.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
        Ok(conn)
    }

    fn encode(&self, value: &Value, json: bool) -> Vec<u8> {
        let mut payload = Vec::new();
        if json {
            payload = serde_json::to_vec(value).unwrap_or_default();
        } else {
            let _ = ciborium::into_writer(value, &mut payload);
        }
        let mut out = (payload.len() as u32).to_be_bytes().to_vec();
        out.extend(payload);
        out
    }

    fn send_raw(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.frames += 1;
        self.stream.write_all(bytes).map_err(|e| format!("send: {e}"))
    }

    fn send_value(&mut self, value: &Value) -> Result<(), String> {
        let bytes = self.encode(value, self.json);
        self.send_raw(&bytes)
    }

    fn recv(&mut self) -> Result<Got, String> {
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
                let end = 4 + len as usize;
                if self.buf.len() >= end {
                    let payload = self.buf[4..end].to_vec();
                    self.buf.drain(..end);
                    let value = if self.json {
                        serde_json::from_slice(&payload).map_err(|e| format!("reply: {e}"))?
                    } else {
                        ciborium::from_reader(payload.as_slice())
                            .map_err(|e| format!("reply: {e}"))?
                    };
                    return Ok(Got::Reply(value));
                }
            }
            let mut chunk = [0u8; 8192];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(Got::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Ok(Got::Closed);
                }
                Err(e) => return Err(format!("no reply: {e}")),
            }
        }
    }

    /// A control request's one reply.
    fn request(&mut self, value: &Value) -> Result<Value, String> {
        self.send_value(value)?;
        match self.recv()? {
            Got::Reply(v) => Ok(v),
            Got::Closed => Err(format!("closed after {value}")),
        }
    }

    /// A request's answer: a control request's one reply, a generation's last frame.
    fn answer(&mut self, value: &Value) -> Result<Value, String> {
        if value["type"] == "generate" {
            self.send_value(value)?;
            self.finish_generation()
        } else {
            self.request(value)
        }
    }

    /// Replies until the generation's last frame (`done` or `error`).
    fn finish_generation(&mut self) -> Result<Value, String> {
        loop {
            match self.recv()? {
                Got::Reply(v) if v["type"] == "progress" || v["type"] == "delta" => {}
                Got::Reply(v) => return Ok(v),
                Got::Closed => return Err("closed mid-generation".into()),
            }
        }
    }
}

/// An `error` reply of one of `kinds`, with a message for a person.
fn expect_error(got: &Value, kinds: &[&str], case: &str) -> Result<(), String> {
    let kind = got["kind"].as_str().unwrap_or("");
    if got["type"] != "error" || !kinds.contains(&kind) {
        return Err(format!("{case}: expected an error of {kinds:?}, got {got}"));
    }
    let message = got["message"].as_str().unwrap_or("");
    if message.is_empty() || message.contains('\n') || message.contains("Semantic(") {
        return Err(format!("{case}: the message is not a sentence: {message:?}"));
    }
    Ok(())
}

/// The connection still serves: a status request is answered.
fn still_open(conn: &mut Conn, case: &str) -> Result<(), String> {
    let got = conn.request(&json!({"type": "status"}))?;
    if got["type"] != "status" {
        return Err(format!("{case}: after the error, status got {got}"));
    }
    Ok(())
}

/// An `error` of `bad_frame`, then the close.
fn expect_closing_error(conn: &mut Conn, case: &str) -> Result<(), String> {
    match conn.recv()? {
        Got::Reply(v) => expect_error(&v, &["bad_frame"], case)?,
        Got::Closed => return Err(format!("{case}: closed without the bad_frame error")),
    }
    match conn.recv()? {
        Got::Closed => Ok(()),
        Got::Reply(v) => Err(format!("{case}: the connection stayed open ({v})")),
    }
}

/// Valid requests, on `context` (a fork the case owns).
fn valid_requests(context: u64) -> Vec<Value> {
    vec![
        json!({"type": "status"}),
        json!({"type": "member_list"}),
        json!({"type": "context_counts", "context": context}),
        json!({"type": "context_edit", "context": context, "edits": [
            {"op": "append", "segment": {"id": "x", "role": "user", "text": "More.", "pinned": true}}]}),
        json!({"type": "context_create", "member": "main", "segments": [
            {"id": "a", "role": "system", "text": "Be brief."}]}),
        json!({"type": "generate", "context": context, "max_new_tokens": 3,
            "sampling": {"temperature": 0.8, "top_p": 0.9, "seed": 7}, "logprobs": 3}),
        json!({"type": "generate", "context": context, "max_new_tokens": 4,
            "constraint": {"kind": "one_of", "options": ["yes", "no"]}}),
        json!({"type": "generate", "context": context, "max_new_tokens": 8,
            "constraint": {"kind": "json", "schema": "{\"type\":\"integer\",\"maximum\":9}"}}),
    ]
}

fn fork(target: &Target, conn: &mut Conn) -> Result<u64, String> {
    let got = conn.request(&json!({"type": "context_fork", "context": target.base_context}))?;
    got["context"].as_u64().ok_or_else(|| format!("fork got {got}"))
}

fn drop_context(conn: &mut Conn, context: u64) -> Result<(), String> {
    let got = conn.request(&json!({"type": "context_drop", "context": context}))?;
    if got["type"] != "ok" {
        return Err(format!("drop got {got}"));
    }
    Ok(())
}

/// A value of another JSON type than `v` (never null: an optional field takes null as absent).
fn other_type(rng: &mut Rng, v: &Value) -> Value {
    let choices = [json!("text"), json!([1, 2]), json!({"k": 1}), json!(true), json!(12)];
    loop {
        let c = rng.pick(&choices).clone();
        let same = matches!(
            (&c, v),
            (Value::String(_), Value::String(_))
                | (Value::Array(_), Value::Array(_))
                | (Value::Object(_), Value::Object(_))
                | (Value::Bool(_), Value::Bool(_))
                | (Value::Number(_), Value::Number(_))
        );
        if !same {
            return c;
        }
    }
}

/// Every (map, key) path of `v` but `type` tags, for mutating one field.
fn fields(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == "type" || k == "op" || k == "kind" {
                    continue;
                }
                path.push(k.clone());
                out.push(path.clone());
                fields(child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                path.push(i.to_string());
                fields(child, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, k| match v {
        Value::Object(map) => map.get_mut(k),
        Value::Array(items) => k.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    })
}

/// Runs the case `seed` picks against `target`; `Err` names what the daemon did wrong.
pub fn run(target: &Target, seed: u64) -> Result<Outcome, String> {
    let mut rng = Rng::new(seed);
    let kind = *rng.pick(&KINDS);
    let frames =
        run_kind(target, kind, &mut rng).map_err(|e| format!("{kind:?} (seed {seed}): {e}"))?;
    // Whatever happened, the next client is served at once.
    let after = Conn::ready(target, Duration::from_secs(1))
        .map_err(|e| format!("{kind:?} (seed {seed}): the next client: {e}"))?;
    Ok(Outcome { kind, frames: frames + after.frames })
}

fn run_kind(target: &Target, kind: Kind, rng: &mut Rng) -> Result<u32, String> {
    let mut conn = Conn::ready(target, Duration::from_secs(5))?;
    match kind {
        Kind::Garbage => {
            let len = 1 + rng.below(64);
            let mut payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            // Not the start of a message in either format: neither `{` nor a CBOR map.
            if payload[0] == b'{' || (0xa0..=0xbf).contains(&payload[0]) {
                payload[0] = 0x01;
            }
            let mut frame = (len as u32).to_be_bytes().to_vec();
            frame.extend(payload);
            conn.send_raw(&frame)?;
            let Got::Reply(got) = conn.recv()? else { return Err("closed".into()) };
            expect_error(&got, &["bad_request", "bad_frame"], "garbage")?;
            still_open(&mut conn, "garbage")?;
        }
        Kind::Oversized => {
            let len = 16_777_217 + (rng.next() % (u64::from(u32::MAX) - 16_777_217)) as u32;
            conn.send_raw(&len.to_be_bytes())?;
            expect_closing_error(&mut conn, "oversized")?;
        }
        Kind::Truncated => {
            let frame = conn.encode(&json!({"type": "status"}), conn.json);
            let cut = 5 + rng.below(frame.len() - 5);
            conn.send_raw(&frame[..cut])?;
            conn.stream.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
            expect_closing_error(&mut conn, "truncated")?;
        }
        Kind::WrongFormat => {
            let value = rng.pick(&valid_requests(target.base_context)).clone();
            let frame = conn.encode(&value, !conn.json);
            conn.send_raw(&frame)?;
            let Got::Reply(got) = conn.recv()? else { return Err("closed".into()) };
            expect_error(&got, &["bad_frame"], "wrong format")?;
            still_open(&mut conn, "wrong format")?;
        }
        Kind::WrongType | Kind::UnknownKey => {
            let mut value = rng.pick(&valid_requests(target.base_context)).clone();
            let mut paths = Vec::new();
            fields(&value, &mut Vec::new(), &mut paths);
            if kind == Kind::WrongType && !paths.is_empty() {
                let path = rng.pick(&paths).clone();
                if let Some(slot) = at(&mut value, &path) {
                    *slot = other_type(rng, slot);
                }
            } else {
                // A key added to the request or to one of its maps.
                let maps: Vec<_> = std::iter::once(Vec::new())
                    .chain(paths)
                    .filter(|p| {
                        let mut probe = value.clone();
                        at(&mut probe, p).is_some_and(|v| v.is_object())
                    })
                    .collect();
                let path = rng.pick(&maps).clone();
                if let Some(Value::Object(map)) = at(&mut value, &path) {
                    map.insert(format!("zz_{}", rng.below(1000)), json!(1));
                }
            }
            let got = conn.request(&value)?;
            expect_error(&got, &["bad_request"], &format!("{kind:?} {value}"))?;
            still_open(&mut conn, "mutated")?;
        }
        Kind::HugeNumber => {
            let context = fork(target, &mut conn)?;
            let g = |extra: Value| {
                let mut v = json!({"type": "generate", "context": context, "max_new_tokens": 2});
                if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
                    m.extend(e);
                }
                v
            };
            let cases = [
                (json!({"type": "context_counts", "context": u64::MAX}), "unknown_context"),
                (g(json!({"max_new_tokens": 1u64 << 40})), "bad_request"),
                (g(json!({"max_new_tokens": -1})), "bad_request"),
                (g(json!({"logprobs": u32::MAX})), "bad_request"),
                (g(json!({"logprobs": -3})), "bad_request"),
                (g(json!({"sampling": {"temperature": -1e30}})), "bad_request"),
                (g(json!({"sampling": {"temperature": 0.5, "top_p": 1e30}})), "bad_request"),
                (g(json!({"sampling": {"temperature": 1e30, "seed": u64::MAX}})), "done"),
                (g(json!({"context": u64::MAX})), "unknown_context"),
            ];
            let (value, want) = rng.pick(&cases).clone();
            let got = conn.answer(&value)?;
            if want == "done" {
                if got["type"] != "done" {
                    return Err(format!("{value}: expected done, got {got}"));
                }
            } else {
                expect_error(&got, &[want], &value.to_string())?;
            }
            drop_context(&mut conn, context)?;
        }
        Kind::RandomRequest => {
            let context = fork(target, &mut conn)?;
            let value = rng.pick(&valid_requests(context)).clone();
            let got = conn.answer(&value)?;
            let expected = match value["type"].as_str() {
                Some("status") => "status",
                Some("member_list") => "members",
                Some("generate") => "done",
                _ => "context",
            };
            if got["type"] != expected {
                return Err(format!("{value}: expected {expected}, got {got}"));
            }
            if value["type"] == "context_create"
                && let Some(id) = got["context"].as_u64()
            {
                drop_context(&mut conn, id)?;
            }
            drop_context(&mut conn, context)?;
        }
        Kind::LeaveMidFrame => {
            let value = rng.pick(&valid_requests(target.base_context)).clone();
            let frame = conn.encode(&value, conn.json);
            let cut = 1 + rng.below(frame.len() - 1);
            conn.send_raw(&frame[..cut])?;
        }
        Kind::LeaveMidGeneration => {
            let context = fork(target, &mut conn)?;
            let mut dropper = Conn::ready(target, Duration::from_secs(5))?;
            conn.send_value(
                &json!({"type": "generate", "context": context, "max_new_tokens": 40}),
            )?;
            let _ = conn.recv()?;
            let frames = conn.frames + dropper.frames;
            drop(conn);
            // The context outlives the connection that generated on it.
            drop_context(&mut dropper, context)?;
            return Ok(frames + 1);
        }
    }
    Ok(conn.frames)
}

/// The resident set's peak of a process, in KiB (`VmHWM`).
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Makes the base context a case forks from.
pub fn base_context(socket: &Path, json: bool) -> Result<u64, String> {
    let target = Target { socket: socket.to_path_buf(), json, base_context: 0 };
    let mut conn = Conn::ready(&target, Duration::from_secs(5))?;
    let got = conn.request(&json!({"type": "context_create", "member": "main", "segments": [
        {"id": "s", "role": "system", "text": "You answer in one word."},
        {"id": "u", "role": "user", "text": "Is water wet?"}]}))?;
    got["context"].as_u64().ok_or_else(|| format!("context_create got {got}"))
}
