//! Plain `aerix` on a terminal: the screen (`aerix-tui`). Startup as `aerix -p` does it (the
//! rows of the startup block instead of lines on stderr), then each request is its own runtime
//! over the session, as `--continue` would run it: the root rebuilt from the log, `session.start`
//! and `session.end` around it. The runtime runs on a thread of its own; the screen gets its
//! events through a channel, so a redraw never waits on the pool.

use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerix_config::{Env, Settings};
use aerix_core::{
    AskGate, CoreError, Live, PlanDecision, PlanGate, Prompts, Request, Runtime, Sink, run_request,
};
use aerix_hooks::{EndReason, Fire, HookFiles, StartSource};
use aerix_session::{Event, Log, Outcome, Store, read_log, rebuild};
use aerix_tools::Cancel;
use aerix_tui::terminal::{Input, Tty, read_input};
use aerix_tui::{
    Action, DiffStat, Feed, Gate, Launch, Level, Note, PlanAnswer, PoolRow, ProfileRow, RequestEnd,
    Screen,
};
use anyhow::Context as _;
use caldrix_proto::Lane;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::attach;
use crate::exit::Exit;
use crate::extensions;
use crate::headless::loaded_line;
use crate::hooks::{AgentHooks, SessionHooks};
use crate::pool;

pub struct Options {
    pub cwd: PathBuf,
    pub max_turns: Option<u32>,
    pub resume: Option<String>,
    pub continue_latest: bool,
    /// `--profile NAME`.
    pub profile: Option<String>,
    /// `--profile-refresh`.
    pub profile_refresh: bool,
    pub started: Instant,
}

/// What reaches the screen's loop.
enum Msg {
    Input(Input),
    Feed(Feed),
    /// A gate waits for the user; the answer goes back on the sender.
    Gate(Gate, std_mpsc::Sender<Answer>),
    /// A request's thread ended.
    Ended(Box<Ended>),
}

enum Answer {
    Plan(PlanAnswer),
    Ask(bool),
}

/// What a request hands back: the connection and the log, for the next.
struct Ended {
    client: caldrix_client::Client,
    log: Log,
    outcome: Outcome,
    answer: Option<String>,
    error: Option<String>,
}

/// The session's fixed parts, shared by its requests.
struct Session {
    settings: Arc<Settings>,
    store: Store,
    project: String,
    cwd: PathBuf,
    instructions: Vec<aerix_config::InstructionFile>,
    agents: Arc<aerix_config::AgentDefinitions>,
    skills: Arc<aerix_skills::Skills>,
    /// The prompts read from the session's profile at startup, once.
    prompts: Prompts,
    /// `session.start`'s `profile`, `profile_branch`, `profile_commit`.
    profile: Option<(String, String, String)>,
    hooks: Arc<SessionHooks>,
    hook_context: Option<String>,
    main: pool::Bound,
    decision: Option<String>,
    members: Vec<String>,
    max_turns: u32,
    /// The startup's hook runs, logged after the first request's `session.start`.
    early: Mutex<Vec<Event>>,
    /// The commit the session started on (its diff line is against it).
    base: Option<(gitstore::Repo, String)>,
    resumed: bool,
}

