//! Plain `aerix` on a terminal: the screen (`aerix-tui`) as the session's front end
//! (`crate::session`): its startup shown as the rows of the startup block, each typed prompt an
//! operation, each of the session's outputs fed to the screen. The session runs on a task of its
//! own, so a redraw never waits on the pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aerix_config::{Env, Layered, Settings};
use aerix_tools::Cancel;
use aerix_tui::terminal::{Input, Tty, read_input};
use aerix_tui::{
    Action, AskAnswer, DiffStat, Feed, Gate, Launch, Level, Note, PlanAnswer, RequestEnd, Screen,
};
use anyhow::Context as _;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::exit::Exit;
use crate::session::{Ask, Asked, CancelledExit, Ended, Op, Out, Reply};
use crate::startup::Trust;

mod close;
mod startup;

use close::{Signals, Stderr};

use startup::startup;

pub struct Options {
    pub asked: Asked,
    /// `--model`.
    pub model: Option<String>,
}

/// What reaches the screen's loop besides the session's outputs.
enum Msg {
    Input(Input),
    /// SIGTERM, SIGHUP or SIGINT came (`Signals::first` says which came first).
    Signal,
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
    let (outs_tx, mut outs) = unbounded_channel();
    let first = signals.interrupt();
    let cancelled_exit: CancelledExit =
        Arc::new(move || first.got().map_or(Exit::Cancelled, |(_, exit)| exit));
    let started = tokio::select! {
        started = startup((layered, trust), env, &options, (&mut screen, &mut tty, &mut rx), (outs_tx, Arc::clone(&cancelled_exit)), &mut stderr) => started,
        (name, exit) = signals.wait() => {
            drop(tty);
            drop(stderr);
            eprintln!("aerix: {name}: the screen closed during its startup");
            return Ok(exit);
        }
    };
    let session = match started {
        Ok(Some(session)) => session,
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
    screen.startup.ready = Some(options.asked.started.elapsed());
    let max_turns = session.max_turns();
    let record = session.recorder();
    let (ops, ops_rx) = unbounded_channel();
    let running = tokio::spawn(session.run(ops_rx));
    let mut cancel = Cancel::default();
    let mut gate_reply: Option<tokio::sync::oneshot::Sender<Reply>> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    // Set by a signal or Ctrl-D: the screen closes when the session has closed, or at this
    // time.
    let mut closing: Option<Instant> = None;
    draw(&mut tty, &screen);
    loop {
        let (msg, out) = tokio::select! {
            msg = rx.recv() => (msg, None),
            out = outs.recv() => match out {
                Some(out) => (None, Some(out)),
                None => break,
            },
            _ = tick.tick(), if screen.is_running() || closing.is_some() => (None, None),
        };
        if closing.is_some_and(|deadline| Instant::now() >= deadline) {
            // The request did not end in time: its log line ends here, as a second signal
            // ends a headless run's.
            record.abandon(cancelled_exit());
            break;
        }
        let mut submit = None;
        let mut close = false;
        match msg {
            None => {}
            Some(Msg::Signal) => {
                // A second signal (or one after Ctrl-D): close now.
                if closing.is_some() {
                    record.abandon(cancelled_exit());
                    break;
                }
                closing = Some(Instant::now() + CLOSE_WAIT);
                cancel.cancel();
                close = true;
            }
            Some(Msg::Input(Input::Key(key))) => match screen.key(key) {
                None => {}
                Some(Action::Exit) if !screen.is_running() && closing.is_none() => {
                    // The session's end (SessionEnd's handlers) has the same bound a signal's
                    // wait has; past it the screen closes without it.
                    closing = Some(Instant::now() + CLOSE_WAIT);
                    close = true;
                }
                Some(Action::Exit) => {}
                Some(Action::Submit(prompt)) => submit = Some(prompt),
                Some(Action::Cancel) => cancel.cancel(),
                Some(Action::Plan(answer)) => reply(&mut gate_reply, plan_reply(answer)),
                Some(Action::Ask(answer)) => reply(&mut gate_reply, ask_reply(answer)),
                // The trust question is the startup's, answered before this loop.
                Some(Action::Trust(_)) => {}
                Some(Action::Rewind(arg)) => {
                    if screen.is_running() {
                        let text = "a request is running: /rewind once it has ended".to_owned();
                        screen.feed(Feed::Note(Note { level: Level::Info, text }), Instant::now());
                    } else {
                        let _ = ops.send(Op::Rewind(arg));
                    }
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
                        reply(&mut gate_reply, plan_reply(answer));
                    }
                }
            },
            Some(Msg::Input(Input::Paste(text))) => screen.paste(&text),
            Some(Msg::Input(Input::Resize)) => {
                let _ = tty.terminal.autoresize();
            }
        }
        match out {
            None => {}
            Some(Out::Event(event)) => screen.feed(Feed::Event(event), Instant::now()),
            Some(Out::Note(text)) => {
                screen.feed(Feed::Note(Note { level: Level::Warning, text }), Instant::now());
            }
            Some(Out::Live { agent, live }) => screen.feed(live_feed(agent, live), Instant::now()),
            Some(Out::Ask(ask, answer)) => {
                gate_reply = Some(answer);
                screen.set_gate(gate(ask));
            }
            Some(Out::Rewound(text)) => {
                screen.feed(Feed::Note(Note { level: Level::Info, text }), Instant::now());
            }
            Some(Out::Ended(ended)) => {
                let Ended { outcome, answer, reason, error, since_session, .. } = *ended;
                let stat = since_session.and_then(|s| s.numstat()).as_deref().map(DiffStat::parse);
                screen.feed(Feed::Diff(stat), Instant::now());
                screen.feed(
                    Feed::RequestEnded(RequestEnd {
                        outcome,
                        answer,
                        error: error.or(reason),
                        local_time: local_time(),
                    }),
                    Instant::now(),
                );
                gate_reply = None;
                // Whatever a hook or a tool wrote to the terminal meanwhile is drawn over.
                let _ = tty.terminal.clear();
                if closing.is_none() {
                    submit = screen.next_queued();
                }
            }
            Some(Out::Closed) => break,
        }
        if close {
            let hurry = signals.hurry.clone();
            let _ = ops.send(Op::Close { hurry });
        }
        if let Some(prompt) = submit
            && closing.is_none()
        {
            cancel = Cancel::default();
            screen.feed(Feed::RequestStarted { prompt: prompt.clone(), max_turns }, Instant::now());
            let _ = ops.send(Op::Prompt { text: prompt, cancel: cancel.clone() });
        }
        draw(&mut tty, &screen);
    }
    drop(tty);
    drop(stderr);
    // A session still closing (a request that did not end in time) is left to the exit.
    drop(running);
    match signals.first() {
        Some((name, exit)) => {
            eprintln!("aerix: {name}: the screen closed");
            Ok(exit)
        }
        None => Ok(Exit::Done),
    }
}

