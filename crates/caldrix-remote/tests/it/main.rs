//! The client against a scripted HTTP server on loopback (every failure it names) and against
//! the real `llama-server` serving SmolLM2.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod engine;
mod failures;
mod fake;
mod vllm;