/// Opens the screen and runs requests until Ctrl-D.
pub async fn run(settings: Settings, env: &Env, options: Options) -> anyhow::Result<Exit> {
    let (tx, mut rx) = unbounded_channel();
    let mut tty = Tty::open().context("opening the terminal")?;
    let input = tx.clone();
    read_input(move |i| input.send(Msg::Input(i)).is_ok());
    let mut screen = Screen::new(launch(&settings, env, &options));
    let draw = |tty: &mut Tty, screen: &Screen| {
        let now = Instant::now();
        let _ = tty.terminal.draw(|frame| aerix_tui::draw(frame, screen, now));
    };
    draw(&mut tty, &screen);
    let started = startup(settings, env, &options, &mut screen, &mut tty, &mut rx).await;
    let (session, mut log, client) = match started {
        Ok(Some(started)) => started,
        Ok(None) => return Ok(Exit::Done),
        Err(e) => {
            screen.startup.notes.push(Note { level: Level::Error, text: format!("{e:#}") });
            draw(&mut tty, &screen);
            wait_for_exit(&mut rx, &mut screen, &mut tty).await;
            drop(tty);
            return Err(e);
        }
    };
    screen.startup.ready = Some(options.started.elapsed());
    let session = Arc::new(session);
    let mut client = Some(client);
    let mut log_slot: Option<Log> = log.take();
    let mut cancel = Cancel::default();
    let mut gate_reply: Option<std_mpsc::Sender<Answer>> = None;
    let mut requests = 0u32;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    draw(&mut tty, &screen);
    loop {
        let msg = tokio::select! {
            msg = rx.recv() => msg,
            _ = tick.tick(), if screen.is_running() => None,
        };
        let mut submit = None;
        match msg {
            None => {}
            Some(Msg::Input(Input::Key(key))) => match screen.key(key) {
                None => {}
                Some(Action::Exit) if !screen.is_running() => break,
                Some(Action::Exit) => {}
                Some(Action::Submit(prompt)) => submit = Some(prompt),
                Some(Action::Cancel) => cancel.cancel(),
                Some(Action::Plan(answer)) => reply(&mut gate_reply, Answer::Plan(answer)),
                Some(Action::Ask(allow)) => reply(&mut gate_reply, Answer::Ask(allow)),
                Some(Action::EditPlan(text)) => {
                    let edited = tty.suspended(|| edit(&text))?;
                    let answer = match edited {
                        Ok(text) => screen.plan_edited(text),
                        Err(e) => {
                            screen.feed(
                                Feed::Note(Note {
                                    level: Level::Warning,
                                    text: format!("the plan was not edited: {e:#}"),
                                }),
                                Instant::now(),
                            );
                            screen.plan_edited(text)
                        }
                    };
                    if let Action::Plan(answer) = answer {
                        reply(&mut gate_reply, Answer::Plan(answer));
                    }
                }
            },
            Some(Msg::Input(Input::Paste(text))) => screen.paste(&text),
            Some(Msg::Input(Input::Resize)) => {
                let _ = tty.terminal.autoresize();
            }
            Some(Msg::Feed(feed)) => screen.feed(feed, Instant::now()),
            Some(Msg::Gate(gate, answer)) => {
                gate_reply = Some(answer);
                screen.set_gate(gate);
            }
            Some(Msg::Ended(ended)) => {
                let Ended { client: c, log: mut l, outcome, answer, error } = *ended;
                let exit = Exit::of(outcome).code();
                let _ = l.append(&Event::SessionEnd { outcome, exit_code: exit });
                let _ = session.store.finish(&session.project, l.id(), outcome.as_str());
                screen.feed(Feed::Diff(diff(&session)), Instant::now());
                screen.feed(
                    Feed::RequestEnded(RequestEnd {
                        outcome,
                        answer,
                        error,
                        local_time: local_time(),
                    }),
                    Instant::now(),
                );
                client = Some(c);
                log_slot = Some(l);
                gate_reply = None;
                // Whatever a hook or a tool wrote to the terminal meanwhile is drawn over.
                let _ = tty.terminal.clear();
                submit = screen.next_queued();
            }
        }
        if let Some(prompt) = submit
            && let (Some(c), Some(l)) = (client.take(), log_slot.take())
        {
            cancel = Cancel::default();
            screen.feed(
                Feed::RequestStarted { prompt: prompt.clone(), max_turns: session.max_turns },
                Instant::now(),
            );
            spawn_request(Arc::clone(&session), c, l, prompt, requests, cancel.clone(), tx.clone());
            requests += 1;
        }
        draw(&mut tty, &screen);
    }
    drop(tty);
    if let Some(log) = &mut log_slot {
        let mut sink = LogSink { log: log.try_clone()? };
        let cancel = Cancel::default();
        session.hooks.fire(Fire::SessionEnd(EndReason::Other), &cancel, &mut sink);
        // A new session that ran no request leaves nothing behind: no log, no index entry.
        if requests == 0 && !session.resumed {
            let _ = session.store.remove(&session.project, log.id());
        }
    }
    Ok(Exit::Done)
}

fn reply(slot: &mut Option<std_mpsc::Sender<Answer>>, answer: Answer) {
    if let Some(sender) = slot.take() {
        let _ = sender.send(answer);
    }
}

/// After a failed startup: the error stays on screen until Ctrl-D (or any key).
async fn wait_for_exit(rx: &mut UnboundedReceiver<Msg>, screen: &mut Screen, tty: &mut Tty) {
    while let Some(msg) = rx.recv().await {
        if let Msg::Input(Input::Key(_)) = msg {
            return;
        }
        let now = Instant::now();
        let _ = tty.terminal.draw(|frame| aerix_tui::draw(frame, screen, now));
    }
}

fn launch(settings: &Settings, env: &Env, options: &Options) -> Launch {
    let cwd = options.cwd.display().to_string();
    let cwd = match env.home.as_ref().map(|h| h.display().to_string()) {
        Some(home) if !home.is_empty() && cwd.starts_with(&home) => {
            format!("~{}", &cwd[home.len()..])
        }
        _ => cwd,
    };
    Launch {
        model: model_name(&settings.main.model),
        lane: None,
        window: 0,
        cwd,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        resumed: options.resume.is_some() || options.continue_latest,
    }
}

