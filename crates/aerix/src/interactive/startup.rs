//! The screen's startup: the shared startup's steps (`crate::startup`), each shown as a row of
//! the startup block where `aerix -p` prints a line.

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use aerix_config::{Env, Layered};
use aerix_hooks::{EndReason, Fire};
use aerix_session::Log;
use aerix_tools::Cancel;
use aerix_tui::terminal::{Input, Tty};
use aerix_tui::{Action, Feed, Gate, Level, Note, PoolRow, ProfileRow, Screen};
use caldrix_proto::Lane;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::close::Stderr;
use super::request::BufferSink;
use super::{Msg, Options, Session, model_name};
use crate::hooks::Notes;
use crate::startup::{self, Files, Front, Pool, ProfileAt, Profiled, Snapshot, Stop, Trust};

pub(super) type Started = (Session, Option<Log>, caldrix_client::Client);

/// The screen as the startup's front end: a note is a row of the startup block; a step waits
/// while keys are read (Ctrl-D leaves).
struct Rows<'a> {
    screen: &'a mut Screen,
    tty: &'a mut Tty,
    rx: &'a mut UnboundedReceiver<Msg>,
}

impl Rows<'_> {
    fn redraw(&mut self) {
        let now = Instant::now();
        let screen = &*self.screen;
        let _ = self.tty.terminal.draw(|frame| aerix_tui::draw(frame, screen, now));
    }
}

impl Front for Rows<'_> {
    fn note(&mut self, note: &str) {
        self.screen.startup.notes.push(Note::classify(note));
    }

    async fn step<T>(&mut self, step: impl Future<Output = T>) -> Option<T> {
        self.redraw();
        tokio::pin!(step);
        loop {
            tokio::select! {
                out = &mut step => return Some(out),
                msg = self.rx.recv() => if let Some(Msg::Input(Input::Key(key))) = msg
                    && self.screen.key(key) == Some(Action::Exit) {
                    return None;
                },
            }
            self.redraw();
        }
    }

    async fn trust(&mut self, root: &Path, items: &[String], changed: bool) -> Option<bool> {
        let root = aerix_trust::escaped(&root.display().to_string());
        self.screen.set_gate(Gate::Trust { root, items: items.to_vec(), changed });
        loop {
            self.redraw();
            // A resize redraws; nothing else comes before the session exists.
            if let Msg::Input(Input::Key(key)) = self.rx.recv().await? {
                match self.screen.key(key) {
                    Some(Action::Trust(answer)) => return Some(answer),
                    Some(Action::Exit) => return None,
                    _ => {}
                }
            }
        }
    }
}