fn reply(slot: &mut Option<tokio::sync::oneshot::Sender<Reply>>, answer: Reply) {
    if let Some(sender) = slot.take() {
        let _ = sender.send(answer);
    }
}

fn plan_reply(answer: PlanAnswer) -> Reply {
    match answer {
        PlanAnswer::Accept => Reply::Accept,
        PlanAnswer::Edited(text) => Reply::Edited(text),
        PlanAnswer::Abort => Reply::Deny,
    }
}

fn ask_reply(answer: AskAnswer) -> Reply {
    match answer {
        AskAnswer::Once => Reply::Once,
        AskAnswer::Always => Reply::Always,
        AskAnswer::Deny => Reply::Deny,
    }
}

/// A session's question as the screen's gate (a call's input cut to 200 characters).
fn gate(ask: Ask) -> Gate {
    match ask {
        Ask::Plan { agent, text } => Gate::Plan { agent, text },
        Ask::Call { agent, tool, input, reason, always, .. } => {
            let input = input.to_string().chars().take(200).collect();
            Gate::Ask { agent, tool, input, reason, always }
        }
    }
}

fn live_feed(agent: String, live: aerix_agent::runtime::Live) -> Feed {
    match live {
        aerix_agent::runtime::Live::Generating => Feed::Generating { agent },
        aerix_agent::runtime::Live::Streamed => Feed::Streamed { agent },
        aerix_agent::runtime::Live::Generated => Feed::Generated { agent },
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
    let cwd = options.asked.cwd.display().to_string();
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
        resumed: options.asked.resume.is_some() || options.asked.continue_latest,
    }
}

/// A model reference's last part: `model.gguf` for a path, the file of a repository's reference.
fn model_name(reference: &str) -> String {
    reference.rsplit('/').next().unwrap_or(reference).to_owned()
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