/// A model reference's last part: `model.gguf` for a path, the file of a repository's reference.
fn model_name(reference: &str) -> String {
    reference.rsplit('/').next().unwrap_or(reference).to_owned()
}

type Started = (Session, Option<Log>, caldrix_client::Client);

/// The startup block, row by row; `None` when the user left during it.
async fn startup(
    settings: Settings,
    env: &Env,
    options: &Options,
    screen: &mut Screen,
    tty: &mut Tty,
    rx: &mut UnboundedReceiver<Msg>,
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
    let main = pool::bind(&mut client, &settings.main, "main", load_timeout).await?;
    let decision = match &settings.decision {
        Some(member) => {
            Some(pool::bind(&mut client, member, "decision", load_timeout).await?.alias)
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
    let hooks = Arc::new(SessionHooks { hooks: loaded.hooks, session: hook_session });
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
    };
    Ok(Some((session, Some(log), client)))
}

/// `git diff --numstat` against the session's start commit.
fn diff(session: &Session) -> Option<DiffStat> {
    let (repo, base) = session.base.as_ref()?;
    let out = repo.run(&["diff", "--numstat", base], Duration::from_secs(30)).ok()?;
    Some(DiffStat::parse(&String::from_utf8_lossy(&out)))
}

fn local_time() -> String {
    chrono::Local::now().format("%H:%M:%S").to_string()
}

/// Runs `$EDITOR` (else `vi`) on the plan's text; the saved text.
fn edit(text: &str) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("plan.md");
    std::fs::write(&path, text)?;
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    // `sh -c` so that an `$EDITOR` with arguments (`code --wait`) works.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&path)
        .current_dir(dir.path())
        .status()
        .with_context(|| format!("running {editor}"))?;
    anyhow::ensure!(status.success(), "{editor} exited {status}");
    Ok(std::fs::read_to_string(&path)?)
}

/// One request on a thread of its own, driven by the process's tokio runtime.
fn spawn_request(
    session: Arc<Session>,
    client: caldrix_client::Client,
    log: Log,
    prompt: String,
    nth: u32,
    cancel: Cancel,
    tx: UnboundedSender<Msg>,
) {
    let handle = tokio::runtime::Handle::current();
    std::thread::spawn(move || {
        let ended =
            handle.block_on(request(&session, client, log, prompt, nth, cancel, tx.clone()));
        let _ = tx.send(Msg::Ended(Box::new(ended)));
    });
}

