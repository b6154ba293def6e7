//! caldrix-engine through the real engine, on the real test models (`scripts/fetch-models`).
//!
//! The models are loaded once and shared; model work is serialised by `support::lock` because
//! the test machines have two cores and llama.cpp already uses both.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a failed unwrap is a failed test")]

mod errors;
mod generate;
#[cfg(feature = "vulkan")]
mod gpu;
mod replay;
mod running;
mod sequences;
mod snapshot;
mod support;
mod template;
mod tokens;
