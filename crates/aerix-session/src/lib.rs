//! Sessions: `$XDG_DATA_HOME/aerix/sessions/<project key>/<id>.jsonl`, one event per line, an
//! `index.json` beside them, spool files under `<id>/spool/`; reading a log back (a last line
//! cut by a crash is skipped) and rebuilding an agent's context and plan from it.

mod event;
mod index;
mod key;
mod log;
mod rebuild;
mod record;
mod rewind;
mod time;

use std::path::PathBuf;

pub use event::{Event, Outcome, SegmentOp, Usage};
pub use index::{ImportOutcome, IndexEntry, Store};
pub use key::project_key;
pub use log::{Log, ReadLog, read_log, spool};
pub use rebuild::{Rebuilt, RebuiltSegment, rebuild};
pub use record::{Label, Role, Route};
pub use rewind::{Request, live, live_mask, requests};
pub use time::{now_rfc3339, session_id};

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{what} {}: {error}", path.display())]
    Io { what: &'static str, path: PathBuf, error: std::io::Error },
    #[error("no session `{id}` in {}", dir.display())]
    NotFound { id: String, dir: PathBuf },
    #[error("{}: line {line} is not a session event: {message}", path.display())]
    Corrupt { path: PathBuf, line: usize, message: String },
    #[error("`{0}` is not a session id")]
    BadId(String),
    #[error("the log appends segment `{id}` of {agent} without its {missing}")]
    Incomplete { agent: String, id: String, missing: &'static str },
}
