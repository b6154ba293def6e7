//! The trees a piece's attempts work in: each a git worktree of the caller's tree as it is
//! (uncommitted and untracked changes included), removed when the piece ends, whatever way it
//! ends; outside a git work tree, the caller's tree itself.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::runtime::{HookFire, RuntimeHooks};
use aerix_tools::ToolError;
use aerix_worktrees::{Change, Snapshot, Store, Worktree};

use crate::delegate::lock;

/// Where a project's worktrees live (`$XDG_DATA_HOME/aerix/worktrees/<project key>/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorktreePlace {
    pub data_home: PathBuf,
    pub project_key: String,
}

/// Worktrees made in this process, for unique names.
static MADE: AtomicU64 = AtomicU64::new(0);

/// One piece's worktrees, all of one snapshot of the caller's tree; `WorktreeCreate` and
/// `WorktreeRemove` fire around each.
pub(crate) struct Trees {
    store: Store,
    base: Snapshot,
    /// Each worktree and the attempt's implementer it was made for.
    made: Mutex<Vec<(Worktree, String)>>,
    hooks: Arc<dyn RuntimeHooks>,
}

impl Trees {
    /// `None` when `tree` is not in a git work tree: the piece runs in place.
    pub(crate) fn open(
        tree: &Path,
        place: &WorktreePlace,
        hooks: Arc<dyn RuntimeHooks>,
    ) -> Result<Option<Trees>, ToolError> {
        let failed = |e: aerix_worktrees::Error| {
            ToolError::new(format!("the piece could not set up its worktrees: {e}"))
        };
        let Some(store) =
            Store::open(tree, &place.data_home, &place.project_key).map_err(failed)?
        else {
            return Ok(None);
        };
        let base = store.snapshot().map_err(failed)?;
        Ok(Some(Trees { store, base, made: Mutex::new(Vec::new()), hooks }))
    }

    /// A new worktree for `agent` (its id names the directory), at the path a
    /// `WorktreeCreate` handler printed when one did (an absolute path outside the repository,
    /// new or empty), else under the store.
    pub(crate) fn make(&self, agent: &str) -> Result<PathBuf, ToolError> {
        let n = MADE.fetch_add(1, Ordering::SeqCst);
        let name = format!("{}-{n}-{}", std::process::id(), agent.replace('.', "-"));
        let reply = self.hooks.fire(HookFire::WorktreeCreate {
            agent,
            name: &name,
            base: &self.base.commit,
        });
        if let Some(reason) = reply.stop.or(reply.block) {
            return Err(ToolError::new(format!(
                "a WorktreeCreate hook refused the attempt {agent} a worktree: {reason}"
            )));
        }
        let chosen = reply.context.as_deref().and_then(|c| c.lines().next()).map(PathBuf::from);
        if let Some(path) = chosen.as_ref().filter(|p| !p.is_absolute()) {
            return Err(ToolError::new(format!(
                "a WorktreeCreate hook named `{}`: the worktree's path must be absolute",
                path.display()
            )));
        }
        let worktree = self.store.create(&name, &self.base, chosen.as_deref()).map_err(|e| {
            ToolError::new(format!("the attempt {agent} could not get a worktree: {e}"))
        })?;
        let path = worktree.path.clone();
        lock(&self.made).push((worktree, agent.to_owned()));
        Ok(path)
    }

    /// What the attempt in `path` changed against the snapshot.
    pub(crate) fn change(&self, path: &Path) -> Result<Change, ToolError> {
        let made = lock(&self.made);
        let worktree = made
            .iter()
            .find(|(w, _)| w.path == path)
            .map(|(w, _)| w)
            .ok_or_else(|| ToolError::new(format!("no worktree at {}", path.display())))?;
        worktree.change().map_err(|e| {
            ToolError::new(format!("reading what the attempt changed in {}: {e}", path.display()))
        })
    }

    /// The store the changes land through (the caller's tree).
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Removes every worktree made so far (their changes were read first), each followed by
    /// `WorktreeRemove`.
    pub(crate) fn clear(&self) {
        let made: Vec<(Worktree, String)> = lock(&self.made).drain(..).collect();
        for (worktree, agent) in made {
            // Removal failing leaves a recorded worktree the next run's sweep removes.
            if self.store.remove(&worktree).is_ok() {
                let path = worktree.path.display().to_string();
                self.hooks.fire(HookFire::WorktreeRemove { agent: &agent, path: &path });
            }
        }
    }
}

impl Drop for Trees {
    fn drop(&mut self) {
        self.clear();
    }
}

/// A linked worktree's own git directory (`.git/worktrees/<name>`, from its `.git` file) and
/// the repository's shared one; `None` for a main work tree or a plain directory.
pub(crate) fn git_dirs(tree: &Path) -> Option<(PathBuf, PathBuf)> {
    let text = std::fs::read_to_string(tree.join(".git")).ok()?;
    let own = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
    let own = if own.is_absolute() { own } else { tree.join(own) };
    // `<common>/worktrees/<name>`.
    let common = own.parent()?.parent()?.to_owned();
    Some((own, common))
}
