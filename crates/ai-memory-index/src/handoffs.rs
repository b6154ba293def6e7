//! Handoffs: the files a session's edit and write tools named (their inputs, never their
//! output), and each project's latest handoff, the note the next session of the project starts
//! with. A read never consumes a handoff; only a newer one replaces it.

use ai_memory_core::Clean;
use rusqlite::{OptionalExtension, params};

use crate::{Index, IndexError, ProjectRow};

pub(crate) const HANDOFF_SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS session_files (
    session_id TEXT NOT NULL,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (session_id, path)
);
-- One handoff per project and operator (`user_key` 0: root); `at` orders them, so an older
-- session's handoff written late never replaces a newer one.
CREATE TABLE IF NOT EXISTS handoffs (
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_key INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    harness TEXT NOT NULL,
    text TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (project_id, user_key)
);
-- Sessions of a harness without a session-end event, handed off at a later session start:
-- the last activity handed off, so a session is handed off again only after more activity.
CREATE TABLE IF NOT EXISTS sessions_handed_off (
    session_id TEXT PRIMARY KEY,
    at INTEGER NOT NULL
);
"#;

/// A project's latest handoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffRow {
    pub session: String,
    pub harness: String,
    pub text: String,
    pub at: i64,
}

/// A session left open by a harness that sends no session end, with activity not yet handed
/// off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenSession {
    pub id: String,
    pub harness: String,
    /// Its last prompt or file change (unix seconds).
    pub last: i64,
}

/// Stores a handoff for a project and operator key unless theirs is newer (an older session's
/// handoff written late, or an import's older one, never replaces it); one of the same time
/// replaces theirs only when `same_time` (a session's, not an import's); returns the rows
/// written.
pub(crate) fn put_in(
    conn: &rusqlite::Connection,
    project_id: i64,
    user_key: i64,
    handoff: &HandoffRow,
    same_time: bool,
) -> Result<usize, IndexError> {
    Ok(conn.execute(
        "INSERT INTO handoffs (project_id, user_key, session_id, harness, text, at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (project_id, user_key) DO UPDATE SET
            session_id = excluded.session_id, harness = excluded.harness,
            text = excluded.text, at = excluded.at
         WHERE excluded.at > handoffs.at OR (?7 AND excluded.at = handoffs.at)",
        params![
            project_id,
            user_key,
            handoff.session,
            handoff.harness,
            handoff.text,
            handoff.at,
            same_time
        ],
    )?)
}

/// The `user_key` column of an operator (0: the root, whose id is none).
pub(crate) fn user_key(user: Option<i64>) -> i64 {
    user.unwrap_or(0)
}

