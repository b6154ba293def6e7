//! The wire format: round trips in both formats, the exact JSON shape documented in
//! docs/protocol.md, and bad bytes turned into errors, never panics.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a failed unwrap is a failed test")]

mod fuzz;

use caldrix_proto::*;

fn roundtrip(request: Request) {
    for format in [FrameFormat::Cbor, FrameFormat::Json] {
        let frame = encode(&request, format).unwrap();
        let (payload, used) = split_frame(&frame).unwrap().unwrap();
        assert_eq!(used, frame.len());
        let back: Request = decode(payload, format).unwrap();
        assert_eq!(back, request, "{format:?}");
    }
}

fn sample_requests() -> Vec<Request> {
    let segment = Segment {
        id: "sys".into(),
        role: Role::System,
        text: "You are terse.".into(),
        pinned: true,
    };
    vec![
        Request::Hello { version: PROTOCOL_VERSION, client: "test/1".into() },
        Request::MemberLoad {
            alias: "main".into(),
            model: "/m.gguf".into(),
            flags: ServingFlags { ctx: Some(4096), ..Default::default() },
        },
        Request::MemberLoad {
            alias: "batched".into(),
            model: "/m.gguf".into(),
            flags: ServingFlags {
                max_batch: Some(4),
                fit_max_batch: Some(true),
                fast_forward: Some(false),
                draft: Some(true),
                ..Default::default()
            },
        },
        Request::MemberList {},
        Request::ContextCreate {
            member: "main".into(),
            segments: vec![segment.clone()],
            tools: vec![],
        },
        Request::ContextEdit {
            context: 7,
            edits: vec![
                Edit::Append { segment },
                Edit::Replace { id: "sys".into(), text: "x".into(), pinned: None },
                Edit::Remove { id: "u1".into() },
            ],
        },
        Request::Generate(Generate {
            context: 7,
            constraint: Constraint::OneOf { options: vec!["a".into(), "b".into()] },
            max_new_tokens: 8,
            sampling: Some(Sampling { temperature: 0.5, top_p: 0.9, seed: 3 }),
            logprobs: Some(2),
            append_as: Some("a1".into()),
        }),
        Request::Cancel {},
        Request::Stop {},
    ]
}

#[test]
fn requests_round_trip_in_both_formats() {
    for request in sample_requests() {
        roundtrip(request);
    }
}

