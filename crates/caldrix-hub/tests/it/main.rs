//! The resolver against a hub served on loopback: the same HTTP exchanges as the real hub
//! (repository listing, ranged downloads with etag and commit headers), so the download, cache,
//! offline and checksum paths all run for real.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod hub;
mod mock;