impl Index {
    /// Records a file `session`'s edit or write tool named; at most `max` distinct files a
    /// session (`false` when the file is new and the session has that many). A session id known
    /// as another project's or operator's is refused.
    pub fn record_file(
        &self,
        project: &ProjectRow,
        session: &str,
        user: Option<i64>,
        path: &Clean,
        at: i64,
        max: usize,
    ) -> Result<bool, IndexError> {
        let conn = self.conn();
        let owner: Option<(i64, Option<i64>)> = conn
            .query_row("SELECT project_id, user_id FROM sessions WHERE id = ?1", [session], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        if owner.is_some_and(|o| o != (project.id, user)) {
            return Err(IndexError::Denied(format!(
                "session `{session}` belongs to another project or operator"
            )));
        }
        let updated = conn.execute(
            "UPDATE session_files SET at = ?1 WHERE session_id = ?2 AND path = ?3",
            params![at, session, path.as_str()],
        )?;
        if updated > 0 {
            return Ok(true);
        }
        let count: i64 = conn.query_row(
            "SELECT COUNT(*) FROM session_files WHERE session_id = ?1",
            [session],
            |r| r.get(0),
        )?;
        if usize::try_from(count).unwrap_or(usize::MAX) >= max {
            return Ok(false);
        }
        conn.execute(
            "INSERT INTO session_files (session_id, project_id, path, at) VALUES (?1, ?2, ?3, ?4)",
            params![session, project.id, path.as_str(), at],
        )?;
        Ok(true)
    }

    /// Whether `session` was started in `project` by `user` (only the session's own operator
    /// hands it off: another's session end never turns its prompts into their handoff).
    pub fn owns_session(
        &self,
        project: &ProjectRow,
        user: Option<i64>,
        session: &str,
    ) -> Result<bool, IndexError> {
        let owner: Option<(i64, Option<i64>)> = self
            .conn()
            .query_row("SELECT project_id, user_id FROM sessions WHERE id = ?1", [session], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        Ok(owner == Some((project.id, user)))
    }

    /// The files a session changed, in the order first seen.
    pub fn session_files(
        &self,
        project: &ProjectRow,
        session: &str,
    ) -> Result<Vec<String>, IndexError> {
        self.session_texts(
            "SELECT path FROM session_files WHERE session_id = ?1 AND project_id = ?2 ORDER BY rowid",
            project,
            session,
        )
    }

    /// The prompts captured in a session, in order.
    pub fn session_prompts(
        &self,
        project: &ProjectRow,
        session: &str,
    ) -> Result<Vec<String>, IndexError> {
        self.session_texts(
            "SELECT text FROM prompts WHERE session_id = ?1 AND project_id = ?2 ORDER BY id",
            project,
            session,
        )
    }

    /// One text column of a session's rows (`sql` takes the session as ?1, the project as ?2).
    fn session_texts(
        &self,
        sql: &str,
        project: &ProjectRow,
        session: &str,
    ) -> Result<Vec<String>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map(params![session, project.id], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Stores a handoff for `project` and `user`, replacing theirs unless that one is newer.
    /// Returns whether it was stored.
    pub fn put_handoff(
        &self,
        project: &ProjectRow,
        user: Option<i64>,
        handoff: &HandoffRow,
    ) -> Result<bool, IndexError> {
        Ok(put_in(&self.conn(), project.id, user_key(user), handoff, true)? > 0)
    }

    /// The latest handoff of `project` for `user`. Reading it changes nothing.
    pub fn handoff(
        &self,
        project: &ProjectRow,
        user: Option<i64>,
    ) -> Result<Option<HandoffRow>, IndexError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT session_id, harness, text, at FROM handoffs
                 WHERE project_id = ?1 AND user_key = ?2",
                params![project.id, user_key(user)],
                |r| {
                    Ok(HandoffRow {
                        session: r.get(0)?,
                        harness: r.get(1)?,
                        text: r.get(2)?,
                        at: r.get(3)?,
                    })
                },
            )
            .optional()?)
    }

