//! The projection read back by a reader of Claude Code's transcript format, and the importer
//! on transcripts in Claude Code's format (`tests/fixtures/`).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a failed unwrap is a failed test")]

mod import;
mod projection;
mod reader;
