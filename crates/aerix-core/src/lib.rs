//! The agent runtime: routing, the root agent, the turn loop, the agent's own tools.
//!
//! **Resist adding here.** This crate decides what an agent does next and nothing else: no
//! terminal, no command line, no settings files, no session files (it emits `Event`s to a
//! `Sink`), no process spawning beyond what a tool does. A feature that can live beside it
//! (a tool, a format, a screen) goes in its own crate.

mod agent;
mod calls;
mod compact;
mod context;
mod definitions;
mod delegate;
mod gates;
mod generation;
mod hooks;
mod prompts;
mod repeats;
mod request;
mod route;
pub mod schemas;
mod skills;
pub mod turn;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aerix_config::Settings;
use aerix_session::Event;
use aerix_tools::Cancel;
use caldrix_client::{Client, ClientError};

pub use agent::{Agent, AgentEnd, AgentSpec};
pub use context::{Context, Label, Segment};
pub use definitions::{Definition, Definitions, NO_DEFINITIONS, NoDefinitions};
pub use gates::{ACCEPT_PLANS, AcceptPlans, AskGate, DENY_ASKS, DenyAsks, PlanDecision, PlanGate};
pub use hooks::{HookFire, HookReply, NO_HOOKS, NoHooks, RuntimeHooks};
pub use prompts::{EMBEDDED, Prompts, fill};
pub use request::{HOOK_CONTEXT, Request, RequestEnd, run_request, system_segment};
pub use route::{ROUTES, Route, route};
pub use skills::{NO_SKILLS, NoSkills, Skills};

/// Where an agent's events go (the session log, a screen, a test), and its spool.
pub trait Sink: Send {
    fn event(&mut self, event: Event);
    /// Writes a whole tool result once; its path, or `None` when it could not be written.
    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf>;
    /// A generation's progress as it happens (not logged: a screen's live figures). `agent`
    /// is the agent generating, `route` for routing's probe.
    fn live(&mut self, _agent: &str, _live: Live) {}
}

/// A generation's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Live {
    /// Sent to the pool.
    Generating,
    /// A piece of text arrived.
    Streamed,
    /// Its `done` came (or it failed, or was cancelled).
    Generated,
}

/// What every agent of a request shares.
pub struct Runtime<'a> {
    pub client: &'a mut Client,
    pub sink: &'a mut dyn Sink,
    pub settings: &'a Settings,
    pub prompts: &'a Prompts,
    pub cwd: &'a Path,
    /// Set when the user cancels: generations get a `cancel` frame, tools and agents stop.
    pub cancel: Cancel,
    /// The hook events the runtime fires (compaction, delegation); `NO_HOOKS` by default.
    pub hooks: &'a dyn RuntimeHooks,
    /// The agent definitions an `agent` call's `definition` names; `NO_DEFINITIONS` by default.
    pub definitions: &'a dyn Definitions,
    /// The skills a `skill` call loads; `NO_SKILLS` (and no `skill` tool) by default.
    pub skills: &'a dyn Skills,
    /// The pool's member aliases, for the `agent` call's `member` (empty: not offered).
    pub members: Vec<String>,
    /// The root's first plan write of the request; `ACCEPT_PLANS` by default.
    pub plan_gate: &'a dyn PlanGate,
    /// A `PreToolUse` hook's `ask`; `DENY_ASKS` by default.
    pub ask_gate: &'a dyn AskGate,
    /// Whether the root's first plan write of this request has been through the gate.
    pub(crate) plan_gated: bool,
    /// Where the request's time went.
    pub stats: Stats,
    /// Turn schemas by tool set and kind of final, before the context ids.
    schemas: HashMap<(Vec<String>, turn::Answer), serde_json::Value>,
    /// The last turn schema's text, for the next turn whose tools and ids are the same.
    last_schema: Option<(SchemaKey, String)>,
}

type SchemaKey = (Vec<String>, turn::Answer, schemas::ContextIds);

/// Time spent waiting on the pool, against the rest (the runtime's own overhead and the tools).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// When the first generation request was sent.
    pub first_generate: Option<Instant>,
    pub generations: u32,
    /// Wall time from sending a generation to its final frame, summed.
    pub generating: Duration,
    /// Agent turns taken.
    pub turns: u32,
}

