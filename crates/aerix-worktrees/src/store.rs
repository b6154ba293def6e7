//! Where one project's worktrees live, and their life: a snapshot of the user's tree, a
//! detached worktree of it (recorded, its base held by a ref), its removal, and the sweep of
//! what dead runs left.

use std::path::{Component, Path, PathBuf};

use gitstore::{GIT_TIMEOUT, Repo};

use crate::Error;
use crate::change::Change;
use crate::record::{self, Owner, Record};

/// The namespace of the refs that keep worktrees' bases from `git gc`.
const REF_PREFIX: &str = "refs/aerix/worktrees/";

/// One project's worktrees: `<data_home>/aerix/worktrees/<project key>/`, never inside the
/// repository. Each worktree is a directory there (unless a hook chose its path) and a
/// record `<name>.json` beside it.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
    dir: PathBuf,
    repo: Repo,
}

/// The user's tree at one moment, as a commit no branch points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub commit: String,
}

/// A detached worktree at a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worktree {
    pub name: String,
    pub path: PathBuf,
    pub base: Snapshot,
}

impl Store {
    /// The store of the work tree holding `dir`; `None` when `dir` is not inside a git work
    /// tree (the caller runs pieces in place). `project_key` names the store's directory
    /// (aerix-session's `project_key` of the root). Creates nothing.
    pub fn open(dir: &Path, data_home: &Path, project_key: &str) -> Result<Option<Store>, Error> {
        let Some(root) = Repo::toplevel(dir) else {
            return Ok(None);
        };
        let mut parts = Path::new(project_key).components();
        if !matches!((parts.next(), parts.next()), (Some(Component::Normal(_)), None)) {
            return Err(Error::BadKey { key: project_key.to_owned() });
        }
        let data_home = absolute(data_home)?;
        let dir = data_home.join("aerix/worktrees").join(project_key);
        outside(&dir, &root)?;
        Ok(Some(Store { repo: Repo::at(&root), root, dir }))
    }

    /// The top of the user's work tree.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory holding this project's worktrees and their records.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes what dead runs left: every recorded worktree of this work tree whose owner
    /// process has ended (its directory, git's entry, its ref, its record), then `git worktree
    /// prune` (git's entries of worktrees whose directory is gone, as `git gc` would drop
    /// them). A live owner's worktrees, another clone's, and files that are not records are
    /// left alone. Returns the paths it removed.
    pub fn sweep(&self) -> Result<Vec<PathBuf>, Error> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(Error::Io { what: "list", path: self.dir.clone(), error: source });
            }
        };
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            // Records in the writing are `.<name>.json.<pid>.tmp`.
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            let Some(record) = Record::read(&path) else { continue };
            if record.root != self.root || record.owner.alive() {
                continue;
            }
            self.remove_parts(&record.name, &record.path)?;
            removed.push(record.path);
        }
        self.repo.worktree_prune()?;
        removed.sort();
        Ok(removed)
    }

    /// The user's tree now: the tracked files as they are (staged or not) and the untracked
    /// files that are not ignored, as a commit on `HEAD` (without a parent in a repository
    /// without a commit; `HEAD` itself when nothing differs). Written through a temporary
    /// index: touches neither the user's index, nor `HEAD`, nor any branch, nor the stash.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        Ok(Snapshot { commit: self.repo.snapshot_commit()? })
    }

    /// A detached worktree named `name` at `base`: at `path` when given (a hook chose it; it
    /// must not exist or be an empty directory, outside the repository), else
    /// `<store dir>/<name>`. Recorded for [`Store::sweep`] before anything else is made, and
    /// its base held by `refs/aerix/worktrees/<name>` while it exists. The repository's own
    /// hooks do not run. On an error nothing of it is left.
    pub fn create(
        &self,
        name: &str,
        base: &Snapshot,
        path: Option<&Path>,
    ) -> Result<Worktree, Error> {
        check_name(name)?;
        let path = match path {
            Some(path) => absolute(path)?,
            None => self.dir.join(name),
        };
        outside(&path, &self.root)?;
        if path.symlink_metadata().is_ok() && !is_empty_dir(&path) {
            return Err(Error::PathTaken { path });
        }
        std::fs::create_dir_all(&self.dir).map_err(|error| Error::Io {
            what: "create the worktree directory",
            path: self.dir.clone(),
            error,
        })?;
        let record_path = self.record_path(name);
        let record = Record {
            version: 1,
            name: name.to_owned(),
            path: path.clone(),
            root: self.root.clone(),
            base: base.commit.clone(),
            owner: Owner::current(),
        };
        record.create(&record_path)?;
        let reference = format!("{REF_PREFIX}{name}");
        // The empty old value: the ref must not exist yet.
        let made = self
            .repo
            .run(&["update-ref", &reference, &base.commit, ""], GIT_TIMEOUT)
            .map_err(Error::from)
            .and_then(|_| {
                self.repo.worktree_add(&path, &base.commit).map_err(|e| {
                    let _ = self.repo.run(&["update-ref", "-d", &reference], GIT_TIMEOUT);
                    Error::from(e)
                })
            });
        if let Err(e) = made {
            let _ = record::remove(&record_path);
            return Err(e);
        }
        Ok(Worktree { name: name.to_owned(), path, base: base.clone() })
    }

    /// Removes the worktree: its files and git's entry (`git worktree remove --force`), its
    /// ref and its record. Removing one already gone is no error.
    pub fn remove(&self, worktree: &Worktree) -> Result<(), Error> {
        self.remove_parts(&worktree.name, &worktree.path)
    }

    fn remove_parts(&self, name: &str, path: &Path) -> Result<(), Error> {
        if path.symlink_metadata().is_ok() {
            // Its failure is judged by what is left: a directory git no longer knows (its
            // entry was pruned) is still removed below.
            let _ = self.repo.worktree_remove(path);
            let io = |error| Error::Io { what: "remove the worktree", path: path.into(), error };
            if is_linked_worktree(path) {
                std::fs::remove_dir_all(path).map_err(io)?;
                self.repo.worktree_prune()?;
            } else if is_empty_dir(path) {
                // Made for a worktree whose checkout never happened.
                std::fs::remove_dir(path).map_err(io)?;
            } // else not a worktree (or gone): never delete what this crate did not make
        }
        let reference = format!("{REF_PREFIX}{name}");
        self.repo.run(&["update-ref", "-d", &reference], GIT_TIMEOUT)?;
        record::remove(&self.record_path(name))
    }

    fn record_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }
}

