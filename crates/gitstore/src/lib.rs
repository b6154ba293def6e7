//! The one door to git. Every call has a time bound; a call that passes it is killed and named.
//! Every call runs nothing a configuration names (a hook, an fsmonitor, a filter or diff driver,
//! a signing program, an editor, ...): `neutral.rs`, applied where this crate starts git.
//!
//! This crate runs the `git` command where exact porcelain semantics matter in the user's
//! repository (`git diff`, `git ls-files`, a snapshot written through a temporary index, linked
//! worktrees and `git merge-file`); `bare` writes bare repositories
//! (the memory wiki) through libgit2, objects directly and the branch by compare-and-swap.

pub mod bare;
mod checkpoint;
mod neutral;
mod worktree;

pub use checkpoint::{CHECKPOINT_CAP, CHECKPOINT_PREFIX, Checkpoint, RestoreError};
pub use worktree::WORKTREE_TIMEOUT;

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt;

use neutral::{LIST, Neutral};

/// The bound of every git call on a user's repository (the spec's "git calls for the diff").
pub const GIT_TIMEOUT: Duration = Duration::from_secs(30);
/// The bound of the remote lookup for a project key.
pub const REMOTE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git in {}: {error}", dir.display())]
    Spawn { dir: PathBuf, error: std::io::Error },
    #[error("`git {args}` in {} took longer than {}s and was killed", dir.display(), timeout.as_secs())]
    Timeout { dir: PathBuf, args: String, timeout: Duration },
    #[error("`git {args}` in {} failed ({status}): {stderr}", dir.display())]
    Failed { dir: PathBuf, args: String, status: String, stderr: String },
    #[error("cannot make a temporary index for {}: {error}", dir.display())]
    TempIndex { dir: PathBuf, error: std::io::Error },
}

/// The identity a snapshot commit is written with (the user's may be unset).
const SNAPSHOT_IDENT: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "aerix"),
    ("GIT_AUTHOR_EMAIL", "aerix@localhost"),
    ("GIT_COMMITTER_NAME", "aerix"),
    ("GIT_COMMITTER_EMAIL", "aerix@localhost"),
];

/// A repository (or any directory) git commands run in.
#[derive(Clone, Debug)]
pub struct Repo {
    dir: PathBuf,
}

impl Repo {
    pub fn at(dir: &Path) -> Repo {
        Repo { dir: dir.to_owned() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `git ARGS` and returns its stdout; a non-zero exit is an error with its stderr.
    pub fn run(&self, args: &[&str], timeout: Duration) -> Result<Vec<u8>, GitError> {
        self.run_env(args, &[], timeout)
    }

    /// As [`Repo::run`], with `env` set for git (a temporary index, an identity, `GIT_DIR`).
    pub fn run_env(
        &self,
        args: &[&str],
        env: &[(&str, &OsStr)],
        timeout: Duration,
    ) -> Result<Vec<u8>, GitError> {
        let (status, stdout, stderr) = self.output(args, env, timeout)?;
        if !status.success() {
            return Err(self.failed(args, status, &stderr));
        }
        Ok(stdout)
    }

    /// Runs `git ARGS` within `timeout` and returns its exit status, stdout and stderr, for
    /// the commands whose non-zero exit is an answer (`merge-file`'s count of conflicts).
    /// Every git this crate starts starts here: first the listing of the configured keys, then
    /// the call with each executing one turned off (`neutral.rs`).
    fn output(
        &self,
        args: &[&str],
        env: &[(&str, &OsStr)],
        timeout: Duration,
    ) -> Result<(ExitStatus, Vec<u8>, Vec<u8>), GitError> {
        // Read at each call: the configuration may have changed since the last.
        let (status, listed, stderr) = self.spawn(&Neutral::listing(), &LIST, env, timeout)?;
        if !status.success() {
            return Err(self.failed(&LIST, status, &stderr));
        }
        self.spawn(&Neutral::for_listing(&listed), args, env, timeout)
    }

    /// `git ARGS` run with `neutral`, within `timeout` (killed past it).
    fn spawn(
        &self,
        neutral: &Neutral,
        args: &[&str],
        env: &[(&str, &OsStr)],
        timeout: Duration,
    ) -> Result<(ExitStatus, Vec<u8>, Vec<u8>), GitError> {
        let mut child = neutral
            .command(&self.dir, args, env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| GitError::Spawn { dir: self.dir.clone(), error })?;
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut out);
                }
                out
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let status = match child.wait_timeout(timeout) {
            Ok(Some(status)) => status,
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(GitError::Timeout {
                    dir: self.dir.clone(),
                    args: args.join(" "),
                    timeout,
                });
            }
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        Ok((status, stdout, stderr))
    }

