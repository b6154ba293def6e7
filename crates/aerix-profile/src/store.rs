//! The repository: opening (creating and seeding `main`), branches, reading a commit, and the
//! one way anything is written: a compare-and-swap commit under the repository's lock file,
//! rebuilt from the new head at most `CAS_RETRIES` times.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gitstore::bare::{Author, Bare, BareError, Change, CommitInfo};

use crate::ProfileError;
use crate::bound::{GIT_TIMEOUT, LOCK_WAIT, bounded, lock};
use crate::names::{MAIN, model_branch, session_branch, valid_name};

/// Retries of a write whose branch moved, each rebuilt from the new head; then `Raced`.
pub const CAS_RETRIES: u32 = 3;
/// The email of every commit aerix writes (the author's name says which command).
pub const AUTHOR_EMAIL: &str = "aerix@aerix.local";
/// The lock file writers of one repository take in turn, inside the repository.
const LOCK_FILE: &str = "aerix-write.lock";

/// This release's prompts: what `main` is seeded with and the embedded fallbacks.
#[derive(Clone, Copy, Debug)]
pub struct Release<'a> {
    /// `CARGO_PKG_VERSION`: the seed commit's message is `aerix <version>`.
    pub version: &'a str,
    /// Every built-in prompt by its path in a profile.
    pub embedded: &'a [(&'a str, &'a str)],
}

impl Release<'_> {
    pub fn text(&self, path: &str) -> Option<&str> {
        self.embedded.iter().find(|(p, _)| *p == path).map(|(_, t)| *t)
    }
}

/// A branch's head as a write sees it: the commit (none before the branch exists) and its files.
#[derive(Clone, Debug, Default)]
pub struct Head {
    pub commit: Option<String>,
    pub files: BTreeMap<String, String>,
}

/// What a write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    Committed(String),
    /// Nothing to change: the branch's head (if any) is left where it is.
    Unchanged(Option<String>),
}

/// An opened profile. Cheap to clone: every call opens the repository on its own thread.
#[derive(Clone, Debug)]
pub struct Profile {
    name: String,
    path: PathBuf,
    bare: Bare,
    timeout: Duration,
    lock_wait: Duration,
}

/// `<data home>/aerix/profiles/<name>.git`.
pub fn profile_path(data_home: &Path, name: &str) -> PathBuf {
    data_home.join("aerix/profiles").join(format!("{name}.git"))
}

