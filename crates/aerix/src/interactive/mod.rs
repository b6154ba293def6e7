//! Plain `aerix` on a terminal: the screen (`aerix-tui`). Startup as `aerix -p` does it (the
//! rows of the startup block instead of lines on stderr), then each request is its own runtime
//! over the session, as `--continue` would run it: the root rebuilt from the log, `session.start`
//! and `session.end` around it. The runtime runs on a thread of its own; the screen gets its
//! events through a channel, so a redraw never waits on the pool.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aerix_config::{Env, Layered, Settings};
use aerix_core::Prompts;
use aerix_hooks::{EndReason, Fire};
use aerix_session::{Event, Log, Outcome, Store};
use aerix_tools::Cancel;
use aerix_tui::terminal::{Input, Tty, read_input};
use aerix_tui::{
    Action, AskAnswer, DiffStat, Feed, Gate, Launch, Level, Note, PlanAnswer, RequestEnd, Screen,
};
use anyhow::Context as _;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::attach::SessionBranch;
use crate::exit::Exit;
use crate::hooks::SessionHooks;
use crate::pool;
use crate::startup::{Snapshot, Trust};

mod close;
mod request;
mod startup;

use close::{Signals, Stderr};

use request::{LogSink, spawn_request};
use startup::startup;

pub struct Options {
    pub cwd: PathBuf,
    /// `--model`.
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub resume: Option<String>,
    pub continue_latest: bool,
    /// `--profile NAME`.
    pub profile: Option<String>,
    /// `--profile-refresh`.
    pub profile_refresh: bool,
    /// `--permission-mode`.
    pub permission_mode: Option<aerix_permissions::Mode>,
    pub started: Instant,
}

/// What reaches the screen's loop.
enum Msg {
    Input(Input),
    Feed(Feed),
    /// A gate waits for the user; the answer goes back on the sender.
    /// A gate to show; the answer goes back on the sender.
    Gate(Gate, tokio::sync::oneshot::Sender<Answer>),
    /// A request's thread ended.
    Ended(Box<Ended>),
    /// SIGTERM, SIGHUP or SIGINT came (`Signals::first` says which came first).
    Signal,
}

enum Answer {
    Plan(PlanAnswer),
    Ask(AskAnswer),
}

/// What a request hands back: the connection and the log, for the next.
struct Ended {
    client: caldrix_client::Client,
    log: Log,
    outcome: Outcome,
    answer: Option<String>,
    error: Option<String>,
    /// The root, live for the next request (none after a failed or cancelled one).
    root: Option<aerix_request::Root>,
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
    /// The MCP servers started at startup; their processes end with the screen.
    mcp: Arc<aerix_mcp::Servers>,
    /// The prompts read from the session's profile at startup, once.
    prompts: Arc<Prompts>,
    /// `session.start`'s `profile`, `profile_branch`, `profile_commit`.
    profile: Option<(String, String, String)>,
    hooks: Arc<SessionHooks>,
    hook_context: Option<String>,
    /// The permission rules, the mode, and the screen as who answers.
    permissions: Arc<aerix_permissions::Permissions>,
    main: pool::Bound,
    decision: Option<String>,
    members: Vec<String>,
    /// Where pieces' worktrees live (`None`: in place) and the repository's test commands.
    worktrees: Option<aerix_delegate::WorktreePlace>,
    checks: Vec<String>,
    max_turns: u32,
    /// The startup's hook runs, logged after the first request's `session.start`.
    early: Mutex<Vec<Event>>,
    /// The session's id.
    id: String,
    /// The working tree the session started on (its diff line is against it).
    base: Option<Snapshot>,
    /// The profile's `session/<id>`, made by the screen's first request.
    branch: Option<SessionBranch>,
    resumed: bool,
    /// The number of the session's first request on this screen (a resumed session's go on
    /// from its log's).
    first_request: u32,
}

