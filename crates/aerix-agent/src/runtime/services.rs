//! What every agent of a request shares: the connection, the sink, the options, the hooks and
//! gates, and the two seams the session fills: each context's budget (`Compaction`) and the
//! pieces an `agent` call runs (`Delegation`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aerix_tools::{Cancel, Roots, Sandbox, ToolError};
use aerix_turn::prompts::Prompts;
use aerix_turn::schemas::{self, ContextIds};
use aerix_turn::{Answer, Call, SchemaCache};
use caldrix_proto::{Done, Generate};
use serde_json::Value;

use crate::runtime::connection::{Connection, Later};
use crate::runtime::context::{Context, Segment};
use crate::runtime::error::CoreError;
use crate::runtime::gates::{AcceptPlans, AskGate, DenyAsks, PlanGate};
use crate::runtime::hooks::{NoHooks, RuntimeHooks};
use crate::runtime::sink::{Live, Sink};
use aerix_config::AgentDefinitions;
pub use aerix_permissions::Held;
use aerix_permissions::Permissions;
use aerix_skills::Skills;

/// What the runtime reads of the settings (the session fills it from its settings files).
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// A turn asks for `min(max_new_tokens, W / 4)` tokens.
    pub max_new_tokens: u32,
    /// The repeat guard (`repeats.rs`).
    pub repeat_guard: bool,
    /// Under the `Json` constraint, the budget's last turn may only be a `final`.
    pub last_turn_final: bool,
    /// Bytes a tool's result may hold before it is cut and spooled, by tool name.
    pub tool_caps: BTreeMap<String, u64>,
    /// The cap of a tool `tool_caps` does not name.
    pub default_tool_cap: u64,
    /// The characters the system segment's skills listing may take.
    pub skills_chars: u32,
    /// The tools a planning root may call (the `edit` and `plan` routes).
    pub planner_tools: Vec<String>,
}

impl Options {
    /// The cap of a tool's results.
    pub fn tool_cap(&self, tool: &str) -> u64 {
        let mcp = || tool.starts_with("mcp__").then(|| self.tool_caps.get("mcp")).flatten();
        self.tool_caps.get(tool).or_else(mcp).copied().unwrap_or(self.default_tool_cap)
    }
}

/// Each context's budget (the spec's "Context management"): the pass before a turn, a turn's
/// results fitted to the room left, and the model's own `context` tool. It sees the context
/// (its segments and the pool's counts) and the member's window; `compact` implements it.
pub trait Compaction: Send + Sync {
    /// Before a turn (the hard limit comes after it, in the turn loop).
    fn before_turn<'a>(
        &'a self,
        context: &'a mut Context,
        window: u32,
        rt: &'a mut Runtime<'_>,
    ) -> Later<'a, Result<(), CoreError>>;

    /// A turn's results, appended in call order in one request.
    fn append_results<'a>(
        &'a self,
        context: &'a mut Context,
        window: u32,
        rt: &'a mut Runtime<'_>,
        results: Vec<Segment>,
    ) -> Later<'a, Result<(), CoreError>>;

    /// A `context` call.
    fn context_tool<'a>(
        &'a self,
        context: &'a mut Context,
        window: u32,
        rt: &'a mut Runtime<'_>,
        input: &'a Value,
    ) -> Later<'a, Result<String, ToolError>>;
}

/// No budget: results go in whole, the `context` tool refuses.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCompaction;

impl Compaction for NoCompaction {
    fn before_turn<'a>(
        &'a self,
        _: &'a mut Context,
        _: u32,
        _: &'a mut Runtime<'_>,
    ) -> Later<'a, Result<(), CoreError>> {
        Box::pin(async { Ok(()) })
    }

    fn append_results<'a>(
        &'a self,
        context: &'a mut Context,
        _: u32,
        rt: &'a mut Runtime<'_>,
        results: Vec<Segment>,
    ) -> Later<'a, Result<(), CoreError>> {
        Box::pin(context.append_all(rt.client, rt.sink, results))
    }

    fn context_tool<'a>(
        &'a self,
        _: &'a mut Context,
        _: u32,
        _: &'a mut Runtime<'_>,
        _: &'a Value,
    ) -> Later<'a, Result<String, ToolError>> {
        Box::pin(async { Err(ToolError::new("refused: this runtime manages no context")) })
    }
}

/// The calling agent, as the pieces of its `agent` calls see it.
#[derive(Clone, Debug)]
pub struct Caller {
    pub id: String,
    pub depth: u32,
    pub member: String,
    pub window: u32,
    pub json: bool,
    /// The definitions whose tool patterns hold the caller: its pieces are held to them too.
    pub held: Vec<Held>,
    /// The leading system and instruction segments: every piece's context starts with them, so
    /// the pool's prefix store resumes their rows.
    pub prefix: Vec<Segment>,
}

/// A turn's `agent` calls, run after its other calls; `delegate` implements it.
pub trait Delegation: Send + Sync {
    /// An agent at this depth or deeper gets no `agent` tool (the root is at 0).
    fn depth(&self) -> u32;