    fn failed(&self, args: &[&str], status: ExitStatus, stderr: &[u8]) -> GitError {
        GitError::Failed {
            dir: self.dir.clone(),
            args: args.join(" "),
            status: status.to_string(),
            stderr: String::from_utf8_lossy(stderr).trim().to_owned(),
        }
    }

    fn text(&self, args: &[&str], timeout: Duration) -> Result<String, GitError> {
        Ok(String::from_utf8_lossy(&self.run(args, timeout)?).trim_end().to_owned())
    }

    fn text_env(&self, args: &[&str], env: &[(&str, &OsStr)]) -> Result<String, GitError> {
        Ok(String::from_utf8_lossy(&self.run_env(args, env, GIT_TIMEOUT)?).trim_end().to_owned())
    }

    /// Runs `f` with a temporary index, a copy of the repository's own (else `HEAD`'s tree):
    /// what `f` stages there never reaches the user's index. `f` gets the environment that
    /// points git at it, and the temporary directory holding it.
    fn with_temp_index<T>(
        &self,
        f: impl FnOnce(&[(&str, &OsStr)], &Path) -> Result<T, GitError>,
    ) -> Result<T, GitError> {
        let temp = |error| GitError::TempIndex { dir: self.dir.clone(), error };
        let scratch = tempfile::Builder::new().prefix("gitstore-index-").tempdir().map_err(temp)?;
        let index = scratch.path().join("index");
        let own = self.dir.join(self.text(&["rev-parse", "--git-path", "index"], GIT_TIMEOUT)?);
        let env = [("GIT_INDEX_FILE", index.as_os_str())];
        if own.is_file() {
            std::fs::copy(&own, &index).map_err(temp)?;
            // The copy keeps the index's time. git rereads an entry whose stat data is as new as
            // its index ("racily clean"); a copy stamped later makes a same-size edit made in the
            // entry's own second look clean, and the diff missed it.
            let written = std::fs::metadata(&own).and_then(|m| m.modified()).map_err(temp)?;
            std::fs::File::options()
                .write(true)
                .open(&index)
                .and_then(|f| f.set_modified(written))
                .map_err(temp)?;
        } else if self.head().is_some() {
            self.run_env(&["read-tree", "HEAD"], &env, GIT_TIMEOUT)?;
        } // else no commit and no index: the temporary index starts empty

        f(&env, scratch.path())
    }

    /// The top directory of the work tree holding `dir`, or `None` outside a repository.
    pub fn toplevel(dir: &Path) -> Option<PathBuf> {
        Repo::at(dir).text(&["rev-parse", "--show-toplevel"], GIT_TIMEOUT).ok().map(PathBuf::from)
    }

    /// The git file set: tracked files plus untracked files that are not ignored, relative to
    /// the repository directory this `Repo` was opened at.
    pub fn file_set(&self) -> Result<Vec<String>, GitError> {
        let out = self
            .run(&["ls-files", "-z", "--cached", "--others", "--exclude-standard"], GIT_TIMEOUT)?;
        let mut files: Vec<String> = out
            .split(|b| *b == 0)
            .filter(|f| !f.is_empty())
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect();
        files.sort();
        files.dedup(); // a file both staged-deleted and present shows twice
        Ok(files)
    }

    /// The commit `HEAD` names, or `None` in a repository without a commit.
    pub fn head(&self) -> Option<String> {
        self.text(&["rev-parse", "--verify", "--quiet", "HEAD"], GIT_TIMEOUT)
            .ok()
            .filter(|head| !head.is_empty())
    }

    /// A snapshot of the working tree that touches neither the index nor the tree: a commit
    /// (parent `HEAD`) of the tracked files as they are and the untracked files that are not
    /// ignored, written through a temporary index; `HEAD` itself when that is `HEAD`'s tree.
    /// `None` in a repository without a commit.
    pub fn snapshot(&self) -> Result<Option<String>, GitError> {
        match self.head() {
            // No commit yet: nothing to diff against.
            None => Ok(None),
            Some(head) => self.snapshot_on(Some(&head)).map(Some),
        }
    }

    /// As [`Repo::snapshot`], and in a repository without a commit a commit without a parent
    /// (a worktree needs a commit to check out, even of a repository nobody committed to).
    pub fn snapshot_commit(&self) -> Result<String, GitError> {
        self.snapshot_on(self.head().as_deref())
    }

