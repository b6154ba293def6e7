//! One agent: its spec, its context and the state its turns keep (the turn loop is
//! `turn_loop.rs`).

use std::path::Path;
use std::sync::Arc;

use aerix_session::{Event, Outcome};
use aerix_tools::{Cancel, FileSet, JobEnd, Jobs};
use aerix_turn::Answer;

use crate::runtime::context::{Context, Label};
use crate::runtime::error::CoreError;
use crate::runtime::repeats::Guard;
use crate::runtime::services::{Held, Runtime};

/// `tools` without `skill` when the model may load no skill (a tool that always refuses is
/// noise).
pub fn offer_skill(tools: Vec<String>, skills: &aerix_skills::Skills) -> Vec<String> {
    if !skills.model_names().is_empty() {
        return tools;
    }
    tools.into_iter().filter(|t| t != "skill").collect()
}

/// How an agent is set up.
#[derive(Clone, Debug)]
pub struct AgentSpec {
    pub id: String,
    pub member: String,
    /// The member's context window.
    pub window: u32,
    /// Whether the member takes the `Json` constraint.
    pub json: bool,
    /// The tools its calls may name.
    pub tools: Vec<String>,
    pub max_turns: u32,
    /// Its place in delegation: the root 0, an implementer or verifier one more than its caller.
    pub depth: u32,
    /// What its `final` holds (a verifier's is a verdict).
    pub answer: Answer,
    /// A subagent's type for hooks (a definition's name, `implementer`, `verifier`); `None`
    /// for the root.
    pub agent_type: Option<String>,
    /// The definitions whose tool patterns hold it: its own and its callers'.
    pub held: Vec<Held>,
    /// How its turns are sampled: `None` greedy (every agent but a sampled attempt); turn n
    /// of a sampled agent uses `seed + n`, so its turns differ yet replay the same.
    pub sampling: Option<caldrix_proto::Sampling>,
}

/// Turns aerix takes for an agent before its first own one (an implementer's opening: its
/// check run, the files it names read). Asked again with each opening turn's results, until
/// `None`: a thought and the calls, each a tool and its input (`r`: the results). It may ask
/// the pool itself (an implementer's whole-file turn), on a context of its own.
pub trait Opening: Send {
    fn next<'a>(
        &'a mut self,
        pool: &'a mut dyn crate::runtime::Connection,
        r: &'a [String],
    ) -> Opened<'a>;
}

/// What an opening's next turn comes to.
pub type Opened<'a> = crate::runtime::Later<'a, Option<(String, Vec<(String, serde_json::Value)>)>>;

/// How an agent ended.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentEnd {
    pub outcome: Outcome,
    pub reason: Option<String>,
    pub final_text: Option<String>,
    pub turns: u32,
}

pub struct Agent {
    pub spec: AgentSpec,
    pub context: Context,
    pub plan: Option<String>,
    pub next_call: u32,
    /// Turns taken in this request (the budget counts these).
    pub turns: u32,
    /// Turns of earlier requests of the session (a resumed root), so ids stay unique.
    pub turn_base: u32,
    /// Shared with the blocking thread a tool runs on.
    pub(crate) jobs: Arc<Jobs>,
    pub(crate) files: Arc<FileSet>,
    pub(crate) cancel: Cancel,
    /// `Stop`/`SubagentStop` continues taken (at most `STOP_CONTINUES`).
    pub(crate) stop_continues: u32,
    /// A tool hook's `continue: false`: the agent ends once this turn's calls are cut short.
    pub(crate) hook_stop: Option<String>,
    pub(crate) hard_limit_hits: u32,
    /// The repeat guard (`context.repeat_guard`).
    pub(crate) guard: Guard,
    /// Taken before its first own turn.
    pub(crate) opening: Option<Box<dyn Opening>>,
}

impl Agent {
    pub fn new(spec: AgentSpec, context: Context, cwd: &Path, cancel: Cancel) -> Agent {
        Agent {
            spec,
            context,
            plan: None,
            next_call: 0,
            turns: 0,
            turn_base: 0,
            jobs: Arc::default(),
            files: Arc::new(FileSet::new(cwd)),
            cancel,
            stop_continues: 0,
            hook_stop: None,
            hard_limit_hits: 0,
            guard: Guard::default(),
            opening: None,
        }
    }

    /// `{prefix}{n}` for the first n from 1 that no segment of the context holds.
    pub fn fresh_id(&self, prefix: &str) -> String {
        self.context.fresh_id(prefix)
    }

    /// A user segment the runtime adds (a note, a job's output).
    pub async fn add_note(
        &mut self,
        rt: &mut Runtime<'_>,
        label: Label,
        text: String,
    ) -> Result<(), CoreError> {
        self.context.add_note(rt.client, rt.sink, label, text).await
    }

    pub(crate) fn end(
        &self,
        outcome: Outcome,
        reason: Option<String>,
        final_text: Option<String>,
    ) -> AgentEnd {
        AgentEnd { outcome, reason, final_text, turns: self.turns }
    }
}

pub(crate) fn job_started(agent: &str, job: &str, command: &str) -> Event {
    Event::Job {
        agent: agent.to_owned(),
        job: job.to_owned(),
        state: "started".to_owned(),
        command: command.to_owned(),
        ending: None,
    }
}

pub(crate) fn job_ended(agent: &str, job: &JobEnd) -> Event {
    Event::Job {
        agent: agent.to_owned(),
        job: job.id.clone(),
        state: "ended".to_owned(),
        command: job.command.clone(),
        ending: job.text.lines().next().map(String::from),
    }
}
