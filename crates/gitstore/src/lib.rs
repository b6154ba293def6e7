//! The one door to git. Every call has a time bound; a call that passes it is killed and named.
//!
//! This crate runs the `git` command where exact porcelain semantics matter in the user's
//! repository (`git stash create`, `git diff`, `git ls-files`); `bare` writes bare repositories
//! (the memory wiki) through libgit2, objects directly and the branch by compare-and-swap.

pub mod bare;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt;

/// The bound of every git call on a user's repository (the spec's "git calls for the diff").
pub const GIT_TIMEOUT: Duration = Duration::from_secs(30);
/// The bound of the remote lookup for a project key.
pub const REMOTE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git in {}: {source}", dir.display())]
    Spawn {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {args}` in {} took longer than {}s and was killed", dir.display(), timeout.as_secs())]
    Timeout { dir: PathBuf, args: String, timeout: Duration },
    #[error("`git {args}` in {} failed ({status}): {stderr}", dir.display())]
    Failed { dir: PathBuf, args: String, status: String, stderr: String },
}

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
        let mut child = Command::new("git")
            .args(args)
            .current_dir(&self.dir)
            // Never wait on a pager, an editor or a credential prompt.
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| GitError::Spawn { dir: self.dir.clone(), source })?;
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
        if !status.success() {
            return Err(GitError::Failed {
                dir: self.dir.clone(),
                args: args.join(" "),
                status: status.to_string(),
                stderr: String::from_utf8_lossy(&stderr).trim().to_owned(),
            });
        }
        Ok(stdout)
    }

    fn text(&self, args: &[&str], timeout: Duration) -> Result<String, GitError> {
        Ok(String::from_utf8_lossy(&self.run(args, timeout)?).trim_end().to_owned())
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

    /// A snapshot of the working tree that touches nothing: `git stash create`'s commit, or
    /// `HEAD` when the tree is clean. `None` in a repository without a commit.
    pub fn snapshot(&self) -> Result<Option<String>, GitError> {
        let head = match self.text(&["rev-parse", "--verify", "--quiet", "HEAD"], GIT_TIMEOUT) {
            Ok(head) if !head.is_empty() => head,
            // No commit yet: nothing to diff against (`stash create` refuses too).
            _ => return Ok(None),
        };
        let stash = self.text(&["stash", "create"], GIT_TIMEOUT)?;
        Ok(Some(if stash.is_empty() { head } else { stash }))
    }

    /// The unified diff of the working tree against `base` (tracked files).
    pub fn diff_against(&self, base: &str) -> Result<String, GitError> {
        let out = self.run(&["diff", "--no-color", "--no-ext-diff", base, "--"], GIT_TIMEOUT)?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let diff = repo.diff_against(&snapshot).unwrap();
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
