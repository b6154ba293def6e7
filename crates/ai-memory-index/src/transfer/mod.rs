//! What lives only in this database, read out whole (`ai-memory export`) and merged back
//! (`ai-memory import`): projects' recorded opt-outs, operators (API keys as their SHA-256
//! hashes, never the keys), grants, sessions, captured prompts, the profile's candidates,
//! cursors and forget ledger, and each project's stacks. The page tables are not here: they
//! are a cache of the wiki, exported from git.
//!
//! Records name projects by workspace and name, not by row id (ids differ between databases);
//! operators keep their ids, because a private profile (`_profile.<id>`) and a project's
//! `creator` are named by them.

use std::collections::HashMap;

use rusqlite::{Connection, TransactionBehavior};
use serde::{Deserialize, Serialize};

use crate::{Index, IndexError};

mod merge;

use merge::{check, merge};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectRecord {
    pub workspace: String,
    pub name: String,
    /// The access mode and creator (as the wiki's `.project.toml` holds them).
    pub restricted: bool,
    pub creator: Option<i64>,
    /// The marker's opt-outs as last recorded (`None`: never sent).
    pub contribute: Option<bool>,
    pub consume: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorRecord {
    pub id: i64,
    pub name: String,
    /// The SHA-256 of the operator's API key, as stored: the key itself is never kept.
    pub token_sha256: String,
    pub created: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantRecord {
    pub operator: i64,
    pub workspace: String,
    pub project: String,
    pub level: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRecord {
    pub id: String,
    pub workspace: String,
    pub project: String,
    pub harness: String,
    pub operator: Option<i64>,
    pub started: i64,
    pub ended: Option<i64>,
    /// Its context went out with its first prompt (Kimi Code).
    #[serde(default)]
    pub briefed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptRecord {
    /// Its id in the exported database: candidates and cursors refer to prompts by it.
    pub id: i64,
    pub session: String,
    pub workspace: String,
    pub project: String,
    pub operator: Option<i64>,
    pub text: String,
    pub at: i64,
}

/// A profile's home: the project a profile's records belong to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileRef {
    pub workspace: String,
    pub project: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateRecord {
    pub profile: ProfileRef,
    /// `prompt:<prompt id>:<hash>` or `page:<workspace>/<project>:<path>:<hash>`.
    pub key: String,
    /// The statement as the profile crate recorded it (JSON).
    pub statement: String,
    pub workspace: String,
    pub project: String,
    pub operator: Option<i64>,
    pub at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CursorRecord {
    pub profile: ProfileRef,
    /// The last prompt (by its exported id) the profile's passes read.
    pub prompt: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgottenRecord {
    pub profile: ProfileRef,
    pub path: String,
    pub statement: String,
    pub at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackRecord {
    pub workspace: String,
    pub project: String,
    pub tag: String,
    pub first_seen: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandoffRecord {
    pub workspace: String,
    pub project: String,
    /// Whose sessions it hands off (`None`: the root's).
    pub operator: Option<i64>,
    pub session: String,
    pub harness: String,
    pub text: String,
    pub at: i64,
}

/// Everything that lives only in the database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexState {
    pub projects: Vec<ProjectRecord>,
    pub operators: Vec<OperatorRecord>,
    pub grants: Vec<GrantRecord>,
    pub sessions: Vec<SessionRecord>,
    pub prompts: Vec<PromptRecord>,
    pub candidates: Vec<CandidateRecord>,
    pub cursors: Vec<CursorRecord>,
    pub forgotten: Vec<ForgottenRecord>,
    pub stacks: Vec<StackRecord>,
    /// Each project's latest handoff (the files a running session changed are not kept: a
    /// session handed off already wrote them into its handoff).
    pub handoffs: Vec<HandoffRecord>,
}

/// What a merge did, and what it kept as it was (named, for the user).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Merged {
    pub operators: usize,
    pub grants: usize,
    pub sessions: usize,
    pub prompts: usize,
    pub candidates: usize,
    pub forgotten: usize,
    pub handoffs: usize,
    pub kept: Vec<String>,
}

impl Index {
    /// Reads every record of `IndexState` in one read transaction: one consistent state.
    pub fn export_state(&self) -> Result<IndexState, IndexError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let state = read_state(&tx)?;
        tx.commit()?;
        Ok(state)
    }

    /// The problems that would make `merge_state` refuse `state`, found without writing:
    /// operators keep their ids, so one whose id or name another operator holds here cannot be
    /// merged; a project restricted on one side and open on the other would change who reads
    /// its pages.
    pub fn merge_problems(&self, state: &IndexState) -> Result<Vec<String>, IndexError> {
        check(&self.conn(), state)
    }

    /// Merges `state` in one transaction (all or nothing): operators with their ids, projects
    /// (their opt-outs: the stricter side wins), grants (`replace`: the export's level wins),
    /// sessions, prompts (an identical one is not added twice), the profile's records (prompt
    /// and project references renumbered) and stacks. What is already here stays; what the
    /// merge kept instead of the export's is named in `Merged::kept`.
    pub fn merge_state(&self, state: &IndexState, replace: bool) -> Result<Merged, IndexError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let problems = check(&tx, state)?;
        if !problems.is_empty() {
            return Err(IndexError::Invalid(problems.join("; ")));
        }
        let merged = merge(&tx, state, replace)?;
        tx.commit()?;
        Ok(merged)
    }
}

fn collect<T>(
    conn: &Connection,
    sql: &str,
    f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, IndexError> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map([], f)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn read_state(conn: &Connection) -> Result<IndexState, IndexError> {
    let projects = collect(
        conn,
        "SELECT workspace, name, restricted, creator, contribute, consume FROM projects
         ORDER BY workspace, name",
        |r| {
            Ok(ProjectRecord {
                workspace: r.get(0)?,
                name: r.get(1)?,
                restricted: r.get(2)?,
                creator: r.get(3)?,
                contribute: r.get(4)?,
                consume: r.get(5)?,
            })
        },
    )?;
    let operators =
        collect(conn, "SELECT id, name, token_hash, created FROM users ORDER BY id", |r| {
            Ok(OperatorRecord {
                id: r.get(0)?,
                name: r.get(1)?,
                token_sha256: r.get(2)?,
                created: r.get(3)?,
            })
        })?;
    let grants = collect(
        conn,
        "SELECT g.user_id, pr.workspace, pr.name, g.level FROM grants g
         JOIN projects pr ON pr.id = g.project_id ORDER BY 1, 2, 3",
        |r| {
            Ok(GrantRecord {
                operator: r.get(0)?,
                workspace: r.get(1)?,
                project: r.get(2)?,
                level: r.get(3)?,
            })
        },
    )?;
    let sessions = collect(
        conn,
        "SELECT s.id, pr.workspace, pr.name, s.harness, s.user_id, s.started, s.ended,
                EXISTS (SELECT 1 FROM sessions_briefed b WHERE b.session_id = s.id)
         FROM sessions s JOIN projects pr ON pr.id = s.project_id ORDER BY s.started, s.id",
        |r| {
            Ok(SessionRecord {
                id: r.get(0)?,
                workspace: r.get(1)?,
                project: r.get(2)?,
                harness: r.get(3)?,
                operator: r.get(4)?,
                started: r.get(5)?,
                ended: r.get(6)?,
                briefed: r.get(7)?,
            })
        },
    )?;
    let prompts = collect(
        conn,
        "SELECT p.id, p.session_id, pr.workspace, pr.name, p.user_id, p.text, p.at
         FROM prompts p JOIN projects pr ON pr.id = p.project_id ORDER BY p.id",
        |r| {
            Ok(PromptRecord {
                id: r.get(0)?,
                session: r.get(1)?,
                workspace: r.get(2)?,
                project: r.get(3)?,
                operator: r.get(4)?,
                text: r.get(5)?,
                at: r.get(6)?,
            })
        },
    )?;
    let names: HashMap<i64, (String, String)> =
        collect(conn, "SELECT id, workspace, name FROM projects", |r| {
            Ok((r.get(0)?, (r.get(1)?, r.get(2)?)))
        })?
        .into_iter()
        .collect();
    let profile = |id: i64| -> ProfileRef {
        let (workspace, project) = names.get(&id).cloned().unwrap_or_default();
        ProfileRef { workspace, project }
    };
    let candidates = collect(
        conn,
        "SELECT c.scope_id, c.sentence, c.statement, pr.workspace, pr.name, c.user_id, c.at
         FROM profile_candidates c JOIN projects pr ON pr.id = c.project_id ORDER BY c.id",
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        },
    )?
    .into_iter()
    .map(|(scope, key, statement, workspace, project, operator, at)| CandidateRecord {
        profile: profile(scope),
        key: export_key(&key, &names),
        statement,
        workspace,
        project,
        operator,
        at,
    })
    .collect();
    let cursors =
        collect(conn, "SELECT scope_id, prompt_id FROM profile_cursors ORDER BY 1", |r| {
            Ok((r.get::<_, i64>(0)?, r.get(1)?))
        })?
        .into_iter()
        .map(|(scope, prompt)| CursorRecord { profile: profile(scope), prompt })
        .collect();
    let forgotten = collect(
        conn,
        "SELECT scope_id, path, statement, at FROM profile_forgotten ORDER BY 1, 2",
        |r| Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?
    .into_iter()
    .map(|(scope, path, statement, at)| ForgottenRecord {
        profile: profile(scope),
        path,
        statement,
        at,
    })
    .collect();
    let stacks = collect(
        conn,
        "SELECT pr.workspace, pr.name, s.tag, s.first_seen FROM project_stacks s
         JOIN projects pr ON pr.id = s.project_id ORDER BY 1, 2, 3",
        |r| {
            Ok(StackRecord {
                workspace: r.get(0)?,
                project: r.get(1)?,
                tag: r.get(2)?,
                first_seen: r.get(3)?,
            })
        },
    )?;
    let handoffs = collect(
        conn,
        "SELECT pr.workspace, pr.name, h.user_key, h.session_id, h.harness, h.text, h.at
         FROM handoffs h JOIN projects pr ON pr.id = h.project_id ORDER BY 1, 2, 3",
        |r| {
            let key: i64 = r.get(2)?;
            Ok(HandoffRecord {
                workspace: r.get(0)?,
                project: r.get(1)?,
                operator: (key != 0).then_some(key),
                session: r.get(3)?,
                harness: r.get(4)?,
                text: r.get(5)?,
                at: r.get(6)?,
            })
        },
    )?;
    Ok(IndexState {
        projects,
        operators,
        grants,
        sessions,
        prompts,
        candidates,
        cursors,
        forgotten,
        stacks,
        handoffs,
    })
}

/// `page:<project id>:<rest>` → `page:<workspace>/<project>:<rest>`: row ids mean nothing in
/// another database. Other keys are kept as they are.
fn export_key(key: &str, names: &HashMap<i64, (String, String)>) -> String {
    let Some(rest) = key.strip_prefix("page:") else { return key.to_owned() };
    let Some((id, tail)) = rest.split_once(':') else { return key.to_owned() };
    match id.parse::<i64>().ok().and_then(|id| names.get(&id)) {
        Some((ws, name)) => format!("page:{ws}/{name}:{tail}"),
        None => key.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;
    use ai_memory_core::{ProjectName, WorkspaceName};
    use merge::stricter;

    #[test]
    fn opt_outs_merge_to_the_stricter() {
        assert_eq!(stricter(None, None), None);
        assert_eq!(stricter(Some(true), None), Some(true));
        assert_eq!(stricter(Some(true), Some(false)), Some(false));
        assert_eq!(stricter(None, Some(false)), Some(false));
    }

    fn populated() -> Index {
        let index = Index::in_memory().unwrap();
        let ws = WorkspaceName::default_workspace();
        let app =
            index.ensure_project(&ws, &ProjectName::new("app").unwrap(), false, None).unwrap();
        let global = index.ensure_project(&ws, &ProjectName::global(), false, None).unwrap();
        let (alice, _) = index.add_user("alice").unwrap();
        index.grant(alice, app.id, crate::Level::Write).unwrap();
        let s = crate::SessionStart {
            id: "s1",
            harness: "codex",
            user: Some(alice),
            contribute: Some(false),
            consume: None,
        };
        index.start_session(&app, &s).unwrap();
        let text = ai_memory_core::sanitize("always use pnpm");
        index.capture_prompt(&app, "s1", Some(alice), &text, 100).unwrap();
        index.capture_prompt(&app, "s1", Some(alice), &text, 200).unwrap();
        let prompt: i64 =
            index.conn().query_row("SELECT MAX(id) FROM prompts", [], |r| r.get(0)).unwrap();
        index
            .add_candidate(&global, &format!("prompt:{prompt}:ab"), "{}", app.id, Some(alice), 200)
            .unwrap();
        index
            .add_candidate(
                &global,
                &format!("page:{}:decisions/x.md:cd", app.id),
                "{}",
                app.id,
                None,
                50,
            )
            .unwrap();
        index.set_cursor(&global, prompt).unwrap();
        index.forget(&global, "profile/tools/npm.md", "use npm", 300).unwrap();
        index.add_stacks(&app, &["rust"].into_iter().collect(), 10).unwrap();
        index
    }

    #[test]
    fn a_state_merged_into_an_empty_index_reads_back_the_same() {
        let from = populated();
        let state = from.export_state().unwrap();
        assert!(state.candidates.iter().any(|c| c.key == "page:default/app:decisions/x.md:cd"));
        let to = Index::in_memory().unwrap();
        // A project that exists first gets another row id: keys follow it.
        to.ensure_project(
            &WorkspaceName::new("other").unwrap(),
            &ProjectName::new("x").unwrap(),
            false,
            None,
        )
        .unwrap();
        let merged = to.merge_state(&state, false).unwrap();
        assert_eq!((merged.operators, merged.prompts, merged.candidates), (1, 2, 2));
        let mut again = to.export_state().unwrap();
        again.projects.retain(|p| p.workspace != "other");
        // Prompt ids are renumbered; everything else reads back as exported.
        let renumber = |s: &mut IndexState| {
            let first = s.prompts.first().map(|p| p.id).unwrap_or(0);
            for p in &mut s.prompts {
                p.id -= first;
            }
            for c in &mut s.cursors {
                c.prompt -= first;
            }
            for c in &mut s.candidates {
                if let Some(rest) = c.key.strip_prefix("prompt:") {
                    let (id, tail) = rest.split_once(':').unwrap();
                    c.key = format!("prompt:{}:{tail}", id.parse::<i64>().unwrap() - first);
                }
            }
        };
        let mut state = state;
        renumber(&mut state);
        renumber(&mut again);
        assert_eq!(again, state);
        // A second merge adds nothing.
        let twice = to.merge_state(&to.export_state().unwrap(), false).unwrap();
        assert_eq!((twice.operators, twice.prompts, twice.candidates, twice.grants), (0, 0, 0, 0));
    }

    #[test]
    fn an_operator_whose_id_is_taken_is_refused_before_anything_is_written() {
        let state = populated().export_state().unwrap();
        let to = Index::in_memory().unwrap();
        to.add_user("bob").unwrap();
        let problems = to.merge_problems(&state).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("operator `alice` (id 1)") && problems[0].contains("`bob`"));
        assert!(to.merge_state(&state, false).is_err());
        assert_eq!(to.users().unwrap().len(), 1);
        assert_eq!(to.export_state().unwrap().prompts.len(), 0);
    }
}
