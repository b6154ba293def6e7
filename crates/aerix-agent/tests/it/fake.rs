//! A member that answers from a script, and the sink, hooks and delegation a test records
//! through.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aerix_agent::runtime::{
    Agent, AgentEnd, AgentSpec, Caller, Connection, Context, CoreError, Delegation, HookFire,
    HookReply, Label, Options, Pending, Prompts, Ran, Runtime, RuntimeHooks, Segment, Sink,
};
use aerix_session::Event;
use aerix_tools::{Cancel, ToolError};
use aerix_turn::Call;
use caldrix_client::Counts;
use caldrix_proto::{
    self as proto, Constraint, ContextId, Done, Edit, Generate, MemberInfo, Role, StopReason,
};

use crate::contexts::Contexts;

pub use crate::contexts::tokens;

/// A scripted member: each generation takes the next reply.
#[derive(Default)]
pub struct Member {
    script: VecDeque<(String, StopReason)>,
    pub contexts: Contexts,
    /// Every generation request, in order.
    pub generations: Vec<Generate>,
    /// Every edit request, in order.
    pub edits: Vec<Vec<Edit>>,
    /// How many `context_counts` requests came (a generation's `done` carries its counts).
    pub counts_asked: usize,
}

impl Member {
    pub fn new(replies: &[&str]) -> Member {
        let mut member = Member::default();
        for reply in replies {
            member.then(reply, StopReason::EndOfTurn);
        }
        member
    }

    /// One more reply, ending with `stop`.
    pub fn then(&mut self, text: &str, stop: StopReason) -> &mut Member {
        self.script.push_back((text.to_owned(), stop));
        self
    }

    fn generation(&mut self, generate: Generate) -> Result<Done, CoreError> {
        self.generations.push(generate.clone());
        let (text, stop) = self
            .script
            .pop_front()
            .ok_or_else(|| CoreError::Failed("the script ran out".into()))?;
        self.contexts.reply(&generate, text, stop)
    }

    /// The ids of a context's segments, in order.
    pub fn ids(&self, context: ContextId) -> Vec<String> {
        let segments = self.contexts.segments(context).unwrap_or_default();
        segments.iter().map(|s| s.id.clone()).collect()
    }

    /// The text of a context's segment `id`.
    pub fn text(&self, context: ContextId, id: &str) -> Option<String> {
        let segments = self.contexts.segments(context).ok()?;
        segments.iter().find(|s| s.id == id).map(|s| s.text.clone())
    }
}

impl Connection for Member {
    fn create_context(
        &mut self,
        _member: &str,
        segments: Vec<proto::Segment>,
    ) -> Pending<'_, Counts> {
        let counts = self.contexts.create(segments);
        Box::pin(async move { counts })
    }

    fn edit_context(&mut self, context: ContextId, edits: Vec<Edit>) -> Pending<'_, Counts> {
        self.edits.push(edits.clone());
        let counts = self.contexts.edit(context, edits);
        Box::pin(async move { counts })
    }

    fn context_counts(&mut self, context: ContextId) -> Pending<'_, Counts> {
        self.counts_asked += 1;
        let counts = self.contexts.counts(context);
        Box::pin(async move { counts })
    }

    fn drop_context(&mut self, context: ContextId) -> Pending<'_, ()> {
        self.contexts.drop_context(context);
        Box::pin(async { Ok(()) })
    }

    fn members(&mut self) -> Pending<'_, Vec<MemberInfo>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn generate<'a>(
        &'a mut self,
        generate: Generate,
        cancel: &'a Cancel,
        _streamed: &'a mut (dyn FnMut() + Send),
    ) -> Pending<'a, Done> {
        let done = if cancel.is_cancelled() {
            Err(CoreError::Cancelled)
        } else {
            self.generation(generate)
        };
        Box::pin(async move { done })
    }
}

/// What happened, in order: the hooks fired and the delegation's runs.
pub type Record = Arc<Mutex<Vec<String>>>;

pub fn lines(record: &Record) -> Vec<String> {
    record.lock().map(|r| r.clone()).unwrap_or_default()
}

fn note(record: &Record, line: String) {
    if let Ok(mut r) = record.lock() {
        r.push(line);
    }
}

/// Records the tool hooks and `Stop`; a `Stop` is blocked with `stop_block` when set.
pub struct Hooks {
    pub record: Record,
    pub stop_block: Option<String>,
}

impl RuntimeHooks for Hooks {
    fn fire(&self, event: HookFire<'_>) -> HookReply {
        match event {
            HookFire::PreToolUse { tool, call, .. } => {
                note(&self.record, format!("PreToolUse {tool} {call}"))
            }
            HookFire::PostToolUse { tool, call, .. } => {
                note(&self.record, format!("PostToolUse {tool} {call}"))
            }
            HookFire::Stop { active, .. } => {
                note(&self.record, format!("Stop active={active}"));
                return HookReply { block: self.stop_block.clone(), ..HookReply::default() };
            }
            _ => {}
        }
        HookReply::default()
    }
}

