//! The screen's startup: the startup block, row by row, as `aerix -p` starts.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerix_config::{Env, Settings};
use aerix_hooks::{Fire, HookFiles, StartSource};
use aerix_session::{Log, Store, read_log};
use aerix_tools::Cancel;
use aerix_tui::terminal::{Input, Tty};
use aerix_tui::{Action, Feed, Level, Note, PoolRow, ProfileRow, Screen};
use anyhow::Context as _;
use caldrix_proto::Lane;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::close::Stderr;
use super::request::BufferSink;
use super::{Msg, Options, Session, model_name};
use crate::attach;
use crate::exit::Exit;
use crate::extensions;
use crate::headless::loaded_line;
use crate::hooks::{Notes, SessionHooks};
use crate::pool;

pub(super) type Started = (Session, Option<Log>, caldrix_client::Client);

/// The startup block, row by row; `None` when the user left during it. Messages come on `rx`
/// (keys) and go on `tx` (hook notes); fd 2 is sent to the session's file through `stderr`.
pub(super) async fn startup(
    settings: Settings,
    env: &Env,
    options: &Options,
    screen: &mut Screen,
    tty: &mut Tty,
    (rx, tx): (&mut UnboundedReceiver<Msg>, &UnboundedSender<Msg>),
    stderr: &mut Option<Stderr>,
) -> anyhow::Result<Option<Started>> {
    let redraw = |tty: &mut Tty, screen: &Screen| {
        let now = Instant::now();
        let _ = tty.terminal.draw(|frame| aerix_tui::draw(frame, screen, now));
    };
    let root = aerix_config::project_root(&options.cwd);
    let instructions = aerix_config::instruction_files(&root, &options.cwd)?;
    let data = env.data_home().context("no data directory: set HOME or XDG_DATA_HOME")?;
    let store = Store::new(&data);
    let project = aerix_session::project_key(&root);
    // Until the session is known, stray writes go to a file of this process's.
    let early = store.project_dir(&project).join(format!("screen-{}.stderr", std::process::id()));
    *stderr = Stderr::redirect(&early).ok();
    let hook_files = HookFiles::standard(
        env.config_home().as_deref(),
        env.home.as_deref(),
        &root,
        settings.hooks.claude_settings,
    );
    let mut loaded = aerix_hooks::load(&hook_files.paths());
    let mut agents =
        aerix_config::load_agents(&aerix_config::AgentDirs::standard(env, &root, &options.cwd));
    let extensions =
        extensions::load(&settings, env, &root, &options.cwd, &mut agents, &mut loaded);
    let mut notes = loaded.notes.clone();
    notes.extend(agents.notes.iter().cloned());
    notes.extend(extensions.notes.iter().cloned());
    screen.startup.loaded =
        loaded_line(&instructions, &loaded.files, &agents.definitions, &extensions)
            .map(|line| line.trim_start_matches("loaded: ").to_owned());
    screen.startup.notes.extend(notes.iter().map(|n| Note::classify(n)));

    let resume_id = match (&options.resume, options.continue_latest) {
        (Some(id), _) => Some(id.clone()),
        (None, true) => Some(store.latest(&project)?.ok_or_else(|| {
            anyhow::anyhow!(Exit::Usage.with("no session to continue in this project"))
        })?),
        (None, false) => None,
    };
    let log = match &resume_id {
        Some(id) => {
            store
                .existing(&project, id)
                .map_err(|e| anyhow::anyhow!(Exit::Usage.with(e.to_string())))?;
            if let Some(tag) = store.entry(&project, id)?.and_then(|e| e.tag) {
                return Err(Exit::Usage
                    .with(format!("session {id} was imported ({tag}) and cannot be resumed"))
                    .into());
            }
            screen.startup.session = Some(id.clone());
            Some(store.open(&project, id)?)
        }
        None => None,
    };
    redraw(tty, screen);

    // The pool: a key pressed meanwhile is kept (Ctrl-D leaves).
    let mut pool_notes = Vec::new();
    let mut client = {
        let connecting = pool::connect(&settings, env, &mut pool_notes);
        tokio::pin!(connecting);
        loop {
            tokio::select! {
                client = &mut connecting => break client?,
                msg = rx.recv() => if let Some(Msg::Input(Input::Key(key))) = msg
                    && screen.key(key) == Some(Action::Exit) {
                    return Ok(None);
                },
            }
            redraw(tty, screen);
        }
    };
    screen.startup.notes.extend(pool_notes.iter().map(|n| Note::classify(n)));
    let load_timeout = Duration::from_secs(settings.pool.start_timeout_secs);
    let serving = pool::Serving::main(&settings.main, settings.delegation.parallel);
    let main = pool::bind(&mut client, &settings.main, "main", serving, load_timeout).await?;
    if let Some(note) = serving.batching.note(&main) {
        screen.startup.notes.push(Note::classify(&note));
    }
    let decision = match &settings.decision {
        Some(member) => {
            let single = pool::Serving::other(member);
            Some(pool::bind(&mut client, member, "decision", single, load_timeout).await?.alias)
        }
        None => None,
    };
    let members: Vec<String> = client
        .members()
        .await
        .map(|m| m.into_iter().map(|m| m.alias).collect())
        .unwrap_or_default();
    screen.launch.window = main.window;
    screen.launch.lane = main.lane.map(|l| l.name().to_owned());
    screen.startup.pool = Some(PoolRow {
        model: model_name(&settings.main.model),
        lane: main.lane.map(|l| l.name().to_owned()),
        // The spec's "CPU lane's thread count": a GPU member's threads are not its lane's.
        threads: main.threads.filter(|_| main.lane == Some(Lane::Cpu)),
        decision: settings.decision.as_ref().map(|d| model_name(&d.model)),
        socket: settings.pool.socket.display().to_string(),
    });

    // The session: a new one is created by its first request (its `session.start` holds it).
    let session_id = log.as_ref().map(|l| l.id().to_owned());
    let (log, session_id) = match (log, session_id) {
        (Some(log), Some(id)) => (log, id),
        _ => {
            let log = store.create(&project, &options.cwd, &settings.main.model, "")?;
            let id = log.id().to_owned();
            (log, id)
        }
    };
    screen.startup.session = Some(session_id.clone());
    if let Some(stderr) = stderr {
        stderr.settle(&log.path().with_extension("stderr"));
    }

    // The profile, after the pool is bound (as `aerix -p` attaches it): its prompts, overlays
    // and lines, read once for every request of the screen.
    let recorded = match &resume_id {
        Some(_) => read_log(log.path()).ok().and_then(|read| attach::recorded(&read.events)),
        None => None,
    };
    let mut skills = extensions.skills;
    let mut definitions = agents.definitions;
    let attached = attach::for_session(
        options.profile.as_deref(),
        recorded.as_ref(),
        options.profile_refresh,
        &settings,
        env,
        &data,
        &project,
        &session_id,
        &options.cwd,
        &mut skills,
        &mut definitions,
    );
    screen.startup.profile = match &attached.profile {
        Some((name, branch, commit)) => ProfileRow::Attached {
            name: name.clone(),
            branch: branch.clone(),
            commit: commit.clone(),
            tuned: attached.tuned,
        },
        None => ProfileRow::Embedded,
    };
    screen.startup.notes.extend(attached.lines.iter().map(|n| Note::classify(n)));
    notes.extend(attached.lines.iter().cloned());
    let hook_session = aerix_hooks::Session {
        id: session_id.clone(),
        transcript_path: aerix_claude::transcript_path(log.path()),
        subagents_dir: aerix_claude::subagents_dir(log.path()),
        cwd: options.cwd.clone(),
        project_dir: root.clone(),
        spool_dir: log.spool_dir(),
    };
    // A hook's note is a row of the screen, never a line on the terminal under it.
    let tx = tx.clone();
    let show: Notes = Some(Box::new(move |note: &str| {
        let row = Note { level: Level::Warning, text: note.to_owned() };
        if tx.send(Msg::Feed(Feed::Note(row))).is_err() {
            eprintln!("{note}");
        }
    }));
    let hooks = Arc::new(SessionHooks { hooks: loaded.hooks, session: hook_session, notes: show });
    let mut sink = BufferSink(Vec::new());
    let cancel = Cancel::default();
    let source = if resume_id.is_some() { StartSource::Resume } else { StartSource::Startup };
    let fired = hooks.fire(Fire::SessionStart(source), &cancel, &mut sink);
    if let Some(stop) = fired.stop {
        anyhow::bail!("a SessionStart hook (`{}`) ended the run: {}", stop.command, stop.reason);
    }
    for file in &instructions {
        let fire = Fire::InstructionsLoaded {
            file_path: &file.path,
            memory_type: "Project",
            load_reason: "session_start",
        };
        hooks.fire(fire, &cancel, &mut sink);
    }
    hooks.notify(&notes, "startup_note", &cancel, &mut sink);
    let base = gitstore::Repo::toplevel(&root).and_then(|top| {
        let repo = gitstore::Repo::at(&top);
        repo.snapshot().ok().flatten().map(|base| (repo, base))
    });
    let session = Session {
        max_turns: options.max_turns.unwrap_or(settings.max_turns),
        settings: Arc::new(settings),
        store,
        project,
        cwd: options.cwd.clone(),
        instructions,
        agents: Arc::new(definitions),
        skills: Arc::new(skills.with_session(&session_id)),
        prompts: attached.prompts,
        profile: attached.profile,
        hooks,
        hook_context: fired.context,
        early: Mutex::new(sink.0),
        main,
        decision,
        members,
        base,
        resumed: resume_id.is_some(),
        id: session_id,
    };
    Ok(Some((session, Some(log), client)))
}
