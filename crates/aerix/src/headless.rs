//! `aerix -p`: the session's front end on stdout and stderr. Its prompt is the session's first
//! request (with `--input-format stream-json`, each later stdin message another); each event
//! is a progress line on stderr and what `--output-format` prints; the answer, then the diff
//! (or the `result` object) end it.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use aerix_config::{Env, Settings};
use aerix_session::{Event, Outcome};
use aerix_tools::Cancel;
use anyhow::Context as _;
use tokio::sync::mpsc::unbounded_channel;

use crate::exit::Exit;
use crate::output::{Ending, Format, Inputs, Output};
use crate::progress::progress;
use crate::session::{self, Asked, Ended, Launch, Op, Opened, Out, Recorder};
use crate::signals::{self, Signals};
use crate::startup::{Changes, Front, Trust};

pub struct Options {
    pub prompt: String,
    pub asked: Asked,
    /// `-q`.
    pub quiet: bool,
    /// `--output-format`.
    pub output: Format,
    /// `--input-format stream-json`: the requests after the first (`prompt`), read from stdin.
    pub inputs: Option<Inputs>,
}

/// `future`'s output, or `None` when the run is cancelled first.
async fn unless_cancelled<T>(cancel: &Cancel, future: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        out = future => Some(out),
        () = signals::cancelled(cancel) => None,
    }
}

/// The headless front end of the startup: a note is a line on stderr, a signal cancels the
/// step it interrupts.
struct Lines<'a> {
    cancel: &'a Cancel,
    signals: &'a Signals,
    /// The session, once known, and a resumed one's earlier events (the stream's ids go on).
    session: Option<(String, Vec<Event>)>,
}

impl Front for Lines<'_> {
    fn note(&mut self, note: &str) {
        eprintln!("{note}");
    }

    async fn step<T>(&mut self, step: impl Future<Output = T>) -> Option<T> {
        unless_cancelled(self.cancel, step).await
    }

    /// No permission prompts headless: an untrusted project's parts are skipped (`--trust`).
    async fn trust(&mut self, _: &Path, _: &[String], _: bool) -> Option<bool> {
        Some(false)
    }

    fn recording(&mut self, record: &Recorder) {
        // A second signal from here on ends the session's log line before the process exits.
        self.signals.on_second(record.clone());
    }

    fn session(&mut self, id: &str, earlier: Option<&[Event]>, _: &Path) {
        eprintln!("session {id}{}", if earlier.is_some() { " (resumed)" } else { "" });
        self.session = Some((id.to_owned(), earlier.unwrap_or_default().to_vec()));
    }
}

