//! Links between pages of one project, both ways: what a page links to (with whether the
//! target exists) and what links to it. Rows belong to their source page (deleted with it) and
//! name the target by path, so a link to a page not written yet is kept and resolves when the
//! page appears.

use ai_memory_core::{Page, PagePath, page_links};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::{Index, IndexError, ProjectRow};

/// Made after the other tables (it refers to `pages`).
pub(crate) const LINKS_SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS page_links (
    source_id INTEGER NOT NULL REFERENCES pages(id) ON DELETE CASCADE,
    project_id INTEGER NOT NULL,
    target TEXT NOT NULL,
    kind TEXT NOT NULL,
    label TEXT,
    ord INTEGER NOT NULL,
    PRIMARY KEY (source_id, target)
);
CREATE INDEX IF NOT EXISTS page_links_target ON page_links (project_id, target);
"#;

/// The most backlinks one listing returns (the total is counted).
pub const MAX_BACKLINKS_LISTED: usize = 200;

/// A link out of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkOut {
    pub path: String,
    /// `body` (`[[...]]`) or `related` (frontmatter).
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Whether the target page exists (a dangling link resolves when it is written).
    pub exists: bool,
}

/// A page linking to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backlink {
    pub path: String,
    pub title: String,
    pub kind: String,
}

/// A page's title and summary, for a neighbourhood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Brief {
    pub title: String,
    pub summary: Option<String>,
}

/// Replaces the links of the page `source_id` with those its text holds.
pub(crate) fn set_links_in(
    conn: &Connection,
    project: &ProjectRow,
    source_id: i64,
    path: &PagePath,
    page: &Page,
) -> Result<(), IndexError> {
    conn.execute("DELETE FROM page_links WHERE source_id = ?1", [source_id])?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO page_links (source_id, project_id, target, kind, label, ord)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (ord, link) in page_links(page, Some(path)).into_iter().enumerate() {
        insert.execute(params![
            source_id,
            project.id,
            link.target.as_str(),
            link.kind.as_str(),
            link.label,
            ord as i64
        ])?;
    }
    Ok(())
}

impl Index {
    /// The links out of `path`, in the order written (the caller has checked it may read the
    /// project; links never leave it).
    pub fn links_of(&self, project: &ProjectRow, path: &str) -> Result<Vec<LinkOut>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT l.target, l.kind, l.label,
                    EXISTS (SELECT 1 FROM pages t WHERE t.project_id = l.project_id AND t.path = l.target)
             FROM page_links l JOIN pages s ON s.id = l.source_id
             WHERE s.project_id = ?1 AND s.path = ?2 ORDER BY l.ord",
        )?;
        let rows = stmt.query_map(params![project.id, path], |r| {
            Ok(LinkOut { path: r.get(0)?, kind: r.get(1)?, label: r.get(2)?, exists: r.get(3)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The pages linking to `path`, by path, at most `limit`; and how many there are.
    pub fn backlinks_of(
        &self,
        project: &ProjectRow,
        path: &str,
        limit: usize,
    ) -> Result<(Vec<Backlink>, usize), IndexError> {
        let conn = self.conn();
        let total: i64 = conn.query_row(
            "SELECT COUNT(*) FROM page_links WHERE project_id = ?1 AND target = ?2",
            params![project.id, path],
            |r| r.get(0),
        )?;
        let mut stmt = conn.prepare_cached(
            "SELECT s.path, s.title, l.kind FROM page_links l JOIN pages s ON s.id = l.source_id
             WHERE l.project_id = ?1 AND l.target = ?2 ORDER BY s.path LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![project.id, path, limit as i64], |r| {
            Ok(Backlink { path: r.get(0)?, title: r.get(1)?, kind: r.get(2)? })
        })?;
        Ok((rows.collect::<Result<_, _>>()?, total as usize))
    }

    /// A page's title and summary, `None` when the project has no such page.
    pub fn brief(&self, project: &ProjectRow, path: &str) -> Result<Option<Brief>, IndexError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT title, summary FROM pages WHERE project_id = ?1 AND path = ?2",
                params![project.id, path],
                |r| Ok(Brief { title: r.get(0)?, summary: r.get(1)? }),
            )
            .optional()?)
    }
}

