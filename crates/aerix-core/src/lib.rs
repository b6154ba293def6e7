//! The agent runtime: one agent's turn loop, its context, the dispatch of its calls, and the
//! seams the binary fills (the model connection, compaction, delegation, hooks, gates,
//! permissions, definitions, skills).
//!
//! **Resist adding here.** This crate decides what an agent does next and nothing else: no
//! terminal, no command line, no settings files, no session files (it emits `Event`s to a
//! `Sink`), no process spawning beyond what a tool does. A feature that can live beside it
//! (a tool, a format, a screen, a policy over the context) goes in its own crate, behind a
//! trait here when the turn loop calls it.
//!
//! Files import one another in one direction only: `lib.rs` declares and re-exports;
//! `turn_loop` → `calls` → `agent` → `runtime` → `context` → `connection`, `error`, `sink`.

mod agent;
mod calls;
mod connection;
mod context;
mod error;
pub mod gate;
mod hooks;
mod repeats;
mod runtime;
mod sink;
mod turn_loop;

pub use aerix_seams::{
    ACCEPT_PLANS, AcceptPlans, Answering, AskAnswer, AskGate, DENY_ASKS, DenyAsks, PlanDecision,
    PlanGate,
};
pub use aerix_seams::{ALLOW_ALL, AllowAll, Asked, Held, Permission, Permissions};
pub use aerix_seams::{Definition, Definitions, NO_DEFINITIONS, NoDefinitions};
pub use aerix_seams::{ExternalTools, NO_EXTERNAL_TOOLS, NoExternalTools};
pub use aerix_seams::{NO_SKILLS, NoSkills, Skills, offer_skill};
pub use aerix_turn::prompts::{EMBEDDED, Prompts, fill};
pub use agent::{Agent, AgentEnd, AgentSpec, Opened, Opening};
pub use connection::{Connect, Connection, Later, Pending, PoolSocket, cancelled};
pub use context::{Context, Label, Segment};
pub use error::{CoreError, pool_gone};
pub use hooks::{HookFire, HookReply, NO_HOOKS, NoHooks, RuntimeHooks};
pub use runtime::{
    Caller, Compaction, Delegation, NoCompaction, NoDelegation, Options, Ran, Runtime, Services,
    Stats,
};
pub use sink::{Live, Sink};
pub use turn_loop::{HARD_LIMIT_HITS, MIN_TURN_TOKENS, STOP_CONTINUES, run_agent};
