//! Checkpoints: snapshots of a working tree kept under `refs/aerix/checkpoints/<session>/<n>`
//! (never a branch, the index or the stash), and writing one back over the working tree.

use std::collections::BTreeSet;
use std::path::Path;

use crate::{GIT_TIMEOUT, GitError, Repo};

/// The namespace of every checkpoint ref.
pub const CHECKPOINT_PREFIX: &str = "refs/aerix/checkpoints/";
/// At most this many checkpoints a session; the oldest go first.
pub const CHECKPOINT_CAP: usize = 100;

/// A checkpoint written, and the request numbers whose checkpoints the cap removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub commit: String,
    pub pruned: Vec<u32>,
}

/// Why files cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("no checkpoint of request {request} in {} (pruned, or taken outside this repository)", dir.display())]
    Missing { dir: std::path::PathBuf, request: u32 },
    #[error(
        "cannot restore `{path}`: it is a directory now and the checkpoint has a file there; move it away first"
    )]
    Obstructed { path: String },
    #[error(transparent)]
    Git(#[from] GitError),
}

fn refname(session: &str, n: u32) -> String {
    format!("{CHECKPOINT_PREFIX}{session}/{n}")
}

impl Repo {
    /// Keeps `commit` (a [`Repo::snapshot_commit`]) as request `n`'s checkpoint of `session`,
    /// then removes the oldest beyond `cap`.
    pub fn keep_checkpoint(
        &self,
        session: &str,
        n: u32,
        commit: &str,
        cap: usize,
    ) -> Result<Checkpoint, GitError> {
        self.run(&["update-ref", &refname(session, n), commit], GIT_TIMEOUT)?;
        let kept = self.checkpoints(session)?;
        let over = kept.len().saturating_sub(cap);
        let pruned: Vec<u32> = kept.into_iter().take(over).collect();
        for old in &pruned {
            self.run(&["update-ref", "-d", &refname(session, *old)], GIT_TIMEOUT)?;
        }
        Ok(Checkpoint { commit: commit.to_owned(), pruned })
    }

    /// The request numbers `session` has checkpoints for, oldest first.
    pub fn checkpoints(&self, session: &str) -> Result<Vec<u32>, GitError> {
        let prefix = format!("{CHECKPOINT_PREFIX}{session}/");
        let out = self.run(&["for-each-ref", "--format=%(refname)", &prefix], GIT_TIMEOUT)?;
        let mut numbers: Vec<u32> = String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|line| line.strip_prefix(&prefix)?.parse().ok())
            .collect();
        numbers.sort_unstable();
        Ok(numbers)
    }

    /// Deletes every checkpoint of `session`; how many there were.
    pub fn remove_checkpoints(&self, session: &str) -> Result<usize, GitError> {
        let numbers = self.checkpoints(session)?;
        for n in &numbers {
            self.run(&["update-ref", "-d", &refname(session, *n)], GIT_TIMEOUT)?;
        }
        Ok(numbers.len())
    }

    /// Writes request `n`'s checkpoint over the working tree: its files as they were, and the
    /// files that are not ignored and not in it removed. The index, `HEAD`, branches and stash
    /// are untouched; ignored files are left alone. Refused, before anything is written, when a
    /// checkpoint's file is a directory now.
    pub fn restore_checkpoint(&self, session: &str, n: u32) -> Result<(), RestoreError> {
        let name = refname(session, n);
        let Ok(commit) = self.text(&["rev-parse", "--verify", "--quiet", &name], GIT_TIMEOUT)
        else {
            return Err(RestoreError::Missing { dir: self.dir.clone(), request: n });
        };
        // `<mode> <type> <object>\t<path>`: a submodule (`commit`) is a directory by right.
        let listed = self.run(&["ls-tree", "-r", "-z", &commit], GIT_TIMEOUT)?;
        let mut wanted = BTreeSet::new();
        for entry in listed.split(|b| *b == 0).filter(|f| !f.is_empty()) {
            let entry = String::from_utf8_lossy(entry);
            let Some((meta, path)) = entry.split_once('\t') else { continue };
            let submodule = meta.split(' ').nth(1) == Some("commit");
            if !submodule && self.dir.join(path).symlink_metadata().is_ok_and(|m| m.is_dir()) {
                return Err(RestoreError::Obstructed { path: path.to_owned() });
            }
            wanted.insert(path.to_owned());
        }
        for path in self.file_set()? {
            // A submodule added since is a repository of its own: left as it is.
            let submodule = self.dir.join(&path).symlink_metadata().is_ok_and(|m| m.is_dir());
            if !wanted.contains(&path) && !submodule {
                remove_file(&self.dir, &path)
                    .map_err(|error| GitError::TempIndex { dir: self.dir.join(&path), error })?;
            }
        }
        self.with_temp_index(|env, _| {
            self.run_env(&["read-tree", &commit], env, GIT_TIMEOUT)?;
            self.run_env(&["checkout-index", "--all", "--force"], env, GIT_TIMEOUT).map(drop)
        })?;
        Ok(())
    }
}

