//! The profile's records: candidates the harvester recorded (with the classification they were
//! recorded with), each profile's cursor into the captured prompts, the ledger of forgotten
//! entries, and the stacks each project's activity shows.
//!
//! Statements are kept as JSON the profile crate reads: this crate stores, it does not judge.

use std::collections::BTreeSet;

use ai_memory_core::CURATED_FOLDERS;
use rusqlite::{OptionalExtension, named_params, params};

use crate::access::READABLE;
use crate::{Index, IndexError, ProjectRow};

pub(crate) const PROFILE_SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS profile_candidates (
    id INTEGER PRIMARY KEY,
    scope_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    sentence TEXT NOT NULL,
    statement TEXT NOT NULL,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id INTEGER,
    at INTEGER NOT NULL,
    UNIQUE (scope_id, sentence)
);
CREATE TABLE IF NOT EXISTS profile_cursors (
    scope_id INTEGER PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    prompt_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS profile_page_cursors (
    scope_id INTEGER PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
    page_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS profile_forgotten (
    scope_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    statement TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (scope_id, path)
);
CREATE TABLE IF NOT EXISTS project_stacks (
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    first_seen INTEGER NOT NULL,
    PRIMARY KEY (project_id, tag)
);
"#;

/// Which projects feed a profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// Only this workspace (a workspace profile).
    pub workspace: Option<String>,
    /// Only this operator's prompts, in projects they can read (a private profile).
    pub user: Option<i64>,
    /// Only open projects (a shared profile on a multi-user server: restricted projects never
    /// feed it).
    pub open_only: bool,
}

/// The condition "project `pr` feeds the profile": it contributes (an explicit
/// `contribute = false` keeps it out), is not a reserved project, and passes `Sources`.
const FEEDS: &str = "(pr.contribute IS NOT 0 AND pr.name != '_global' AND pr.name != '_profile'
     AND pr.name NOT LIKE '\\_profile.%' ESCAPE '\\'
     AND (:ws IS NULL OR pr.workspace = :ws)
     AND (:open_only = 0 OR pr.restricted = 0))";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePrompt {
    pub id: i64,
    pub project_id: i64,
    /// `workspace/project`.
    pub project: String,
    pub user: Option<i64>,
    pub text: String,
    pub at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePage {
    pub project_id: i64,
    pub project: String,
    pub path: String,
    pub summary: Option<String>,
    /// The page's frontmatter as JSON.
    pub frontmatter: String,
    /// Its change number (`pages.seq`).
    pub seq: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateRow {
    pub id: i64,
    pub sentence: String,
    pub statement: String,
    pub project: String,
    pub user: Option<i64>,
    pub at: i64,
    pub date: String,
}

impl Sources {
    fn bind(&self) -> (Option<&str>, bool, bool, i64) {
        // A private profile reads as its operator: READABLE with :root false.
        (self.workspace.as_deref(), self.open_only, self.user.is_none(), self.user.unwrap_or(-1))
    }
}

impl Index {
    /// Prompts after `after` that feed a profile, oldest first (at most `limit`).
    pub fn source_prompts(
        &self,
        sources: &Sources,
        after: i64,
        limit: usize,
    ) -> Result<Vec<SourcePrompt>, IndexError> {
        let (ws, open_only, root, user) = sources.bind();
        let sql = format!(
            "SELECT p.id, pr.id, pr.workspace || '/' || pr.name, p.user_id, p.text, p.at
             FROM prompts p JOIN projects pr ON pr.id = p.project_id
             WHERE p.id > :after AND {FEEDS} AND (:root OR p.user_id = :user) AND {READABLE}
             ORDER BY p.id LIMIT :limit"
        );
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            named_params! { ":after": after, ":ws": ws, ":open_only": open_only, ":root": root,
            ":user": user, ":limit": limit as i64 },
            |r| {
                Ok(SourcePrompt {
                    id: r.get(0)?,
                    project_id: r.get(1)?,
                    project: r.get(2)?,
                    user: r.get(3)?,
                    text: r.get(4)?,
                    at: r.get(5)?,
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Curated pages (`_rules/`, `decisions/`, `gotchas/`, `procedures/`) changed after
    /// change number `after`, of projects that feed a profile; a private profile reads those
    /// its operator created.
    pub fn source_pages(
        &self,
        sources: &Sources,
        after: i64,
    ) -> Result<Vec<SourcePage>, IndexError> {
        let (ws, open_only, root, user) = sources.bind();
        // `_` is a LIKE wildcard: escaped, so `_rules/` means that folder only.
        let curated = CURATED_FOLDERS
            .iter()
            .map(|f| format!("pg.path LIKE '{}%' ESCAPE '\\'", f.replace('_', "\\_")))
            .collect::<Vec<_>>()
            .join(" OR ");
        let sql = format!(
            "SELECT pr.id, pr.workspace || '/' || pr.name, pg.path, pg.summary, pg.frontmatter, pg.seq
             FROM pages pg JOIN projects pr ON pr.id = pg.project_id
             WHERE pg.seq > :after AND {FEEDS} AND (:root OR pr.creator = :user) AND {READABLE}
               AND ({curated})
             ORDER BY pg.seq"
        );
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            named_params! { ":after": after, ":ws": ws, ":open_only": open_only, ":root": root,
            ":user": user },
            |r| {
                Ok(SourcePage {
                    project_id: r.get(0)?,
                    project: r.get(1)?,
                    path: r.get(2)?,
                    summary: r.get(3)?,
                    frontmatter: r.get(4)?,
                    seq: r.get(5)?,
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// `(workspace/project, tag, first-seen date)` of every project that feeds a profile.
    pub fn source_stacks(
        &self,
        sources: &Sources,
    ) -> Result<Vec<(String, String, String)>, IndexError> {
        let (ws, open_only, root, user) = sources.bind();
        let sql = format!(
            "SELECT pr.workspace || '/' || pr.name, s.tag, date(s.first_seen, 'unixepoch')
             FROM project_stacks s JOIN projects pr ON pr.id = s.project_id
             WHERE {FEEDS} AND (:root OR pr.creator = :user OR EXISTS (SELECT 1 FROM prompts p
                   WHERE p.project_id = pr.id AND p.user_id = :user)) AND {READABLE}
             ORDER BY 1, 2"
        );
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            named_params! { ":ws": ws, ":open_only": open_only, ":root": root, ":user": user },
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records a candidate; `false` when its sentence was recorded before (it keeps the
    /// classification it was recorded with).
    pub fn add_candidate(
        &self,
        scope: &ProjectRow,
        sentence: &str,
        statement: &str,
        project_id: i64,
        user: Option<i64>,
        at: i64,
    ) -> Result<bool, IndexError> {
        let n = self.conn().execute(
            "INSERT INTO profile_candidates (scope_id, sentence, statement, project_id, user_id, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (scope_id, sentence) DO NOTHING",
            params![scope.id, sentence, statement, project_id, user, at],
        )?;
        Ok(n > 0)
    }

    /// A profile's candidates from projects that still contribute, oldest first.
    pub fn candidates(&self, scope: &ProjectRow) -> Result<Vec<CandidateRow>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT c.id, c.sentence, c.statement, pr.workspace || '/' || pr.name, c.user_id, c.at,
                    date(c.at, 'unixepoch')
             FROM profile_candidates c JOIN projects pr ON pr.id = c.project_id
             WHERE c.scope_id = ?1 AND pr.contribute IS NOT 0 ORDER BY c.at, c.id",
        )?;
        let rows = stmt.query_map([scope.id], |r| {
            Ok(CandidateRow {
                id: r.get(0)?,
                sentence: r.get(1)?,
                statement: r.get(2)?,
                project: r.get(3)?,
                user: r.get(4)?,
                at: r.get(5)?,
                date: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Deletes every candidate (of every profile) from projects set `contribute = false`:
    /// an opt-out takes back the evidence harvested before it. Returns how many went.
    pub fn purge_opted_out(&self) -> Result<usize, IndexError> {
        Ok(self.conn().execute(
            "DELETE FROM profile_candidates WHERE project_id IN
                (SELECT id FROM projects WHERE contribute = 0)",
            [],
        )?)
    }

    /// A profile's candidates harvested from curated pages: `(id, key, project, statement)`,
    /// the key being `page:<project id>:<path>:<hash of the line>`.
    pub fn page_candidates(
        &self,
        scope: &ProjectRow,
    ) -> Result<Vec<(i64, String, String, String)>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT c.id, c.sentence, pr.workspace || '/' || pr.name, c.statement
             FROM profile_candidates c JOIN projects pr ON pr.id = c.project_id
             WHERE c.scope_id = ?1 AND substr(c.sentence, 1, 5) = 'page:' ORDER BY c.id",
        )?;
        let rows =
            stmt.query_map([scope.id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A page's summary and frontmatter (JSON) as indexed; `None` when there is no such page.
    pub fn page_summary(
        &self,
        project_id: i64,
        path: &str,
    ) -> Result<Option<(Option<String>, String)>, IndexError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT summary, frontmatter FROM pages WHERE project_id = ?1 AND path = ?2",
                params![project_id, path],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    pub fn delete_candidate(&self, id: i64) -> Result<(), IndexError> {
        self.conn().execute("DELETE FROM profile_candidates WHERE id = ?1", [id])?;
        Ok(())
    }

    /// `workspace/project` of every project that opted out of contributing.
    pub fn opted_out(&self) -> Result<BTreeSet<String>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT workspace || '/' || name FROM projects WHERE contribute = 0 ORDER BY 1",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The project's recorded opt-outs: `(contribute, consume)`, `None` when never set.
    pub fn project_opt_outs(
        &self,
        project: &ProjectRow,
    ) -> Result<(Option<bool>, Option<bool>), IndexError> {
        Ok(self.conn().query_row(
            "SELECT contribute, consume FROM projects WHERE id = ?1",
            [project.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    }

    pub fn cursor(&self, scope: &ProjectRow) -> Result<i64, IndexError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT prompt_id FROM profile_cursors WHERE scope_id = ?1",
                [scope.id],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0))
    }

    /// The last page change a profile's pass read (0: none).
    pub fn page_cursor(&self, scope: &ProjectRow) -> Result<i64, IndexError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT page_seq FROM profile_page_cursors WHERE scope_id = ?1",
                [scope.id],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0))
    }

    pub fn set_page_cursor(&self, scope: &ProjectRow, seq: i64) -> Result<(), IndexError> {
        self.conn().execute(
            "INSERT INTO profile_page_cursors (scope_id, page_seq) VALUES (?1, ?2)
             ON CONFLICT (scope_id) DO UPDATE SET page_seq = excluded.page_seq",
            params![scope.id, seq],
        )?;
        Ok(())
    }

    pub fn set_cursor(&self, scope: &ProjectRow, prompt_id: i64) -> Result<(), IndexError> {
        self.conn().execute(
            "INSERT INTO profile_cursors (scope_id, prompt_id) VALUES (?1, ?2)
             ON CONFLICT (scope_id) DO UPDATE SET prompt_id = excluded.prompt_id",
            params![scope.id, prompt_id],
        )?;
        Ok(())
    }

    /// Records a forgotten entry (it stays out until stated again after now).
    pub fn forget(
        &self,
        scope: &ProjectRow,
        path: &str,
        statement: &str,
        at: i64,
    ) -> Result<(), IndexError> {
        self.conn().execute(
            "INSERT INTO profile_forgotten (scope_id, path, statement, at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (scope_id, path) DO UPDATE SET statement = excluded.statement, at = excluded.at",
            params![scope.id, path, statement, at],
        )?;
        Ok(())
    }

    /// `(path, statement, at)` of every forgotten entry.
    pub fn forgotten(&self, scope: &ProjectRow) -> Result<Vec<(String, String, i64)>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT path, statement, at FROM profile_forgotten WHERE scope_id = ?1 ORDER BY path",
        )?;
        let rows = stmt.query_map([scope.id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records stacks a project's activity shows.
    pub fn add_stacks(
        &self,
        project: &ProjectRow,
        tags: &BTreeSet<&str>,
        at: i64,
    ) -> Result<(), IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "INSERT INTO project_stacks (project_id, tag, first_seen) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
        )?;
        for tag in tags {
            stmt.execute(params![project.id, tag, at])?;
        }
        Ok(())
    }

    pub fn stacks(&self, project: &ProjectRow) -> Result<BTreeSet<String>, IndexError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare_cached("SELECT tag FROM project_stacks WHERE project_id = ?1")?;
        let rows = stmt.query_map([project.id], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether a project has any page (a project without is new: it gets the baseline).
    pub fn has_pages(&self, project: &ProjectRow) -> Result<bool, IndexError> {
        Ok(self.conn().query_row(
            "SELECT EXISTS (SELECT 1 FROM pages WHERE project_id = ?1)",
            [project.id],
            |r| r.get(0),
        )?)
    }

    /// Every workspace that has a project.
    pub fn workspaces(&self) -> Result<Vec<String>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT DISTINCT workspace FROM projects ORDER BY 1")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
