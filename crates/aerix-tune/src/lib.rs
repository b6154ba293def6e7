//! `aerix tune`, `aerix profile sync` and `aerix tune --eval` as a library: the corpus of a
//! profile's sessions, the evidence per artifact, the reflection on a throwaway pool context,
//! the guards and the planted-text check applied, the commit, and what stdout says. The binary
//! gives it a profile store (`Store`), the guards (`Guard`) and a reflection member
//! (`Reflector`); nothing here parses a command line or touches the terminal.

mod corpus;
mod diff;
pub mod eval;
mod evidence;
mod planted;
mod profile;
mod reflect;
mod sync;
mod tune;
mod upstream;

use std::collections::BTreeMap;
use std::future::Future;

pub use corpus::{Corpus, Request, read_corpus};
pub use diff::unified;
pub use evidence::{EVIDENCE_CHARS, EVIDENCE_ITEMS, Evidence, ITEM_CHARS, Item, Source, gather};
pub use planted::{PLANTED_WORDS, Planted, find_planted};
pub use profile::{Guards, ProfileStore};
pub use reflect::{
    PoolReflector, RECONCILE_SCHEMA, REFLECT_SCHEMA, Reconciled, Reflection, parse_reconciled,
    parse_reflection,
};
pub use sync::{SyncLine, SyncReport, plan_sync, sync};
pub use tune::{Line, TuneOptions, TuneReport, tune};
pub use upstream::{UPSTREAM_JSON, Upstreams, sha256_hex};

/// Retries of a commit that found its branch moved (the spec's `CAS_RETRIES`).
pub const CAS_RETRIES: u32 = 3;

/// What tune needs of a profile repository. Texts are UTF-8; a path a commit lacks is `None`.
pub trait Store {
    /// The branch's head, `None` when the branch does not exist.
    fn head(&self, branch: &str) -> Result<Option<String>, TuneError>;
    /// `path`'s text at `commit`.
    fn read(&self, commit: &str, path: &str) -> Result<Option<String>, TuneError>;
    /// The texts `path` had on `branch`, newest first (for the old upstream of a built-in:
    /// `main` holds every release's set).
    fn history(&self, branch: &str, path: &str) -> Result<Vec<String>, TuneError>;
    /// One commit of `files` (path, text) on `branch` with `parent` as its parent, moving the
    /// branch by compare-and-swap: `Moved` (and nothing written) when its head is no longer
    /// `parent`.
    fn commit(
        &self,
        branch: &str,
        parent: &str,
        files: &[(String, String)],
        message: &str,
    ) -> Result<Committed, TuneError>;
}

/// A compare-and-swap commit's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Committed {
    /// The new commit.
    Done(String),
    /// The branch is at this commit now; nothing was written.
    Moved(String),
}

/// The checks a text must pass before it is committed (the profile store's guards).
pub trait Guard {
    /// `Err(reason)` when `text` may not replace `path` (`source`: its upstream text, the
    /// embedded prompt or an overlay's source file).
    fn check(&self, path: &str, text: &str, source: &str) -> Result<(), String>;
}

/// The reflection member: one generation on a throwaway context.
pub trait Reflector {
    /// The member's model reference, for the commit message.
    fn member(&self) -> &str;
    /// `system` and `user` as the context's two segments, answered under `schema` (JSON
    /// Schema text).
    fn ask(
        &mut self,
        system: &str,
        user: &str,
        schema: &str,
    ) -> impl Future<Output = Result<String, TuneError>>;
}

/// Every artifact a run may look at, with the text it follows now: the embedded prompts by
/// their built-in paths, and each loaded skill's and agent definition's overlay path with its
/// file's text.
#[derive(Clone, Debug, Default)]
pub struct Artifacts {
    /// Path → the current upstream text.
    pub upstream: BTreeMap<String, String>,
    /// A loaded skill's name → its overlay path (skills without one are left out).
    pub skills: BTreeMap<String, String>,
    /// A loaded agent definition's name → its overlay path.
    pub agents: BTreeMap<String, String>,
}

impl Artifacts {
    /// Whether `path` is an overlay (its old upstream is kept as `upstream/<path>`).
    pub fn is_overlay(path: &str) -> bool {
        path.starts_with("skills/") || path.starts_with("agents/")
    }

    /// The built-in prompts tune may revise: every embedded one but tune's own.
    pub fn tunable(path: &str) -> bool {
        !path.starts_with("tune/")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("{0}")]
    Store(String),
    #[error("the reflection member: {0}")]
    Pool(String),
    #[error(transparent)]
    Session(#[from] aerix_session::SessionError),
    #[error("{branch} moved during the write {attempts} times; nothing written (run it again)")]
    Raced { branch: String, attempts: u32 },
    #[error("{branch} does not exist in the profile: no session of this model has run yet")]
    NoBranch { branch: String },
    #[error("upstream.json on {branch} does not parse: {message}")]
    UpstreamJson { branch: String, message: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session error inside a tune error: its cause once, however it is printed (it was
    /// three times under `{:#}`: the wrapper's message, the session error's, then the cause).
    #[test]
    fn a_wrapped_error_s_cause_is_printed_once() {
        let cause = "permission denied";
        let e = TuneError::from(aerix_session::SessionError::Io {
            what: "cannot read",
            path: "/home/u/.aerix/sessions/s.jsonl".into(),
            error: std::io::Error::other(cause),
        });
        let plain = e.to_string();
        let chain = format!("{:#}", anyhow::Error::new(e));
        assert_eq!(plain.matches(cause).count(), 1, "{plain}");
        assert_eq!(chain, format!("cannot read /home/u/.aerix/sessions/s.jsonl: {cause}"));
    }
}
