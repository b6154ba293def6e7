//! The git side of isolated attempts: a snapshot of the user's tree, detached worktrees of it
//! under aerix's data directory, what an attempt changed there, and that change applied back
//! to the user's tree three-way, all or nothing.
//!
//! Nothing here touches the user's index, `HEAD`, branches or stash: snapshots are written
//! through a temporary index, worktrees are detached, and the only ref is aerix's own
//! (`refs/aerix/worktrees/<name>`, which keeps a worktree's base from `git gc`). The user's
//! tree is written by [`apply`] alone.

mod apply;
mod change;
mod record;
mod store;

use std::path::PathBuf;

pub use apply::{Applied, apply};
pub use change::{Change, Content, FileChange, Mode};
pub use gitstore::GitError;
pub use store::{Snapshot, Store, Worktree};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot {what} {}: {error}", path.display())]
    Io { what: &'static str, path: PathBuf, error: std::io::Error },
    #[error("the project key `{key}` is not a single directory name")]
    BadKey { key: String },
    #[error(
        "the worktree name `{name}` {reason} (letters, digits, `.`, `_` and `-`, at most 100, \
         not starting with `.` or `-`)"
    )]
    BadName { name: String, reason: &'static str },
    #[error("a worktree named `{name}` exists already (its record: {})", record.display())]
    NameTaken { name: String, record: PathBuf },
    #[error("{} is inside the repository at {}: worktrees live outside it", path.display(), root.display())]
    InsideRepository { path: PathBuf, root: PathBuf },
    #[error("{} exists and is not an empty directory: a worktree needs a new one", path.display())]
    PathTaken { path: PathBuf },
    #[error("the change cannot carry the path {path:?}: it is not UTF-8")]
    NonUtf8Path { path: String },
    /// A path of the change that [`apply`] refuses to write: nothing was written.
    #[error("the change's `{path}` {reason}; nothing was written")]
    Unsafe { path: String, reason: &'static str },
    /// Files the user changed in a way the change's edits do not merge with: nothing was
    /// written.
    #[error(
        "the change conflicts with the work tree in {}; nothing was written",
        paths.join(", ")
    )]
    Conflict { paths: Vec<String> },
}
