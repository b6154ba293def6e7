//! Property tests of the frame decoder: whatever the bytes, an error or a message, never a
//! panic; and every encodable request survives a round trip. Bounded (proptest's default 256
//! cases per property, more with PROPTEST_CASES) so CI runs it every time.

use caldrix_proto::*;
use proptest::prelude::*;

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(Some((payload, _))) = split_frame(&bytes) {
            let _ = decode::<Request>(payload, FrameFormat::Cbor);
            let _ = decode::<Request>(payload, FrameFormat::Json);
        }
        let _ = decode::<Request>(&bytes, FrameFormat::Cbor);
        let _ = decode::<Request>(&bytes, FrameFormat::Json);
        let _ = decode::<Reply>(&bytes, FrameFormat::Cbor);
    }

    #[test]
    fn mutated_frames_never_panic(index in 0usize..64, byte in any::<u8>(), cut in 0usize..80) {
        let request = Request::ContextCreate {
            member: "main".into(),
            segments: vec![Segment { id: "s".into(), role: Role::User, text: "héllo".into(), pinned: false }],
            tools: vec![],
        };
        for format in [FrameFormat::Cbor, FrameFormat::Json] {
            let mut frame = encode(&request, format).unwrap();
            let i = index % frame.len();
            frame[i] = byte;
            frame.truncate(cut.min(frame.len()));
            if let Ok(Some((payload, _))) = split_frame(&frame) {
                let _ = decode::<Request>(payload, format);
            }
        }
    }

    #[test]
    fn segments_round_trip(id in ".{0,20}", text in ".{0,200}", pinned in any::<bool>(), seed in any::<u64>()) {
        let request = Request::ContextEdit {
            context: seed,
            edits: vec![Edit::Append { segment: Segment { id, role: Role::Assistant, text, pinned } }],
        };
        for format in [FrameFormat::Cbor, FrameFormat::Json] {
            let frame = encode(&request, format).unwrap();
            let (payload, _) = split_frame(&frame).unwrap().unwrap();
            prop_assert_eq!(decode::<Request>(payload, format).unwrap(), request.clone());
        }
    }
}
