//! The wiki read whole at one commit and written in one commit: what `ai-memory export` reads
//! and `ai-memory import` writes. The write is a compare-and-swap on the commit the caller
//! planned against, so a page written meanwhile is never overwritten unseen.

use ai_memory_core::{ProjectName, WorkspaceName};
use gitstore::bare::{Author, BareError, Change};

use crate::{
    BRANCH, CleanPage, Location, PROJECT_META, PageRead, ProjectMeta, StoreError, Stored, Wiki,
    meta_change, parse_meta,
};

/// Every page and every project's settings at one commit.
#[derive(Debug)]
pub struct Snapshot {
    /// The commit read (`None`: the wiki has no commit yet, and the snapshot is empty).
    pub commit: Option<String>,
    pub pages: Vec<(Location, PageRead)>,
    pub metas: Vec<(WorkspaceName, ProjectName, ProjectMeta)>,
}

/// What a batch writes: pages, and the settings of projects it makes.
#[derive(Debug, Default)]
pub struct Batch {
    pub pages: Vec<(Location, CleanPage)>,
    pub metas: Vec<(WorkspaceName, ProjectName, ProjectMeta)>,
}

/// The files of one commit, by their path in git.
#[derive(Debug, Default)]
pub struct Files(std::collections::HashMap<String, Vec<u8>>);

impl Files {
    /// A page's bytes (`None`: not there).
    pub fn page(&self, at: &Location) -> Option<&[u8]> {
        self.0.get(&at.git_path()).map(Vec::as_slice)
    }

    /// Whether the project has its settings (`.project.toml`).
    pub fn has_meta(&self, ws: &WorkspaceName, project: &ProjectName) -> bool {
        self.0.contains_key(&format!("{ws}/{project}/{PROJECT_META}"))
    }
}

impl Wiki {
    /// The pages and project settings at the branch's tip, all read at that one commit.
    pub fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let Some(commit) = self.head()? else {
            return Ok(Snapshot { commit: None, pages: Vec::new(), metas: Vec::new() });
        };
        let mut pages = Vec::new();
        let mut metas = Vec::new();
        for (path, bytes) in self.git.files_at(&commit, "")? {
            if let Some(rest) = path.strip_suffix(&format!("/{PROJECT_META}")) {
                let Some((ws, project)) = rest.split_once('/') else { continue };
                let meta = parse_meta(&path, &bytes)?;
                metas.push((WorkspaceName::new(ws)?, ProjectName::new(project)?, meta));
                continue;
            }
            let Some(location) = Location::from_git_path(&path) else { continue };
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let parsed = ai_memory_core::Page::parse(&text)
                .map(|page| Stored { location: location.clone(), text, page })
                .map_err(|error| StoreError::Page { path: path.clone(), error });
            pages.push((location, parsed));
        }
        Ok(Snapshot { commit: Some(commit), pages, metas })
    }

    /// Every file at `commit` (none for `None`), read in one walk of its tree: what an import
    /// compares its pages with.
    pub fn files_at(&self, commit: Option<&str>) -> Result<Files, StoreError> {
        let Some(commit) = commit else { return Ok(Files::default()) };
        Ok(Files(self.git.files_at(commit, "")?.into_iter().collect()))
    }

    /// Commits `batch` in one commit on top of `expected` (the tip the caller planned
    /// against); `Ok(None)` when the branch has moved since (nothing is written: plan again).
    /// An empty batch commits nothing and returns `expected`.
    pub fn commit_batch(
        &self,
        expected: Option<&str>,
        batch: &Batch,
        message: &str,
        author: &str,
    ) -> Result<Option<String>, StoreError> {
        if batch.pages.is_empty() && batch.metas.is_empty() {
            return Ok(expected.map(str::to_owned));
        }
        let mut changes = Vec::new();
        for (ws, project, meta) in &batch.metas {
            changes.push(meta_change(ws, project, meta)?);
        }
        for (at, page) in &batch.pages {
            changes
                .push(Change::Put { path: at.git_path(), bytes: page.text().as_bytes().to_vec() });
        }
        let email = format!("{author}@ai-memory.local");
        let _serial = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let commit = match self.git.commit_on(
            BRANCH,
            expected,
            &changes,
            message,
            Author { name: author, email: &email },
        ) {
            Ok(commit) => commit,
            Err(BareError::Moved { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        self.sync_mirror()?;
        Ok(Some(commit))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;
    use ai_memory_core::{PagePath, sanitize};

    fn at(path: &str) -> Location {
        Location {
            workspace: WorkspaceName::default_workspace(),
            project: ProjectName::new("app").unwrap(),
            path: PagePath::new(path).unwrap(),
        }
    }

    #[test]
    fn a_batch_is_one_commit_and_refused_on_a_moved_branch() {
        let dir = tempfile::tempdir().unwrap();
        let wiki = Wiki::open(dir.path()).unwrap();
        let page = |t: &str| CleanPage::new(sanitize(t)).unwrap();
        let first = wiki.write(&at("a.md"), &page("# A\n"), "t").unwrap();
        let mut batch = Batch::default();
        batch.pages.push((at("b.md"), page("# B\n")));
        batch.pages.push((at("c.md"), page("# C\n")));
        batch.metas.push((
            WorkspaceName::default_workspace(),
            ProjectName::new("app").unwrap(),
            ProjectMeta { restricted: true, creator: Some(3) },
        ));
        // Planned against an older tip: refused, nothing written.
        wiki.write(&at("d.md"), &page("# D\n"), "t").unwrap();
        assert_eq!(wiki.commit_batch(Some(&first), &batch, "import", "t").unwrap(), None);
        assert!(wiki.read(&at("b.md")).unwrap().is_none());
        let head = wiki.head().unwrap();
        let commit = wiki.commit_batch(head.as_deref(), &batch, "import", "t").unwrap().unwrap();
        let snap = wiki.snapshot().unwrap();
        assert_eq!(snap.commit.as_deref(), Some(commit.as_str()));
        let paths: Vec<String> = snap.pages.iter().map(|(l, _)| l.path.to_string()).collect();
        assert_eq!(paths, ["a.md", "b.md", "c.md", "d.md"]);
        assert_eq!(snap.metas[0].2, ProjectMeta { restricted: true, creator: Some(3) });
        let files = wiki.files_at(Some(&commit)).unwrap();
        assert_eq!(files.page(&at("b.md")), Some(&b"# B\n"[..]));
        assert_eq!(files.page(&at("e.md")), None);
        assert!(
            files.has_meta(&WorkspaceName::default_workspace(), &ProjectName::new("app").unwrap())
        );
        assert!(wiki.files_at(None).unwrap().page(&at("a.md")).is_none());
        // The mirror follows.
        assert!(dir.path().join("wiki/default/app/c.md").exists());
    }
}