#[cfg(test)]
mod tests {
    use ai_memory_core::{ProjectName, WorkspaceName};
    use ai_memory_store::{Location, Stored};

    use super::*;

    fn setup() -> (Index, ProjectRow) {
        let index = Index::in_memory().unwrap();
        let ws = WorkspaceName::new("default").unwrap();
        let project = ProjectName::new("app").unwrap();
        let row = index.ensure_project(&ws, &project, false, None).unwrap();
        (index, row)
    }

    fn write(index: &Index, row: &ProjectRow, path: &str, text: &str) {
        let location = Location {
            workspace: WorkspaceName::new("default").unwrap(),
            project: ProjectName::new("app").unwrap(),
            path: PagePath::new(path).unwrap(),
        };
        let stored = Stored { location, text: text.to_owned(), page: Page::parse(text).unwrap() };
        index.upsert_page(row, &stored).unwrap();
    }

    #[test]
    fn links_follow_writes_and_deletes_both_ways() {
        let (index, row) = setup();
        write(&index, &row, "a.md", "---\nrelated: [c.md]\n---\nSee [[b|bee]].\n");
        let out = index.links_of(&row, "a.md").unwrap();
        let got: Vec<(&str, &str, bool)> =
            out.iter().map(|l| (l.path.as_str(), l.kind.as_str(), l.exists)).collect();
        assert_eq!(got, [("c.md", "related", false), ("b.md", "body", false)]);
        assert_eq!(out[1].label.as_deref(), Some("bee"));
        // A dangling link resolves when its target is written.
        write(&index, &row, "b.md", "# Bee\n");
        assert!(index.links_of(&row, "a.md").unwrap()[1].exists);
        let (back, total) = index.backlinks_of(&row, "b.md", 10).unwrap();
        assert_eq!((back[0].path.as_str(), back[0].kind.as_str(), total), ("a.md", "body", 1));
        // A rewrite replaces the links; a delete takes them out.
        write(&index, &row, "a.md", "No links now.\n");
        assert!(index.links_of(&row, "a.md").unwrap().is_empty());
        assert_eq!(index.backlinks_of(&row, "b.md", 10).unwrap().1, 0);
        write(&index, &row, "a.md", "[[b]]\n");
        index.delete_page(&row, &PagePath::new("a.md").unwrap()).unwrap();
        assert_eq!(index.backlinks_of(&row, "b.md", 10).unwrap().1, 0);
    }

    #[test]
    fn an_index_made_before_links_reads_the_wiki_again() {
        let path = std::env::temp_dir().join(format!(
            "aim-links-upgrade-{}-{:?}.sqlite",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        {
            let index = Index::open(&path).unwrap();
            let ws = WorkspaceName::new("default").unwrap();
            let row = index.ensure_project(&ws, &ProjectName::new("app").unwrap(), false, None);
            write(&index, &row.unwrap(), "a.md", "[[b]]");
        }
        // What an older version left: pages, a recorded tip, no link table.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TABLE page_links; INSERT INTO wiki_sync (id, tip) VALUES (1, 'abc');",
        )
        .unwrap();
        drop(conn);
        let index = Index::open(&path).unwrap();
        assert!(index.needs_rebuild());
        assert_eq!(index.synced_tip().unwrap(), None, "the next sync rebuilds from the wiki");
        drop(index);
        assert!(!Index::open(&path).unwrap().needs_rebuild(), "only once");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[test]
    fn backlink_listings_are_bounded_and_counted() {
        let (index, row) = setup();
        for i in 0..5 {
            write(&index, &row, &format!("s{i}.md"), "[[t]]");
        }
        let (back, total) = index.backlinks_of(&row, "t.md", 3).unwrap();
        assert_eq!((back.len(), total), (3, 5));
        assert_eq!(back[0].path, "s0.md");
    }
}
