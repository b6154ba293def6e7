//! A session's startup, once, for every front end: the files (after the trust step), the
//! session's log, the pool, the MCP servers, the profile, the permissions and the hooks, the
//! snapshot, then `SessionStart`. A front end sees each step through [`Front`]; a startup that
//! cannot finish ends here, in one place, as its front end's request would have.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::request::Start;
use aerix_config::{Env, Settings};
use aerix_session::{Outcome, rebuild};
use aerix_tools::Cancel;
use tokio::sync::mpsc::UnboundedSender;

use super::{CancelledExit, Out, Recorder, Session, Starting, end_reason, end_session, exit_of};
use crate::exit::Exit;
use crate::hooks::{Notes, SessionHooks};
use crate::startup::{self, Files, Front, Pool, ProfileAt, Profiled, Snapshot, Stop, Trust};

/// What the command line asks of a session, whichever front end opens it.
#[derive(Clone, Debug)]
pub struct Asked {
    pub cwd: PathBuf,
    /// `--max-turns`.
    pub max_turns: Option<u32>,
    /// `--resume ID`.
    pub resume: Option<String>,
    /// `--continue`.
    pub continue_latest: bool,
    /// `--profile NAME`.
    pub profile: Option<String>,
    /// `--profile-refresh`.
    pub profile_refresh: bool,
    /// `--permission-mode`.
    pub permission_mode: Option<aerix_permissions::Mode>,
    /// When the process started (`AERIX_TIMING`).
    pub started: Instant,
}

/// How a front end opens a session: what was asked, and what differs by front end.
pub struct Launch {
    pub asked: Asked,
    /// Who answers a call that asks: no one (`aerix -p`), or the front end (`Out::Ask`).
    pub front: aerix_permissions::Front,
    /// The first prompt, when the front end has it before the startup (`aerix -p`): a first
    /// line `/name` naming no skill is a usage error before anything starts, the index names
    /// the session by it, and a startup that cannot finish ends it as a request that could not
    /// run (logged). Without one, a new session that ran no request leaves nothing behind.
    pub prompt: Option<String>,
    pub cancelled_exit: CancelledExit,
    /// MCP servers the front end's client declares for this session (`aerix acp`: the
    /// editor's `mcpServers`): the user's own, started whatever the project's trust, and one
    /// of a declared server's name replaces it.
    pub mcp: Vec<aerix_mcp::Spec>,
}

/// How a startup ended.
pub enum Opened {
    Open(Box<Session>),
    /// It could not finish: the pool, the MCP servers' wait, a `SessionStart` hook, or the
    /// user leaving (`error: None` for a cancel).
    Ended {
        outcome: Outcome,
        exit: Exit,
        error: Option<anyhow::Error>,
    },
}

