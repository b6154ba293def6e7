//! Where an agent's events go.

use std::path::PathBuf;

use aerix_session::Event;

/// Where an agent's events go (the session log, a screen, a test), and its spool.
pub trait Sink: Send {
    fn event(&mut self, event: Event);
    /// Writes a whole tool result once; its path, or `None` when it could not be written.
    fn spool(&mut self, name: &str, text: &str) -> Option<PathBuf>;
    /// The directory `spool` writes to: the file tools may read there (a capped result's
    /// pointer names a file in it), never write.
    fn spool_dir(&self) -> Option<PathBuf> {
        None
    }
    /// A generation's progress as it happens (not logged: a screen's live figures). `agent`
    /// is the agent generating, `route` for routing's probe.
    fn live(&mut self, _agent: &str, _live: Live) {}
    /// A line for the user that is not an event (an "always" answer that could not be kept on
    /// disk): shown, not logged.
    fn note(&mut self, _line: String) {}
}

/// A generation's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Live {
    /// Sent to the pool.
    Generating,
    /// A piece of text arrived.
    Streamed,
    /// Its `done` came (or it failed, or was cancelled).
    Generated,
}
