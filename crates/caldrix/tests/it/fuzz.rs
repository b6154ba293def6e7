//! The fuzz cases (`fuzz_cases.rs`) as a property test against one real daemon, bounded for
//! CI (48 cases, `PROPTEST_CASES` for more); `scripts/fuzz-pool` is the long run.

use std::sync::OnceLock;

use caldrix_proto::FrameFormat;
use proptest::prelude::*;

use crate::fuzz_cases::{self, Target};
use crate::pool::Daemon;

/// One daemon for every case (CBOR frames; the long run does JSON too), with room for the
/// connections a case leaves behind while the daemon notices they closed.
fn target() -> &'static (Daemon, Target) {
    static TARGET: OnceLock<(Daemon, Target)> = OnceLock::new();
    TARGET.get_or_init(|| {
        let daemon = Daemon::shared("fuzz", FrameFormat::Cbor, &["--ctx", "512"], 16);
        let base_context = fuzz_cases::base_context(&daemon.socket, false).unwrap();
        let target = Target { socket: daemon.socket.clone(), json: false, base_context };
        (daemon, target)
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        max_shrink_iters: 0,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every case gets its documented reply (or close), and a new client is served at once.
    #[test]
    fn every_malformed_or_random_request_gets_its_documented_reply(seed in any::<u64>()) {
        let _serial = crate::serial();
        let (daemon, target) = target();
        let outcome = fuzz_cases::run(target, seed);
        prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
        let outcome = outcome.unwrap();
        // The case's hello and the next client's, at least.
        prop_assert!(outcome.frames >= 2, "{:?}", outcome.kind);
        // Alive, and not growing without bound (SmolLM2 and a 64 MiB store: about 0.3 GiB).
        let rss = fuzz_cases::peak_rss_kib(daemon.child.id());
        prop_assert!(rss.is_some_and(|kib| kib < 1536 << 10), "the daemon died or grew: {rss:?} KiB");
    }
}