/// After a signal, how long the running request has to end (a command's `TERM` grace, the
/// pool's `done` to a cancel) before the screen closes without it.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// Opens the screen and runs requests until Ctrl-D (or a signal).
/// `trust`: what the project would run; the screen asks before any of it runs.
pub async fn run(
    layered: Layered,
    trust: Trust,
    env: &Env,
    options: Options,
) -> anyhow::Result<Exit> {
    let (tx, mut rx) = unbounded_channel();
    let signals = Signals::install(tx.clone()).context("handling signals")?;
    let mut stderr: Option<Stderr> = None;
    let mut tty = Tty::open().context("opening the terminal")?;
    let input = tx.clone();
    read_input(move |i| input.send(Msg::Input(i)).is_ok());
    // The launch line shows the model every file names; the trust step may withhold it.
    let preview = crate::finish(layered.all().clone(), options.model.clone());
    let mut screen = Screen::new(launch(&preview, env, &options));
    let draw = |tty: &mut Tty, screen: &Screen| {
        let now = Instant::now();
        let _ = tty.terminal.draw(|frame| aerix_tui::draw(frame, screen, now));
    };
    draw(&mut tty, &screen);
    let started = tokio::select! {
        started = startup((layered, trust), env, &options, &mut screen, &mut tty, (&mut rx, &tx), &mut stderr) => started,
        (name, exit) = signals.wait() => {
            drop(tty);
            drop(stderr);
            eprintln!("aerix: {name}: the screen closed during its startup");
            return Ok(exit);
        }
    };
    let (session, mut log, client) = match started {
        Ok(Some(started)) => started,
        Ok(None) => return Ok(Exit::Done),
        Err(e) => {
            screen.startup.notes.push(Note { level: Level::Error, text: format!("{e:#}") });
            draw(&mut tty, &screen);
            wait_for_exit(&mut rx, &mut screen, &mut tty).await;
            drop(tty);
            drop(stderr);
            if let Some((name, exit)) = signals.first() {
                eprintln!("aerix: {e:#}");
                eprintln!("aerix: {name}: the screen closed");
                return Ok(exit);
            }
            return Err(e);
        }
    };
    screen.startup.ready = Some(options.started.elapsed());
    let session = Arc::new(session);
    let mut client = Some(client);
    // The root the last request left, live in the pool for the next one.
    let mut root: Option<aerix_request::Root> = None;
    let mut log_slot: Option<Log> = log.take();
    let mut cancel = Cancel::default();
    let mut gate_reply: Option<tokio::sync::oneshot::Sender<Answer>> = None;
    let mut requests = 0u32;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    // Set by a signal: the screen closes when the running request has ended, or at this time.
    let mut closing: Option<Instant> = None;
    draw(&mut tty, &screen);
    loop {
        let msg = tokio::select! {
            msg = rx.recv() => msg,
            _ = tick.tick(), if screen.is_running() || closing.is_some() => None,
        };
        if closing.is_some_and(|deadline| Instant::now() >= deadline) {
            break;
        }
        let mut submit = None;
        match msg {
            None => {}
            Some(Msg::Signal) => {
                // A second signal, or nothing to wait for: close now.
                if closing.is_some() || !screen.is_running() {
                    break;
                }
                closing = Some(Instant::now() + CLOSE_WAIT);
                cancel.cancel();
            }
            Some(Msg::Input(Input::Key(key))) => match screen.key(key) {
                None => {}
                Some(Action::Exit) if !screen.is_running() => break,
                Some(Action::Exit) => {}
                Some(Action::Submit(prompt)) => submit = Some(prompt),
                Some(Action::Cancel) => cancel.cancel(),
                Some(Action::Plan(answer)) => reply(&mut gate_reply, Answer::Plan(answer)),
                Some(Action::Ask(answer)) => reply(&mut gate_reply, Answer::Ask(answer)),
                // The trust question is the startup's, answered before this loop.
                Some(Action::Trust(_)) => {}
                Some(Action::Rewind(arg)) => {
                    let text = if screen.is_running() {
                        "a request is running: /rewind once it has ended".to_owned()
                    } else {
                        let (store, project, cwd) =
                            (&session.store, &session.project, &session.cwd);
                        let id = &session.id;
                        let (text, rewound) =
                            crate::checkpoint::screen(store, project, id, cwd, arg.as_deref());
                        // A rewound conversation: the next request reads the root back from the
                        // log, which leaves the rewound requests out; the live one goes.
                        if rewound && let (Some(r), Some(c)) = (root.take(), client.as_mut()) {
                            r.drop_context(c).await;
                        }
                        text
                    };
                    let note = Note { level: Level::Info, text };
                    screen.feed(Feed::Note(note), Instant::now());
                }
                Some(Action::EditPlan(text)) => {
                    let edited = tty.suspended(|| match &stderr {
                        Some(stderr) => stderr.suspended(|| crate::editor::edit("plan.md", &text)),
                        None => crate::editor::edit("plan.md", &text),
                    })?;
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
                let Ended { client: c, log: mut l, outcome, answer, error, root: r } = *ended;
                root = r;
                let exit = match signals.first() {
                    Some((_, exit)) if outcome == Outcome::Cancelled => exit.code(),
                    _ => Exit::of(outcome).code(),
                };
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
                if closing.is_some() {
                    break;
                }
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
            let (session, r) = (Arc::clone(&session), root.take());
            spawn_request(session, c, l, r, prompt, requests, cancel.clone(), tx.clone());
            requests += 1;
        }
        draw(&mut tty, &screen);
    }
    drop(tty);
    // The live root leaves the pool with the screen.
    if let (Some(root), Some(c)) = (root.take(), client.as_mut()) {
        root.drop_context(c).await;
    }
    drop(stderr);
    // From here a hook's note is a line on the terminal again.
    drop(rx);
    let signalled = signals.first();
    if let Some((_, exit)) = signalled
        && log_slot.is_none()
    {
        // The request did not end in time: its session ends here, as a second signal ends a
        // headless run's.
        log_slot = end_unfinished(&session, exit);
    }
    if let Some(log) = &mut log_slot {
        let mut sink = LogSink { log: log.try_clone()? };
        let reason = if signalled.is_some() { EndReason::Cancelled } else { EndReason::Other };
        // Its answers mean nothing: the screen has closed.
        let _ = session.hooks.fire(Fire::SessionEnd(reason), &signals.hurry, &mut sink);
        // A new session that ran no request leaves nothing behind: no log, no index entry.
        if requests == 0 && !session.resumed {
            let _ = session.store.remove(&session.project, log.id());
        }
    }
    match signalled {
        Some((name, exit)) => {
            eprintln!("aerix: {name}: the screen closed");
            Ok(exit)
        }
        None => Ok(Exit::Done),
    }
}

/// Writes `session.end` (cancelled) for a request still running when the screen closes.
fn end_unfinished(session: &Session, exit: Exit) -> Option<Log> {
    let id = session.id.as_str();
    let mut log = session.store.open(&session.project, id).ok()?;
    let _ = log.append(&Event::SessionEnd { outcome: Outcome::Cancelled, exit_code: exit.code() });
    let _ = session.store.finish(&session.project, id, Outcome::Cancelled.as_str());
    Some(log)
}

fn reply(slot: &mut Option<tokio::sync::oneshot::Sender<Answer>>, answer: Answer) {
    if let Some(sender) = slot.take() {
        let _ = sender.send(answer);
    }
}

/// After a failed startup: the error stays on screen until Ctrl-D (or any key).
async fn wait_for_exit(rx: &mut UnboundedReceiver<Msg>, screen: &mut Screen, tty: &mut Tty) {
    while let Some(msg) = rx.recv().await {
        // A signal closes it too: a terminal gone (SIGHUP) sends no key.
        if let Msg::Input(Input::Key(_)) | Msg::Signal = msg {
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

/// `git diff --numstat` against the session's start (files untracked then included).
fn diff(session: &Session) -> Option<DiffStat> {
    Some(DiffStat::parse(&session.base.as_ref()?.numstat()?))
}

fn local_time() -> String {
    chrono::Local::now().format("%H:%M:%S").to_string()
}

/// Whether plain `aerix` opens the screen: stdout and stdin are terminals and `NO_COLOR` is
/// unset (or empty).
pub fn wanted() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stdout().is_terminal() && std::io::stdin().is_terminal()
}
