//! The wiki: every page of every project as markdown, versioned in one bare git repository
//! (the truth), mirrored as plain files under `wiki/` for people and editors to read.
//!
//! Writes commit objects and move `main` with a compare-and-swap (`gitstore::bare`); writes in
//! one process are also serialized so the mirror follows the branch. Files copied into `wiki/`
//! by hand are imported by `import_changed` (the server's watcher).

mod batch;
mod mirror;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use ai_memory_core::{Clean, NameError, Page, PageError, PagePath, ProjectName, WorkspaceName};
use gitstore::bare::{Bare, BareError, Change, CommitInfo};
use serde::{Deserialize, Serialize};

pub use batch::{Batch, Files, Snapshot};

const BRANCH: &str = "main";
/// Per-project settings kept in the wiki beside the pages (not a page: its name is hidden).
pub const PROJECT_META: &str = ".project.toml";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Git(#[from] BareError),
    #[error("{path}: {error}")]
    Page { path: String, error: PageError },
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{path}: {message}")]
    Meta { path: String, message: String },
    #[error("no page {0}")]
    NotFound(String),
}

/// Where a page is: workspace, project, path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    pub workspace: WorkspaceName,
    pub project: ProjectName,
    pub path: PagePath,
}

impl Location {
    fn git_path(&self) -> String {
        format!("{}/{}/{}", self.workspace, self.project, self.path)
    }

    /// Reads `<workspace>/<project>/<path>` back; `None` for a file that is not a page.
    fn from_git_path(git_path: &str) -> Option<Location> {
        let mut parts = git_path.splitn(3, '/');
        let workspace = WorkspaceName::new(parts.next()?).ok()?;
        let project = ProjectName::new(parts.next()?).ok()?;
        let path = PagePath::new(parts.next()?).ok()?;
        Some(Location { workspace, project, path })
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.workspace, self.project, self.path)
    }
}

/// A page's text that passed the sanitizer and parses as a page.
#[derive(Debug, Clone)]
pub struct CleanPage {
    text: Clean,
    page: Page,
}

impl CleanPage {
    pub fn new(text: Clean) -> Result<CleanPage, PageError> {
        let page = Page::parse(text.as_str())?;
        Ok(CleanPage { text, page })
    }

    pub fn page(&self) -> &Page {
        &self.page
    }

    pub fn text(&self) -> &str {
        self.text.as_str()
    }
}

/// A project's stored settings: its access mode and who created it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectMeta {
    #[serde(default)]
    pub restricted: bool,
    /// The id of the database user who created it (none: root or the single user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<i64>,
}

/// What a commit range changed, as the index sees it (other files are not the index's).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum WikiChange {
    /// A project's settings (`.project.toml`) were written. (First in order: a page's project
    /// takes its access mode from them.)
    Project(WorkspaceName, ProjectName),
    /// A page was written or deleted.
    Page(Location),
}

/// A page as stored, with the commit it was read at.
#[derive(Debug, Clone)]
pub struct Stored {
    pub location: Location,
    pub text: String,
    pub page: Page,
}

/// One stored file read as a page: the page, or why it is not one.
pub type PageRead = Result<Stored, StoreError>;

#[derive(Debug)]
pub struct Wiki {
    git: Bare,
    mirror: PathBuf,
    /// Serializes this process's writes, so the mirror's files follow the branch's order.
    writes: Mutex<()>,
    /// What the last scan of the mirror saw: path → (modified, length).
    seen: Mutex<HashMap<PathBuf, (SystemTime, u64)>>,
}

