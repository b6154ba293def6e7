//! Merging an exported state into this database: the conflicts that refuse it, then every
//! record, renumbered to this database's rows.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ai_memory_core::{ProjectName, WorkspaceName};
use rusqlite::{Connection, OptionalExtension, params};

use super::{IndexState, Merged, PromptRecord};
use crate::access::ensure_project_in;
use crate::handoffs::{put_in, user_key};
use crate::{HandoffRow, IndexError};

pub(super) fn check(conn: &Connection, state: &IndexState) -> Result<Vec<String>, IndexError> {
    let mut problems = Vec::new();
    for op in &state.operators {
        let by_id: Option<(String, String)> = conn
            .query_row("SELECT name, token_hash FROM users WHERE id = ?1", [op.id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        let by_name: Option<i64> = conn
            .query_row("SELECT id FROM users WHERE name = ?1", [&op.name], |r| r.get(0))
            .optional()?;
        let same = by_id.as_ref().is_some_and(|(n, h)| *n == op.name && *h == op.token_sha256);
        if same {
            continue;
        }
        if let Some((name, _)) = by_id {
            problems.push(format!(
                "operator `{}` (id {}): this data directory has operator `{name}` as id {} (operators keep their ids: a private profile is named by it)",
                op.name, op.id, op.id
            ));
        } else if let Some(id) = by_name {
            problems.push(format!(
                "operator `{}` (id {}): this data directory has an operator of that name as id {id}",
                op.name, op.id
            ));
        }
    }
    let known: BTreeSet<i64> = state.operators.iter().map(|o| o.id).collect();
    // An operator a record names is in the export or already here.
    let unknown = |id: i64| -> Result<bool, IndexError> {
        let here: bool =
            conn.query_row("SELECT EXISTS (SELECT 1 FROM users WHERE id = ?1)", [id], |r| {
                r.get(0)
            })?;
        Ok(!known.contains(&id) && !here)
    };
    for g in &state.grants {
        if unknown(g.operator)? {
            problems.push(format!(
                "grant on {}/{}: operator id {} is neither in the export nor here",
                g.workspace, g.project, g.operator
            ));
        }
    }
    for h in &state.handoffs {
        let Some(op) = h.operator else { continue };
        if unknown(op)? {
            problems.push(format!(
                "handoff of {}/{}: operator id {op} is neither in the export nor here",
                h.workspace, h.project
            ));
        }
    }
    for p in &state.projects {
        let here: Option<bool> = conn
            .query_row(
                "SELECT restricted FROM projects WHERE workspace = ?1 AND name = ?2",
                params![p.workspace, p.name],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(restricted) = here
            && restricted != p.restricted
        {
            let mode = |r: bool| if r { "restricted" } else { "open" };
            problems.push(format!(
                "project {}/{} is {} in the export and {} here (its access mode is fixed)",
                p.workspace,
                p.name,
                mode(p.restricted),
                mode(restricted)
            ));
        }
    }
    Ok(problems)
}

/// The stricter of two recorded opt-outs: `false` (opted out) wins, then `true`, then unset.
pub(super) fn stricter(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), _) | (_, Some(true)) => Some(true),
        _ => None,
    }
}

struct Projects<'c> {
    conn: &'c Connection,
    ids: BTreeMap<(String, String), i64>,
    settings: HashMap<(String, String), (bool, Option<i64>)>,
}

impl Projects<'_> {
    /// The row id here of a project the records name, made (with the export's access mode)
    /// when absent.
    fn id(&mut self, ws: &str, name: &str) -> Result<i64, IndexError> {
        let key = (ws.to_owned(), name.to_owned());
        if let Some(id) = self.ids.get(&key) {
            return Ok(*id);
        }
        let (restricted, creator) = self.settings.get(&key).copied().unwrap_or_else(|| {
            (ProjectName::new(name).is_ok_and(|p| p.is_private_profile()), None)
        });
        let row = ensure_project_in(
            self.conn,
            &WorkspaceName::new(ws).map_err(|e| IndexError::Invalid(e.to_string()))?,
            &ProjectName::new(name).map_err(|e| IndexError::Invalid(e.to_string()))?,
            restricted,
            creator,
        )?;
        self.ids.insert(key, row.id);
        Ok(row.id)
    }
}

