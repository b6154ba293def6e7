//! Linked worktrees of a user's repository (`git worktree add/remove/prune`) and the three-way
//! merge of one file's contents (`git merge-file`), for isolated attempts.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use crate::{GIT_TIMEOUT, GitError, Repo};

/// The bound of a checkout into a new worktree and of its removal: a whole tree is written or
/// deleted, more than one diff's work.
pub const WORKTREE_TIMEOUT: Duration = Duration::from_secs(120);

impl Repo {
    /// A detached worktree of `commit` at `path` (which must not exist or be empty). The
    /// repository's hooks do not run for it, as for every call (`post-checkout` is the
    /// project's code, and the caller's own hook events are its business).
    pub fn worktree_add(&self, path: &Path, commit: &str) -> Result<(), GitError> {
        let path = path_arg(path);
        let args = ["worktree", "add", "--detach", "--quiet", path.as_str(), commit];
        self.run(&args, WORKTREE_TIMEOUT).map(drop)
    }

    /// Removes the worktree at `path`, its files and git's entry for it, whatever it holds
    /// (`--force` twice: changed, untracked or locked).
    pub fn worktree_remove(&self, path: &Path) -> Result<(), GitError> {
        let path = path_arg(path);
        self.run(&["worktree", "remove", "--force", "--force", &path], WORKTREE_TIMEOUT).map(drop)
    }

    /// Drops git's entries for worktrees whose directory is gone.
    pub fn worktree_prune(&self) -> Result<(), GitError> {
        self.run(&["worktree", "prune"], GIT_TIMEOUT).map(drop)
    }

    /// The directories of the repository's worktrees, the main one first (`git worktree list`).
    pub fn worktrees(&self) -> Result<Vec<String>, GitError> {
        let out = self.run(&["worktree", "list", "--porcelain", "-z"], GIT_TIMEOUT)?;
        Ok(out
            .split(|b| *b == 0)
            .filter_map(|field| field.strip_prefix(b"worktree "))
            .map(|path| String::from_utf8_lossy(path).into_owned())
            .collect())
    }

    /// The three-way merge of one file's contents: `Some(merged)` when every hunk merged
    /// cleanly, `None` on a conflict or when git cannot merge them (binary contents). Writes
    /// only temporary files; conflict markers never leave this function.
    pub fn merge_file(
        &self,
        ours: &[u8],
        base: &[u8],
        theirs: &[u8],
    ) -> Result<Option<Vec<u8>>, GitError> {
        let temp = |error| GitError::TempIndex { dir: self.dir.clone(), error };
        let scratch = tempfile::Builder::new().prefix("gitstore-merge-").tempdir().map_err(temp)?;
        let names = ["ours", "base", "theirs"];
        for (name, bytes) in names.iter().zip([ours, base, theirs]) {
            std::fs::write(scratch.path().join(name), bytes).map_err(temp)?;
        }
        let files: Vec<String> = names.iter().map(|n| path_arg(&scratch.path().join(n))).collect();
        let args = ["merge-file", "-p", &files[0], &files[1], &files[2]];
        let none: [(&str, &OsStr); 0] = [];
        let (status, stdout, stderr) = self.output(&args, &none, GIT_TIMEOUT)?;
        match status.code() {
            Some(0) => Ok(Some(stdout)),
            // 1..=127: that many conflicts; 255 (-1): it cannot merge them (binary contents).
            Some(1..=127) => Ok(None),
            Some(255) if String::from_utf8_lossy(&stderr).contains("binary") => Ok(None),
            _ => Err(self.failed(&args, status, &stderr)),
        }
    }
}

/// A path as an argument; git takes paths as bytes, and a non-UTF-8 one is rare enough to be
/// spelled lossily (the call then fails, naming it).
fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use crate::test_repo as repo;

    #[test]
    fn merge_file_merges_apart_edits_and_names_a_conflict() {
        let (_dir, repo) = repo();
        let base = b"one\ntwo\nthree\nfour\nfive\n";
        let ours = b"ONE\ntwo\nthree\nfour\nfive\n";
        let theirs = b"one\ntwo\nthree\nfour\nFIVE\n";
        let merged = repo.merge_file(ours, base, theirs).unwrap();
        assert_eq!(merged.as_deref(), Some(&b"ONE\ntwo\nthree\nfour\nFIVE\n"[..]));
        let clash = b"uno\ntwo\nthree\nfour\nfive\n";
        assert_eq!(repo.merge_file(ours, base, clash).unwrap(), None);
        assert_eq!(repo.merge_file(b"a\0b", b"a\0c", b"a\0d").unwrap(), None, "binary");
    }

    #[test]
    fn a_worktree_is_added_listed_and_removed() {
        let (dir, repo) = repo();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let commit = repo.snapshot_commit().unwrap();
        let place = tempfile::tempdir().unwrap();
        let path = place.path().join("wt");
        repo.worktree_add(&path, &commit).unwrap();
        assert_eq!(std::fs::read_to_string(path.join("a.txt")).unwrap(), "a\n");
        let listed = repo.worktrees().unwrap();
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert!(listed[1].ends_with("/wt"), "{listed:?}");
        repo.worktree_remove(&path).unwrap();
        assert!(!path.exists());
        assert_eq!(repo.worktrees().unwrap().len(), 1);
    }
}
