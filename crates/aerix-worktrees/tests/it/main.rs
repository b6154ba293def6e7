//! Worktrees of real repositories in temporary directories: what they hold, what the user's
//! repository keeps, what an attempt's change is, how it applies, what a sweep removes.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod apply;
mod change;
mod sweep;
mod worktree;

use std::path::{Path, PathBuf};

use aerix_worktrees::Store;
use gitstore::{GIT_TIMEOUT, Repo};

/// A user's repository with one commit (`a.txt`, `b.txt`, a `.gitignore` of `*.log`) and a
/// data home, both temporary.
pub(crate) struct Fixture {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    pub(crate) root: PathBuf,
    pub(crate) data_home: PathBuf,
    pub(crate) store: Store,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        Fixture::with(|root| {
            std::fs::write(root.join("a.txt"), "one\ntwo\nthree\nfour\nfive\nsix\nseven\n")
                .unwrap();
            std::fs::write(root.join("b.txt"), "bee\n").unwrap();
            std::fs::write(root.join(".gitignore"), "*.log\n").unwrap();
            git(root, &["add", "."]);
            git(root, &["commit", "-qm", "first"]);
        })
    }

    /// A repository set up by `setup` (after `git init`).
    pub(crate) fn with(setup: impl FnOnce(&Path)) -> Fixture {
        let repo = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let root = repo.path().canonicalize().unwrap();
        git(&root, &["init", "-q", "-b", "main"]);
        git(&root, &["config", "user.email", "t@example.com"]);
        git(&root, &["config", "user.name", "t"]);
        setup(&root);
        let data_home = home.path().to_owned();
        let store = Store::open(&root, &data_home, "proj-0123").unwrap().unwrap();
        Fixture { _dirs: (repo, home), root, data_home, store }
    }

    pub(crate) fn write(&self, path: &str, text: &str) {
        write(&self.root, path, text);
    }

    pub(crate) fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.root.join(path)).unwrap()
    }

    pub(crate) fn git(&self, args: &[&str]) -> String {
        git(&self.root, args)
    }

    /// Everything of the user's repository that aerix must not move: the index file (its
    /// blob id: any byte written changes it), HEAD, the branches, tags and stash, the stash
    /// list and the status.
    pub(crate) fn user_state(&self) -> [String; 5] {
        let index = match self.root.join(".git/index").exists() {
            true => self.git(&["hash-object", ".git/index"]),
            false => "no index".to_owned(),
        };
        let refs = self.git(&["for-each-ref", "refs/heads", "refs/tags", "refs/stash"]);
        let head = std::fs::read_to_string(self.root.join(".git/HEAD")).unwrap();
        let stash = self.git(&["stash", "list"]);
        let status = self.git(&["status", "--porcelain", "--untracked-files=all"]);
        [index, head, refs, stash, status]
    }
}

pub(crate) fn write(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `git ARGS` in `dir` through gitstore (no optional locks: a `status` does not refresh the
/// index, so the index file's bytes say whether anything else wrote it).
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(Repo::at(dir).run(args, GIT_TIMEOUT).unwrap()).unwrap()
}

/// The worktree paths `git worktree list` names.
pub(crate) fn listed(root: &Path) -> Vec<PathBuf> {
    Repo::at(root).worktrees().unwrap().into_iter().map(PathBuf::from).collect()
}