pub(super) fn merge(
    conn: &Connection,
    state: &IndexState,
    replace: bool,
) -> Result<Merged, IndexError> {
    let mut out = Merged::default();
    for op in &state.operators {
        let n = conn.execute(
            "INSERT INTO users (id, name, token_hash, created) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT DO NOTHING",
            params![op.id, op.name, op.token_sha256, op.created],
        )?;
        out.operators += n;
    }
    let mut projects = Projects {
        conn,
        ids: BTreeMap::new(),
        settings: state
            .projects
            .iter()
            .map(|p| ((p.workspace.clone(), p.name.clone()), (p.restricted, p.creator)))
            .collect(),
    };
    for p in &state.projects {
        let id = projects.id(&p.workspace, &p.name)?;
        let (contribute, consume): (Option<bool>, Option<bool>) =
            conn.query_row("SELECT contribute, consume FROM projects WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        conn.execute(
            "UPDATE projects SET contribute = ?1, consume = ?2 WHERE id = ?3",
            params![stricter(contribute, p.contribute), stricter(consume, p.consume), id],
        )?;
    }
    for g in &state.grants {
        let project = projects.id(&g.workspace, &g.project)?;
        crate::Level::parse(&g.level)?;
        let here: Option<String> = conn
            .query_row(
                "SELECT level FROM grants WHERE user_id = ?1 AND project_id = ?2",
                params![g.operator, project],
                |r| r.get(0),
            )
            .optional()?;
        match here {
            None => {
                conn.execute(
                    "INSERT INTO grants (user_id, project_id, level) VALUES (?1, ?2, ?3)",
                    params![g.operator, project, g.level],
                )?;
                out.grants += 1;
            }
            Some(level) if level == g.level => {}
            Some(level) if replace => {
                conn.execute(
                    "UPDATE grants SET level = ?1 WHERE user_id = ?2 AND project_id = ?3",
                    params![g.level, g.operator, project],
                )?;
                out.grants += 1;
                out.kept.push(format!(
                    "grant of operator {} on {}/{}: {level} replaced by the export's {}",
                    g.operator, g.workspace, g.project, g.level
                ));
            }
            Some(level) => out.kept.push(format!(
                "grant of operator {} on {}/{}: kept {level} (the export says {})",
                g.operator, g.workspace, g.project, g.level
            )),
        }
    }
    for s in &state.sessions {
        let project = projects.id(&s.workspace, &s.project)?;
        let owner: Option<(i64, Option<i64>)> = conn
            .query_row("SELECT project_id, user_id FROM sessions WHERE id = ?1", [&s.id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        match owner {
            None => {
                conn.execute(
                    "INSERT INTO sessions (id, project_id, harness, user_id, started, ended)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![s.id, project, s.harness, s.operator, s.started, s.ended],
                )?;
                out.sessions += 1;
            }
            Some(owner) if owner == (project, s.operator) => {}
            Some(_) => out.kept.push(format!(
                "session `{}`: kept this data directory's (it belongs to another project or operator here)",
                s.id
            )),
        }
        if s.briefed {
            conn.execute(
                "INSERT INTO sessions_briefed (session_id) VALUES (?1) ON CONFLICT DO NOTHING",
                [&s.id],
            )?;
        }
    }
    // Prompts in their exported order, so their new ids keep it (cursors rely on that).
    let mut prompt_ids: BTreeMap<i64, i64> = BTreeMap::new();
    let mut prompts: Vec<&PromptRecord> = state.prompts.iter().collect();
    prompts.sort_by_key(|p| p.id);
    for p in prompts {
        let project = projects.id(&p.workspace, &p.project)?;
        let same: Option<i64> = conn
            .query_row(
                "SELECT id FROM prompts WHERE session_id = ?1 AND project_id = ?2
                 AND user_id IS ?3 AND text = ?4 AND at = ?5",
                params![p.session, project, p.operator, p.text, p.at],
                |r| r.get(0),
            )
            .optional()?;
        let id = match same {
            Some(id) => id,
            None => {
                conn.execute(
                    "INSERT INTO prompts (session_id, project_id, user_id, text, at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![p.session, project, p.operator, p.text, p.at],
                )?;
                out.prompts += 1;
                conn.last_insert_rowid()
            }
        };
        prompt_ids.insert(p.id, id);
    }
    for c in &state.candidates {
        let scope = projects.id(&c.profile.workspace, &c.profile.project)?;
        let project = projects.id(&c.workspace, &c.project)?;
        let Some(key) = import_key(&c.key, &prompt_ids, &mut projects)? else {
            out.kept
                .push(format!("candidate `{}`: its prompt is not in the export; left out", c.key));
            continue;
        };
        out.candidates += conn.execute(
            "INSERT INTO profile_candidates (scope_id, sentence, statement, project_id, user_id, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (scope_id, sentence) DO NOTHING",
            params![scope, key, c.statement, project, c.operator, c.at],
        )?;
    }
    for c in &state.cursors {
        let scope = projects.id(&c.profile.workspace, &c.profile.project)?;
        // The last prompt read, renumbered: the newest imported prompt at or before it. A
        // profile that has a cursor here keeps it (its passes re-read the imported prompts;
        // their candidates are already recorded under the same keys).
        let Some((_, id)) = prompt_ids.range(..=c.prompt).next_back() else { continue };
        conn.execute(
            "INSERT INTO profile_cursors (scope_id, prompt_id) VALUES (?1, ?2)
             ON CONFLICT (scope_id) DO NOTHING",
            params![scope, id],
        )?;
    }
    for f in &state.forgotten {
        let scope = projects.id(&f.profile.workspace, &f.profile.project)?;
        // Forgotten on both sides: the later one holds (the entry stays out longer).
        out.forgotten += conn.execute(
            "INSERT INTO profile_forgotten (scope_id, path, statement, at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (scope_id, path) DO UPDATE SET statement = excluded.statement,
                at = excluded.at WHERE excluded.at > profile_forgotten.at",
            params![scope, f.path, f.statement, f.at],
        )?;
    }
    for s in &state.stacks {
        let project = projects.id(&s.workspace, &s.project)?;
        conn.execute(
            "INSERT INTO project_stacks (project_id, tag, first_seen) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
            params![project, s.tag, s.first_seen],
        )?;
    }
    for h in &state.handoffs {
        let project = projects.id(&h.workspace, &h.project)?;
        let row = HandoffRow {
            session: h.session.clone(),
            harness: h.harness.clone(),
            text: h.text.clone(),
            at: h.at,
        };
        out.handoffs += put_in(conn, project, user_key(h.operator), &row, false)?;
    }
    Ok(out)
}

/// An exported candidate key with this database's ids: `prompt:<exported id>:…` renumbered
/// (`None`: the prompt is not in the export), `page:<workspace>/<project>:…` given the
/// project's row id.
fn import_key(
    key: &str,
    prompt_ids: &BTreeMap<i64, i64>,
    projects: &mut Projects<'_>,
) -> Result<Option<String>, IndexError> {
    let bad = || IndexError::Invalid(format!("candidate key `{key}` is not one ai-memory writes"));
    if let Some(rest) = key.strip_prefix("prompt:") {
        let (id, tail) = rest.split_once(':').ok_or_else(bad)?;
        let id: i64 = id.parse().map_err(|_| bad())?;
        return Ok(prompt_ids.get(&id).map(|new| format!("prompt:{new}:{tail}")));
    }
    if let Some(rest) = key.strip_prefix("page:") {
        let (project, tail) = rest.split_once(':').ok_or_else(bad)?;
        let (ws, name) = project.split_once('/').ok_or_else(bad)?;
        let id = projects.id(ws, name)?;
        return Ok(Some(format!("page:{id}:{tail}")));
    }
    Err(bad())
}