/// The session's startup; an error before its log exists (a bad `--resume`, a `/name` naming
/// no skill, a file that cannot be read) is the caller's to report.
pub async fn open(
    settings: Settings,
    env: &Env,
    trust: &Trust,
    launch: Launch,
    front: &mut impl Front,
    outs: UnboundedSender<Out>,
    cancel: &Cancel,
) -> anyhow::Result<Opened> {
    let mut files = Files::read(&settings, env, &launch.asked.cwd, trust, front)?;
    if let Some(line) = &files.loaded {
        front.loaded(line);
    }
    if let Some(prompt) = &launch.prompt {
        files
            .extensions
            .skills
            .expand_prompt(prompt)
            .map_err(|e| anyhow::anyhow!(Exit::Usage.with(e.to_string())))?;
    }
    // The session first: a bad --resume is a usage error before any pool is started.
    let resume_id =
        files.resume_id(launch.asked.resume.as_deref(), launch.asked.continue_latest)?;
    let (log, resumed) = match &resume_id {
        Some(id) => {
            let resumed = files.resume(id, front)?;
            let number = crate::checkpoint::next_request(&resumed.events);
            let rebuilt = rebuild(&resumed.events, crate::request::ROOT)?;
            front.session(id, Some(&resumed.events), resumed.log.path());
            (resumed.log, Some((rebuilt, resumed.recorded, number)))
        }
        None => {
            let title = launch.prompt.as_deref().unwrap_or_default();
            let model = &settings.main.model;
            let log = files.store.create(&files.project, &launch.asked.cwd, model, title)?;
            front.session(log.id(), None, log.path());
            (log, None)
        }
    };
    let id = log.id().to_owned();
    let permissions = files.permissions(launch.asked.permission_mode, launch.front);
    let hook_session =
        startup::hook_session(&log, &launch.asked.cwd, &files.root, permissions.mode());
    let record = Recorder::new(log, files.store.clone(), files.project.clone(), outs.clone());
    // The first prompt's `session.start`, written by whatever ends the startup before its
    // request does (it names the profile once one is attached).
    let (project, was_resumed) = (files.project.clone(), resumed.is_some());
    let pend = |profile: Option<&(String, String, String)>| {
        if let Some(prompt) = &launch.prompt {
            let starting = Starting {
                settings: &settings,
                session: &id,
                project: &project,
                cwd: &launch.asked.cwd,
                profile,
            };
            record.pending(starting.event(prompt, was_resumed, None));
        }
    };
    pend(None);
    front.recording(&record);
    let opening = Opening {
        record: &record,
        cancelled_exit: &launch.cancelled_exit,
        hooks: None,
        keep: launch.prompt.is_some() || was_resumed,
    };

    let pool = match Pool::bind(&settings, env, &mut files, front).await {
        Some(Ok(pool)) => pool,
        Some(Err(e)) => return Ok(opening.end(Outcome::Failed, Some(e), cancel)),
        None => return Ok(opening.end(Outcome::Cancelled, None, cancel)),
    };
    let Pool { client, main, decision, members } = pool;
    // The MCP servers, started at once; one that fails is a note, never a hang.
    let Some(mut mcp) = startup::mcp::start(trust, &settings, &launch.mcp, &mut files, front).await
    else {
        return Ok(opening.end(Outcome::Cancelled, None, cancel));
    };
    front.bound(&main, &settings);
    // The profile, after the pool is bound: its prompts, overlays and lines, read once.
    let (recorded, first_number, rebuilt) = match resumed {
        Some((rebuilt, recorded, number)) => (recorded, number, Some(rebuilt)),
        None => (None, 1, None),
    };
    let at = ProfileAt {
        flag: launch.asked.profile.as_deref(),
        recorded: recorded.as_ref(),
        refresh: launch.asked.profile_refresh,
        session: &id,
        cwd: &launch.asked.cwd,
    };
    let Profiled { attached, skills, definitions } = files.profile(&settings, env, &at, front);
    front.profile(&attached);
    mcp.hide(|tool| permissions.hides(tool));
    // A hook's note is the front end's to show, in order with the session's other outputs (a
    // front end that has gone sees none).
    let notes = outs.clone();
    let show: Notes = Box::new(move |note: &str| {
        let _ = notes.send(Out::Note(note.to_owned()));
    });
    let hooks = std::mem::take(&mut files.hooks.hooks);
    let hooks = Arc::new(SessionHooks { hooks, session: hook_session, notes: show });
    // The diff is taken against the tree before `SessionStart`: what a session hook writes
    // is the session's change.
    let base = Snapshot::take(&files.root);
    pend(attached.profile.as_ref());
    let opening = Opening { hooks: Some(Arc::clone(&hooks)), ..opening };
    let mut sink = record.clone();
    let hook_context = match startup::session_start(
        &hooks,
        rebuilt.is_some(),
        &files.instructions,
        &files.notes,
        cancel,
        &mut sink,
    ) {
        Ok(context) => context,
        Err(Stop::Cancelled) => return Ok(opening.end(Outcome::Cancelled, None, cancel)),
        Err(Stop::Killed(reason)) => {
            return Ok(opening.end(Outcome::Killed, Some(anyhow::anyhow!(reason)), cancel));
        }
    };
    let resumed = rebuilt.is_some();
    let start = match rebuilt {
        Some(rebuilt) => Start::Rebuilt(rebuilt),
        None => Start::Fresh,
    };
    let Files { store, project, root, instructions, worktrees, checks, .. } = files;
    Ok(Opened::Open(Box::new(Session {
        max_turns: launch.asked.max_turns.unwrap_or(settings.max_turns),
        settings: Arc::new(settings),
        store,
        project,
        id,
        cwd: launch.asked.cwd,
        root,
        instructions,
        agents: Arc::new(definitions),
        skills: Arc::new(skills),
        mcp: Arc::new(mcp),
        prompts: Arc::new(attached.prompts),
        profile: attached.profile,
        branch: attached.branch,
        hooks,
        hook_context,
        permissions: Arc::new(permissions),
        main,
        decision,
        members,
        worktrees,
        checks,
        client,
        record,
        cancelled_exit: launch.cancelled_exit,
        started: launch.asked.started,
        base,
        start: Some(start),
        live: None,
        resumed,
        ran: 0,
        next_number: first_number,
        last: None,
    })))
}

/// What a startup that cannot finish ends.
struct Opening<'a> {
    record: &'a Recorder,
    cancelled_exit: &'a CancelledExit,
    /// Once `SessionStart` may have fired: `SessionEnd` fires too.
    hooks: Option<Arc<SessionHooks>>,
    /// The log stays: it holds a request (the front end's first prompt) or a resumed session.
    keep: bool,
}

impl Opening<'_> {
    /// The first prompt's request (its pending `session.start`) is logged as ended with
    /// `outcome`; `SessionEnd` fires when `SessionStart` did; a new session without a prompt
    /// leaves nothing behind.
    fn end(self, outcome: Outcome, error: Option<anyhow::Error>, cancel: &Cancel) -> Opened {
        let exit = exit_of(outcome, self.cancelled_exit);
        self.record.end_pending(outcome, exit);
        let reason = end_reason(Some(outcome), false);
        end_session(self.hooks.as_deref(), reason, cancel, self.record, self.keep);
        Opened::Ended { outcome, exit, error }
    }
}