    fn snapshot_on(&self, head: Option<&str>) -> Result<String, GitError> {
        let tree = self.working_tree()?;
        if let Some(head) = head
            && tree == self.text(&["rev-parse", "HEAD^{tree}"], GIT_TIMEOUT)?
        {
            return Ok(head.to_owned());
        }
        let ident: Vec<(&str, &OsStr)> =
            SNAPSHOT_IDENT.iter().map(|(k, v)| (*k, OsStr::new(*v))).collect();
        let message = "aerix: the working tree at a request's start";
        let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
        if let Some(head) = head {
            args.extend(["-p", head]);
        }
        self.text_env(&args, &ident)
    }

    /// The tree of the working tree as `git add -A` would stage it (the tracked files as they
    /// are, the untracked files that are not ignored), written through a temporary index: the
    /// user's index is never touched.
    pub fn working_tree(&self) -> Result<String, GitError> {
        self.with_temp_index(|env, _| {
            self.run_env(&["add", "-A"], env, GIT_TIMEOUT)?;
            self.text_env(&["write-tree"], env)
        })
    }

    /// The working tree now against `base` (a [`Repo::snapshot`]), as a unified diff, or as
    /// `--numstat` lines: the files git tracks now and `kept`, the files that were untracked
    /// when the snapshot was taken (so an edit to one shows, and its removal). A file that is
    /// new and untracked is in neither (the caller names it). Touches neither the index nor the
    /// tree.
    pub fn diff_since(
        &self,
        base: &str,
        kept: &[String],
        numstat: bool,
    ) -> Result<String, GitError> {
        let tree = self.with_temp_index(|env, scratch| {
            self.run_env(&["add", "-u"], env, GIT_TIMEOUT)?;
            let present: Vec<&String> =
                kept.iter().filter(|p| self.dir.join(p).symlink_metadata().is_ok()).collect();
            if !present.is_empty() {
                let list = scratch.join("kept");
                let mut bytes = Vec::new();
                for path in present {
                    bytes.extend_from_slice(path.as_bytes());
                    bytes.push(0);
                }
                std::fs::write(&list, bytes)
                    .map_err(|error| GitError::TempIndex { dir: self.dir.clone(), error })?;
                let from = format!("--pathspec-from-file={}", list.display());
                let mut env = env.to_vec();
                // The paths are file names, never patterns.
                env.push(("GIT_LITERAL_PATHSPECS", OsStr::new("1")));
                let args = ["add", "-f", "--pathspec-file-nul", from.as_str()];
                self.run_env(&args, &env, GIT_TIMEOUT)?;
            }
            self.text_env(&["write-tree"], env)
        })?;
        // The repository's diff drivers are off already; these make the diff not ask for them.
        let mut args = vec!["diff", "--no-color", "--no-ext-diff", "--no-textconv"];
        if numstat {
            args.push("--numstat");
        }
        args.extend([base, tree.as_str(), "--"]);
        let out = self.run(&args, GIT_TIMEOUT)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Untracked files that are not ignored.
    pub fn untracked(&self) -> Result<Vec<String>, GitError> {
        let out = self.run(&["ls-files", "-z", "--others", "--exclude-standard"], GIT_TIMEOUT)?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|f| !f.is_empty())
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect())
    }

    /// The URL of remote `origin`, if there is one.
    pub fn origin_url(&self) -> Option<String> {
        self.text(&["config", "--get", "remote.origin.url"], REMOTE_TIMEOUT)
            .ok()
            .filter(|u| !u.is_empty())
    }
}

