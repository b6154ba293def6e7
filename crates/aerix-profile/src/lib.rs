//! A session's prompt profile: a bare git repository per profile name at
//! `$XDG_DATA_HOME/aerix/profiles/<name>.git`, with `main` (the embedded prompts, re-seeded when
//! a release's set differs), a model base `model/<percent-encoded model>` per main model, and
//! `session/<id>` per session (`store.rs`); what a session reads from one commit: the prompts,
//! the skill and agent overlays, the startup lines (`read.rs`); the upstream hashes
//! (`upstream.rs`); and the guards a hand edit or a revision must pass (`guards`).
//!
//! Nothing here knows a terminal or the pool: the binary prints the lines and builds the
//! runtime's prompts from what a read returns.

mod bound;
pub mod guards;
mod names;
mod read;
mod store;
mod upstream;

use std::path::PathBuf;
use std::time::Duration;

pub use bound::{GIT_TIMEOUT, LOCK_WAIT};
pub use gitstore::bare::{Change, CommitInfo};
pub use names::{MAIN, encode_model, model_branch, overlay_path, session_branch, valid_name};
pub use read::{
    Attach, Attached, BuiltinState, MAX_LEGACY_ENTRIES, OverlayKind, OverlayUse, Read, Source,
    Target, legacy_prompt_dirs,
};
pub use store::{AUTHOR_EMAIL, CAS_RETRIES, Head, Profile, Release, Written, profile_path};
pub use upstream::{UPSTREAM_DIR, UPSTREAM_FILE, Upstream, sha256_hex};

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Not `[A-Za-z0-9_-][A-Za-z0-9._-]*`.
    #[error("`{0}` is not a profile name: use letters, digits, `_`, `-` and `.`, not first")]
    BadName(String),
    #[error("profile {profile}: {} does not exist (a session creates it)", path.display())]
    Missing { profile: String, path: PathBuf },
    #[error("profile {profile}: cannot create {}: {error}", path.display())]
    Create { profile: String, path: PathBuf, error: std::io::Error },
    #[error("profile {profile}: {error}")]
    Git { profile: String, error: gitstore::bare::BareError },
    /// The spec's race refusal: the branch moved on every attempt.
    #[error("profile {profile}: {branch} moved during the write {attempts} times; nothing written")]
    Raced { profile: String, branch: String, attempts: u32 },
    #[error(
        "profile {profile}: git ({what}) took longer than {}s; stopped waiting, nothing written",
        timeout.as_secs()
    )]
    Timeout { profile: String, what: String, timeout: Duration },
    #[error(
        "profile {profile}: another writer held {} for {}s; nothing written",
        path.display(), timeout.as_secs()
    )]
    Locked { profile: String, path: PathBuf, timeout: Duration },
    #[error("profile {profile}: no branch `{branch}`")]
    NoBranch { profile: String, branch: String },
    /// A write that a check refused (the caller's reason), nothing written.
    #[error("profile {profile}: {reason}; nothing written")]
    Refused { profile: String, reason: String },
}