/// `trust`: what the project may run (the settings came through it already).
pub async fn run(
    settings: Settings,
    env: &Env,
    trust: &Trust,
    mut options: Options,
) -> anyhow::Result<Exit> {
    let signals = Signals::install().context("handling SIGINT, SIGTERM and SIGHUP")?;
    let cancel = &signals.cancel;
    let mut front = Lines { cancel, signals: &signals, session: None };
    let (tx, mut outs) = unbounded_channel();
    let exit_signals = signals.clone();
    let launch = Launch {
        asked: options.asked.clone(),
        // No one to ask: an ask rule denies, the mode's own asking lets the call through.
        front: aerix_permissions::Front::Headless,
        prompt: Some(options.prompt.clone()),
        cancelled_exit: Arc::new(move || exit_signals.exit()),
        mcp: Vec::new(),
    };
    let opened = session::open(settings, env, trust, launch, &mut front, tx, cancel).await?;
    let (id, earlier) = front.session.take().unwrap_or_default();
    let mut shown =
        Shown { output: Output::new(options.output, &id, &earlier), quiet: options.quiet };
    drop(earlier);
    let session = match opened {
        Opened::Open(session) => session,
        Opened::Ended { outcome, exit, error } => {
            shown.output.begin();
            while let Ok(out) = outs.try_recv() {
                shown.show(out);
            }
            let error = error.map(|e| format!("{e:#}")).unwrap_or_default();
            if !error.is_empty() {
                eprintln!("aerix: {error}");
            }
            shown.report(outcome, exit, &error, None);
            return Ok(exit);
        }
    };
    shown.output.set_permission_mode(session.permission_mode());
    shown.output.set_mcp_servers(session.mcp_servers());
    let (ops, ops_rx) = unbounded_channel();
    tokio::spawn(session.run(ops_rx));
    shown.output.begin();
    let _ = ops.send(Op::Prompt { text: options.prompt, cancel: cancel.clone() });
    let mut last: Option<Ended> = None;
    let mut usage: Option<String> = None;
    while let Some(out) = outs.recv().await {
        let ended = match out {
            Out::Ended(ended) => *ended,
            Out::Closed => break,
            out => {
                shown.show(out);
                continue;
            }
        };
        if let Some(error) = &ended.error {
            eprintln!("aerix: {error}");
        }
        if let (Format::Text, Some(answer)) = (options.output, &ended.answer) {
            println!("{answer}");
        }
        let Some(inputs) = options.inputs.as_mut() else {
            last = Some(ended);
            let _ = ops.send(Op::Close { hurry: cancel.clone() });
            continue;
        };
        // This request's result, then the next message (a signal ends the wait).
        shown.report_ended(&ended);
        let next = match unless_cancelled(cancel, inputs.next()).await {
            Some(Some(Ok(prompt))) => Some(prompt),
            // A bad line ends the session as its last request ended, then says what is wrong.
            Some(Some(Err(e))) => {
                usage = Some(e);
                None
            }
            None | Some(None) => None,
        };
        match next {
            Some(text) => {
                shown.output.begin();
                let _ = ops.send(Op::Prompt { text, cancel: cancel.clone() });
            }
            None => {
                let _ = ops.send(Op::Close { hurry: cancel.clone() });
            }
        }
        last = Some(ended);
    }
    let Some(last) = last else {
        return Err(anyhow::anyhow!("the session ended before its request did"));
    };
    // Each request of a stream-json input reported as it ended; a single request reports here,
    // after `SessionEnd` (what a SessionEnd hook wrote is in its diff).
    match options.output {
        Format::Text => {
            if let Some(changes) = changes(&last) {
                print!("{changes}");
            }
        }
        _ if options.inputs.is_none() => shown.report_ended(&last),
        _ => {}
    }
    if let Some(failed) = &last.log_failed {
        eprintln!("aerix: the session log could not be written: {failed}");
    }
    if let Some(e) = usage {
        return Err(Exit::Usage.with(e).into());
    }
    // A signal while the next message was awaited: the session ended cancelled.
    if cancel.is_cancelled() && last.outcome != Outcome::Cancelled && options.inputs.is_some() {
        return Ok(signals.exit());
    }
    Ok(last.exit)
}

/// What stdout and stderr show of the session.
struct Shown {
    output: Output,
    quiet: bool,
}

impl Shown {
    fn show(&mut self, out: Out) {
        match out {
            Out::Event(event) => {
                if !self.quiet {
                    progress(&event);
                }
                self.output.event(&event);
            }
            Out::Note(note) => eprintln!("{note}"),
            // Headless asks nothing: its permissions deny what would ask. A question that came
            // anyway is refused by dropping its reply.
            Out::Ask(..) | Out::Live { .. } | Out::Rewound(_) | Out::Ended(_) | Out::Closed => {}
        }
    }

    /// A request's `result` object (`json`, `stream-json`), once: its answer or what ended
    /// it, and what it changed.
    fn report_ended(&mut self, ended: &Ended) {
        let text = match (&ended.error, &ended.answer) {
            (Some(error), _) => error.as_str(),
            (None, answer) => answer.as_deref().unwrap_or_default(),
        };
        self.report(ended.outcome, ended.exit, text, changes(ended).as_ref());
    }

    fn report(&mut self, outcome: Outcome, exit: Exit, text: &str, changes: Option<&Changes>) {
        self.output.result(&Ending {
            outcome,
            exit_code: exit.code(),
            result: text,
            diff: changes.map(|c| c.diff.as_str()).unwrap_or_default(),
            untracked: changes.map(|c| c.untracked.as_slice()).unwrap_or_default(),
        });
    }
}

/// What a request changed in the tree (`None` outside git; a failure to read it is said).
fn changes(ended: &Ended) -> Option<Changes> {
    match ended.since_request.as_ref()?.changes() {
        Ok(changes) => Some(changes),
        Err(e) => {
            eprintln!("aerix: {e:#}");
            None
        }
    }
}
