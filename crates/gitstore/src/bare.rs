//! Bare repositories written without a working tree or an index: blobs and trees are written
//! as objects and the branch moves with a compare-and-swap, so concurrent writers (threads or
//! processes) never lose a write and never meet "index is locked". A writer whose base moved
//! rebuilds its tree on the new tip and tries again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use git2::{
    ErrorCode, FileMode, ObjectType, Oid, Repository, Signature, TreeWalkMode, TreeWalkResult,
};

/// The branch a new repository's HEAD names.
pub const DEFAULT_BRANCH: &str = "main";

/// How many times a commit is rebuilt on a moved branch before it gives up.
pub const MAX_COMMIT_ATTEMPTS: u32 = 200;

#[derive(Debug, thiserror::Error)]
pub enum BareError {
    #[error("git repository {}: {error}", path.display())]
    Git { path: PathBuf, error: git2::Error },
    #[error("`{0}` does not exist on the branch")]
    NotFound(String),
    #[error("the branch kept moving: {attempts} attempts to commit lost the race")]
    Contended { attempts: u32 },
    /// A compare-and-swap found the branch elsewhere than expected: nothing was moved.
    #[error("branch `{branch}` moved (expected {}, found {})", expected.as_deref().unwrap_or("none"), found.as_deref().unwrap_or("none"))]
    Moved { branch: String, expected: Option<String>, found: Option<String> },
    #[error("`{0}` names no commit")]
    BadRevision(String),
    #[error("the branch lock {}: {error}", path.display())]
    Lock { path: PathBuf, error: std::io::Error },
}

/// Who a commit is by.
#[derive(Debug, Clone, Copy)]
pub struct Author<'a> {
    pub name: &'a str,
    pub email: &'a str,
}

/// One change of a commit.
#[derive(Debug, Clone)]
pub enum Change {
    Put { path: String, bytes: Vec<u8> },
    Delete { path: String },
}

/// A commit touching a path, newest first in `log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    pub id: String,
    pub message: String,
    pub author: String,
    /// Seconds since the epoch.
    pub time: i64,
}

/// The id git gives a blob holding `bytes`.
pub fn blob_id(bytes: &[u8]) -> Option<String> {
    Oid::hash_object(ObjectType::Blob, bytes).ok().map(|id| id.to_string())
}

/// A bare repository on disk. Cheap to clone; every call opens the repository (libgit2's
/// handles are not shared between threads).
#[derive(Debug, Clone)]
pub struct Bare {
    path: PathBuf,
}

impl Bare {
    /// Opens the bare repository at `path`, creating it when absent.
    pub fn open_or_init(path: &Path) -> Result<Bare, BareError> {
        let bare = Bare { path: path.to_owned() };
        if Repository::open_bare(path).is_err() {
            let repo = Repository::init_bare(path).map_err(|e| bare.err(e))?;
            // `git log` and friends read HEAD: point it at the branch the writers use.
            repo.set_head(&format!("refs/heads/{DEFAULT_BRANCH}")).map_err(|e| bare.err(e))?;
        }
        Ok(bare)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, source: git2::Error) -> BareError {
        BareError::Git { path: self.path.clone(), error: source }
    }

    fn repo(&self) -> Result<Repository, BareError> {
        Repository::open_bare(&self.path).map_err(|e| self.err(e))
    }

    /// Held while a branch is read and moved by this crate's writers, in this process or
    /// another (an advisory lock: released when the file closes, a killed writer's too). With
    /// the ref's compare-and-swap alone, 16 writers once lost one write of 80 in a loaded
    /// suite run (not reproduced in 30 runs alone, cause not found): serialized, this crate's
    /// writers cannot interleave a read of the tip and its move whatever libgit2 does.
    fn ref_lock(&self) -> Result<std::fs::File, BareError> {
        let path = self.path.join("gitstore-refs.lock");
        let io = |error| BareError::Lock { path: path.clone(), error };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        file.lock().map_err(io)?;
        Ok(file)
    }

