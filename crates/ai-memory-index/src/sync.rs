//! The page tables follow the wiki: `sync` brings them to the branch's tip from the commit they
//! were last brought to (recorded in `wiki_sync`), `rebuild` makes them again from the whole
//! wiki.
//!
//! Every write commits to git first and then syncs, so a process killed between the two leaves
//! git ahead of the index, never behind; the next sync (at startup, after any write, or the
//! watcher's) applies exactly the paths that changed since the recorded commit. A sync reads
//! pages at the commit it records, inside one `IMMEDIATE` transaction: concurrent syncs (threads
//! or processes) take turns, and the last one always reads a tip at least as new as every write
//! that finished before it, whatever order the writers reach the index in.

use ai_memory_core::{ProjectName, WorkspaceName};
use ai_memory_store::{Location, ProjectMeta, StoreError, Wiki, WikiChange};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::access::{ensure_project_in, project_row};
use crate::pages::{delete_page_in, upsert_page_in};
use crate::{Index, IndexError, ProjectRow};

/// What a sync changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Synced {
    /// Pages indexed again or taken out.
    pub pages: usize,
    /// Stored files that do not parse: out of the index, left in the wiki, named.
    pub broken: Vec<String>,
    /// The page tables were made again from the whole wiki (no usable recorded commit).
    pub rebuilt: bool,
}

/// How many times a rebuild reads the wiki again when the branch moved while it read.
const REBUILD_READS: usize = 5;

impl Index {
    /// Brings the page tables to the wiki's tip: the paths changed since the recorded commit,
    /// or everything when there is none (a new index, another wiki).
    pub fn sync(&self, wiki: &Wiki) -> Result<Synced, IndexError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let recorded = recorded_tip(&tx)?;
        let tip = wiki.head()?;
        if recorded == tip {
            return Ok(Synced::default());
        }
        let changes = match (&recorded, &tip) {
            (Some(from), Some(to)) => wiki.changes(Some(from), to)?,
            _ => None,
        };
        let (Some(changes), Some(tip)) = (changes, tip) else {
            let (pages, broken) = rebuild_in(&tx, wiki)?;
            tx.commit()?;
            return Ok(Synced { pages, broken, rebuilt: true });
        };
        let mut synced = Synced::default();
        for change in changes {
            match change {
                WikiChange::Project(ws, project) => {
                    if let Some(meta) = wiki.project_meta_at(&ws, &project, &tip)? {
                        apply_meta(&tx, &ws, &project, &meta)?;
                    }
                }
                WikiChange::Page(at) => {
                    synced.pages += 1;
                    match wiki.read_at(&at, &tip) {
                        Ok(Some(stored)) => {
                            let row = project_of(&tx, wiki, &at, &tip)?;
                            upsert_page_in(&tx, &row, &stored)?;
                        }
                        Ok(None) => remove(&tx, &at)?,
                        Err(e @ StoreError::Page { .. }) => {
                            remove(&tx, &at)?;
                            synced.broken.push(e.to_string());
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        record_tip(&tx, Some(&tip))?;
        tx.commit()?;
        Ok(synced)
    }

    /// Makes the page tables again from the wiki alone: every project with settings or pages,
    /// every page that parses. Operators, grants, sessions and prompts stay. Returns the pages
    /// indexed and the stored files that do not parse (named, left in the wiki).
    pub fn rebuild(&self, wiki: &Wiki) -> Result<(usize, Vec<String>), IndexError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = rebuild_in(&tx, wiki)?;
        tx.commit()?;
        Ok(out)
    }

    /// The wiki commit the page tables were last brought to.
    pub fn synced_tip(&self) -> Result<Option<String>, IndexError> {
        recorded_tip(&self.conn())
    }
}

fn recorded_tip(conn: &Connection) -> Result<Option<String>, IndexError> {
    Ok(conn.query_row("SELECT tip FROM wiki_sync WHERE id = 1", [], |r| r.get(0)).optional()?)
}

fn record_tip(conn: &Connection, tip: Option<&str>) -> Result<(), IndexError> {
    match tip {
        Some(tip) => conn.execute(
            "INSERT INTO wiki_sync (id, tip) VALUES (1, ?1)
             ON CONFLICT (id) DO UPDATE SET tip = excluded.tip",
            [tip],
        )?,
        None => conn.execute("DELETE FROM wiki_sync", [])?,
    };
    Ok(())
}

fn rebuild_in(conn: &Connection, wiki: &Wiki) -> Result<(usize, Vec<String>), IndexError> {
    // Read until the branch stands still across the read, so the tip recorded is the one the
    // pages were read at; a wiki that keeps moving records none and the next sync reads it all.
    let mut read = None;
    for _ in 0..REBUILD_READS {
        let before = wiki.head()?;
        let metas = wiki.project_metas()?;
        let pages = wiki.pages()?;
        let still = wiki.head()? == before;
        read = Some((before.filter(|_| still), metas, pages));
        if still {
            break;
        }
    }
    let Some((tip, metas, pages)) = read else { return Ok((0, Vec::new())) };
    conn.execute("DELETE FROM pages", [])?;
    // Change numbers start over with the pages.
    conn.execute("DELETE FROM profile_page_cursors", [])?;
    conn.execute("INSERT INTO pages_fts (pages_fts) VALUES ('rebuild')", [])?;
    for (ws, project, meta) in &metas {
        apply_meta(conn, ws, project, meta)?;
    }
    let (mut n, mut broken) = (0, Vec::new());
    for (location, stored) in pages {
        match stored {
            Ok(stored) => {
                let project = ensure_project_in(
                    conn,
                    &location.workspace,
                    &location.project,
                    location.project.is_private_profile(),
                    None,
                )?;
                upsert_page_in(conn, &project, &stored)?;
                n += 1;
            }
            Err(e) => broken.push(e.to_string()),
        }
    }
    record_tip(conn, tip.as_deref())?;
    Ok((n, broken))
}

/// A project's settings from the wiki: the wiki is the truth for its access mode.
fn apply_meta(
    conn: &Connection,
    ws: &WorkspaceName,
    project: &ProjectName,
    meta: &ProjectMeta,
) -> Result<(), IndexError> {
    ensure_project_in(conn, ws, project, meta.restricted, meta.creator)?;
    conn.execute(
        "UPDATE projects SET restricted = ?1, creator = ?2 WHERE workspace = ?3 AND name = ?4",
        params![meta.restricted, meta.creator, ws.as_str(), project.as_str()],
    )?;
    Ok(())
}

/// The row of a page's project, made from its settings at `tip` when the index has none yet.
fn project_of(
    conn: &Connection,
    wiki: &Wiki,
    at: &Location,
    tip: &str,
) -> Result<ProjectRow, IndexError> {
    if let Some(row) = project_row(conn, at.workspace.as_str(), at.project.as_str())? {
        return Ok(row);
    }
    let meta = wiki.project_meta_at(&at.workspace, &at.project, tip)?.unwrap_or_default();
    let restricted = meta.restricted || at.project.is_private_profile();
    ensure_project_in(conn, &at.workspace, &at.project, restricted, meta.creator)
}

fn remove(conn: &Connection, at: &Location) -> Result<(), IndexError> {
    if let Some(row) = project_row(conn, at.workspace.as_str(), at.project.as_str())? {
        delete_page_in(conn, &row, &at.path)?;
    }
    Ok(())
}
