//! Where a session's events go: its log and its front end, through one handle every writer
//! shares (the request's sink, the hooks the runtime fires, a second signal). The log's
//! `session.start`/`session.end` pairs are written under one lock, so a request's end is
//! written once whoever writes it first.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::runtime::{Live, Sink};
use aerix_session::{Event, Log, Outcome, Store};
use tokio::sync::mpsc::UnboundedSender;

use super::Out;
use crate::exit::Exit;

#[derive(Clone)]
pub struct Recorder {
    ledger: Arc<Mutex<Ledger>>,
    outs: UnboundedSender<Out>,
}

struct Ledger {
    log: Log,
    store: Store,
    project: String,
    /// The startup's hook runs, logged after the first `session.start` (a log opens with it).
    early: Option<Vec<Event>>,
    /// A `session.start` is written without its `session.end`.
    open: bool,
    /// The `session.start` of the request the front end gave with the startup (`aerix -p`'s
    /// prompt), until a request writes its own: a second signal during the startup writes it
    /// with its end.
    pending: Option<Event>,
    /// Ended from outside (a second signal): nothing more is written.
    abandoned: bool,
    /// The first write that failed.
    failed: Option<String>,
}

impl Ledger {
    /// `start`, then (the first time) the startup's events: the request is open.
    fn write_start(&mut self, start: &Event) {
        self.append(start);
        for event in self.early.take().unwrap_or_default() {
            self.append(&event);
        }
        self.open = true;
    }

    fn append(&mut self, event: &Event) {
        if let Err(e) = self.log.append(event)
            && self.failed.is_none()
        {
            self.failed = Some(e.to_string());
        }
    }
}

impl Recorder {
    pub fn new(log: Log, store: Store, project: String, outs: UnboundedSender<Out>) -> Recorder {
        let ledger = Ledger {
            log,
            store,
            project,
            early: Some(Vec::new()),
            open: false,
            pending: None,
            abandoned: false,
            failed: None,
        };
        Recorder { ledger: Arc::new(Mutex::new(ledger)), outs }
    }

    fn lock(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn outs(&self) -> &UnboundedSender<Out> {
        &self.outs
    }

    /// A note for the user.
    pub fn note(&self, note: impl Into<String>) {
        let _ = self.outs.send(Out::Note(note.into()));
    }

    pub fn log_path(&self) -> PathBuf {
        self.lock().log.path().to_owned()
    }

    /// The `session.start` a second signal writes while the startup runs.
    pub fn pending(&self, start: Event) {
        self.lock().pending = Some(start);
    }

    /// A request begins: its `session.start`, then (the first time) the startup's events.
    pub fn start(&self, start: Event) {
        let mut ledger = self.lock();
        if ledger.abandoned {
            return;
        }
        ledger.pending = None;
        ledger.write_start(&start);
        let _ = self.outs.send(Out::Event(start));
    }

    /// The open request's `session.end`, and the index's outcome; nothing when none is open.
    pub fn end(&self, outcome: Outcome, exit: Exit) {
        let mut ledger = self.lock();
        if !ledger.open || ledger.abandoned {
            return;
        }
        let end = Event::SessionEnd { outcome, exit_code: exit.code() };
        ledger.append(&end);
        let _ = self.outs.send(Out::Event(end));
        let Ledger { store, project, log, .. } = &*ledger;
        let _ = store.finish(project, log.id(), outcome.as_str());
        ledger.open = false;
    }

    /// The open request ends with `outcome`; when none is open, the one the startup was
    /// starting (its pending `session.start`, written first), if any.
    pub fn end_pending(&self, outcome: Outcome, exit: Exit) {
        {
            let mut ledger = self.lock();
            if !ledger.open
                && !ledger.abandoned
                && let Some(start) = ledger.pending.take()
            {
                ledger.write_start(&start);
                let _ = self.outs.send(Out::Event(start));
            }
        }
        self.end(outcome, exit);
    }

    /// A second signal: the open or pending request ends cancelled now, and nothing more is
    /// written (the process is about to exit).
    pub fn abandon(&self, exit: Exit) {
        self.end_pending(Outcome::Cancelled, exit);
        self.lock().abandoned = true;
    }

    /// The log as the session ends: kept (the startup's events written, when no request wrote
    /// them), or removed with its index entry (`keep` false: a new session that ran no
    /// request leaves nothing behind).
    pub fn settle(&self, keep: bool) {
        let mut ledger = self.lock();
        if ledger.abandoned {
            return;
        }
        if keep {
            for event in ledger.early.take().unwrap_or_default() {
                ledger.append(&event);
            }
        } else {
            let Ledger { store, project, log, .. } = &*ledger;
            let _ = store.remove(project, log.id());
        }
    }

    /// The first write to the log that failed, taken.
    pub fn failed(&self) -> Option<String> {
        self.lock().failed.take()
    }
}

impl Sink for Recorder {
    fn event(&mut self, event: Event) {
        {
            let mut ledger = self.lock();
            if ledger.abandoned {
                return;
            }
            match ledger.early.as_mut() {
                Some(early) => early.push(event.clone()),
                None => ledger.append(&event),
            }
        }
        let _ = self.outs.send(Out::Event(event));
    }

    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf> {
        let mut ledger = self.lock();
        match ledger.log.spool(name, text) {
            Ok(path) => Some(path),
            Err(e) => {
                if ledger.failed.is_none() {
                    ledger.failed = Some(e.to_string());
                }
                None
            }
        }
    }

    fn spool_dir(&self) -> Option<PathBuf> {
        Some(self.lock().log.spool_dir())
    }

    fn note(&mut self, line: String) {
        Recorder::note(self, format!("aerix: {line}"));
    }

    fn live(&mut self, agent: &str, live: Live) {
        let _ = self.outs.send(Out::Live { agent: agent.to_owned(), live });
    }
}
