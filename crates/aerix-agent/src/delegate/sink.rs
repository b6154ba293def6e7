//! A piece's sink: its events go to the caller's task over a channel (the caller writes them to
//! its sink in the order they come, so lines of concurrent pieces never mix), its spool files
//! into the caller's spool directory, and what its agents changed and ran is noted on the way
//! for the piece's result.

use std::path::PathBuf;
use std::sync::Mutex;

use aerix_session::Event;
use aerix_turn::tools::Key;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::runtime::{Live, Sink};

use crate::delegate::lock;

/// What a piece sends its caller's sink.
pub(crate) enum Out {
    Event(Box<Event>),
    Live(String, Live),
    Note(String),
}

/// Where a piece's events go: the caller's task, and its spool directory.
#[derive(Clone)]
pub(crate) struct Outlet {
    pub(crate) tx: UnboundedSender<Out>,
    pub(crate) spool_dir: Option<PathBuf>,
}

impl Outlet {
    pub(crate) fn event(&self, event: Event) {
        // The caller waits for every piece before it stops reading: a send fails only when
        // it has gone, and then there is no one to tell.
        let _ = self.tx.send(Out::Event(Box::new(event)));
    }
}

/// Writes what pieces sent into `sink`.
pub(crate) fn forward(sink: &mut dyn Sink, out: Out) {
    match out {
        Out::Event(event) => sink.event(*event),
        Out::Live(agent, live) => sink.live(&agent, live),
        Out::Note(line) => sink.note(line),
    }
}

pub(crate) struct PieceSink<'s> {
    outlet: &'s Outlet,
    /// The piece's id (`a1.c3`): its implementers, verifiers and their own pieces start so.
    piece: String,
    trace: &'s Mutex<Trace>,
    spooled: u32,
}

/// What a piece's agents changed and ran (the verifier's brief and the caller's result).
#[derive(Clone, Debug, Default)]
pub(crate) struct Trace {
    /// Paths written or edited, in first-touch order.
    pub(crate) files: Vec<String>,
    /// Commands run, in first-run order.
    pub(crate) checks: Vec<String>,
}

impl<'s> PieceSink<'s> {
    pub(crate) fn new(outlet: &'s Outlet, piece: &str, trace: &'s Mutex<Trace>) -> PieceSink<'s> {
        PieceSink { outlet, piece: piece.to_owned(), trace, spooled: 0 }
    }

    fn trace(&mut self, event: &Event) {
        let Event::Message { agent, role, tool: Some(tool), input: Some(input), error, .. } = event
        else {
            return;
        };
        let ours = agent == &self.piece || agent.starts_with(&format!("{}.", self.piece));
        if !ours || *role != aerix_session::Role::Tool || *error == Some(true) {
            return;
        }
        let mut trace = lock(self.trace);
        let (list, key) = match aerix_turn::tool_named(tool).map(|t| t.key) {
            Some(Key::Edits { field }) => (&mut trace.files, field),
            Some(Key::Command { field }) => (&mut trace.checks, field),
            _ => return,
        };
        if let Some(value) = input.get(key).and_then(Value::as_str)
            && !list.iter().any(|v| v == value)
        {
            list.push(value.to_owned());
        }
    }
}

impl Sink for PieceSink<'_> {
    fn event(&mut self, event: Event) {
        self.trace(&event);
        self.outlet.event(event);
    }

    fn live(&mut self, agent: &str, live: Live) {
        let _ = self.outlet.tx.send(Out::Live(agent.to_owned(), live));
    }

    fn spool_dir(&self) -> Option<PathBuf> {
        self.outlet.spool_dir.clone()
    }

    fn note(&mut self, line: String) {
        let _ = self.outlet.tx.send(Out::Note(line));
    }

    /// Names are made unique within the piece: every agent numbers its calls from `c1`.
    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf> {
        self.spooled += 1;
        let dir = self.outlet.spool_dir.as_ref()?;
        aerix_session::spool(dir, &format!("{}.{}-{name}", self.piece, self.spooled), text).ok()
    }
}
