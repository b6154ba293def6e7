//! The files `glob`, `grep` and `repo_map` see: the git file set (tracked plus untracked, not
//! ignored) inside a repository; elsewhere a walk that skips `.git`, `target` and
//! `node_modules`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::ToolError;

const SKIPPED_DIRS: [&str; 3] = [".git", "target", "node_modules"];

/// One request's view of the files under its working directory. The listing is read at every
/// call (a file the agent just wrote is seen); the repository map once per request.
#[derive(Debug)]
pub struct FileSet {
    cwd: PathBuf,
    pub(crate) map: OnceLock<String>,
}

#[derive(Debug)]
struct Listing {
    /// Absolute paths, sorted.
    paths: Vec<PathBuf>,
}

impl FileSet {
    pub fn new(cwd: &Path) -> FileSet {
        // git reports canonical paths: compare like with like.
        let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_owned());
        FileSet { cwd, map: OnceLock::new() }
    }

    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The files under `dir` (absolute, sorted).
    pub fn under(&self, dir: &Path) -> Result<Vec<PathBuf>, ToolError> {
        let dir = &dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        let listing = list(dir).map_err(ToolError::new)?;
        Ok(listing.paths.into_iter().filter(|p| p.starts_with(dir)).collect())
    }
}

fn list(dir: &Path) -> Result<Listing, String> {
    if let Some(top) = gitstore::Repo::toplevel(dir) {
        let repo = gitstore::Repo::at(&top);
        let files = repo.file_set().map_err(|e| e.to_string())?;
        let mut paths: Vec<PathBuf> =
            files.iter().map(|f| top.join(f)).filter(|p| p.is_file()).collect();
        paths.sort();
        return Ok(Listing { paths });
    }
    let mut paths = Vec::new();
    walk(dir, &mut paths);
    paths.sort();
    Ok(Listing { paths })
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        if kind.is_dir() {
            if !SKIPPED_DIRS.iter().any(|s| entry.file_name() == *s) {
                walk(&path, out);
            }
        } else if kind.is_file() {
            out.push(path);
        }
    }
}
