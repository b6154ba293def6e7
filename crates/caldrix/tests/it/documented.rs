//! What `docs/protocol.md` says of frames, the handshake and the request shapes, checked byte
//! by byte as a client written from the page alone would send them (the outside client's
//! cases of issue 32). Run in each frame format on the daemons of the bad-input tests
//! (`hardening::every_bad_request_...` for CBOR, `pool::bad_input_...` for JSON), so no model
//! is loaded for them.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use caldrix_proto::FrameFormat;
use serde_json::{Value, json};

/// A connection that speaks raw frames in one format.
struct Raw {
    stream: UnixStream,
    frames: FrameFormat,
    buf: Vec<u8>,
}

fn encode(value: &Value, frames: FrameFormat) -> Vec<u8> {
    let mut payload = Vec::new();
    match frames {
        FrameFormat::Json => payload = serde_json::to_vec(value).unwrap(),
        FrameFormat::Cbor => ciborium::into_writer(value, &mut payload).unwrap(),
    }
    payload
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

impl Raw {
    /// Connects and sends `payload` as the first frame; its reply. A refusal for too many
    /// connections (one just closed may hold its place for a moment) is tried again.
    fn first(socket: &Path, frames: FrameFormat, payload: &[u8]) -> (Raw, Value) {
        let started = Instant::now();
        loop {
            let stream = UnixStream::connect(socket).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let mut raw = Raw { stream, frames, buf: Vec::new() };
            // A refused connection may be closed before the frame is written.
            let _ = raw.stream.write_all(&frame(payload));
            let reply = raw.reply().expect("a reply to the first frame");
            if reply["kind"] == "too_many_connections" && started.elapsed().as_secs() < 60 {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            return (raw, reply);
        }
    }

    /// A connection past its handshake.
    fn ready(socket: &Path, frames: FrameFormat) -> Raw {
        let hello = json!({"type": "hello", "version": 2, "client": "outside"});
        let (raw, reply) = Raw::first(socket, frames, &encode(&hello, frames));
        assert_eq!(reply["type"], "hello", "{reply}");
        raw
    }

    fn send(&mut self, payload: &[u8]) {
        self.stream.write_all(&frame(payload)).unwrap();
    }

    fn send_value(&mut self, value: &Value) {
        let payload = encode(value, self.frames);
        self.send(&payload);
    }

    /// The next frame's payload, `None` once the daemon closed the connection.
    fn payload(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(len) = self.buf.get(..4) {
                let end = 4 + u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                if self.buf.len() >= end {
                    let payload = self.buf[4..end].to_vec();
                    self.buf.drain(..end);
                    return Some(payload);
                }
            }
            let mut chunk = [0u8; 8192];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("no reply: {e}"),
            }
        }
    }

    /// The next frame, read in the connection's format; `None` once closed.
    fn reply(&mut self) -> Option<Value> {
        let payload = self.payload()?;
        Some(match self.frames {
            FrameFormat::Json => serde_json::from_slice(&payload).unwrap(),
            FrameFormat::Cbor => ciborium::from_reader(payload.as_slice()).unwrap(),
        })
    }

    fn request(&mut self, value: &Value) -> Value {
        self.send_value(value);
        self.reply().unwrap_or_else(|| panic!("closed after {value}"))
    }

    /// A generation's last frame.
    fn finish(&mut self) -> Value {
        loop {
            let reply = self.reply().expect("closed mid-generation");
            if reply["type"] != "progress" && reply["type"] != "delta" {
                return reply;
            }
        }
    }

    fn closed(&mut self) -> bool {
        self.payload().is_none()
    }

    fn still_serves(&mut self) {
        let status = self.request(&json!({"type": "status"}));
        assert_eq!(status["type"], "status", "{status}");
    }
}

/// An `error` of `kind` whose message is one line of at most 1,000 bytes naming `named`.
#[track_caller]
fn assert_error(reply: &Value, kind: &str, named: &str) {
    assert_eq!(
        (reply["type"].as_str(), reply["kind"].as_str()),
        (Some("error"), Some(kind)),
        "{reply}"
    );
    let message = reply["message"].as_str().unwrap();
    assert!(!message.contains('\n') && message.len() <= 1000, "{message}");
    assert!(message.contains(named), "{message}");
}

fn contexts_on_main(raw: &mut Raw) -> u64 {
    let status = raw.request(&json!({"type": "status"}));
    let members = status["members"].as_array().unwrap();
    let main = members.iter().find(|m| m["info"]["alias"] == "main").unwrap();
    main["contexts"].as_u64().unwrap()
}