/// The startup block, row by row; `None` when the user left during it. Messages come on `rx`
/// (keys) and go on `tx` (hook notes); fd 2 is sent to the session's file through `stderr`.
pub(super) async fn startup(
    (layered, mut trust): (Layered, Trust),
    env: &Env,
    options: &Options,
    screen: &mut Screen,
    tty: &mut Tty,
    (rx, tx): (&mut UnboundedReceiver<Msg>, &UnboundedSender<Msg>),
    stderr: &mut Option<Stderr>,
) -> anyhow::Result<Option<Started>> {
    // Until the session is known, stray writes go to a file of this process's.
    if let Some(data) = env.data_home() {
        let project = aerix_session::project_key(&aerix_config::project_root(&options.cwd));
        let early = aerix_session::Store::new(&data)
            .project_dir(&project)
            .join(format!("screen-{}.stderr", std::process::id()));
        *stderr = Stderr::redirect(&early).ok();
    }
    let mut rows = Rows { screen, tty, rx };
    // Step 0: an untrusted project is asked about before anything of it runs.
    if startup::ask_trust(&mut trust, &mut rows).await.is_none() {
        return Ok(None);
    }
    let settings = crate::finish(trust.settings(layered), options.model.clone());
    let mut files = Files::read(&settings, env, &options.cwd, &trust, &mut rows)?;
    rows.screen.startup.loaded =
        files.loaded.as_deref().map(|line| line.trim_start_matches("loaded: ").to_owned());

    let resume_id = files.resume_id(options.resume.as_deref(), options.continue_latest)?;
    let (log, recorded, first_request) = match &resume_id {
        Some(id) => {
            let resumed = files.resume(id, &mut rows)?;
            rows.screen.startup.session = Some(id.clone());
            let first = crate::checkpoint::next_request(&resumed.events);
            (Some(resumed.log), resumed.recorded, first)
        }
        None => (None, None, 1),
    };

    let Some(pool) = Pool::bind(&settings, env, &mut files, &mut rows).await else {
        return Ok(None);
    };
    let Pool { client, main, decision, members } = pool?;
    // The MCP servers, started at once; one that fails is a row, never a hang.
    let Some(mut mcp) = startup::mcp::start(&trust, &settings, &mut files, &mut rows).await else {
        return Ok(None);
    };
    let screen = &mut *rows.screen;
    screen.launch.window = main.window;
    screen.launch.lane = main.lane_text();
    screen.startup.pool = Some(PoolRow {
        model: model_name(&settings.main.model),
        lane: main.lane_text(),
        device: main.device_text(),
        // The spec's "CPU lane's thread count": a GPU member's threads are not its lane's.
        threads: main.threads.filter(|_| main.lane == Some(Lane::Cpu)),
        decision: settings.decision.as_ref().map(|d| model_name(&d.model)),
        socket: settings.pool.socket.display().to_string(),
    });

    // A new session's log is made now; its first request writes its `session.start`, and one
    // that ran none is removed when the screen closes.
    let log = match log {
        Some(log) => log,
        None => files.store.create(&files.project, &options.cwd, &settings.main.model, "")?,
    };
    let session_id = log.id().to_owned();
    rows.screen.startup.session = Some(session_id.clone());
    if let Some(stderr) = stderr {
        stderr.settle(&log.path().with_extension("stderr"));
    }

    // The profile, after the pool is bound (as `aerix -p` attaches it): read once for every
    // request of the screen; its `session/<id>` is made by the first.
    let at = ProfileAt {
        flag: options.profile.as_deref(),
        recorded: recorded.as_ref(),
        refresh: options.profile_refresh,
        session: &session_id,
        cwd: &options.cwd,
    };
    let Profiled { attached, skills, definitions } = files.profile(&settings, env, &at, &mut rows);
    rows.screen.startup.profile = match &attached.profile {
        Some((name, branch, commit)) => ProfileRow::Attached {
            name: name.clone(),
            branch: branch.clone(),
            commit: commit.clone(),
            tuned: attached.tuned,
        },
        None => ProfileRow::Embedded,
    };
    // A hook's note is a row of the screen, never a line on the terminal under it.
    let tx = tx.clone();
    let show: Notes = Some(Box::new(move |note: &str| {
        let row = Note { level: Level::Warning, text: note.to_owned() };
        if tx.send(Msg::Feed(Feed::Note(row))).is_err() {
            eprintln!("{note}");
        }
    }));
    let hooks = std::mem::take(&mut files.hooks.hooks);
    let permissions = files.permissions(options.permission_mode, aerix_permissions::Front::Screen);
    let mode = permissions.mode();
    mcp.hide(|tool| permissions.hides(tool));
    let hooks =
        Arc::new(startup::session_hooks(hooks, &log, &options.cwd, &files.root, mode, show));
    let mut sink = BufferSink(Vec::new());
    let cancel = Cancel::default();
    let resumed = resume_id.is_some();
    // The diff is taken against the tree before `SessionStart`, as `aerix -p` takes it: what a
    // session hook writes is the session's change.
    let base = Snapshot::take(&files.root);
    let hook_context = match startup::session_start(
        &hooks,
        resumed,
        &files.instructions,
        &files.notes,
        &cancel,
        &mut sink,
    ) {
        Ok(context) => context,
        Err(stop) => {
            // The session ends here, as a headless run's does: `SessionEnd` fires (it fired
            // `SessionStart`), and a new session that ran no request leaves nothing behind.
            let reason = match stop {
                Stop::Cancelled => EndReason::Cancelled,
                Stop::Killed(_) => EndReason::Other,
            };
            let _ = hooks.fire(Fire::SessionEnd(reason), &cancel, &mut sink);
            if !resumed {
                let _ = files.store.remove(&files.project, &session_id);
            }
            return Err(stop.into_error());
        }
    };
    let session = Session {
        max_turns: options.max_turns.unwrap_or(settings.max_turns),
        settings: Arc::new(settings),
        store: files.store,
        project: files.project,
        cwd: options.cwd.clone(),
        base,
        instructions: files.instructions,
        agents: Arc::new(definitions),
        skills: Arc::new(skills),
        mcp: Arc::new(mcp),
        prompts: Arc::new(attached.prompts),
        profile: attached.profile,
        branch: attached.branch,
        hooks,
        hook_context,
        permissions: Arc::new(permissions),
        early: Mutex::new(sink.0),
        main,
        decision,
        members,
        worktrees: files.worktrees,
        checks: files.checks,
        resumed,
        first_request,
        id: session_id,
    };
    Ok(Some((session, Some(log), client)))
}