    /// Runs `calls`, one turn's `agent` calls of `caller`; each result by its call's id (a call
    /// missing from them did not run).
    fn run_all<'a, 'r: 'a>(
        &'a self,
        rt: &'a mut Runtime<'r>,
        caller: &'a Caller,
        calls: &'a [Call],
    ) -> Ran<'a>;
}

/// What a turn's `agent` calls come to: each result by its call's id.
pub type Ran<'a> = Later<'a, Vec<(String, Result<String, ToolError>)>>;

/// No delegation: no agent gets the `agent` tool.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoDelegation;

impl Delegation for NoDelegation {
    fn depth(&self) -> u32 {
        0
    }

    fn run_all<'a, 'r: 'a>(
        &'a self,
        _: &'a mut Runtime<'r>,
        _: &'a Caller,
        _: &'a [Call],
    ) -> Ran<'a> {
        Box::pin(async { Vec::new() })
    }
}

/// What a session's agents share and none owns: the options, the prompts and every seam the
/// session fills. One set per request, held by `Arc`: a piece's runtime holds its caller's.
#[derive(Clone)]
pub struct Services {
    pub options: Options,
    pub prompts: Arc<Prompts>,
    /// `bash`'s sandbox; `None` by default.
    pub sandbox: Option<Sandbox>,
    /// The hook events the runtime fires (compaction, delegation); `NoHooks` by default.
    pub hooks: Arc<dyn RuntimeHooks>,
    /// The agent definitions an `agent` call's `definition` names; none by default.
    pub definitions: Arc<AgentDefinitions>,
    /// The skills a `skill` call loads; none (and no `skill` tool) by default.
    pub skills: Arc<Skills>,
    /// MCP servers' tools, offered to the root and implementers; none by default.
    pub external: Arc<aerix_mcp::Servers>,
    /// The pool's member aliases, for the `agent` call's `member` (empty: not offered).
    pub members: Vec<String>,
    /// The repository's test commands (`verify.commands`, else detected): an `agent` call's
    /// `check` offers them, and a check that is one of them is run by the harness.
    pub checks: Vec<String>,
    /// The root's first plan write of the request (an agent at depth 0 only); `AcceptPlans`
    /// by default.
    pub plan_gate: Arc<dyn PlanGate>,
    /// A `PreToolUse` hook's `ask` and the permission rules' asking; `DenyAsks` by default.
    pub ask_gate: Arc<dyn AskGate>,
    /// The user's permission rules, after `PreToolUse`; `None` (every call allowed: tests) by
    /// default.
    pub permissions: Option<Arc<Permissions>>,
    /// Each context's budget; `NoCompaction` by default.
    pub compaction: Arc<dyn Compaction>,
    /// The pieces of `agent` calls; `NoDelegation` (no `agent` tool) by default.
    pub delegation: Arc<dyn Delegation>,
}

impl Services {
    /// `options` and `prompts`, every seam at its default.
    pub fn new(options: Options, prompts: Arc<Prompts>) -> Services {
        Services {
            options,
            prompts,
            sandbox: None,
            hooks: Arc::new(NoHooks),
            definitions: Arc::default(),
            skills: Arc::default(),
            external: Arc::new(aerix_mcp::Servers::none()),
            members: Vec::new(),
            checks: Vec::new(),
            plan_gate: Arc::new(AcceptPlans),
            ask_gate: Arc::new(DenyAsks),
            permissions: None,
            compaction: Arc::new(NoCompaction),
            delegation: Arc::new(NoDelegation),
        }
    }
}

/// One agent tree's runtime: a connection, a sink and a tree of its own, and the services it
/// shares.
pub struct Runtime<'a> {
    pub client: &'a mut dyn Connection,
    pub sink: &'a mut dyn Sink,
    pub services: Arc<Services>,
    pub cwd: &'a Path,
    /// Where the file tools may act: by default the working directory, and the sink's spool to
    /// read (`with_roots` sets the tree and the directories added).
    pub roots: Roots,
    /// Set when the user cancels: generations get a `cancel` frame, tools and agents stop.
    pub cancel: Cancel,
    /// Whether the root's first plan write of this request has been through the gate.
    pub(crate) plan_gated: bool,
    /// Where the request's time went.
    pub stats: Stats,
    /// The turn schemas built so far.
    schemas: SchemaCache,
}

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

impl Stats {
    /// Adds another runtime's figures (a piece's) to these.
    pub fn add(&mut self, other: &Stats) {
        self.generations += other.generations;
        self.generating += other.generating;
        self.turns += other.turns;
        if let Some(first) = other.first_generate {
            self.first_generate.get_or_insert(first);
        }
    }
}

