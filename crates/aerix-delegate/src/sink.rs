//! A piece's sink: its events go to the caller's sink (one lock per event, so lines of
//! concurrent pieces never mix), and what its agents changed and ran is noted on the way for
//! the piece's result.

use std::path::PathBuf;
use std::sync::Mutex;

use aerix_session::Event;
use serde_json::Value;

use aerix_core::{Live, Sink};

use crate::lock;

pub(crate) struct PieceSink<'s, 'p> {
    shared: &'s Mutex<&'p mut dyn Sink>,
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

impl<'s, 'p> PieceSink<'s, 'p> {
    pub(crate) fn new(
        shared: &'s Mutex<&'p mut dyn Sink>,
        piece: &str,
        trace: &'s Mutex<Trace>,
    ) -> PieceSink<'s, 'p> {
        PieceSink { shared, piece: piece.to_owned(), trace, spooled: 0 }
    }

    fn note(&mut self, event: &Event) {
        let Event::Message { agent, role, tool: Some(tool), input: Some(input), error, .. } = event
        else {
            return;
        };
        let ours = agent == &self.piece || agent.starts_with(&format!("{}.", self.piece));
        if !ours || *role != aerix_session::Role::Tool || *error == Some(true) {
            return;
        }
        let mut trace = lock(self.trace);
        let (list, key) = match tool.as_str() {
            "write" | "edit" => (&mut trace.files, "path"),
            "bash" => (&mut trace.checks, "command"),
            _ => return,
        };
        if let Some(value) = input.get(key).and_then(Value::as_str)
            && !list.iter().any(|v| v == value)
        {
            list.push(value.to_owned());
        }
    }
}

impl Sink for PieceSink<'_, '_> {
    fn event(&mut self, event: Event) {
        self.note(&event);
        lock(self.shared).event(event);
    }

    fn live(&mut self, agent: &str, live: Live) {
        lock(self.shared).live(agent, live);
    }

    fn spool_dir(&self) -> Option<PathBuf> {
        lock(self.shared).spool_dir()
    }

    /// Names are made unique within the piece: every agent numbers its calls from `c1`.
    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf> {
        self.spooled += 1;
        let name = format!("{}.{}-{name}", self.piece, self.spooled);
        lock(self.shared).spool(&name, text)
    }
}