impl Wiki {
    /// The wiki of a data directory: `wiki.git` (bare) and the `wiki/` mirror. A branch lock
    /// left by a killed writer is removed, and the mirror catches up with the branch.
    pub fn open(data_dir: &Path) -> Result<Wiki, StoreError> {
        let mirror = data_dir.join("wiki");
        std::fs::create_dir_all(&mirror)
            .map_err(|error| StoreError::Io { path: mirror.clone(), error })?;
        let git = Bare::open_or_init(&data_dir.join("wiki.git"))?;
        let wiki = Wiki { git, mirror, writes: Mutex::new(()), seen: Mutex::new(HashMap::new()) };
        wiki.clear_stale_lock(mirror::Wait::UntilStale);
        {
            let _serial = wiki.writes.lock().unwrap_or_else(|p| p.into_inner());
            wiki.sync_mirror()?;
        }
        Ok(wiki)
    }

    /// Commits on the branch. A lock on it left by a killed process would refuse every commit
    /// from then on: one old enough to be stale is removed and the commit tried once more.
    fn commit(
        &self,
        changes: &[Change],
        message: &str,
        author: &str,
    ) -> Result<String, StoreError> {
        match self.git.commit(BRANCH, changes, message, author) {
            Err(BareError::Contended { .. }) if self.clear_stale_lock(mirror::Wait::No) => {
                Ok(self.git.commit(BRANCH, changes, message, author)?)
            }
            other => Ok(other?),
        }
    }

    /// The branch's commit, if any page was ever written.
    pub fn head(&self) -> Result<Option<String>, StoreError> {
        Ok(self.git.head(BRANCH)?)
    }

    /// What changed between commit `from` (`None`: the empty wiki) and commit `to` of the
    /// branch, in path order; `None` when `from` is not a commit of this repository (an index
    /// made for another wiki: the caller rebuilds).
    pub fn changes(
        &self,
        from: Option<&str>,
        to: &str,
    ) -> Result<Option<Vec<WikiChange>>, StoreError> {
        let Some(paths) = self.git.changed_paths(from, to)? else { return Ok(None) };
        let mut out = Vec::new();
        for p in &paths {
            if let Some(rest) = p.strip_suffix(&format!("/{PROJECT_META}"))
                && let Some((ws, project)) = rest.split_once('/')
                && let (Ok(ws), Ok(project)) = (WorkspaceName::new(ws), ProjectName::new(project))
            {
                out.push(WikiChange::Project(ws, project));
            } else if let Some(location) = Location::from_git_path(p) {
                out.push(WikiChange::Page(location));
            }
        }
        out.sort();
        out.dedup();
        Ok(Some(out))
    }

    /// Writes a page; returns the commit.
    pub fn write(
        &self,
        at: &Location,
        page: &CleanPage,
        author: &str,
    ) -> Result<String, StoreError> {
        self.write_with_meta(at, page, None, author)
    }

    /// Writes a page and, in the same commit, its project's settings (a new project's first
    /// page); returns the commit.
    pub fn write_with_meta(
        &self,
        at: &Location,
        page: &CleanPage,
        meta: Option<&ProjectMeta>,
        author: &str,
    ) -> Result<String, StoreError> {
        let mut changes = Vec::new();
        if let Some(meta) = meta {
            changes.push(meta_change(&at.workspace, &at.project, meta)?);
        }
        changes.push(Change::Put { path: at.git_path(), bytes: page.text().as_bytes().to_vec() });
        let _serial = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let commit = self.commit(&changes, &format!("write {at}"), author)?;
        self.sync_mirror()?;
        Ok(commit)
    }

    /// Deletes a page (its history stays in git); returns the commit.
    pub fn delete(&self, at: &Location, author: &str) -> Result<String, StoreError> {
        let _serial = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let change = Change::Delete { path: at.git_path() };
        let commit = match self.commit(&[change], &format!("delete {at}"), author) {
            Err(StoreError::Git(BareError::NotFound(_))) => {
                return Err(StoreError::NotFound(at.to_string()));
            }
            other => other?,
        };
        self.sync_mirror()?;
        Ok(commit)
    }

    pub fn read(&self, at: &Location) -> Result<Option<Stored>, StoreError> {
        let Some(bytes) = self.git.read(BRANCH, &at.git_path())? else { return Ok(None) };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let page =
            Page::parse(&text).map_err(|error| StoreError::Page { path: at.to_string(), error })?;
        Ok(Some(Stored { location: at.clone(), text, page }))
    }