#[test]
fn the_json_shape_is_the_documented_one() {
    let frame = encode(&Request::ContextCounts { context: 3 }, FrameFormat::Json).unwrap();
    assert_eq!(&frame[..4], &[0, 0, 0, 37]);
    assert_eq!(&frame[4..], br#"{"type":"context_counts","context":3}"#);
    let generate: Request = decode(
        br#"{"type":"generate","context":1,"max_new_tokens":16,"constraint":{"kind":"json","schema":"{\"type\":\"object\"}"}}"#,
        FrameFormat::Json,
    )
    .unwrap();
    let Request::Generate(g) = generate else { panic!("{generate:?}") };
    assert_eq!(g.constraint, Constraint::Json { schema: r#"{"type":"object"}"#.into() });
    assert_eq!(g.sampling, None);
    let reply = encode(
        &Reply::Error { kind: ErrorKind::UnknownContext, message: "no context 9".into() },
        FrameFormat::Json,
    )
    .unwrap();
    assert_eq!(
        &reply[4..],
        br#"{"type":"error","kind":"unknown_context","message":"no context 9"}"#
    );
    // Serving flags left unset are left out, and an old client's flags still decode.
    let load = Request::MemberLoad {
        alias: "m".into(),
        model: "/m.gguf".into(),
        flags: ServingFlags { max_batch: Some(4), draft: Some(false), ..Default::default() },
    };
    assert_eq!(
        &encode(&load, FrameFormat::Json).unwrap()[4..],
        br#"{"type":"member_load","alias":"m","model":"/m.gguf","flags":{"max_batch":4,"draft":false}}"#
    );
    let old: Request = decode(
        br#"{"type":"member_load","alias":"m","model":"/m.gguf","flags":{"ctx":512}}"#,
        FrameFormat::Json,
    )
    .unwrap();
    let Request::MemberLoad { flags, .. } = old else { panic!("{old:?}") };
    assert_eq!((flags.max_batch, flags.fast_forward, flags.draft), (None, None, None));
}

#[test]
fn member_info_carries_lane_and_threads_and_an_older_pool_still_parses() {
    let old = br#"{"type":"members","members":[{"alias":"main","model":"m.gguf","architecture":"llama","context_window":4096,"footprint_bytes":1,"queue_depth":0}]}"#;
    let Reply::Members { members } = decode(old, FrameFormat::Json).unwrap() else { panic!() };
    assert_eq!((members[0].lane, members[0].threads), (None, None));
    let mut info = members[0].clone();
    info.lane = Some(Lane::Gpu);
    info.threads = Some(6);
    let frame = encode(&Reply::Members { members: vec![info.clone()] }, FrameFormat::Json).unwrap();
    let text = String::from_utf8_lossy(&frame[4..]).into_owned();
    assert!(text.contains(r#""lane":"gpu","threads":6"#), "{text}");
    info.threads = None;
    let frame = encode(&Reply::Members { members: vec![info] }, FrameFormat::Json).unwrap();
    assert!(!String::from_utf8_lossy(&frame[4..]).contains("threads"), "none is left out");
}

#[test]
fn bad_payloads_are_named_errors() {
    let json = FrameFormat::Json;
    let err = decode::<Request>(br#"{"type":"make_coffee"}"#, json).unwrap_err();
    assert!(matches!(err, FrameError::Malformed { .. }), "{err}");
    assert!(err.to_string().contains("make_coffee"), "{err}");
    let err = decode::<Request>(br#"{"type":"status","extra":1}"#, json).unwrap_err();
    assert!(matches!(err, FrameError::Malformed { .. }), "{err}");
    let err = decode::<Request>(b"\xff\x00garbage", json).unwrap_err();
    assert!(matches!(err, FrameError::Malformed { .. }), "{err}");
    let cbor = encode(&Request::Status {}, FrameFormat::Cbor).unwrap();
    let err = decode::<Request>(&cbor[4..], json).unwrap_err();
    assert!(matches!(err, FrameError::WrongFormat { expected: "json", got: "cbor" }), "{err}");
    let err = decode::<Request>(br#"{"type":"status"}"#, FrameFormat::Cbor).unwrap_err();
    assert!(matches!(err, FrameError::WrongFormat { expected: "cbor", got: "json" }), "{err}");
}

#[test]
fn frames_split_only_when_whole() {
    let frame = encode(&Request::Status {}, FrameFormat::Cbor).unwrap();
    for cut in 0..frame.len() {
        assert!(split_frame(&frame[..cut]).unwrap().is_none(), "{cut} bytes");
    }
    let mut two = frame.clone();
    two.extend(&frame);
    let (_, used) = split_frame(&two).unwrap().unwrap();
    assert_eq!(used, frame.len());
    let huge = (MAX_FRAME_BYTES + 1).to_be_bytes();
    let err = split_frame(&huge).unwrap_err();
    assert!(matches!(err, FrameError::TooLarge { len } if len == MAX_FRAME_BYTES + 1), "{err}");
}

/// Regression: a `none` constraint ignored keys beside its tag (serde's unit-variant rule).
#[test]
fn unknown_keys_are_refused_inside_a_none_constraint_too() {
    let json = FrameFormat::Json;
    let ok = br#"{"type":"generate","context":1,"max_new_tokens":4,"constraint":{"kind":"none"}}"#;
    let Request::Generate(g) = decode::<Request>(ok, json).unwrap() else { panic!() };
    assert_eq!(g.constraint, Constraint::None);
    let bad = br#"{"type":"generate","context":1,"max_new_tokens":4,"constraint":{"kind":"none","schema":"{}"}}"#;
    let err = decode::<Request>(bad, json).unwrap_err();
    assert!(err.to_string().contains("unknown field `schema`"), "{err}");
    // And it still encodes as the documented shape.
    let frame = encode(&Constraint::None, json).unwrap();
    assert_eq!(&frame[4..], br#"{"kind":"none"}"#);
}

/// An unknown kind is quoted whatever its length, in CBOR as in JSON (a CBOR name past
/// ciborium's 4 KiB scratch buffer was a decoder message: "expected str or bytes").
#[test]
fn an_unknown_kind_past_4_kib_is_quoted_as_a_short_one_is() {
    for len in [10, 4096, 4097, 100_000] {
        let kind = format!("coffee{}", "x".repeat(len));
        let value = ciborium::Value::Map(vec![(
            ciborium::Value::Text("type".into()),
            ciborium::Value::Text(kind.clone()),
        )]);
        let err = decode::<Request>(&cbor(&value), FrameFormat::Cbor).unwrap_err().to_string();
        assert!(err.contains(&format!("unknown variant `{kind}`")), "{len}: {}", head(&err));
        let json = serde_json::to_vec(&serde_json::json!({ "type": kind })).unwrap();
        let err = decode::<Request>(&json, FrameFormat::Json).unwrap_err().to_string();
        assert!(err.contains(&format!("unknown variant `{kind}`")), "{len}: {}", head(&err));
        // A long unknown key is named too.
        let value = ciborium::Value::Map(vec![
            (ciborium::Value::Text("type".into()), ciborium::Value::Text("status".into())),
            (ciborium::Value::Text(kind.clone()), ciborium::Value::Integer(1.into())),
        ]);
        let err = decode::<Request>(&cbor(&value), FrameFormat::Cbor).unwrap_err().to_string();
        assert!(err.contains(&format!("unknown field `{kind}`")), "{len}: {}", head(&err));
    }
}

fn head(text: &str) -> String {
    text.chars().take(200).collect()
}

/// Every decode error is a sentence for a person: no Rust debug text from the CBOR library.
#[test]
fn cbor_errors_read_as_sentences() {
    let frame = encode(&Request::Status {}, FrameFormat::Cbor).unwrap();
    let truncated = &frame[4..frame.len() - 2];
    let cases: [&[u8]; 3] = [truncated, b"\xa1\x64type\x64nope", b"\xa1\xff"];
    for payload in cases {
        let err = decode::<Request>(payload, FrameFormat::Cbor).unwrap_err().to_string();
        for debug in ["Semantic(", "Io(", "Syntax(", "Error {", "kind:"] {
            assert!(!err.contains(debug), "{err}");
        }
    }
    let err = decode::<Request>(truncated, FrameFormat::Cbor).unwrap_err().to_string();
    assert!(err.contains("ends in the middle of a value"), "{err}");
}

fn cbor(value: &ciborium::Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).unwrap();
    out
}

fn text(s: &str) -> ciborium::Value {
    ciborium::Value::Text(s.into())
}

/// A payload is exactly one message of the protocol's shape: decoders would take an array for
/// a struct's fields in order, a CBOR byte string for text, and stop before trailing bytes.
#[test]
fn only_one_message_of_the_documented_shape_decodes() {
    use ciborium::Value as V;
    let (json, cbor_format) = (FrameFormat::Json, FrameFormat::Cbor);
    let refused = |payload: &[u8], format: FrameFormat, named: &str| {
        let err = decode::<Request>(payload, format).unwrap_err();
        assert!(matches!(err, FrameError::Malformed { .. }), "{err}");
        assert!(err.to_string().contains(named), "{format:?}: {err}");
    };
    // An array for a message, a segment, a sampling map, a segment inside an edit.
    let message = V::Array(vec![text("status")]);
    refused(&cbor(&message), cbor_format, "the message is not a map");
    refused(br#"["status"]"#, json, "the message is not a map");
    refused(
        br#"{"type":"context_create","member":"m","segments":[["s","user","hi",false]]}"#,
        json,
        "a list holds an array",
    );
    refused(
        br#"{"type":"generate","context":1,"max_new_tokens":2,"sampling":[0.5,0.9,1]}"#,
        json,
        "`sampling` is an array",
    );
    refused(
        br#"{"type":"context_edit","context":1,"edits":[{"op":"append","segment":["s","user","hi"]}]}"#,
        json,
        "`segment` is an array",
    );
    // CBOR's own: a byte string for text, a key that is not text, a tag, trailing bytes.
    let map = |entries: Vec<(V, V)>| cbor(&V::Map(entries));
    let bytes_type = map(vec![(text("type"), V::Bytes(b"status".to_vec()))]);
    refused(&bytes_type, cbor_format, "`type` is a byte string");
    let bytes_key = map(vec![(V::Bytes(b"type".to_vec()), text("status"))]);
    refused(&bytes_key, cbor_format, "a map key is not a text string");
    let tagged = map(vec![(text("type"), V::Tag(32, Box::new(text("status"))))]);
    refused(&tagged, cbor_format, "carries CBOR tag 32");
    let mut trailing = map(vec![(text("type"), text("status"))]);
    assert_eq!(decode::<Request>(&trailing, cbor_format).unwrap(), Request::Status {});
    trailing.push(0x00);
    refused(&trailing, cbor_format, "the message ends at byte 13 of the payload's 14");
    refused(b"{\"type\":\"status\"} x", json, "trailing characters");
}

/// Replies pass the shape check too (the client decodes them with the same function), and a
/// token's `top` is sent even when empty.
#[test]
fn replies_round_trip_and_top_is_always_sent() {
    let row =
        |top: Vec<TopLogprob>| TokenLogprob { token: 5, text: "hi".into(), logprob: -0.5, top };
    let done = Reply::Done(Done {
        text: "hi".into(),
        stop: StopReason::EndOfTurn,
        usage: Usage {
            prompt_tokens: 9,
            completion_tokens: 1,
            recomputed_from: Some(0),
            prefill_ms: 1.5,
            decode_ms: 2.0,
        },
        one_of: Some(OneOfScores { chosen: 0, logprobs: vec![-0.1, -3.0] }),
        tool_calls: vec![],
        logprobs: Some(vec![
            row(vec![]),
            row(vec![TopLogprob { token: 6, text: "yo".into(), logprob: -1.0 }]),
        ]),
        counts: Some(SegmentCounts {
            segments: vec![SegmentCount { id: "t1".into(), tokens: 2 }],
            total_tokens: 11,
        }),
    });
    let counts = Reply::Context {
        context: 3,
        segments: vec![SegmentCount { id: "s".into(), tokens: 4 }],
        total_tokens: 7,
    };
    for format in [FrameFormat::Cbor, FrameFormat::Json] {
        for reply in [&done, &counts, &Reply::Ok] {
            let frame = encode(reply, format).unwrap();
            assert_eq!(&decode::<Reply>(&frame[4..], format).unwrap(), reply, "{format:?}");
        }
    }
    let frame = encode(&done, FrameFormat::Json).unwrap();
    let text = String::from_utf8_lossy(&frame[4..]).into_owned();
    assert!(text.contains(r#""logprob":-0.5,"top":[]}"#), "{text}");
    // An older daemon left an empty `top` out: still read, as `[]`.
    let old = br#"{"token":5,"text":"hi","logprob":-0.5}"#;
    assert_eq!(serde_json::from_slice::<TokenLogprob>(old).unwrap(), row(vec![]));
    // An older daemon's `done` has no `counts`: read as none (the client then asks for them).
    let old = br#"{"text":"","stop":"end_of_turn","usage":{"prompt_tokens":1,"completion_tokens":0,"prefill_ms":0,"decode_ms":0}}"#;
    assert_eq!(serde_json::from_slice::<Done>(old).unwrap().counts, None);
}