    fn tip(&self, repo: &Repository, branch: &str) -> Result<Option<Oid>, BareError> {
        match repo.refname_to_id(&format!("refs/heads/{branch}")) {
            Ok(id) => Ok(Some(id)),
            Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(self.err(e)),
        }
    }

    /// The commit the branch points at, if it has one.
    pub fn head(&self, branch: &str) -> Result<Option<String>, BareError> {
        let repo = self.repo()?;
        Ok(self.tip(&repo, branch)?.map(|id| id.to_string()))
    }

    /// The bytes of `path` at the branch's tip (`None`: no such file, or no commit yet).
    pub fn read(&self, branch: &str, path: &str) -> Result<Option<Vec<u8>>, BareError> {
        let repo = self.repo()?;
        let Some(tip) = self.tip(&repo, branch)? else { return Ok(None) };
        self.read_in(&repo, tip, path)
    }

    /// The bytes of `path` at `commit`.
    pub fn read_at(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>, BareError> {
        let repo = self.repo()?;
        let id = Oid::from_str(commit).map_err(|e| self.err(e))?;
        self.read_in(&repo, id, path)
    }

    fn read_in(
        &self,
        repo: &Repository,
        commit: Oid,
        path: &str,
    ) -> Result<Option<Vec<u8>>, BareError> {
        let tree = repo.find_commit(commit).and_then(|c| c.tree()).map_err(|e| self.err(e))?;
        let entry = match tree.get_path(Path::new(path)) {
            Ok(entry) => entry,
            Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
            Err(e) => return Err(self.err(e)),
        };
        if entry.kind() != Some(ObjectType::Blob) {
            return Ok(None);
        }
        let blob = repo.find_blob(entry.id()).map_err(|e| self.err(e))?;
        Ok(Some(blob.content().to_vec()))
    }

    /// Every file at the branch's tip under `prefix` ("" for all), with its bytes, in path order.
    pub fn files(&self, branch: &str, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, BareError> {
        let repo = self.repo()?;
        let Some(tip) = self.tip(&repo, branch)? else { return Ok(Vec::new()) };
        self.files_of(&repo, tip, prefix)
    }

    fn files_of(
        &self,
        repo: &Repository,
        commit: Oid,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, BareError> {
        let tree = repo.find_commit(commit).and_then(|c| c.tree()).map_err(|e| self.err(e))?;
        let mut ids = Vec::new();
        tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(ObjectType::Blob) {
                let path = format!("{dir}{}", entry.name().unwrap_or_default());
                if path.starts_with(prefix) {
                    ids.push((path, entry.id()));
                }
            }
            TreeWalkResult::Ok
        })
        .map_err(|e| self.err(e))?;
        ids.sort();
        ids.into_iter()
            .map(|(path, id)| {
                let blob = repo.find_blob(id).map_err(|e| self.err(e))?;
                Ok((path, blob.content().to_vec()))
            })
            .collect()
    }

    /// Commits `changes` on `branch` (created by the first commit). The tree is built from the
    /// tip as it is now; if another writer moves the branch first, the commit is rebuilt on the
    /// new tip. A `Delete` of a file that does not exist fails with `NotFound` and commits
    /// nothing. Returns the new commit's id.
    pub fn commit(
        &self,
        branch: &str,
        changes: &[Change],
        message: &str,
        author: &str,
    ) -> Result<String, BareError> {
        let repo = self.repo()?;
        let refname = format!("refs/heads/{branch}");
        let sig = Signature::now(author, &format!("{author}@ai-memory.local"))
            .map_err(|e| self.err(e))?;
        let blobs = self.write_blobs(&repo, changes)?;
        for attempt in 1..=MAX_COMMIT_ATTEMPTS {
            let _held = self.ref_lock()?;
            let parent = self.tip(&repo, branch)?;
            let parent_commit = match parent {
                Some(id) => Some(repo.find_commit(id).map_err(|e| self.err(e))?),
                None => None,
            };
            let tree = self.updated_tree(&repo, parent_commit.as_ref(), changes, &blobs)?;
            let parents: Vec<&git2::Commit<'_>> = parent_commit.iter().collect();
            let id =
                repo.commit(None, &sig, &sig, message, &tree, &parents).map_err(|e| self.err(e))?;
            let moved = match parent {
                Some(old) => repo.reference_matching(&refname, id, true, old, message).map(|_| ()),
                None => repo.reference(&refname, id, false, message).map(|_| ()),
            };
            match moved {
                Ok(()) => return Ok(id.to_string()),
                // Another writer moved the branch (or holds its lock): rebuild on the new tip.
                Err(e)
                    if matches!(
                        e.code(),
                        ErrorCode::Modified | ErrorCode::Exists | ErrorCode::Locked
                    ) =>
                {
                    if attempt % 8 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(u64::from(
                            attempt / 8,
                        )));
                    }
                }
                Err(e) => return Err(self.err(e)),
            }
        }
        Err(BareError::Contended { attempts: MAX_COMMIT_ATTEMPTS })
    }

    /// The blob of each `Put` of `changes`, in order.
    fn write_blobs(&self, repo: &Repository, changes: &[Change]) -> Result<Vec<Oid>, BareError> {
        let puts = changes.iter().filter_map(|change| match change {
            Change::Put { bytes, .. } => Some(bytes),
            Change::Delete { .. } => None,
        });
        puts.map(|bytes| repo.blob(bytes).map_err(|e| self.err(e))).collect()
    }

    /// `parent`'s tree (the empty tree for `None`) with `changes` applied, each `Put` as its
    /// blob of `blobs`. A `Delete` of a path the tree lacks is `NotFound`.
    fn updated_tree<'r>(
        &self,
        repo: &'r Repository,
        parent: Option<&git2::Commit<'r>>,
        changes: &[Change],
        blobs: &[Oid],
    ) -> Result<git2::Tree<'r>, BareError> {
        let base = match parent {
            Some(c) => c.tree().map_err(|e| self.err(e))?,
            None => {
                let empty =
                    repo.treebuilder(None).and_then(|b| b.write()).map_err(|e| self.err(e))?;
                repo.find_tree(empty).map_err(|e| self.err(e))?
            }
        };
        let mut update = git2::build::TreeUpdateBuilder::new();
        let mut blobs = blobs.iter();
        for change in changes {
            match change {
                Change::Put { path, .. } => {
                    if let Some(id) = blobs.next() {
                        update.upsert(path.as_str(), *id, FileMode::Blob);
                    }
                }
                Change::Delete { path } => {
                    if base.get_path(Path::new(path)).is_err() {
                        return Err(BareError::NotFound(path.clone()));
                    }
                    update.remove(path.as_str());
                }
            }
        }
        let id = update.create_updated(repo, &base).map_err(|e| self.err(e))?;
        repo.find_tree(id).map_err(|e| self.err(e))
    }

    /// One compare-and-swap commit: `changes` applied to `expected`'s tree (the empty tree for
    /// `None`, creating the branch), the branch moved only if it still points at `expected`.
    /// No retry: a moved branch is `Moved` and nothing is moved (the caller decides whether
    /// to rebuild on the new head). Returns the new commit's id.
    pub fn commit_on(
        &self,
        branch: &str,
        expected: Option<&str>,
        changes: &[Change],
        message: &str,
        author: Author<'_>,
    ) -> Result<String, BareError> {
        let repo = self.repo()?;
        let sig = Signature::now(author.name, author.email).map_err(|e| self.err(e))?;
        let parent = match expected {
            Some(id) => Some(self.commit_of(&repo, id)?),
            None => None,
        };
        let blobs = self.write_blobs(&repo, changes)?;
        let tree = self.updated_tree(&repo, parent.as_ref(), changes, &blobs)?;
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        let id =
            repo.commit(None, &sig, &sig, message, &tree, &parents).map_err(|e| self.err(e))?;
        self.swap(&repo, branch, &id.to_string(), expected, message)?;
        Ok(id.to_string())
    }

    /// Points `branch` at `target` if it points at `expected` now (`None`: only if it does not
    /// exist). Anything else is `Moved` and moves nothing.
    pub fn set_branch(
        &self,
        branch: &str,
        target: &str,
        expected: Option<&str>,
        message: &str,
    ) -> Result<(), BareError> {
        let repo = self.repo()?;
        self.commit_of(&repo, target)?;
        self.swap(&repo, branch, target, expected, message)
    }

    fn swap(
        &self,
        repo: &Repository,
        branch: &str,
        target: &str,
        expected: Option<&str>,
        message: &str,
    ) -> Result<(), BareError> {
        let refname = format!("refs/heads/{branch}");
        let id = Oid::from_str(target).map_err(|e| self.err(e))?;
        let _held = self.ref_lock()?;
        let moved = match expected {
            Some(old) => {
                let old = Oid::from_str(old).map_err(|e| self.err(e))?;
                repo.reference_matching(&refname, id, true, old, message).map(|_| ())
            }
            None => repo.reference(&refname, id, false, message).map(|_| ()),
        };
        match moved {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.code(),
                    ErrorCode::Modified | ErrorCode::Exists | ErrorCode::Locked
                ) || (expected.is_some() && e.code() == ErrorCode::NotFound) =>
            {
                Err(BareError::Moved {
                    branch: branch.to_owned(),
                    expected: expected.map(str::to_owned),
                    found: self.tip(repo, branch)?.map(|id| id.to_string()),
                })
            }
            Err(e) => Err(self.err(e)),
        }
    }

    /// Deletes `branch` if it points at `expected`; `Ok(false)` when it does not exist.
    pub fn delete_branch(&self, branch: &str, expected: &str) -> Result<bool, BareError> {
        let repo = self.repo()?;
        let Some(tip) = self.tip(&repo, branch)? else { return Ok(false) };
        if tip.to_string() != expected {
            return Err(BareError::Moved {
                branch: branch.to_owned(),
                expected: Some(expected.to_owned()),
                found: Some(tip.to_string()),
            });
        }
        let mut reference =
            repo.find_reference(&format!("refs/heads/{branch}")).map_err(|e| self.err(e))?;
        reference.delete().map_err(|e| self.err(e))?;
        Ok(true)
    }

    /// Every branch with the commit it points at, by name.
    pub fn branches(&self) -> Result<Vec<(String, String)>, BareError> {
        let repo = self.repo()?;
        let mut out = Vec::new();
        for item in repo.branches(Some(git2::BranchType::Local)).map_err(|e| self.err(e))? {
            let (branch, _) = item.map_err(|e| self.err(e))?;
            let reference = branch.get();
            if let (Ok(name), Some(id)) = (reference.shorthand(), reference.target()) {
                out.push((name.to_owned(), id.to_string()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Whether `id` (a full id) is a commit of this repository.
    pub fn has_commit(&self, id: &str) -> Result<bool, BareError> {
        let repo = self.repo()?;
        let Ok(oid) = Oid::from_str(id) else { return Ok(false) };
        Ok(repo.find_commit(oid).is_ok())
    }

    /// The full id of the commit `rev` names (a branch, an id or its prefix, `X^`, ...).
    pub fn resolve(&self, rev: &str) -> Result<String, BareError> {
        let repo = self.repo()?;
        let branch = format!("refs/heads/{rev}");
        let object = repo
            .revparse_single(&branch)
            .or_else(|_| repo.revparse_single(rev))
            .map_err(|_| BareError::BadRevision(rev.to_owned()))?;
        let commit = object.peel_to_commit().map_err(|_| BareError::BadRevision(rev.to_owned()))?;
        Ok(commit.id().to_string())
    }

    fn commit_of<'r>(&self, repo: &'r Repository, id: &str) -> Result<git2::Commit<'r>, BareError> {
        let oid = Oid::from_str(id).map_err(|_| BareError::BadRevision(id.to_owned()))?;
        repo.find_commit(oid).map_err(|_| BareError::BadRevision(id.to_owned()))
    }

    /// Every file of `commit` under `prefix` ("" for all), with its bytes, in path order.
    pub fn files_at(
        &self,
        commit: &str,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, BareError> {
        let repo = self.repo()?;
        let commit = self.commit_of(&repo, commit)?;
        self.files_of(&repo, commit.id(), prefix)
    }

    /// The unified diff from `old` (the empty tree for `None`) to `new`, both commit ids.
    pub fn diff(&self, old: Option<&str>, new: &str) -> Result<String, BareError> {
        let repo = self.repo()?;
        let new_tree = self.commit_of(&repo, new)?.tree().map_err(|e| self.err(e))?;
        let old_tree = match old {
            Some(old) => Some(self.commit_of(&repo, old)?.tree().map_err(|e| self.err(e))?),
            None => None,
        };
        let diff = repo
            .diff_tree_to_tree(old_tree.as_ref(), Some(&new_tree), None)
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        diff.print(git2::DiffFormat::Patch, |_, _, line| {
            if matches!(line.origin(), '+' | '-' | ' ') {
                out.push(line.origin() as u8);
            }
            out.extend_from_slice(line.content());
            true
        })
        .map_err(|e| self.err(e))?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// The paths a tree-to-tree diff from commit `from` (`None`: the empty tree) to commit `to`
    /// touches: each change's old path, then its new one, in git's order. `None` when `from`
    /// is not a commit of this repository.
    pub fn changed_paths(
        &self,
        from: Option<&str>,
        to: &str,
    ) -> Result<Option<Vec<String>>, BareError> {
        let repo = self.repo()?;
        let commit = |id: &str| Oid::from_str(id).and_then(|id| repo.find_commit(id));
        let old = match from.map(commit) {
            None => None,
            Some(Ok(from)) => Some(from.tree().map_err(|e| self.err(e))?),
            Some(Err(_)) => return Ok(None),
        };
        let new = commit(to).and_then(|c| c.tree()).map_err(|e| self.err(e))?;
        let diff =
            repo.diff_tree_to_tree(old.as_ref(), Some(&new), None).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for delta in diff.deltas() {
            for file in [delta.old_file(), delta.new_file()] {
                if let Some(path) = file.path().and_then(|p| p.to_str()) {
                    out.push(path.to_owned());
                }
            }
        }
        Ok(Some(out))
    }

    /// Commits reachable from `rev`, newest first, at most `limit`: every commit, or with
    /// `path` those that changed it.
    pub fn history(
        &self,
        rev: &str,
        path: Option<&str>,
        limit: usize,
    ) -> Result<Vec<CommitInfo>, BareError> {
        let tip = self.resolve(rev)?;
        let repo = self.repo()?;
        let mut walk = repo.revwalk().map_err(|e| self.err(e))?;
        walk.push(Oid::from_str(&tip).map_err(|e| self.err(e))?).map_err(|e| self.err(e))?;
        let id_at = |commit: &git2::Commit<'_>, path: &str| {
            commit.tree().ok().and_then(|t| t.get_path(Path::new(path)).ok()).map(|e| e.id())
        };
        let mut out = Vec::new();
        for id in walk {
            let id = id.map_err(|e| self.err(e))?;
            let commit = repo.find_commit(id).map_err(|e| self.err(e))?;
            let touched = match path {
                None => true,
                Some(path) => {
                    id_at(&commit, path) != commit.parent(0).ok().and_then(|p| id_at(&p, path))
                }
            };
            if touched {
                out.push(CommitInfo {
                    id: id.to_string(),
                    message: commit.message().unwrap_or_default().to_owned(),
                    author: commit.author().name().unwrap_or_default().to_owned(),
                    time: commit.time().seconds(),
                });
                if out.len() == limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// For each of `paths`, the ids of every blob it held in the commits reachable from
    /// `branch` (at most `limit` commits walked; none when the branch does not exist).
    pub fn path_blobs(
        &self,
        branch: &str,
        paths: &[String],
        limit: usize,
    ) -> Result<BTreeMap<String, BTreeSet<String>>, BareError> {
        let repo = self.repo()?;
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let Some(tip) = self.tip(&repo, branch)? else { return Ok(out) };
        let mut walk = repo.revwalk().map_err(|e| self.err(e))?;
        walk.push(tip).map_err(|e| self.err(e))?;
        for id in walk.take(limit) {
            let id = id.map_err(|e| self.err(e))?;
            let tree = repo.find_commit(id).and_then(|c| c.tree()).map_err(|e| self.err(e))?;
            for path in paths {
                if let Ok(entry) = tree.get_path(Path::new(path)) {
                    out.entry(path.clone()).or_default().insert(entry.id().to_string());
                }
            }
        }
        Ok(out)
    }

    /// Commits that changed `path` on `branch`, newest first, at most `limit` (none when the
    /// branch does not exist).
    pub fn log(
        &self,
        branch: &str,
        path: &str,
        limit: usize,
    ) -> Result<Vec<CommitInfo>, BareError> {
        let repo = self.repo()?;
        match self.tip(&repo, branch)? {
            Some(tip) => self.history(&tip.to_string(), Some(path), limit),
            None => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where a repository named `name` may be created, and the guard removing it when dropped.
    fn temp(name: &str) -> (tempfile::TempDir, PathBuf) {
        let tmp =
            tempfile::Builder::new().prefix(&format!("gitstore-bare-{name}-")).tempdir().unwrap();
        let path = tmp.path().join(format!("{name}.git"));
        (tmp, path)
    }

    fn put(path: &str, text: &str) -> Change {
        Change::Put { path: path.into(), bytes: text.as_bytes().to_vec() }
    }

    #[test]
    fn changed_paths_and_the_log_of_a_path() {
        let (_tmp, path) = temp("changed");
        let bare = Bare::open_or_init(&path).unwrap();
        assert_eq!(bare.log("main", "a", 10).unwrap(), [], "no branch yet");
        let first = bare.commit("main", &[put("a", "1"), put("b", "1")], "one", "t").unwrap();
        let second = bare
            .commit("main", &[put("a", "2"), Change::Delete { path: "b".into() }], "two", "t")
            .unwrap();
        let paths = |from| bare.changed_paths(from, &second).unwrap().unwrap();
        assert_eq!(paths(Some(first.as_str())), ["a", "a", "b", "b"]);
        assert_eq!(paths(None), ["a", "a"]);
        let stranger = "0123456789012345678901234567890123456789";
        assert_eq!(bare.changed_paths(Some(stranger), &second).unwrap(), None);
        let log: Vec<String> =
            bare.log("main", "b", 10).unwrap().into_iter().map(|c| c.id).collect();
        assert_eq!(log, [second.clone(), first.clone()]);
        assert_eq!(bare.log("main", "a", 1).unwrap()[0].id, second);
    }

    #[test]
    fn commits_read_back_with_history() {
        let (_tmp, dir) = temp("history");
        let bare = Bare::open_or_init(&dir).unwrap();
        assert_eq!(bare.head("main").unwrap(), None);
        assert_eq!(bare.read("main", "a/b.md").unwrap(), None);
        let first = bare.commit("main", &[put("a/b.md", "one")], "first", "me").unwrap();
        bare.commit("main", &[put("a/c.md", "other")], "unrelated", "me").unwrap();
        bare.commit("main", &[put("a/b.md", "two")], "second", "you").unwrap();
        assert_eq!(bare.read("main", "a/b.md").unwrap().as_deref(), Some(&b"two"[..]));
        assert_eq!(bare.read_at(&first, "a/b.md").unwrap().as_deref(), Some(&b"one"[..]));
        let log = bare.log("main", "a/b.md", 10).unwrap();
        let messages: Vec<_> =
            log.iter().map(|c| (c.message.as_str(), c.author.as_str())).collect();
        assert_eq!(
            messages,
            [("second", "you"), ("first", "me")],
            "the unrelated commit is not in the page's log"
        );
        let files: Vec<_> = bare.files("main", "a/").unwrap().into_iter().map(|(p, _)| p).collect();
        assert_eq!(files, ["a/b.md", "a/c.md"]);

        bare.commit("main", &[Change::Delete { path: "a/b.md".into() }], "gone", "me").unwrap();
        assert_eq!(bare.read("main", "a/b.md").unwrap(), None);
        assert_eq!(bare.log("main", "a/b.md", 10).unwrap().len(), 3, "the deletion is history too");
        let head = bare.head("main").unwrap();
        let err = bare
            .commit("main", &[Change::Delete { path: "nope.md".into() }], "x", "me")
            .unwrap_err();
        assert!(matches!(err, BareError::NotFound(ref p) if p == "nope.md"), "{err}");
        assert_eq!(bare.head("main").unwrap(), head, "a refused commit commits nothing");
    }

    /// One-attempt writes move a ref only from where the writer saw it.
    #[test]
    fn compare_and_swap_writes_refuse_a_moved_branch() {
        let (_tmp, dir) = temp("cas");
        let bare = Bare::open_or_init(&dir).unwrap();
        let me = Author { name: "aerix", email: "aerix@aerix.local" };
        let first = bare.commit_on("main", None, &[put("a.md", "1")], "first", me).unwrap();
        let err = bare.commit_on("main", None, &[put("a.md", "x")], "again", me).unwrap_err();
        assert!(matches!(err, BareError::Moved { .. }), "{err}");
        let second =
            bare.commit_on("main", Some(&first), &[put("b.md", "2")], "second", me).unwrap();
        let stale = bare.commit_on("main", Some(&first), &[put("c.md", "3")], "stale", me);
        assert!(
            matches!(stale, Err(BareError::Moved { ref found, .. }) if found.as_deref() == Some(second.as_str()))
        );
        assert_eq!(bare.head("main").unwrap().as_deref(), Some(second.as_str()));
        bare.set_branch("side", &first, None, "side").unwrap();
        assert!(bare.set_branch("side", &second, Some(&second), "x").is_err());
        bare.set_branch("side", &second, Some(&first), "x").unwrap();
        assert_eq!(bare.branches().unwrap().len(), 2);
        assert!(bare.delete_branch("side", &first).is_err(), "not where the caller saw it");
        assert!(bare.delete_branch("side", &second).unwrap());
        assert!(!bare.delete_branch("side", &second).unwrap());
        assert_eq!(bare.resolve(&format!("{second}^")).unwrap(), first);
        assert!(bare.diff(Some(&first), &second).unwrap().contains("+2"));
        assert_eq!(bare.history("main", Some("b.md"), 10).unwrap().len(), 1);
        let blobs = bare.path_blobs("main", &["a.md".to_owned()], 10).unwrap();
        assert_eq!(blobs["a.md"].iter().next().cloned(), blob_id(b"1"));
    }

    /// Writers on separate handles (as separate processes would be) race for the branch:
    /// every write lands, none is lost.
    #[test]
    fn concurrent_writers_lose_nothing() {
        let (_tmp, dir) = temp("race");
        Bare::open_or_init(&dir).unwrap();
        let threads: Vec<_> = (0..16)
            .map(|t| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let bare = Bare::open_or_init(&dir).unwrap();
                    for i in 0..5 {
                        let path = format!("w{t}/{i}.md");
                        bare.commit("main", &[put(&path, &path)], &path, "w").unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let bare = Bare::open_or_init(&dir).unwrap();
        assert_eq!(bare.files("main", "").unwrap().len(), 80);
        let repo = Repository::open_bare(&dir).unwrap();
        let mut walk = repo.revwalk().unwrap();
        walk.push_ref("refs/heads/main").unwrap();
        assert_eq!(walk.count(), 80, "one commit per write, in one line of history");
    }
}