/// `with_x(self, x) -> Runtime`: the same runtime with its services' fields set, one builder a
/// line (the services are copied first when another runtime shares them).
macro_rules! with {
    ($($(#[$doc:meta])* $name:ident($($field:ident: $ty:ty),+);)*) => {
        $($(#[$doc])* pub fn $name(mut self, $($field: $ty),+) -> Runtime<'a> {
            let services = Arc::make_mut(&mut self.services);
            $(services.$field = $field;)+
            self
        })*
    };
}

impl<'a> Runtime<'a> {
    pub fn new(
        client: &'a mut dyn Connection,
        sink: &'a mut dyn Sink,
        options: Options,
        prompts: Arc<Prompts>,
        cwd: &'a Path,
        cancel: Cancel,
    ) -> Runtime<'a> {
        let services = Arc::new(Services::new(options, prompts));
        Runtime::sharing(client, sink, services, cwd, cancel)
    }

    /// A runtime on `services` (a piece's: its caller's).
    pub fn sharing(
        client: &'a mut dyn Connection,
        sink: &'a mut dyn Sink,
        services: Arc<Services>,
        cwd: &'a Path,
        cancel: Cancel,
    ) -> Runtime<'a> {
        let roots = with_spool(Roots::new(cwd), &*sink);
        Runtime {
            client,
            sink,
            services,
            cwd,
            roots,
            cancel,
            plan_gated: false,
            stats: Stats::default(),
            schemas: SchemaCache::default(),
        }
    }

    /// The same runtime, its file tools confined to `roots` (and the sink's spool, read only).
    pub fn with_roots(self, roots: Roots) -> Runtime<'a> {
        let roots = with_spool(roots, &*self.sink);
        Runtime { roots, ..self }
    }

    with! {
        /// The same runtime, running `bash` in `sandbox`.
        with_sandbox(sandbox: Option<Sandbox>);
        /// The same runtime, firing its events through `hooks`.
        with_hooks(hooks: Arc<dyn RuntimeHooks>);
        /// The same runtime, finding agent definitions in `definitions`.
        with_definitions(definitions: Arc<AgentDefinitions>);
        /// The same runtime, loading skills from `skills`.
        with_skills(skills: Arc<Skills>);
        /// The same runtime, offering and calling `external`'s tools.
        with_external(external: Arc<aerix_mcp::Servers>);
        /// The same runtime, asking `plan` and `ask` of the user.
        with_gates(plan_gate: Arc<dyn PlanGate>, ask_gate: Arc<dyn AskGate>);
        /// The same runtime, checking calls against `permissions`.
        with_permissions(permissions: Option<Arc<Permissions>>);
        /// The same runtime, knowing the pool's members (an `agent` call's `member` names one).
        with_members(members: Vec<String>);
        /// The same runtime, knowing the repository's test commands.
        with_checks(checks: Vec<String>);
        /// The same runtime, keeping each context's budget with `compaction`.
        with_compaction(compaction: Arc<dyn Compaction>);
        /// The same runtime, running `agent` calls with `delegation`.
        with_delegation(delegation: Arc<dyn Delegation>);
    }

    /// `tools` for an agent at `depth`: without `agent` at the delegation's depth limit; with
    /// the external tools.
    pub fn tools_at(&self, tools: Vec<String>, depth: u32) -> Vec<String> {
        let limit = depth >= self.services.delegation.depth();
        let tools = tools.into_iter().filter(|t| !(limit && t == "agent"));
        tools.chain(self.services.external.names()).collect()
    }

    /// A generation of `agent`, timed into `stats`, its progress to the sink; the cancel flag
    /// ends it.
    pub async fn generate(&mut self, agent: &str, generate: Generate) -> Result<Done, CoreError> {
        let start = Instant::now();
        self.stats.first_generate.get_or_insert(start);
        self.sink.live(agent, Live::Generating);
        let sink = &mut *self.sink;
        let done = self
            .client
            .generate(generate, &self.cancel, &mut || sink.live(agent, Live::Streamed))
            .await;
        self.sink.live(agent, Live::Generated);
        self.stats.generations += 1;
        self.stats.generating += start.elapsed();
        done
    }

    /// The turn schema's text: an `agent` call may name only the definitions and members
    /// there are, a `skill` call only the skills, a `context` call only the segments.
    pub(crate) fn schema_for(
        &mut self,
        tools: &[String],
        answer: Answer,
        ids: ContextIds,
    ) -> String {
        let (definitions, members, skills) =
            (&self.services.definitions, &self.services.members, &self.services.skills);
        let (checks, external) = (&self.services.checks, &self.services.external);
        self.schemas.text(tools, answer, ids, &|tool| external.input_schema(tool), |schema| {
            let names: Vec<String> = definitions.iter().map(|d| d.name.clone()).collect();
            schemas::restrict_agent_call(schema, &names, members, checks);
            schemas::restrict_skill_call(schema, &skills.model_names());
        })
    }
}

/// `roots` and the sink's spool directory, read only.
fn with_spool(roots: Roots, sink: &dyn Sink) -> Roots {
    match sink.spool_dir() {
        Some(dir) => roots.with_read_only(&dir),
        None => roots,
    }
}