async fn request(
    session: &Session,
    mut client: caldrix_client::Client,
    log: Log,
    prompt: String,
    nth: u32,
    cancel: Cancel,
    tx: UnboundedSender<Msg>,
) -> Ended {
    let resumed = session.resumed || nth > 0;
    let mut sink = ScreenSink { log, tx: tx.clone() };
    let failed = |client, sink: ScreenSink, outcome, error: String| Ended {
        client,
        log: sink.log,
        outcome,
        answer: None,
        error: Some(error),
    };
    // The root from the log, as `--continue` rebuilds it.
    let rebuilt = if resumed {
        match read_log(sink.log.path()) {
            Ok(read) => Some(rebuild(&read.events, "a1")),
            Err(e) => {
                return failed(client, sink, Outcome::Failed, format!("the session log: {e}"));
            }
        }
    } else {
        None
    };
    let settings = &*session.settings;
    sink.event(Event::SessionStart {
        session: sink.log.id().to_owned(),
        project: session.project.clone(),
        cwd: session.cwd.display().to_string(),
        model: settings.main.model.clone(),
        decision: settings.decision.as_ref().map(|d| d.model.clone()),
        prompt: prompt.clone(),
        resumed: rebuilt.is_some(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        profile: session.profile.as_ref().map(|p| p.0.clone()),
        profile_branch: session.profile.as_ref().map(|p| p.1.clone()),
        profile_commit: session.profile.as_ref().map(|p| p.2.clone()),
    });
    let early = std::mem::take(
        &mut *session.early.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    for event in early {
        let _ = sink.log.append(&event);
    }
    let expanded = match session.skills.expand_prompt(&prompt) {
        Ok(Some(expanded)) => expanded,
        Ok(None) => prompt.clone(),
        Err(e) => return failed(client, sink, Outcome::Failed, e.to_string()),
    };
    let submitted =
        session.hooks.fire(Fire::UserPromptSubmit { prompt: &expanded }, &cancel, &mut sink);
    if let Some(block) = submitted.block.or(submitted.stop) {
        let error = format!(
            "the prompt was blocked by a UserPromptSubmit hook (`{}`): {}",
            block.command, block.reason
        );
        return failed(client, sink, Outcome::Killed, error);
    }
    let prompts = session.prompts.clone();
    let request = Request {
        prompt: expanded,
        instructions: session.instructions.clone(),
        hook_context: session.hook_context.clone(),
        prompt_context: submitted.context,
        main: session.main.alias.clone(),
        window: session.main.window,
        json: session.main.json,
        decision: session.decision.clone(),
        max_turns: session.max_turns,
        resume: rebuilt,
    };
    let agent_hooks = AgentHooks {
        hooks: &session.hooks,
        log: sink.log.try_clone().ok().map(Mutex::new),
        cancel: cancel.clone(),
        quiet: true,
    };
    let gates = ScreenGates { tx: tx.clone(), cancel: cancel.clone() };
    let mut runtime =
        Runtime::new(&mut client, &mut sink, settings, &prompts, &session.cwd, cancel.clone())
            .with_members(session.members.clone())
            .with_hooks(&agent_hooks)
            .with_definitions(&*session.agents)
            .with_skills(&*session.skills)
            .with_gates(&gates, &gates);
    let result = run_request(&mut runtime, request).await;
    drop(runtime);
    let (outcome, answer, error) = match result {
        Ok(end) => (end.end.outcome, end.end.final_text, end.end.reason),
        Err(CoreError::Cancelled) => (Outcome::Cancelled, None, None),
        Err(CoreError::Killed(reason)) => (Outcome::Killed, None, Some(reason)),
        Err(e) => (Outcome::Failed, None, Some(e.to_string())),
    };
    Ended { client, log: sink.log, outcome, answer, error }
}

/// A request's events: to the session log, and to the screen.
struct ScreenSink {
    log: Log,
    tx: UnboundedSender<Msg>,
}

impl Sink for ScreenSink {
    fn event(&mut self, event: Event) {
        let _ = self.log.append(&event);
        let _ = self.tx.send(Msg::Feed(Feed::Event(event)));
    }

    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf> {
        self.log.spool(name, text).ok()
    }

    fn live(&mut self, agent: &str, live: Live) {
        let agent = agent.to_owned();
        let feed = match live {
            Live::Generating => Feed::Generating { agent },
            Live::Streamed => Feed::Streamed { agent },
            Live::Generated => Feed::Generated { agent },
        };
        let _ = self.tx.send(Msg::Feed(feed));
    }
}

/// The session's own hook runs, outside a request: to the log only.
struct LogSink {
    log: Log,
}

impl Sink for LogSink {
    fn event(&mut self, event: Event) {
        let _ = self.log.append(&event);
    }

    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf> {
        self.log.spool(name, text).ok()
    }
}

/// The startup's hook runs, kept until the session's first `session.start` is written.
struct BufferSink(Vec<Event>);

impl Sink for BufferSink {
    fn event(&mut self, event: Event) {
        self.0.push(event);
    }

    fn spool(&mut self, _: &str, _: &str) -> Option<PathBuf> {
        None
    }
}

/// The gates, answered on the screen: the runtime's thread waits (checking the cancel flag).
struct ScreenGates {
    tx: UnboundedSender<Msg>,
    cancel: Cancel,
}

impl ScreenGates {
    fn wait(&self, gate: Gate) -> Option<Answer> {
        let (send, recv) = std_mpsc::channel();
        self.tx.send(Msg::Gate(gate, send)).ok()?;
        let wait = || loop {
            match recv.recv_timeout(Duration::from_millis(50)) {
                Ok(answer) => return Some(answer),
                Err(std_mpsc::RecvTimeoutError::Timeout) if !self.cancel.is_cancelled() => {}
                Err(_) => return None,
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(_) => tokio::task::block_in_place(wait),
            Err(_) => wait(),
        }
    }
}

impl PlanGate for ScreenGates {
    fn plan(&self, agent: &str, text: &str) -> PlanDecision {
        match self.wait(Gate::Plan { agent: agent.to_owned(), text: text.to_owned() }) {
            Some(Answer::Plan(PlanAnswer::Accept)) => PlanDecision::Accept,
            Some(Answer::Plan(PlanAnswer::Edited(text))) => PlanDecision::Replace(text),
            _ => PlanDecision::Abort,
        }
    }
}

impl AskGate for ScreenGates {
    fn ask(
        &self,
        agent: &str,
        tool: &str,
        input: &serde_json::Value,
        reason: &str,
    ) -> Result<(), String> {
        let input = input.to_string().chars().take(200).collect();
        let gate = Gate::Ask {
            agent: agent.to_owned(),
            tool: tool.to_owned(),
            input,
            reason: reason.to_owned(),
        };
        match self.wait(gate) {
            Some(Answer::Ask(true)) => Ok(()),
            _ => Err(format!("the user denied the call a PreToolUse hook asked about: {reason}")),
        }
    }
}

/// Whether plain `aerix` opens the screen: stdout and stdin are terminals and `NO_COLOR` is
/// unset (or empty).
pub fn wanted() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stdout().is_terminal() && std::io::stdin().is_terminal()
}