/// Removes `path` (a file or link) and the directories it leaves empty, up to `top`.
fn remove_file(top: &Path, path: &str) -> std::io::Result<()> {
    let full = top.join(path);
    match std::fs::remove_file(&full) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    let mut dir = full.parent();
    while let Some(d) = dir {
        if d == top || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_repo as repo;

    #[test]
    fn the_cap_removes_the_oldest_checkpoints() {
        let (dir, repo) = repo();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let commit = repo.snapshot_commit().unwrap();
        for n in 1..=4 {
            let kept = repo.keep_checkpoint("s1", n, &commit, 3).unwrap();
            assert_eq!(kept.pruned, if n == 4 { vec![1] } else { vec![] }, "request {n}");
        }
        assert_eq!(repo.checkpoints("s1").unwrap(), vec![2, 3, 4]);
        // Past 100 the default cap takes the oldest: numbers compare as numbers, not text.
        for n in 5..=101 {
            repo.keep_checkpoint("s1", n, &commit, CHECKPOINT_CAP).unwrap();
        }
        let kept = repo.keep_checkpoint("s1", 102, &commit, CHECKPOINT_CAP).unwrap();
        assert_eq!(kept.pruned, vec![2]);
        let numbers = repo.checkpoints("s1").unwrap();
        assert_eq!((numbers.len(), numbers[0], numbers[99]), (100, 3, 102));
        assert_eq!(repo.remove_checkpoints("s1").unwrap(), 100);
        assert!(repo.checkpoints("s1").unwrap().is_empty());
    }

    #[test]
    fn a_restore_brings_back_edited_deleted_and_removes_new_files_but_not_ignored() {
        let (dir, repo) = repo();
        let at = |p: &str| dir.path().join(p);
        std::fs::write(at(".gitignore"), "*.log\n").unwrap();
        std::fs::write(at("kept.txt"), "before\n").unwrap();
        std::fs::write(at("gone.txt"), "gone\n").unwrap();
        let commit = repo.snapshot_commit().unwrap();
        repo.keep_checkpoint("s1", 1, &commit, CHECKPOINT_CAP).unwrap();
        std::fs::write(at("kept.txt"), "after\n").unwrap();
        std::fs::remove_file(at("gone.txt")).unwrap();
        std::fs::create_dir(at("new")).unwrap();
        std::fs::write(at("new/made.txt"), "new\n").unwrap();
        std::fs::write(at("build.log"), "ignored\n").unwrap();
        repo.restore_checkpoint("s1", 1).unwrap();
        assert_eq!(std::fs::read_to_string(at("kept.txt")).unwrap(), "before\n");
        assert_eq!(std::fs::read_to_string(at("gone.txt")).unwrap(), "gone\n");
        assert!(!at("new").exists(), "a new file and its directory are removed");
        assert_eq!(std::fs::read_to_string(at("build.log")).unwrap(), "ignored\n");
        // The index was never written: nothing was ever staged.
        assert_eq!(repo.text(&["ls-files"], GIT_TIMEOUT).unwrap(), "");
    }

    #[test]
    fn a_submodule_is_not_an_obstruction_and_is_left_alone() {
        let (dir, repo) = repo();
        let (sub_dir, sub) = super::tests::repo();
        std::fs::write(sub_dir.path().join("s.txt"), "s\n").unwrap();
        let ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"];
        sub.run(&["add", "-A"], GIT_TIMEOUT).unwrap();
        sub.run(&[&ident[..], &["commit", "-qm", "s"]].concat(), GIT_TIMEOUT).unwrap();
        let url = sub_dir.path().to_string_lossy().into_owned();
        let add = ["-c", "protocol.file.allow=always", "submodule", "add", "-q", &url, "sub"];
        repo.run(&add, GIT_TIMEOUT).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let commit = repo.snapshot_commit().unwrap();
        repo.keep_checkpoint("s1", 1, &commit, CHECKPOINT_CAP).unwrap();
        std::fs::write(dir.path().join("a.txt"), "changed\n").unwrap();
        repo.restore_checkpoint("s1", 1).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "a\n");
        assert_eq!(std::fs::read_to_string(dir.path().join("sub/s.txt")).unwrap(), "s\n");
    }

    #[test]
    fn a_directory_where_a_file_was_is_refused_untouched() {
        let (dir, repo) = repo();
        std::fs::write(dir.path().join("x"), "file\n").unwrap();
        std::fs::write(dir.path().join("y"), "y\n").unwrap();
        let commit = repo.snapshot_commit().unwrap();
        repo.keep_checkpoint("s1", 1, &commit, CHECKPOINT_CAP).unwrap();
        std::fs::remove_file(dir.path().join("x")).unwrap();
        std::fs::create_dir(dir.path().join("x")).unwrap();
        std::fs::write(dir.path().join("x/inside"), "i\n").unwrap();
        std::fs::write(dir.path().join("y"), "changed\n").unwrap();
        let err = repo.restore_checkpoint("s1", 1).unwrap_err();
        assert!(matches!(&err, RestoreError::Obstructed { path } if path == "x"), "{err}");
        assert_eq!(std::fs::read_to_string(dir.path().join("y")).unwrap(), "changed\n");
        let missing = repo.restore_checkpoint("s1", 2).unwrap_err();
        assert!(matches!(missing, RestoreError::Missing { request: 2, .. }), "{missing}");
    }
}