impl Worktree {
    /// What the attempt changed against its base: tracked edits, new files that are not
    /// ignored, deletions, and changes of the executable bit. Empty when nothing changed.
    pub fn change(&self) -> Result<Change, Error> {
        Change::between(&Repo::at(&self.path), &self.base.commit)
    }
}

/// A worktree's name is a directory name and a ref's last part: it is kept to what is safe
/// in both.
fn check_name(name: &str) -> Result<(), Error> {
    let bad = |reason| Err(Error::BadName { name: name.to_owned(), reason });
    if name.is_empty() {
        return bad("is empty");
    }
    if name.len() > 100 {
        return bad("is too long");
    }
    if name.starts_with(['.', '-']) {
        return bad("starts with `.` or `-`");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
        return bad("has a character outside the set");
    }
    if name.contains("..") || name.ends_with(".lock") || name.ends_with(".json") {
        return bad("has `..` or ends in `.lock` or `.json`");
    }
    Ok(())
}

/// `path` made absolute against the current directory (not resolved: it may not exist).
fn absolute(path: &Path) -> Result<PathBuf, Error> {
    std::path::absolute(path).map_err(|error| Error::Io {
        what: "make absolute",
        path: path.to_owned(),
        error,
    })
}

/// Refuses `path` when it is (or would be) inside the work tree at `root`: judged by where it
/// resolves, so a symbolic link into the repository does not pass.
fn outside(path: &Path, root: &Path) -> Result<(), Error> {
    let resolved = resolve(path);
    let root_resolved = root.canonicalize().unwrap_or_else(|_| root.to_owned());
    if resolved.starts_with(&root_resolved) {
        return Err(Error::InsideRepository { path: path.to_owned(), root: root.to_owned() });
    }
    Ok(())
}

/// The longest existing ancestor of `path` resolved, the rest appended.
fn resolve(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_owned(),
        }
    }
}

/// A linked worktree's top holds a `.git` file naming its git directory.
fn is_linked_worktree(path: &Path) -> bool {
    let git = path.join(".git");
    git.symlink_metadata().is_ok_and(|m| m.is_file())
        && std::fs::read(&git).is_ok_and(|text| text.starts_with(b"gitdir: "))
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_safe_as_a_directory_and_a_ref_are_refused() {
        for good in ["p1", "s-3f2a.p2_a1", "A9"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "-x", "a/b", "a..b", "x.lock", "x.json", "sp ace", "é"] {
            let error = check_name(bad).unwrap_err();
            assert!(matches!(error, Error::BadName { .. }), "{bad}: {error}");
        }
        assert!(check_name(&"a".repeat(101)).is_err());
    }

    #[test]
    fn a_path_is_resolved_through_its_existing_part() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(&real, real.join("link")).unwrap();
        assert_eq!(resolve(&real.join("link/not/yet")), real.join("not/yet"));
        let root = real.join("repo");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&root, real.join("into")).unwrap();
        let error = outside(&real.join("into/wt"), &root).unwrap_err();
        assert!(matches!(error, Error::InsideRepository { .. }), "{error}");
        assert!(outside(&real.join("elsewhere/wt"), &root).is_ok());
    }
}