    /// `user`'s sessions of `project` from `harness` (one that sends no session end), other
    /// than `except`, still open, with prompts or file changes newer than what was handed off of
    /// them; oldest activity first.
    pub fn open_sessions(
        &self,
        project: &ProjectRow,
        user: Option<i64>,
        harness: &str,
        except: &str,
    ) -> Result<Vec<OpenSession>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT s.id, s.harness, MAX(a.at) AS last, h.at
             FROM sessions s
             JOIN (SELECT session_id, at FROM prompts WHERE project_id = ?1
                   UNION ALL SELECT session_id, at FROM session_files WHERE project_id = ?1) a
               ON a.session_id = s.id
             LEFT JOIN sessions_handed_off h ON h.session_id = s.id
             WHERE s.project_id = ?1 AND s.user_id IS ?2 AND s.harness = ?3 AND s.id != ?4
               AND s.ended IS NULL
             GROUP BY s.id
             HAVING last > COALESCE(h.at, -1)
             ORDER BY last, s.id",
        )?;
        let rows = stmt.query_map(params![project.id, user, harness, except], |r| {
            Ok(OpenSession { id: r.get(0)?, harness: r.get(1)?, last: r.get(2)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records that a session's activity up to `at` was handed off.
    pub fn mark_handed_off(&self, session: &str, at: i64) -> Result<(), IndexError> {
        self.conn().execute(
            "INSERT INTO sessions_handed_off (session_id, at) VALUES (?1, ?2)
             ON CONFLICT (session_id) DO UPDATE SET at = MAX(at, excluded.at)",
            params![session, at],
        )?;
        Ok(())
    }

    /// Deletes handoffs and recorded files older than `cutoff` (unix seconds): they hold
    /// captured prompts, so `capture.retention_days` applies to them too.
    pub fn purge_handoffs_before(&self, cutoff: i64) -> Result<usize, IndexError> {
        let conn = self.conn();
        let handoffs = conn.execute("DELETE FROM handoffs WHERE at < ?1", [cutoff])?;
        let files = conn.execute("DELETE FROM session_files WHERE at < ?1", [cutoff])?;
        Ok(handoffs + files)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use ai_memory_core::{ProjectName, WorkspaceName, sanitize};

    use super::*;
    use crate::SessionStart;

    fn setup() -> (Index, ProjectRow) {
        let index = Index::in_memory().unwrap();
        let p = index
            .ensure_project(
                &WorkspaceName::default_workspace(),
                &ProjectName::new("shop").unwrap(),
                false,
                None,
            )
            .unwrap();
        (index, p)
    }

    fn start(index: &Index, p: &ProjectRow, id: &str, harness: &str) {
        let s = SessionStart { id, harness, user: None, contribute: None, consume: None };
        index.start_session(p, &s).unwrap();
    }

    fn row(session: &str, text: &str, at: i64) -> HandoffRow {
        HandoffRow { session: session.into(), harness: "codex".into(), text: text.into(), at }
    }

    #[test]
    fn files_are_bounded_per_session_and_kept_in_order() {
        let (index, p) = setup();
        start(&index, &p, "s1", "claude-code");
        for f in ["b.rs", "a.rs", "b.rs", "c.rs"] {
            index.record_file(&p, "s1", None, &sanitize(f), 5, 2).unwrap();
        }
        assert_eq!(index.session_files(&p, "s1").unwrap(), ["b.rs", "a.rs"]);
        let other = SessionStart {
            id: "s2",
            harness: "codex",
            user: Some(9),
            contribute: None,
            consume: None,
        };
        index.start_session(&p, &other).unwrap();
        let err = index.record_file(&p, "s2", None, &sanitize("x.rs"), 5, 10).unwrap_err();
        assert!(matches!(err, IndexError::Denied(_)), "{err}");
        assert!(index.owns_session(&p, Some(9), "s2").unwrap());
        assert!(!index.owns_session(&p, None, "s2").unwrap(), "another operator's");
        assert!(!index.owns_session(&p, None, "unknown").unwrap());
    }

    #[test]
    fn a_handoff_is_replaced_only_by_a_newer_one_and_reading_keeps_it() {
        let (index, p) = setup();
        assert!(index.put_handoff(&p, None, &row("s1", "first", 10)).unwrap());
        assert_eq!(index.handoff(&p, None).unwrap().unwrap().text, "first");
        assert_eq!(index.handoff(&p, None).unwrap().unwrap().text, "first", "a read keeps it");
        assert!(!index.put_handoff(&p, None, &row("s0", "older", 5)).unwrap());
        assert!(index.put_handoff(&p, None, &row("s2", "newer", 11)).unwrap());
        assert_eq!(index.handoff(&p, None).unwrap().unwrap().session, "s2");
        assert_eq!(index.handoff(&p, Some(3)).unwrap(), None, "another operator's is apart");
        assert_eq!(index.purge_handoffs_before(12).unwrap(), 1);
        assert_eq!(index.handoff(&p, None).unwrap(), None);
    }

    #[test]
    fn open_sessions_are_those_with_activity_not_yet_handed_off() {
        let (index, p) = setup();
        start(&index, &p, "c1", "codex");
        start(&index, &p, "c2", "codex");
        start(&index, &p, "cc", "claude-code");
        index.capture_prompt(&p, "c1", None, &sanitize("fix it"), 100).unwrap();
        index.capture_prompt(&p, "cc", None, &sanitize("other"), 100).unwrap();
        let open = index.open_sessions(&p, None, "codex", "now").unwrap();
        assert_eq!(open, [OpenSession { id: "c1".into(), harness: "codex".into(), last: 100 }]);
        assert!(index.open_sessions(&p, None, "codex", "c1").unwrap().is_empty(), "not itself");
        index.mark_handed_off("c1", 100).unwrap();
        assert!(index.open_sessions(&p, None, "codex", "now").unwrap().is_empty());
        index.record_file(&p, "c1", None, &sanitize("src/a.rs"), 101, 10).unwrap();
        assert_eq!(index.open_sessions(&p, None, "codex", "now").unwrap()[0].last, 101);
        assert_eq!(index.session_prompts(&p, "c1").unwrap(), ["fix it"]);
    }
}