    /// The page as it was at `commit` (`None`: not there then).
    pub fn read_at(&self, at: &Location, commit: &str) -> Result<Option<Stored>, StoreError> {
        let Some(bytes) = self.git.read_at(commit, &at.git_path())? else { return Ok(None) };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let page =
            Page::parse(&text).map_err(|error| StoreError::Page { path: at.to_string(), error })?;
        Ok(Some(Stored { location: at.clone(), text, page }))
    }

    /// Commits that changed the page, newest first.
    pub fn history(&self, at: &Location, limit: usize) -> Result<Vec<CommitInfo>, StoreError> {
        Ok(self.git.log(BRANCH, &at.git_path(), limit)?)
    }

    /// Every page at the branch's tip, in path order. A stored file that no longer parses is
    /// reported, not dropped: `(location, Err)`.
    pub fn pages(&self) -> Result<Vec<(Location, PageRead)>, StoreError> {
        let mut out = Vec::new();
        for (path, bytes) in self.git.files(BRANCH, "")? {
            let Some(location) = Location::from_git_path(&path) else { continue };
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let parsed = Page::parse(&text)
                .map(|page| Stored { location: location.clone(), text, page })
                .map_err(|error| StoreError::Page { path: path.clone(), error });
            out.push((location, parsed));
        }
        Ok(out)
    }

    /// The settings of every project that has them.
    pub fn project_metas(
        &self,
    ) -> Result<Vec<(WorkspaceName, ProjectName, ProjectMeta)>, StoreError> {
        let mut out = Vec::new();
        for (path, bytes) in self.git.files(BRANCH, "")? {
            let Some(rest) = path.strip_suffix(&format!("/{PROJECT_META}")) else { continue };
            let Some((ws, project)) = rest.split_once('/') else { continue };
            let meta = parse_meta(&path, &bytes)?;
            out.push((WorkspaceName::new(ws)?, ProjectName::new(project)?, meta));
        }
        Ok(out)
    }

    pub fn project_meta(
        &self,
        ws: &WorkspaceName,
        project: &ProjectName,
    ) -> Result<Option<ProjectMeta>, StoreError> {
        let path = format!("{ws}/{project}/{PROJECT_META}");
        self.git.read(BRANCH, &path)?.map(|bytes| parse_meta(&path, &bytes)).transpose()
    }

    /// A project's settings as they were at `commit`.
    pub fn project_meta_at(
        &self,
        ws: &WorkspaceName,
        project: &ProjectName,
        commit: &str,
    ) -> Result<Option<ProjectMeta>, StoreError> {
        let path = format!("{ws}/{project}/{PROJECT_META}");
        self.git.read_at(commit, &path)?.map(|bytes| parse_meta(&path, &bytes)).transpose()
    }

    pub fn set_project_meta(
        &self,
        ws: &WorkspaceName,
        project: &ProjectName,
        meta: &ProjectMeta,
        author: &str,
    ) -> Result<String, StoreError> {
        let change = meta_change(ws, project, meta)?;
        let _serial = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        self.commit(&[change], &format!("settings of {ws}/{project}"), author)
    }
}

fn meta_change(
    ws: &WorkspaceName,
    project: &ProjectName,
    meta: &ProjectMeta,
) -> Result<Change, StoreError> {
    let path = format!("{ws}/{project}/{PROJECT_META}");
    let text = toml::to_string(meta)
        .map_err(|e| StoreError::Meta { path: path.clone(), message: e.to_string() })?;
    Ok(Change::Put { path, bytes: text.into_bytes() })
}

fn parse_meta(path: &str, bytes: &[u8]) -> Result<ProjectMeta, StoreError> {
    toml::from_str(&String::from_utf8_lossy(bytes))
        .map_err(|e| StoreError::Meta { path: path.to_owned(), message: e.message().to_owned() })
}
