//! The wiki: every page of every project as markdown, versioned in one bare git repository
//! (the truth), mirrored as plain files under `wiki/` for people and editors to read.
//!
//! Writes commit objects and move `main` with a compare-and-swap (`gitstore::bare`); writes in
//! one process are also serialized so the mirror follows the branch. Files copied into `wiki/`
//! by hand are imported by `import_changed` (the server's watcher).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use ai_memory_core::{Clean, NameError, Page, PageError, PagePath, ProjectName, WorkspaceName};
use gitstore::bare::{Bare, BareError, Change, CommitInfo};
use serde::{Deserialize, Serialize};

const BRANCH: &str = "main";
/// Per-project settings kept in the wiki beside the pages (not a page: its name is hidden).
pub const PROJECT_META: &str = ".project.toml";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Git(#[from] BareError),
    #[error("{path}: {source}")]
    Page {
        path: String,
        #[source]
        source: PageError,
    },
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
    /// The wiki of a data directory: `wiki.git` (bare) and the `wiki/` mirror.
    pub fn open(data_dir: &Path) -> Result<Wiki, StoreError> {
        let mirror = data_dir.join("wiki");
        std::fs::create_dir_all(&mirror)
            .map_err(|source| StoreError::Io { path: mirror.clone(), source })?;
        let git = Bare::open_or_init(&data_dir.join("wiki.git"))?;
        Ok(Wiki { git, mirror, writes: Mutex::new(()), seen: Mutex::new(HashMap::new()) })
    }

    /// The branch's commit, if any page was ever written.
    pub fn head(&self) -> Result<Option<String>, StoreError> {
        Ok(self.git.head(BRANCH)?)
    }

    /// Writes a page; returns the commit.
    pub fn write(
        &self,
        at: &Location,
        page: &CleanPage,
        author: &str,
    ) -> Result<String, StoreError> {
        let _serial = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let change = Change::Put { path: at.git_path(), bytes: page.text().as_bytes().to_vec() };
        let commit = self.git.commit(BRANCH, &[change], &format!("write {at}"), author)?;
        self.mirror_put(&at.git_path(), page.text().as_bytes())?;
        Ok(commit)
    }

    /// Deletes a page (its history stays in git); returns the commit.
    pub fn delete(&self, at: &Location, author: &str) -> Result<String, StoreError> {
        let _serial = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let change = Change::Delete { path: at.git_path() };
        let commit = match self.git.commit(BRANCH, &[change], &format!("delete {at}"), author) {
            Err(BareError::NotFound(_)) => return Err(StoreError::NotFound(at.to_string())),
            other => other?,
        };
        let file = self.mirror.join(at.git_path());
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(StoreError::Io { path: file, source }),
        }
        self.forget_seen(&file);
        Ok(commit)
    }

    pub fn read(&self, at: &Location) -> Result<Option<Stored>, StoreError> {
        let Some(bytes) = self.git.read(BRANCH, &at.git_path())? else { return Ok(None) };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let page = Page::parse(&text)
            .map_err(|source| StoreError::Page { path: at.to_string(), source })?;
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
                .map_err(|source| StoreError::Page { path: path.clone(), source });
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

    pub fn set_project_meta(
        &self,
        ws: &WorkspaceName,
        project: &ProjectName,
        meta: &ProjectMeta,
        author: &str,
    ) -> Result<String, StoreError> {
        let path = format!("{ws}/{project}/{PROJECT_META}");
        let text = toml::to_string(meta)
            .map_err(|e| StoreError::Meta { path: path.clone(), message: e.to_string() })?;
        let _serial = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let change = Change::Put { path: path.clone(), bytes: text.into_bytes() };
        Ok(self.git.commit(BRANCH, &[change], &format!("settings of {ws}/{project}"), author)?)
    }

    /// Pages copied into (or edited in) `wiki/` by hand since the last call: each one that
    /// parses and differs from the branch is committed and returned; one that does not parse
    /// is returned as an error naming the file and left alone.
    pub fn import_changed(
        &self,
        author: &str,
    ) -> Result<Vec<Result<Stored, StoreError>>, StoreError> {
        let mut files = Vec::new();
        walk(&self.mirror, &mut files);
        let mut changed = Vec::new();
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            for (file, stamp) in files {
                if seen.get(&file) != Some(&stamp) {
                    seen.insert(file.clone(), stamp);
                    changed.push(file);
                }
            }
        }
        let mut out = Vec::new();
        for file in changed {
            let Ok(rel) = file.strip_prefix(&self.mirror) else { continue };
            let Some(rel) = rel.to_str().map(|s| s.replace('\\', "/")) else { continue };
            let Some(location) = Location::from_git_path(&rel) else { continue };
            let bytes = match std::fs::read(&file) {
                Ok(b) => b,
                Err(source) => {
                    out.push(Err(StoreError::Io { path: file, source }));
                    continue;
                }
            };
            if self.git.read(BRANCH, &rel)?.as_deref() == Some(&bytes[..]) {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            let page = match CleanPage::new(ai_memory_core::sanitize(&text)) {
                Ok(page) => page,
                Err(source) => {
                    out.push(Err(StoreError::Page { path: rel, source }));
                    continue;
                }
            };
            self.write(&location, &page, author)?;
            out.push(Ok(Stored {
                location,
                text: page.text().to_owned(),
                page: page.page().clone(),
            }));
        }
        Ok(out)
    }

    fn mirror_put(&self, rel: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let file = self.mirror.join(rel);
        let io = |source| StoreError::Io { path: file.clone(), source };
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = file.with_extension(format!("md.tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, &file).map_err(io)?;
        // What we wrote is not a hand edit.
        if let Ok(meta) = std::fs::metadata(&file)
            && let Ok(modified) = meta.modified()
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.insert(file.clone(), (modified, meta.len()));
        }
        Ok(())
    }

    fn forget_seen(&self, file: &Path) {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).remove(file);
    }
}

fn parse_meta(path: &str, bytes: &[u8]) -> Result<ProjectMeta, StoreError> {
    toml::from_str(&String::from_utf8_lossy(bytes))
        .map_err(|e| StoreError::Meta { path: path.to_owned(), message: e.message().to_owned() })
}

/// Markdown files under `dir`, with their modification time and length.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, (SystemTime, u64))>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "md")
            && let Ok(modified) = meta.modified()
        {
            out.push((path, (modified, meta.len())));
        }
    }
}