/// Runs `agent` calls by answering each with `piece <id> done`, recording the batch.
pub struct Pieces {
    pub record: Record,
}

impl Delegation for Pieces {
    fn depth(&self) -> u32 {
        1
    }

    fn run_all<'a, 'r: 'a>(
        &'a self,
        _: &'a mut Runtime<'r>,
        caller: &'a Caller,
        calls: &'a [Call],
    ) -> Ran<'a> {
        let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        note(&self.record, format!("delegation of {} runs {}", caller.id, ids.join(" ")));
        let results: Vec<(String, Result<String, ToolError>)> =
            calls.iter().map(|c| (c.id.clone(), Ok(format!("piece {} done", c.id)))).collect();
        Box::pin(async move { results })
    }
}

pub fn options() -> Options {
    Options {
        max_new_tokens: 256,
        repeat_guard: false,
        last_turn_final: false,
        tool_caps: BTreeMap::new(),
        default_tool_cap: 20_000,
        skills_chars: 0,
        planner_tools: Vec::new(),
    }
}

/// What a run left behind.
pub struct Run {
    pub end: AgentEnd,
    pub events: Vec<Event>,
    pub context: ContextId,
    /// The agent's mirror of its context, segment ids in order.
    pub mirror: Vec<String>,
}

/// Runs the root agent `a1` with `tools` on `member`, from a system segment and `prompt`.
pub async fn run(
    member: &mut Member,
    tools: &[&str],
    prompt: &str,
    hooks: Arc<dyn RuntimeHooks>,
    delegation: Option<Arc<dyn Delegation>>,
) -> Run {
    let mut events = Spooled::default();
    let at = At { cwd: Path::new("/"), options: options() };
    run_in(member, tools, prompt, hooks, delegation, at, &mut events).await
}

/// Keeps every event, and spools into `dir` when it is set.
#[derive(Default)]
pub struct Spooled {
    pub events: Vec<Event>,
    pub dir: Option<PathBuf>,
}

impl Sink for Spooled {
    fn event(&mut self, event: Event) {
        self.events.push(event);
    }

    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf> {
        let path = self.dir.as_ref()?.join(name);
        std::fs::write(&path, text).ok()?;
        Some(path)
    }

    fn spool_dir(&self) -> Option<PathBuf> {
        self.dir.clone()
    }
}

/// Where and how `run_in` runs: the working directory (the tools' tree) and the options.
pub struct At<'a> {
    pub cwd: &'a Path,
    pub options: Options,
}

/// As `run`, `at` a working directory with options, `events` the sink.
pub async fn run_in(
    member: &mut Member,
    tools: &[&str],
    prompt: &str,
    hooks: Arc<dyn RuntimeHooks>,
    delegation: Option<Arc<dyn Delegation>>,
    at: At<'_>,
    events: &mut Spooled,
) -> Run {
    let cwd = at.cwd;
    let prompts = Arc::new(Prompts::embedded());
    let cancel = Cancel::default();
    let segment = |id: &str, role, label, text: &str| Segment {
        id: id.to_owned(),
        role,
        label,
        text: text.to_owned(),
        pinned: false,
        tokens: 0,
    };
    let segments = vec![
        segment("system", Role::System, Label::System, "You are a test."),
        segment("p1", Role::User, Label::Prompt, prompt),
    ];
    let context = Context::create(member, &mut *events, "a1", "main", segments, true)
        .await
        .expect("the fake creates contexts");
    let context_id = context.id;
    let spec = AgentSpec {
        id: "a1".into(),
        member: "main".into(),
        window: 4096,
        json: true,
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        max_turns: 20,
        depth: 0,
        answer: aerix_turn::Answer::Text,
        agent_type: None,
        held: Vec::new(),
        sampling: None,
    };
    let mut agent = Agent::new(spec, context, cwd, cancel.clone());
    let mut rt =
        Runtime::new(member, &mut *events, at.options, prompts, cwd, cancel).with_hooks(hooks);
    if let Some(delegation) = delegation {
        rt = rt.with_delegation(delegation);
    }
    let end = agent.run(&mut rt).await;
    drop(rt);
    let mirror = agent.context.segments.iter().map(|s| s.id.clone()).collect();
    Run { end, events: std::mem::take(&mut events.events), context: context_id, mirror }
}

/// The constraint a generation was under.
pub fn schema_of(generate: &Generate) -> Option<&str> {
    match &generate.constraint {
        Constraint::Json { schema } => Some(schema),
        _ => None,
    }
}
