//! One session, whichever front end drives it (`aerix -p` in `headless.rs`, the screen in
//! `interactive/`, `aerix acp` in `acp/`): the startup once ([`open`]), then operations in
//! ([`Op`]: a prompt, a rewind, the close) and typed outputs out ([`Out`]: every logged event,
//! the notes, the questions a request asks, each request's end). Every hook event, every
//! answer to one, the log's `session.start`/`session.end` pairs, the checkpoint and the diff
//! are written here once, so the front ends differ only in how they show them.
//!
//! A question ([`Out::Ask`]) carries its own reply channel: the request's task awaits the
//! answer (or its cancel flag), holding no thread, and a front end that cannot ask (`aerix -p`)
//! never receives one (its permissions deny what would ask).

mod gates;
mod open;
mod record;
mod request;

use std::path::PathBuf;
use std::sync::Arc;

use crate::request::{Root, Start};
use crate::runtime::Live;
use aerix_config::{InstructionFile, Settings};
use aerix_hooks::{EndReason, Fire};
use aerix_session::{Event, Outcome, Store};
use aerix_tools::Cancel;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::oneshot;

pub use open::{Asked, Launch, Opened, open};
pub use record::Recorder;

use crate::attach::SessionBranch;
use crate::exit::Exit;
use crate::hooks::SessionHooks;
use crate::pool;
use crate::startup::Snapshot;

/// What a front end asks of a running session.
pub enum Op {
    /// A request: the prompt as typed (a first line `/name args` is the skill's text). `cancel`
    /// is the front end's flag for it (a signal, Esc, `session/cancel`).
    Prompt { text: String, cancel: Cancel },
    /// The screen's `/rewind [N]`: the tree and the conversation back to a checkpoint.
    Rewind(Option<String>),
    /// The session ends: its live root leaves the pool, `SessionEnd` fires (a handler still
    /// running when `hurry` is hurried is ended), the MCP servers stop, and [`Out::Closed`] is
    /// the last output.
    Close { hurry: Cancel },
}

/// What a session tells its front end, in order.
pub enum Out {
    /// A line for the user: a hook's note, a rule that could not be saved, the profile
    /// branch's failure.
    Note(String),
    /// An event, as the session log has it.
    Event(Event),
    /// An agent's generation: started, streamed, ended (for a spinner).
    Live { agent: String, live: Live },
    /// A question only the user can answer; the request waits for the reply (a dropped
    /// sender is a refusal).
    Ask(Ask, oneshot::Sender<Reply>),
    /// A request ended.
    Ended(Box<Ended>),
    /// What `Op::Rewind` did.
    Rewound(String),
    /// The session has ended: nothing follows.
    Closed,
}

/// A question of a request.
#[derive(Clone, Debug)]
pub enum Ask {
    /// The planner's plan, to accept, edit or refuse.
    Plan { agent: String, text: String },
    /// A call waiting for consent (`call`: its id in its agent, `c3`): asked by a rule or the
    /// mode (`always`: "always" may be answered), or by a PreToolUse hook (`hook`).
    Call {
        agent: String,
        call: String,
        tool: String,
        input: serde_json::Value,
        reason: String,
        always: bool,
        hook: bool,
    },
}

/// The user's answer to an [`Ask`]. A plan takes `Accept` or `Edited`; a call `Once` or
/// `Always`; anything else refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Accept,
    Edited(String),
    Once,
    Always,
    Deny,
}

/// How a request ended.
#[derive(Debug)]
pub struct Ended {
    pub outcome: Outcome,
    /// The exit status it asks for (a cancelled one: the signal's).
    pub exit: Exit,
    /// The root's final answer.
    pub answer: Option<String>,
    /// Why the root ended as it did (the agent's own reason: a budget, a refusal).
    pub reason: Option<String>,
    /// What stopped the request before its root could end (a hook, a failure, the log), for a
    /// person.
    pub error: Option<String>,
    /// The tree before it (`None` outside git): what it changed is `Snapshot::changes`,
    /// taken by the front end that shows it (no git work for one that does not).
    pub since_request: Option<Snapshot>,
    /// The tree the session started on (the screen's diff line: `Snapshot::numstat`).
    pub since_session: Option<Snapshot>,
    /// The first write to the session log that failed, if one did.
    pub log_failed: Option<String>,
}

/// The exit status a cancelled request asks for: the front end knows which signal came.
pub type CancelledExit = Arc<dyn Fn() -> Exit + Send + Sync>;

/// An opened session: its fixed parts, and what carries from one request to the next.
pub struct Session {
    settings: Arc<Settings>,
    store: Store,
    project: String,
    id: String,
    cwd: PathBuf,
    /// The project's root (the tree the diff and the checkpoints are of).
    root: PathBuf,
    instructions: Vec<InstructionFile>,
    agents: Arc<aerix_config::AgentDefinitions>,
    skills: Arc<aerix_skills::Skills>,
    mcp: Arc<aerix_mcp::Servers>,
    prompts: Arc<crate::runtime::Prompts>,
    /// `session.start`'s `profile`, `profile_branch`, `profile_commit`.
    profile: Option<(String, String, String)>,
    /// The profile's `session/<id>`, made by the session's first request.
    branch: Option<SessionBranch>,
    hooks: Arc<SessionHooks>,
    /// What the `SessionStart` hooks said: the root's pinned `# Hook context`.
    hook_context: Option<String>,
    permissions: Arc<aerix_permissions::Permissions>,
    main: pool::Bound,
    decision: Option<String>,
    members: Vec<String>,
    worktrees: Option<crate::delegate::WorktreePlace>,
    checks: Vec<String>,
    max_turns: u32,
    client: caldrix_client::Client,
    record: Recorder,
    cancelled_exit: CancelledExit,
    /// When the process started (`AERIX_TIMING`).
    started: std::time::Instant,
    /// The tree at the startup, before `SessionStart`: the first request's diff base (what a
    /// session hook writes is the session's change) and the session's diff line's.
    base: Option<Snapshot>,
    /// Where the next request's root comes from: the first request's (fresh, or the resumed
    /// log's), then the root the last request left live, else (it failed or was cancelled)
    /// `None`: read back from the log.
    start: Option<Start>,
    live: Option<Root>,
    resumed: bool,
    /// Requests run by this process, and the next one's number in the session.
    ran: u32,
    next_number: u32,
    last: Option<Outcome>,
}

