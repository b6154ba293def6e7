//! ai-memory end to end: the real binary, the real server over HTTP and stdio MCP (rmcp's
//! client), real git and real SQLite.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod auth;
mod browser;
mod crash;
mod handoffs;
mod hooks;
mod inputs;
mod links;
mod mcp;
mod meaning;
mod profile;
mod regression;
mod store;
mod support;
mod transfer;
