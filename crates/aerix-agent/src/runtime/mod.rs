//! The agent runtime: one agent's turn loop, its context, the dispatch of its calls, and the
//! seams the session fills (the model connection, compaction, delegation, hooks, the gates).
//!
//! **Resist adding here.** This module decides what an agent does next and nothing else: no
//! terminal, no command line, no settings files, no session files (it emits `Event`s to a
//! `Sink`), no process spawning beyond what a tool does. A feature that can live beside it
//! (a tool, a format, a screen, a policy over the context) goes in its own crate, behind a
//! trait here when the turn loop calls it.
//!
//! Files import one another in one direction only: `mod.rs` declares and re-exports;
//! `turn_loop` → `calls` → `agent` → `services` → `context` → `connection`, `error`, `sink`.

mod agent;
mod calls;
mod connection;
mod context;
mod error;
pub mod gate;
mod gates;
mod hooks;
mod repeats;
mod services;
mod sink;
mod turn_loop;

pub use aerix_turn::prompts::{EMBEDDED, Prompts, fill};
pub use agent::{Agent, AgentEnd, AgentSpec, Opened, Opening, offer_skill};
pub use connection::{Connect, Connection, Later, Pending, PoolSocket, cancelled};
pub use context::{Context, Label, Segment};
pub use error::{CoreError, pool_gone};
pub use gates::{
    ACCEPT_PLANS, AcceptPlans, Answering, AskAnswer, AskGate, DENY_ASKS, DenyAsks, PlanDecision,
    PlanGate,
};
pub use hooks::{HookFire, HookReply, NO_HOOKS, NoHooks, RuntimeHooks};
pub use services::{
    Caller, Compaction, Delegation, Held, NoCompaction, NoDelegation, Options, Ran, Runtime,
    Services, Stats,
};
pub use sink::{Live, Sink};
pub use turn_loop::{HARD_LIMIT_HITS, MIN_TURN_TOKENS, STOP_CONTINUES, run_agent};