/// A fresh repository in a temporary directory, for the modules' tests.
#[cfg(test)]
pub(crate) fn test_repo() -> (tempfile::TempDir, Repo) {
    #[allow(clippy::unwrap_used, reason = "a test without its repository cannot run")]
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::at(dir.path());
    #[allow(clippy::unwrap_used, reason = "a test without its repository cannot run")]
    repo.run(&["init", "-q"], GIT_TIMEOUT).unwrap();
    (dir, repo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error as `{}` and as the binaries print it (`{:#}` through anyhow: the message, then
    /// each `source`).
    fn printed<E: std::error::Error + Send + Sync + 'static>(e: E) -> (String, String) {
        (e.to_string(), format!("{:#}", anyhow::Error::new(e)))
    }

    /// The cause is in the message and is not a `source` as well: printed once either way.
    #[test]
    fn an_error_s_cause_is_printed_once() {
        let cause = "the disk is on fire";
        let spawn = GitError::Spawn { dir: "/repo".into(), error: std::io::Error::other(cause) };
        let lock = bare::BareError::Lock {
            path: "/repo/lock".into(),
            error: std::io::Error::other(cause),
        };
        for (plain, chain) in [printed(spawn), printed(lock)] {
            assert_eq!(plain.matches(cause).count(), 1, "{plain}");
            assert_eq!(chain.matches(cause).count(), 1, "{chain}");
        }
        let (_, chain) = printed(GitError::TempIndex {
            dir: "/repo".into(),
            error: std::io::Error::other(cause),
        });
        assert_eq!(chain, format!("cannot make a temporary index for /repo: {cause}"));
    }

    fn repo(name: &str) -> Repo {
        let dir = std::env::temp_dir().join(format!("gitstore-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let repo = Repo::at(&dir);
        repo.run(&["init", "-q"], GIT_TIMEOUT).unwrap();
        repo.run(&["config", "user.email", "t@example.com"], GIT_TIMEOUT).unwrap();
        repo.run(&["config", "user.name", "t"], GIT_TIMEOUT).unwrap();
        repo
    }

    #[test]
    fn snapshot_diff_and_file_set() {
        let repo = repo("snap");
        let dir = repo.dir().to_owned();
        assert_eq!(repo.snapshot().unwrap(), None);
        std::fs::write(dir.join("a.txt"), "one\n").unwrap();
        std::fs::write(dir.join(".gitignore"), "ignored.txt\n").unwrap();
        repo.run(&["add", "."], GIT_TIMEOUT).unwrap();
        repo.run(&["commit", "-qm", "first"], GIT_TIMEOUT).unwrap();
        let head = repo.snapshot().unwrap().unwrap();
        // A user's uncommitted edit is part of the snapshot, so it is not in the diff after.
        std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
        let snapshot = repo.snapshot().unwrap().unwrap();
        assert_ne!(snapshot, head);
        std::fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let diff = repo.diff_since(&snapshot, &[], false).unwrap();
        assert!(diff.contains("+three") && !diff.contains("+two"), "{diff}");
        // The snapshot touched nothing: the working tree still has the user's edit.
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "one\ntwo\nthree\n");
        std::fs::write(dir.join("new.txt"), "n").unwrap();
        std::fs::write(dir.join("ignored.txt"), "i").unwrap();
        assert_eq!(repo.file_set().unwrap(), [".gitignore", "a.txt", "new.txt"]);
        assert_eq!(repo.untracked().unwrap(), ["new.txt"]);
        assert_eq!(
            Repo::toplevel(&dir).unwrap().canonicalize().unwrap(),
            dir.canonicalize().unwrap()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A same-size edit made in the second its file was added is in the diff, however much
    /// later the diff is taken (the temporary index keeps the index's time, so git rereads
    /// the racily clean entry).
    #[test]
    fn a_same_size_edit_in_the_second_of_the_add_is_in_the_diff() {
        let repo = repo("racy");
        let dir = repo.dir().to_owned();
        // The write, the add and the edit within one second of the clock.
        let second = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap()
        };
        for _ in 0..5 {
            let started = second();
            std::fs::write(dir.join("calc.sh"), "echo $(($1 - $2))\n").unwrap();
            repo.run(&["add", "calc.sh"], GIT_TIMEOUT).unwrap();
            repo.run(&["commit", "-qm", "calc", "--allow-empty"], GIT_TIMEOUT).unwrap();
            let base = repo.snapshot().unwrap().unwrap();
            std::fs::write(dir.join("calc.sh"), "echo $(($1 + $2))\n").unwrap();
            if second() != started {
                continue;
            }
            std::thread::sleep(std::time::Duration::from_millis(1100));
            let diff = repo.diff_since(&base, &[], false).unwrap();
            assert!(diff.contains("+echo $(($1 + $2))"), "the edit is missing: {diff:?}");
            std::fs::remove_dir_all(dir).unwrap();
            return;
        }
        panic!("five tries never fit the write, the add and the edit in one second");
    }

    /// A file untracked at the snapshot is in it: an edit to it is in the diff after, a new
    /// file is not; the user's index and tree are as they were.
    #[test]
    fn a_snapshot_holds_untracked_files_and_touches_neither_index_nor_tree() {
        let repo = repo("untracked");
        let dir = repo.dir().to_owned();
        std::fs::write(dir.join("a.txt"), "one\n").unwrap();
        std::fs::write(dir.join(".gitignore"), "ignored.txt\n").unwrap();
        repo.run(&["add", "."], GIT_TIMEOUT).unwrap();
        repo.run(&["commit", "-qm", "first"], GIT_TIMEOUT).unwrap();
        let head = repo.text(&["rev-parse", "HEAD"], GIT_TIMEOUT).unwrap();
        std::fs::write(dir.join("ignored.txt"), "i").unwrap();
        assert_eq!(repo.snapshot().unwrap().unwrap(), head, "an ignored file is not a change");
        std::fs::write(dir.join("notes.txt"), "draft\n").unwrap();
        std::fs::write(dir.join("gone.txt"), "old\n").unwrap();
        std::fs::write(dir.join("a.txt"), "one\nstaged\n").unwrap();
        repo.run(&["add", "a.txt"], GIT_TIMEOUT).unwrap();
        let index = |repo: &Repo| repo.run(&["ls-files", "-s"], GIT_TIMEOUT).unwrap();
        let (index_before, status_before) =
            (index(&repo), repo.run(&["status", "--porcelain"], GIT_TIMEOUT).unwrap());
        let snapshot = repo.snapshot().unwrap().unwrap();
        assert_ne!(snapshot, head);
        let parent = repo.text(&["rev-parse", &format!("{snapshot}^")], GIT_TIMEOUT).unwrap();
        assert_eq!(parent, head);
        let kept = repo.untracked().unwrap();
        assert_eq!(kept, ["gone.txt", "notes.txt"]);
        // The request edits the untracked file, removes another and adds one.
        std::fs::write(dir.join("notes.txt"), "draft\nmore\n").unwrap();
        std::fs::remove_file(dir.join("gone.txt")).unwrap();
        std::fs::write(dir.join("new.txt"), "n\n").unwrap();
        let diff = repo.diff_since(&snapshot, &kept, false).unwrap();
        assert!(diff.contains("+more") && !diff.contains("+draft"), "{diff}");
        assert!(diff.contains("deleted file mode") && diff.contains("gone.txt"), "{diff}");
        assert!(!diff.contains("new.txt") && !diff.contains("staged"), "{diff}");
        let numstat = repo.diff_since(&snapshot, &kept, true).unwrap();
        assert_eq!(numstat, "0\t1\tgone.txt\n1\t0\tnotes.txt\n");
        // Nothing of the user's moved: the index, the tree's status (but the request's edits).
        assert_eq!(index(&repo), index_before);
        let status =
            String::from_utf8(repo.run(&["status", "--porcelain"], GIT_TIMEOUT).unwrap()).unwrap();
        assert_eq!(status, "M  a.txt\n?? new.txt\n?? notes.txt\n", "{status_before:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A repository without a commit: `snapshot` has no base to give, `snapshot_commit` a
    /// commit without a parent holding the files (none staged, then one staged), and the
    /// user's index stays as it was (absent, then with the one entry).
    #[test]
    fn a_repository_without_a_commit_gets_a_parentless_snapshot() {
        let repo = repo("unborn");
        let dir = repo.dir().to_owned();
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
        assert_eq!(repo.snapshot().unwrap(), None);
        let index = dir.join(".git/index");
        let commit = repo.snapshot_commit().unwrap();
        assert!(!index.exists(), "the snapshot wrote the user's index");
        let files = |commit: &str| repo.text(&["ls-tree", "--name-only", commit], GIT_TIMEOUT);
        assert_eq!(files(&commit).unwrap(), "a.txt");
        let parents = repo.text(&["rev-list", "--parents", "-n1", &commit], GIT_TIMEOUT).unwrap();
        assert_eq!(parents, commit, "a parent in a repository without a commit");
        std::fs::write(dir.join("b.txt"), "b\n").unwrap();
        repo.run(&["add", "b.txt"], GIT_TIMEOUT).unwrap();
        let staged = repo.run(&["ls-files", "-s"], GIT_TIMEOUT).unwrap();
        let commit = repo.snapshot_commit().unwrap();
        assert_eq!(files(&commit).unwrap(), "a.txt\nb.txt");
        assert_eq!(repo.run(&["ls-files", "-s"], GIT_TIMEOUT).unwrap(), staged);
        assert_eq!(repo.head(), None, "the snapshot moved HEAD");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn failures_and_timeouts_are_named() {
        let repo = repo("fail");
        let error = repo.run(&["rev-parse", "--verify", "nothing"], GIT_TIMEOUT).unwrap_err();
        assert!(error.to_string().contains("rev-parse --verify nothing"), "{error}");
        let start = std::time::Instant::now();
        let error =
            repo.run(&["-c", "alias.nap=!sleep 5", "nap"], Duration::from_millis(300)).unwrap_err();
        assert!(matches!(error, GitError::Timeout { .. }), "{error}");
        assert!(error.to_string().contains("longer than 0s"), "{error}");
        assert!(start.elapsed() < Duration::from_secs(4));
        std::fs::remove_dir_all(repo.dir()).unwrap();
    }
}