/// Everything the page says about frames and shapes, on a daemon serving `frames` whose
/// member `main` is SmolLM2 with the test daemons' 64 MiB context budget.
pub(crate) fn the_documented_rules_hold(socket: &Path, frames: FrameFormat) {
    let other = if frames == FrameFormat::Cbor { FrameFormat::Json } else { FrameFormat::Cbor };
    let hello = json!({"type": "hello", "version": 2, "client": "outside"});

    // The handshake. Another request first: bad_request, then the close.
    let (mut raw, reply) = Raw::first(socket, frames, &encode(&json!({"type": "status"}), frames));
    assert_error(&reply, "bad_request", "the first request must be hello");
    assert!(raw.closed());
    // A first payload that does not decode: bad_request, then the close.
    let (mut raw, reply) = Raw::first(socket, frames, b"\x01\x02\x03");
    assert_error(&reply, "bad_request", frames.name());
    assert!(raw.closed());
    // A hello in the other format: bad_frame in the daemon's own format, naming both, then the
    // close; that is how a client finds the format it was not told.
    let (mut raw, reply) = Raw::first(socket, frames, &encode(&hello, other));
    assert_error(
        &reply,
        "bad_frame",
        &format!("speaks {} frames, but a {}", frames.name(), other.name()),
    );
    assert!(raw.closed());
    // Another version: `version`, then the close.
    let old = json!({"type": "hello", "version": 1, "client": "old"});
    let (mut raw, reply) = Raw::first(socket, frames, &encode(&old, frames));
    assert_error(&reply, "version", "not 1");
    assert!(raw.closed());

    let mut raw = Raw::ready(socket, frames);
    // A second hello, a cancel with nothing running: bad_request, and the connection serves on.
    assert_error(&raw.request(&hello), "bad_request", "hello was already exchanged");
    raw.still_serves();
    assert_error(&raw.request(&json!({"type": "cancel"})), "bad_request", "no generation");
    raw.still_serves();

    // A payload is one message, a map, with maps where the page has maps.
    for (value, named) in [
        (json!(["status"]), "the message is not a map"),
        (json!(["context_counts", 1]), "the message is not a map"),
        (
            json!({"type": "context_create", "member": "main", "segments": [["s", "user", "Hi."]]}),
            "a list holds an array",
        ),
        (
            json!({"type": "generate", "context": 1, "max_new_tokens": 2, "sampling": [0.5, 0.9, 1]}),
            "`sampling` is an array",
        ),
        (
            json!({"type": "member_load", "alias": "x", "model": "m", "flags": [512]}),
            "`flags` is an array",
        ),
    ] {
        assert_error(&raw.request(&value), "bad_request", named);
    }
    let mut trailing = encode(&json!({"type": "status"}), frames);
    trailing.extend_from_slice(if frames == FrameFormat::Cbor { b"\x00" } else { b" x" });
    raw.send(&trailing);
    let named = if frames == FrameFormat::Cbor { "ends at byte" } else { "trailing characters" };
    assert_error(&raw.reply().unwrap(), "bad_request", named);
    if frames == FrameFormat::Cbor {
        use ciborium::Value as V;
        let map = |entries: Vec<(V, V)>| {
            let mut out = Vec::new();
            ciborium::into_writer(&V::Map(entries), &mut out).unwrap();
            out
        };
        let bytes_type = map(vec![(V::Text("type".into()), V::Bytes(b"status".to_vec()))]);
        raw.send(&bytes_type);
        assert_error(&raw.reply().unwrap(), "bad_request", "`type` is a byte string");
        let bytes_key = map(vec![(V::Bytes(b"type".to_vec()), V::Text("status".into()))]);
        raw.send(&bytes_key);
        assert_error(&raw.reply().unwrap(), "bad_request", "a map key is not a text string");
    }
    raw.still_serves();

    // An unknown kind is quoted however long it is (past CBOR's 4 KiB scratch buffer too).
    let long_kind = format!("coffee{}", "x".repeat(5000));
    let reply = raw.request(&json!({"type": long_kind}));
    assert_error(&reply, "bad_request", "unknown variant `coffeexxx");
    raw.still_serves();

    // `status.version` is the daemon's version, a string (hello's is the protocol's number).
    let status = raw.request(&json!({"type": "status"}));
    let version = status["version"].as_str().unwrap_or_else(|| panic!("{status}"));
    assert!(version.split('.').count() == 3, "{version}");

    // Error messages: one line, at most 1,000 bytes with their escapes.
    let long = format!("coffee\n{}", "\u{1}".repeat(3000));
    let reply = raw.request(&json!({"type": long}));
    assert_error(&reply, "bad_request", "coffee\\n");
    assert!(reply["message"].as_str().unwrap().ends_with(" ..."), "{reply}");

    // Segment ids are unique in a context; a refused create makes no context.
    let before = contexts_on_main(&mut raw);
    let twice = json!({"type": "context_create", "member": "main", "segments": [
        {"id": "s", "role": "user", "text": "One."}, {"id": "s", "role": "user", "text": "Two."}]});
    assert_error(&raw.request(&twice), "bad_request", "segment `s` already exists");
    assert_eq!(contexts_on_main(&mut raw), before);
    let created = raw.request(&json!({"type": "context_create", "member": "main", "segments": [
        {"id": "u", "role": "user", "text": "Say hi."}]}));
    let context = created["context"].as_u64().expect("a context id is an unsigned integer");
    // A multi-edit request applies all or nothing.
    let edit = json!({"type": "context_edit", "context": context, "edits": [
        {"op": "append", "segment": {"id": "u2", "role": "user", "text": "More."}},
        {"op": "remove", "id": "nope"}]});
    assert_error(&raw.request(&edit), "unknown_segment", "no segment `nope`");
    let counts = raw.request(&json!({"type": "context_counts", "context": context}));
    assert_eq!(counts["segments"], created["segments"], "the failed edit changed nothing");

    // Types: ids and counts are unsigned integers; sampling's numbers take integers.
    let generate = |extra: Value| {
        let mut g = json!({"type": "generate", "context": context, "max_new_tokens": 2});
        g.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        g
    };
    for (extra, named) in [
        (json!({"max_new_tokens": 2.5}), "floating point `2.5`"),
        (json!({"max_new_tokens": 1u64 << 32}), "integer `4294967296`"),
        (json!({"context": context.to_string()}), "string"),
        (json!({"context": -1}), "integer `-1`"),
        (json!({"sampling": {"top_p": 0.9}}), "missing field `temperature`"),
    ] {
        assert_error(&raw.request(&generate(extra)), "bad_request", named);
    }
    raw.send_value(&generate(json!({"sampling": {"temperature": 1, "top_p": 1, "seed": 3}})));
    let done = raw.finish();
    assert_eq!(done["type"], "done", "{done}");

    // `logprobs: 0`: every row carries its own log-probability and `top: []`.
    raw.send_value(&generate(json!({"logprobs": 0})));
    let done = raw.finish();
    let rows = done["logprobs"].as_array().unwrap_or_else(|| panic!("{done}"));
    assert!(!rows.is_empty());
    for row in rows {
        assert_eq!(row["top"], json!([]), "{row}");
        assert!(row["logprob"].as_f64().unwrap() <= 0.0, "{row}");
    }
    raw.send_value(&generate(json!({"logprobs": 2})));
    let done = raw.finish();
    assert!(
        done["logprobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["top"].as_array().unwrap().len() == 2)
    );

    // A OneOf with `logprobs`: the options' scores, in option order, and no token rows.
    let options = json!({"kind": "one_of", "options": ["yes", "no", "maybe"]});
    raw.send_value(&generate(json!({"constraint": options, "logprobs": 3, "max_new_tokens": 4})));
    let done = raw.finish();
    assert_eq!(done["type"], "done", "{done}");
    assert!(done.get("logprobs").is_none(), "{done}");
    assert_eq!(done["stop"], "complete", "{done}");
    let scores = done["one_of"]["logprobs"].as_array().unwrap_or_else(|| panic!("{done}"));
    assert_eq!(scores.len(), 3, "{done}");
    assert!(scores.iter().all(|s| s.as_f64().unwrap() <= 0.0), "{done}");
    let chosen = done["one_of"]["chosen"].as_u64().unwrap() as usize;
    assert_eq!(done["text"], ["yes", "no", "maybe"][chosen], "{done}");

    // `footprint_bytes`: the model file's size plus one context budget (`--context-budget`).
    let members = raw.request(&json!({"type": "member_list"}));
    let main = members["members"].as_array().unwrap().iter().find(|m| m["alias"] == "main");
    let main = main.unwrap();
    let file = std::fs::metadata(main["model"].as_str().unwrap()).unwrap().len();
    assert_eq!(main["footprint_bytes"].as_u64().unwrap(), file + (64 << 20), "{main}");

    assert_eq!(raw.request(&json!({"type": "context_drop", "context": context}))["type"], "ok");
}
