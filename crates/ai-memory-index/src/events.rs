//! What hooks report: sessions (start, end) and the user's prompts, captured sanitized.

use ai_memory_core::Clean;
use rusqlite::{OptionalExtension, params};

use crate::{Index, IndexError, ProjectRow, now};

/// A session start as the hook reports it.
#[derive(Debug, Clone)]
pub struct SessionStart<'a> {
    pub id: &'a str,
    pub harness: &'a str,
    pub user: Option<i64>,
    /// The marker's explicit values; `None` leaves the recorded setting as it is.
    pub contribute: Option<bool>,
    pub consume: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptRow {
    pub session: String,
    pub text: String,
    pub at: i64,
}

impl Index {
    /// Records a session start. A session id already known belongs to its project and
    /// operator: reusing it from another is refused (a session cannot be taken over by id).
    pub fn start_session(
        &self,
        project: &ProjectRow,
        s: &SessionStart<'_>,
    ) -> Result<(), IndexError> {
        let conn = self.conn();
        let owner: Option<(i64, Option<i64>)> = conn
            .query_row("SELECT project_id, user_id FROM sessions WHERE id = ?1", [s.id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        match owner {
            Some(owner) if owner != (project.id, s.user) => {
                return Err(IndexError::Denied(format!(
                    "session `{}` belongs to another project or operator",
                    s.id
                )));
            }
            Some(_) => {
                conn.execute("UPDATE sessions SET ended = NULL WHERE id = ?1", [s.id])?;
            }
            None => {
                conn.execute(
                    "INSERT INTO sessions (id, project_id, harness, user_id, started) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![s.id, project.id, s.harness, s.user, now()],
                )?;
            }
        }
        // Only explicit values change a project's opt-outs.
        if let Some(v) = s.contribute {
            conn.execute(
                "UPDATE projects SET contribute = ?1 WHERE id = ?2",
                params![v, project.id],
            )?;
        }
        if let Some(v) = s.consume {
            conn.execute("UPDATE projects SET consume = ?1 WHERE id = ?2", params![v, project.id])?;
        }
        Ok(())
    }

    /// Records a prompt (already sanitized and cut to the capture bound), made at `at` (unix
    /// seconds, from the caller's clock).
    pub fn capture_prompt(
        &self,
        project: &ProjectRow,
        session: &str,
        user: Option<i64>,
        text: &Clean,
        at: i64,
    ) -> Result<(), IndexError> {
        self.conn().execute(
            "INSERT INTO prompts (session_id, project_id, user_id, text, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![session, project.id, user, text.as_str(), at],
        )?;
        Ok(())
    }

    /// Ends a session of `project` opened by `user`; `false` when there is none to end.
    pub fn end_session(
        &self,
        project: &ProjectRow,
        session: &str,
        user: Option<i64>,
    ) -> Result<bool, IndexError> {
        let n = self.conn().execute(
            "UPDATE sessions SET ended = ?1 WHERE id = ?2 AND project_id = ?3 AND user_id IS ?4 AND ended IS NULL",
            params![now(), session, project.id, user],
        )?;
        Ok(n > 0)
    }

    /// Deletes the prompts captured before `cutoff` (unix seconds): `capture.retention_days`.
    pub fn purge_prompts_before(&self, cutoff: i64) -> Result<usize, IndexError> {
        Ok(self.conn().execute("DELETE FROM prompts WHERE at < ?1", [cutoff])?)
    }

    pub fn prompts(&self, project: &ProjectRow) -> Result<Vec<PromptRow>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT session_id, text, at FROM prompts WHERE project_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([project.id], |r| {
            Ok(PromptRow { session: r.get(0)?, text: r.get(1)?, at: r.get(2)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records that `session` got its context; true the first time only.
    pub fn brief_once(&self, session: &str) -> Result<bool, IndexError> {
        let n = self.conn().execute(
            "INSERT INTO sessions_briefed (session_id) VALUES (?1) ON CONFLICT DO NOTHING",
            [session],
        )?;
        Ok(n > 0)
    }

    /// Whether a session ended (`None`: unknown session).
    pub fn session_ended(&self, session: &str) -> Result<Option<bool>, IndexError> {
        let ended: Option<Option<i64>> = self
            .conn()
            .query_row("SELECT ended FROM sessions WHERE id = ?1", [session], |r| r.get(0))
            .optional()?;
        Ok(ended.map(|e| e.is_some()))
    }
}
