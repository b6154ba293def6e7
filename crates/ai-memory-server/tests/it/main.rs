//! The memory service in-process, on a real data directory (git and SQLite) with an injected
//! clock: the cross-project profile's harvest, converge, digest and multi-user rules.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod handoff;
mod llm;
mod profile;
mod regression;
mod support;