impl Session {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The root's turn budget.
    pub fn max_turns(&self) -> u32 {
        self.max_turns
    }

    /// The permission mode the session runs in.
    pub fn permission_mode(&self) -> &'static str {
        self.permissions.mode().as_str()
    }

    /// The MCP servers, each `{"name", "status"}`.
    pub fn mcp_servers(&self) -> Vec<serde_json::Value> {
        let servers = &self.mcp.servers;
        servers
            .iter()
            .map(|s| serde_json::json!({"name": s.spec.name, "status": s.state.to_string()}))
            .collect()
    }

    /// The handle a second signal ends the running request's log line through.
    pub fn recorder(&self) -> Recorder {
        self.record.clone()
    }

    /// Runs operations until `Op::Close` (or until the front end drops its sender: the same
    /// close, unhurried).
    pub async fn run(mut self, mut ops: UnboundedReceiver<Op>) {
        let hurry = loop {
            match ops.recv().await {
                Some(Op::Prompt { text, cancel }) => {
                    let ended = self.request(text, &cancel).await;
                    let _ = self.record.outs().send(Out::Ended(Box::new(ended)));
                }
                Some(Op::Rewind(arg)) => {
                    let text = self.rewind(arg.as_deref()).await;
                    let _ = self.record.outs().send(Out::Rewound(text));
                }
                Some(Op::Close { hurry }) => break hurry,
                None => break Cancel::default(),
            }
        };
        self.close(&hurry).await;
    }

    /// `/rewind`: a rewound conversation's next request reads its root back from the log
    /// (which leaves the rewound requests out); the live one leaves the pool.
    async fn rewind(&mut self, arg: Option<&str>) -> String {
        let (text, rewound) =
            crate::checkpoint::screen(&self.store, &self.project, &self.id, &self.root, arg);
        if rewound && let Some(root) = self.live.take() {
            root.drop_context(&mut self.client).await;
        }
        text
    }

    /// The end, once: the live root leaves the pool, `SessionEnd` fires, a new session that
    /// ran no request leaves nothing behind, the MCP servers stop.
    async fn close(mut self, hurry: &Cancel) {
        if let Some(root) = self.live.take() {
            root.drop_context(&mut self.client).await;
        }
        let reason = end_reason(self.last, hurry.is_cancelled());
        let keep = self.ran > 0 || self.resumed;
        end_session(Some(&self.hooks), reason, hurry, &self.record, keep);
        let Session { mut mcp, record, .. } = self;
        // Every runtime holding the servers has ended; were one left, dropping them still ends
        // their processes.
        if let Some(servers) = Arc::get_mut(&mut mcp) {
            servers.shutdown().await;
        }
        let _ = record.outs().send(Out::Closed);
    }
}

/// `SessionEnd`'s reason: a signal's or the user's cancel, else how the last request ended
/// (`None`: the session ran none).
fn end_reason(last: Option<Outcome>, cancelled: bool) -> EndReason {
    match last {
        _ if cancelled => EndReason::Cancelled,
        Some(Outcome::Cancelled) => EndReason::Cancelled,
        Some(Outcome::Failed) => EndReason::Error,
        _ => EndReason::Other,
    }
}

/// A session's end, whether its startup finished or not: `SessionEnd` (when `SessionStart`
/// fired: `hooks`; its own bound, a handler ended once `hurry` is hurried), then the log kept
/// or, `keep` false, removed.
fn end_session(
    hooks: Option<&SessionHooks>,
    reason: EndReason,
    hurry: &Cancel,
    record: &Recorder,
    keep: bool,
) {
    if let Some(hooks) = hooks {
        // Its answers mean nothing: the session has ended.
        let _ = hooks.fire(Fire::SessionEnd(reason), hurry, &mut record.clone());
    }
    record.settle(keep);
}

/// What every `session.start` of a session says of it.
struct Starting<'a> {
    settings: &'a Settings,
    session: &'a str,
    project: &'a str,
    cwd: &'a std::path::Path,
    /// `profile`, `profile_branch`, `profile_commit`, once attached.
    profile: Option<&'a (String, String, String)>,
}

impl Starting<'_> {
    /// A request's `session.start`: its prompt, whether its root continues an earlier
    /// conversation, and the commit its diff is taken against.
    fn event(&self, prompt: &str, resumed: bool, start_commit: Option<String>) -> Event {
        let profile = self.profile;
        Event::SessionStart {
            session: self.session.to_owned(),
            project: self.project.to_owned(),
            cwd: self.cwd.display().to_string(),
            model: self.settings.main.model.clone(),
            decision: self.settings.decision.as_ref().map(|d| d.model.clone()),
            prompt: prompt.to_owned(),
            resumed,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            profile: profile.map(|p| p.0.clone()),
            profile_branch: profile.map(|p| p.1.clone()),
            profile_commit: profile.map(|p| p.2.clone()),
            start_commit,
        }
    }
}

/// The exit status of a request that ended with `outcome`.
fn exit_of(outcome: Outcome, cancelled: &CancelledExit) -> Exit {
    match outcome {
        Outcome::Cancelled => cancelled(),
        _ => Exit::of(outcome),
    }
}
