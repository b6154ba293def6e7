//! What the start of a session saw of the working tree: the commit `-p`'s diff and the screen's
//! diff line are taken against (recorded as `session.start`'s `start_commit`, which
//! `aerix tune --eval` replays at), and the files that were untracked then.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context as _;

/// What a request changed in the tree.
#[derive(Debug, Default)]
pub struct Changes {
    pub diff: String,
    pub untracked: Vec<String>,
}

/// `-p`'s text output: the diff, then `untracked: <path>` lines.
impl std::fmt::Display for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.diff)?;
        for path in &self.untracked {
            writeln!(f, "untracked: {path}")?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct Snapshot {
    repo: gitstore::Repo,
    /// `None` in a repository without a commit (or when the snapshot failed: no diff then).
    pub base: Option<String>,
    untracked: BTreeSet<String>,
}

impl Snapshot {
    /// `None` outside a git repository. The untracked files are listed before the snapshot is
    /// written, so a file created in between is named as new rather than lost.
    pub fn take(root: &Path) -> Option<Snapshot> {
        let top = gitstore::Repo::toplevel(root)?;
        let repo = gitstore::Repo::at(&top);
        let untracked = repo.untracked().unwrap_or_default().into_iter().collect();
        let base = repo.snapshot().ok().flatten();
        Some(Snapshot { repo, base, untracked })
    }

    fn kept(&self) -> Vec<String> {
        self.untracked.iter().cloned().collect()
    }

    /// The diff of what changed since, and each new file git does not track (a file
    /// untracked at the start is in the diff).
    pub fn changes(&self) -> anyhow::Result<Changes> {
        let mut changes = Changes::default();
        if let Some(base) = &self.base {
            changes.diff = self
                .repo
                .diff_since(base, &self.kept(), false)
                .context("the diff of the request's changes")?;
        }
        for path in self.repo.untracked().context("listing untracked files")? {
            if !self.untracked.contains(&path) {
                changes.untracked.push(path);
            }
        }
        Ok(changes)
    }

    /// `git diff --numstat`'s lines since the start (the screen's diff line).
    pub fn numstat(&self) -> Option<String> {
        let base = self.base.as_ref()?;
        self.repo.diff_since(base, &self.kept(), true).ok()
    }
}
