//! Bare repositories written without a working tree or an index: blobs and trees are written
//! as objects and the branch moves with a compare-and-swap, so concurrent writers (threads or
//! processes) never lose a write and never meet "index is locked". A writer whose base moved
//! rebuilds its tree on the new tip and tries again.

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
    #[error("git repository {}: {source}", path.display())]
    Git {
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    #[error("`{0}` does not exist on the branch")]
    NotFound(String),
    #[error("the branch kept moving: {attempts} attempts to commit lost the race")]
    Contended { attempts: u32 },
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
        BareError::Git { path: self.path.clone(), source }
    }

    fn repo(&self) -> Result<Repository, BareError> {
        Repository::open_bare(&self.path).map_err(|e| self.err(e))
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
        let tree = repo.find_commit(tip).and_then(|c| c.tree()).map_err(|e| self.err(e))?;
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
        let mut blobs = Vec::with_capacity(changes.len());
        for change in changes {
            if let Change::Put { path, bytes } = change {
                blobs.push((path.as_str(), repo.blob(bytes).map_err(|e| self.err(e))?));
            }
        }
        for attempt in 1..=MAX_COMMIT_ATTEMPTS {
            let parent = self.tip(&repo, branch)?;
            let parent_commit = match parent {
                Some(id) => Some(repo.find_commit(id).map_err(|e| self.err(e))?),
                None => None,
            };
            let base = match &parent_commit {
                Some(c) => c.tree().map_err(|e| self.err(e))?,
                None => {
                    let empty =
                        repo.treebuilder(None).and_then(|b| b.write()).map_err(|e| self.err(e))?;
                    repo.find_tree(empty).map_err(|e| self.err(e))?
                }
            };
            let mut update = git2::build::TreeUpdateBuilder::new();
            let mut blob_iter = blobs.iter();
            for change in changes {
                match change {
                    Change::Put { .. } => {
                        if let Some((path, id)) = blob_iter.next() {
                            update.upsert(*path, *id, FileMode::Blob);
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
            let tree_id = update.create_updated(&repo, &base).map_err(|e| self.err(e))?;
            let tree = repo.find_tree(tree_id).map_err(|e| self.err(e))?;
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

    /// Commits that changed `path` on `branch`, newest first, at most `limit`.
    pub fn log(
        &self,
        branch: &str,
        path: &str,
        limit: usize,
    ) -> Result<Vec<CommitInfo>, BareError> {
        let repo = self.repo()?;
        let Some(tip) = self.tip(&repo, branch)? else { return Ok(Vec::new()) };
        let mut walk = repo.revwalk().map_err(|e| self.err(e))?;
        walk.push(tip).map_err(|e| self.err(e))?;
        let id_at = |commit: &git2::Commit<'_>| {
            commit.tree().ok().and_then(|t| t.get_path(Path::new(path)).ok()).map(|e| e.id())
        };
        let mut out = Vec::new();
        for id in walk {
            let id = id.map_err(|e| self.err(e))?;
            let commit = repo.find_commit(id).map_err(|e| self.err(e))?;
            let mine = id_at(&commit);
            let before = commit.parent(0).ok().and_then(|p| id_at(&p));
            if mine != before {
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