impl<'a> Runtime<'a> {
    pub fn new(
        client: &'a mut Client,
        sink: &'a mut dyn Sink,
        settings: &'a Settings,
        prompts: &'a Prompts,
        cwd: &'a Path,
        cancel: Cancel,
    ) -> Runtime<'a> {
        Runtime {
            client,
            sink,
            settings,
            prompts,
            cwd,
            cancel,
            hooks: &NO_HOOKS,
            definitions: &NO_DEFINITIONS,
            skills: &NO_SKILLS,
            members: Vec::new(),
            plan_gate: &ACCEPT_PLANS,
            ask_gate: &DENY_ASKS,
            plan_gated: false,
            stats: Stats::default(),
            schemas: HashMap::new(),
            last_schema: None,
        }
    }

    /// The same runtime, firing its events through `hooks`.
    pub fn with_hooks(self, hooks: &'a dyn RuntimeHooks) -> Runtime<'a> {
        Runtime { hooks, ..self }
    }

    /// The same runtime, finding agent definitions in `definitions`.
    pub fn with_definitions(self, definitions: &'a dyn Definitions) -> Runtime<'a> {
        Runtime { definitions, ..self }
    }

    /// The same runtime, loading skills from `skills`.
    pub fn with_skills(self, skills: &'a dyn Skills) -> Runtime<'a> {
        Runtime { skills, ..self }
    }

    /// The same runtime, asking `plan` and `ask` of the user.
    pub fn with_gates(self, plan_gate: &'a dyn PlanGate, ask_gate: &'a dyn AskGate) -> Runtime<'a> {
        Runtime { plan_gate, ask_gate, ..self }
    }

    /// A generation of `agent`, timed into `stats`, its progress to the sink; the cancel flag
    /// ends it.
    pub(crate) async fn generate(
        &mut self,
        agent: &str,
        generate: caldrix_proto::Generate,
    ) -> Result<caldrix_proto::Done, CoreError> {
        let start = Instant::now();
        self.stats.first_generate.get_or_insert(start);
        self.sink.live(agent, Live::Generating);
        let sink = &mut *self.sink;
        let done = generation::run(self.client, generate, &self.cancel, &mut || {
            sink.live(agent, Live::Streamed)
        })
        .await;
        self.sink.live(agent, Live::Generated);
        self.stats.generations += 1;
        self.stats.generating += start.elapsed();
        done
    }

    /// The turn schema's text for a tool set, a kind of final and the context's ids: an
    /// `agent` call may name only the definitions and members there are, a `context` call only
    /// the segments there are. The schema before the ids is built once per tool set and final;
    /// the ids change with nearly every turn (its own segment, its results), so the text is
    /// rebuilt then, and reused while they stay the same.
    pub(crate) fn schema_for(
        &mut self,
        tools: &[String],
        answer: turn::Answer,
        ids: schemas::ContextIds,
    ) -> String {
        let context = tools.iter().any(|t| t == "context");
        let key = (tools.to_vec(), answer, if context { ids } else { Default::default() });
        if let Some((last, text)) = &self.last_schema
            && *last == key
        {
            return text.clone();
        }
        let (definitions, members, skills) = (self.definitions, &self.members, self.skills);
        let mut schema = self
            .schemas
            .entry((tools.to_vec(), answer))
            .or_insert_with(|| {
                let mut schema = turn::schema_for(tools, answer);
                schemas::restrict_agent_call(&mut schema, &definitions.names(), members);
                schemas::restrict_skill_call(&mut schema, &skills.names());
                schema
            })
            .clone();
        if context {
            schemas::restrict_context_call(&mut schema, &key.2);
        }
        let text = schema.to_string();
        self.last_schema = Some((key, text.clone()));
        text
    }

    /// The same runtime, knowing the pool's members (an `agent` call's `member` names one).
    pub fn with_members(self, members: Vec<String>) -> Runtime<'a> {
        Runtime { members, ..self }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("the pool: {0}")]
    Pool(ClientError),
    /// The pool's end of the connection went away (the daemon died or was killed).
    #[error("pool gone: {0}")]
    PoolGone(ClientError),
    /// A named failure of the agent.
    #[error("{0}")]
    Failed(String),
    /// Ended by a bound.
    #[error("{0}")]
    Killed(String),
    #[error("cancelled")]
    Cancelled,
}

impl From<ClientError> for CoreError {
    fn from(e: ClientError) -> CoreError {
        if pool_gone(&e) { CoreError::PoolGone(e) } else { CoreError::Pool(e) }
    }
}

/// Whether `e` says the pool's end of the connection is gone, rather than a refusal.
pub fn pool_gone(e: &ClientError) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    match e {
        ClientError::Closed => true,
        ClientError::Io(io) => {
            matches!(io.kind(), BrokenPipe | ConnectionReset | ConnectionAborted | UnexpectedEof)
        }
        _ => false,
    }
}