impl Profile {
    /// Opens the profile, creating the repository when absent; `main` is seeded with (or, when
    /// its set differs, re-committed to) this release's embedded prompts.
    pub fn create_or_open(
        data_home: &Path,
        name: &str,
        release: &Release<'_>,
    ) -> Result<Profile, ProfileError> {
        if !valid_name(name) {
            return Err(ProfileError::BadName(name.to_owned()));
        }
        let path = profile_path(data_home, name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| ProfileError::Create {
                profile: name.to_owned(),
                path: parent.to_owned(),
                error,
            })?;
        }
        let at = path.clone();
        let profile_name = name.to_owned();
        let bare = bounded(name, "opening the repository", GIT_TIMEOUT, move || {
            Bare::open_or_init(&at)
                .map_err(|error| ProfileError::Git { profile: profile_name, error })
        })?;
        let profile = Profile {
            name: name.to_owned(),
            path,
            bare,
            timeout: GIT_TIMEOUT,
            lock_wait: LOCK_WAIT,
        };
        profile.seed_main(release)?;
        Ok(profile)
    }

    /// Opens an existing profile (the `profile` commands): nothing is created or seeded.
    pub fn open(data_home: &Path, name: &str) -> Result<Profile, ProfileError> {
        if !valid_name(name) {
            return Err(ProfileError::BadName(name.to_owned()));
        }
        let path = profile_path(data_home, name);
        if !path.join("HEAD").is_file() {
            return Err(ProfileError::Missing { profile: name.to_owned(), path });
        }
        let at = path.clone();
        let profile_name = name.to_owned();
        let bare = bounded(name, "opening the repository", GIT_TIMEOUT, move || {
            Bare::open_or_init(&at)
                .map_err(|error| ProfileError::Git { profile: profile_name, error })
        })?;
        Ok(Profile {
            name: name.to_owned(),
            path,
            bare,
            timeout: GIT_TIMEOUT,
            lock_wait: LOCK_WAIT,
        })
    }

    /// The same profile with other bounds (tests).
    pub fn with_bounds(self, timeout: Duration, lock_wait: Duration) -> Profile {
        Profile { timeout, lock_wait, ..self }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs one git call on its own thread, bounded by the profile's timeout.
    fn git<T: Send + 'static>(
        &self,
        what: &str,
        work: impl FnOnce(&Bare) -> Result<T, BareError> + Send + 'static,
    ) -> Result<T, ProfileError> {
        let bare = self.bare.clone();
        let profile = self.name.clone();
        bounded(&self.name, what, self.timeout, move || {
            work(&bare).map_err(|error| ProfileError::Git { profile, error })
        })
    }

    /// The commit `branch` points at, if it exists.
    pub fn head(&self, branch: &str) -> Result<Option<String>, ProfileError> {
        let branch = branch.to_owned();
        self.git(&format!("reading {branch}"), move |bare| bare.head(&branch))
    }

    /// Every branch and its commit, by name.
    pub fn branches(&self) -> Result<Vec<(String, String)>, ProfileError> {
        self.git("listing branches", |bare| bare.branches())
    }

    /// Whether `commit` (a full id) exists here.
    pub fn has_commit(&self, commit: &str) -> Result<bool, ProfileError> {
        let commit = commit.to_owned();
        self.git("looking up a commit", move |bare| bare.has_commit(&commit))
    }

    /// The full id `rev` names: a branch, a commit id or prefix, `X^`.
    pub fn resolve(&self, rev: &str) -> Result<String, ProfileError> {
        let rev = rev.to_owned();
        self.git(&format!("resolving {rev}"), move |bare| bare.resolve(&rev))
    }

    /// Every file of `commit`, as text (bytes that are not UTF-8 replaced).
    pub fn files(&self, commit: &str) -> Result<BTreeMap<String, String>, ProfileError> {
        let commit = commit.to_owned();
        let files =
            self.git(&format!("reading {commit}"), move |bare| bare.files_at(&commit, ""))?;
        Ok(files
            .into_iter()
            .map(|(path, bytes)| (path, String::from_utf8_lossy(&bytes).into_owned()))
            .collect())
    }

    /// One file of `commit`.
    pub fn read(&self, commit: &str, path: &str) -> Result<Option<String>, ProfileError> {
        let (commit, path) = (commit.to_owned(), path.to_owned());
        let bytes =
            self.git(&format!("reading {path}"), move |bare| bare.read_at(&commit, &path))?;
        Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Commits reachable from `rev`, newest first, at most `limit`; with `path`, those that
    /// changed it.
    pub fn history(
        &self,
        rev: &str,
        path: Option<&str>,
        limit: usize,
    ) -> Result<Vec<CommitInfo>, ProfileError> {
        let (rev, path) = (rev.to_owned(), path.map(str::to_owned));
        self.git("reading the history", move |bare| bare.history(&rev, path.as_deref(), limit))
    }

    /// The unified diff between two revisions (`old` `None`: from the empty tree).
    pub fn diff(&self, old: Option<&str>, new: &str) -> Result<String, ProfileError> {
        let new = self.resolve(new)?;
        let old = old.map(|o| self.resolve(o)).transpose()?;
        self.git("diffing", move |bare| bare.diff(old.as_deref(), &new))
    }

    /// For each path, the blob ids it ever held on `main` (what "inherited from main" means).
    pub(crate) fn main_blobs(
        &self,
        paths: Vec<String>,
    ) -> Result<BTreeMap<String, std::collections::BTreeSet<String>>, ProfileError> {
        self.git("reading main's history", move |bare| bare.path_blobs(MAIN, &paths, 10_000))
    }

    fn head_files(&self, branch: &str) -> Result<Head, ProfileError> {
        let branch = branch.to_owned();
        self.git(&format!("reading {branch}"), move |bare| {
            let Some(commit) = bare.head(&branch)? else { return Ok(Head::default()) };
            let files = bare.files_at(&commit, "")?;
            Ok(Head {
                commit: Some(commit),
                files: files
                    .into_iter()
                    .map(|(p, b)| (p, String::from_utf8_lossy(&b).into_owned()))
                    .collect(),
            })
        })
    }

    /// One commit on `branch`, by compare-and-swap: `build` gets the head and returns the
    /// changes (none: nothing is written). A branch that moved meanwhile is read again and
    /// `build` called on the new head, at most `CAS_RETRIES` times; then `Raced`, nothing
    /// written. Writers of this repository take its lock file in turn (waiting at most
    /// `LOCK_WAIT`), so the CAS only meets writers that do not (git by hand).
    pub fn write(
        &self,
        branch: &str,
        message: &str,
        author: &str,
        mut build: impl FnMut(&Head) -> Result<Vec<Change>, ProfileError>,
    ) -> Result<Written, ProfileError> {
        let _lock = lock(&self.name, &self.path.join(LOCK_FILE), self.lock_wait)?;
        for _ in 0..=CAS_RETRIES {
            let head = self.head_files(branch)?;
            let changes: Vec<Change> = build(&head)?
                .into_iter()
                .filter(|change| match change {
                    Change::Put { path, bytes } => {
                        head.files.get(path).map(String::as_bytes) != Some(bytes.as_slice())
                    }
                    Change::Delete { .. } => true,
                })
                .collect();
            if changes.is_empty() {
                return Ok(Written::Unchanged(head.commit));
            }
            let (b, m, a) = (branch.to_owned(), message.to_owned(), author.to_owned());
            let expected = head.commit.clone();
            let committed = self.git(&format!("committing on {branch}"), move |bare| {
                let author = Author { name: &a, email: AUTHOR_EMAIL };
                bare.commit_on(&b, expected.as_deref(), &changes, &m, author)
            });
            match committed {
                Ok(id) => return Ok(Written::Committed(id)),
                Err(ProfileError::Git { error: BareError::Moved { .. }, .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(self.raced(branch))
    }

    fn raced(&self, branch: &str) -> ProfileError {
        ProfileError::Raced {
            profile: self.name.clone(),
            branch: branch.to_owned(),
            attempts: CAS_RETRIES + 1,
        }
    }

    /// Commits this release's embedded set on `main` when it differs from `main`'s (the first
    /// commit included), the message naming the release. Returns the new commit, if any.
    pub fn seed_main(&self, release: &Release<'_>) -> Result<Option<String>, ProfileError> {
        let differs = |head: &Head| {
            release
                .embedded
                .iter()
                .filter(|(path, text)| head.files.get(*path).map(String::as_str) != Some(*text))
                .map(|(path, text)| Change::Put {
                    path: (*path).to_owned(),
                    bytes: text.as_bytes().to_vec(),
                })
                .collect::<Vec<_>>()
        };
        // Most startups find main as seeded: no lock taken.
        if differs(&self.head_files(MAIN)?).is_empty() {
            return Ok(None);
        }
        let message = format!("aerix {}", release.version);
        match self.write(MAIN, &message, "aerix", |head| Ok(differs(head)))? {
            Written::Committed(id) => Ok(Some(id)),
            Written::Unchanged(_) => Ok(None),
        }
    }

    /// The model base of `model`, made from `main`'s head when it does not exist. Returns the
    /// branch and its head.
    pub fn model_base(&self, model: &str) -> Result<(String, String), ProfileError> {
        let branch = model_branch(model);
        if let Some(head) = self.head(&branch)? {
            return Ok((branch, head));
        }
        let main = self.head(MAIN)?.ok_or_else(|| ProfileError::NoBranch {
            profile: self.name.clone(),
            branch: MAIN.into(),
        })?;
        match self.set_branch(&branch, &main, None) {
            Ok(()) => Ok((branch, main)),
            // Another session made it first: its head is the base.
            Err(ProfileError::Raced { .. }) => {
                let head = self.head(&branch)?.ok_or_else(|| self.raced(&branch))?;
                Ok((branch, head))
            }
            Err(e) => Err(e),
        }
    }

    /// Points `session/<id>` at `commit`: made when absent, moved (by compare-and-swap) when
    /// elsewhere.
    pub fn session_at(&self, session: &str, commit: &str) -> Result<(), ProfileError> {
        let branch = session_branch(session);
        for _ in 0..=CAS_RETRIES {
            let now = self.head(&branch)?;
            if now.as_deref() == Some(commit) {
                return Ok(());
            }
            match self.set_branch(&branch, commit, now.as_deref()) {
                Ok(()) => return Ok(()),
                Err(ProfileError::Raced { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(self.raced(&branch))
    }

    /// Deletes `session/<id>`; `false` when it did not exist.
    pub fn remove_session(&self, session: &str) -> Result<bool, ProfileError> {
        let branch = session_branch(session);
        for _ in 0..=CAS_RETRIES {
            let Some(now) = self.head(&branch)? else { return Ok(false) };
            let (b, n) = (branch.clone(), now.clone());
            match self.git(&format!("deleting {branch}"), move |bare| bare.delete_branch(&b, &n)) {
                Ok(deleted) => return Ok(deleted),
                Err(ProfileError::Git { error: BareError::Moved { .. }, .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(self.raced(&branch))
    }

    /// One compare-and-swap of a ref: `Raced` when it is not at `expected`.
    fn set_branch(
        &self,
        branch: &str,
        target: &str,
        expected: Option<&str>,
    ) -> Result<(), ProfileError> {
        let (b, t, e) = (branch.to_owned(), target.to_owned(), expected.map(str::to_owned));
        let message = format!("aerix: {branch} at {target}");
        match self.git(&format!("moving {branch}"), move |bare| {
            bare.set_branch(&b, &t, e.as_deref(), &message)
        }) {
            Err(ProfileError::Git { error: BareError::Moved { .. }, .. }) => {
                Err(self.raced(branch))
            }
            other => other,
        }
    }
}
