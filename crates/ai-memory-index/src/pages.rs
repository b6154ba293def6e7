//! Pages in the index, and `memory_query`: FTS5 with bm25 ranking, readable projects only.

use ai_memory_core::{DEFAULT_WORKSPACE, GLOBAL_PROJECT, PagePath};
use ai_memory_store::Stored;
use rusqlite::{named_params, params};
use serde::Serialize;

use crate::access::READABLE;
use crate::vectors::Near;
use crate::{Index, IndexError, Principal, ProjectRow};

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub workspace: String,
    pub project: String,
    pub path: String,
    pub title: String,
    pub summary: Option<String>,
    /// Matching words in context, `[`…`]` around each match.
    pub snippet: String,
    /// bm25 (lower is better).
    pub score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryResult {
    /// Pages of the caller's project.
    pub hits: Vec<Hit>,
    /// Pages of the global scope (`default/_global`, the profile included).
    pub global_scope_hits: Vec<Hit>,
}

/// A page's row, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRow {
    pub path: String,
    pub title: String,
    pub summary: Option<String>,
}

/// Turns what a person typed into an FTS5 query: each word quoted (so `what is pnpm?` is not
/// FTS5 syntax), any word may match, bm25 ranks pages matching more of them first. Function
/// words (`STOP_WORDS`) are left out unless nothing else is left, and a repeated word counts
/// once: a word found in almost every page adds next to nothing to bm25, yet its posting list
/// is the longest to read (on LoCoMo at 10k pages, about half of a question's time).
fn fts_query(text: &str) -> Option<String> {
    let all: Vec<&str> =
        text.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty()).collect();
    let content: Vec<&str> = all.iter().copied().filter(|w| !is_stop_word(w)).collect();
    let mut seen = std::collections::HashSet::new();
    let words: Vec<String> = (if content.is_empty() { all } else { content })
        .into_iter()
        .filter(|w| seen.insert(w.to_lowercase()))
        .take(32)
        .map(|w| format!("\"{w}\""))
        .collect();
    (!words.is_empty()).then(|| words.join(" OR "))
}

/// English and Portuguese function words: questions, pronouns, articles, auxiliaries,
/// prepositions. Lowercase, sorted (binary search).
const STOP_WORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "any", "ao", "aos", "are", "as", "at", "be", "been", "but",
    "by", "can", "com", "como", "could", "da", "das", "de", "did", "do", "does", "dos", "e", "ela",
    "ele", "em", "eu", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i",
    "if", "in", "into", "is", "it", "its", "me", "my", "na", "nas", "no", "nos", "o", "of", "on",
    "or", "os", "ou", "our", "para", "pela", "pelo", "por", "qual", "que", "quem", "she", "so",
    "some", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this",
    "those", "to", "um", "uma", "us", "was", "we", "were", "what", "when", "where", "which", "who",
    "whom", "whose", "why", "will", "with", "would", "you", "your", "é",
];

fn is_stop_word(word: &str) -> bool {
    word.len() <= 5 && STOP_WORDS.binary_search(&word.to_lowercase().as_str()).is_ok()
}

impl Index {
    pub fn upsert_page(&self, project: &ProjectRow, stored: &Stored) -> Result<(), IndexError> {
        upsert_page_in(&self.conn(), project, stored)
    }

    pub fn delete_page(&self, project: &ProjectRow, path: &PagePath) -> Result<bool, IndexError> {
        delete_page_in(&self.conn(), project, path)
    }

    /// Pages of a project, in path order (the caller has checked it may read the project).
    pub fn pages_of(&self, project: &ProjectRow, prefix: &str) -> Result<Vec<PageRow>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT path, title, summary FROM pages WHERE project_id = ?1 AND substr(path, 1, length(?2)) = ?2
             ORDER BY path",
        )?;
        let rows = stmt.query_map(params![project.id, prefix], |r| {
            Ok(PageRow { path: r.get(0)?, title: r.get(1)?, summary: r.get(2)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Pages of `workspace`/`project` and of the global scope matching `text`, best first, at
    /// most `limit` of each; only projects `who` may read take part.
    pub fn query(
        &self,
        who: Principal,
        workspace: &str,
        project: &str,
        text: &str,
        near: Option<&Near<'_>>,
        limit: usize,
    ) -> Result<QueryResult, IndexError> {
        let hits = self.query_project(who, workspace, project, text, near, limit)?;
        let global_scope_hits = if (workspace, project) == (DEFAULT_WORKSPACE, GLOBAL_PROJECT) {
            Vec::new()
        } else {
            self.query_project(who, DEFAULT_WORKSPACE, GLOBAL_PROJECT, text, near, limit)?
        };
        Ok(QueryResult { hits, global_scope_hits })
    }

    /// Pages of one project matching `text`, best first, at most `limit` (1 to 100); only a
    /// project `who` may read answers. With `near` (the query's embedding, asked for once the
    /// words are searched), bm25's ranking is fused with the embeddings' (`vectors`); a page
    /// not embedded yet is found by its words.
    pub fn query_project(
        &self,
        who: Principal,
        workspace: &str,
        project: &str,
        text: &str,
        near: Option<&Near<'_>>,
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        let limit = limit.clamp(1, 100);
        let words = fts_query(text);
        let no_words = || IndexError::Invalid("the query has no words".into());
        let Some(near) = near else {
            let hits =
                self.search(who, &words.ok_or_else(no_words)?, workspace, project, limit as i64)?;
            return Ok(hits.into_iter().map(|(_, h)| h).collect());
        };
        let by_words = match &words {
            Some(q) => {
                let n = crate::vectors::FUSION_CANDIDATES.max(limit) as i64;
                self.search(who, q, workspace, project, n)?
            }
            None => Vec::new(),
        };
        match near.get() {
            Some(vector) => self.fuse(who, workspace, project, by_words, vector, limit),
            // The embedding failed after all: the words' ranking alone.
            None if words.is_some() => {
                Ok(by_words.into_iter().take(limit).map(|(_, h)| h).collect())
            }
            None => Err(no_words()),
        }
    }

    fn search(
        &self,
        who: Principal,
        q: &str,
        ws: &str,
        project: &str,
        limit: i64,
    ) -> Result<Vec<(i64, Hit)>, IndexError> {
        let (root, user) = Index::bind_principal(who);
        let Some(project_id) = self.project_id(ws, project)? else { return Ok(Vec::new()) };
        // The project's pages only, inside FTS5: `project_key` is an indexed column.
        let q = format!("project_key : p{project_id} AND {{title path body}} : ({q})");
        let sql = format!(
            "SELECT pr.workspace, pr.name, p.path, p.title, p.summary,
                    snippet(pages_fts, 2, '[', ']', '…', 12), bm25(pages_fts, 4.0, 2.0, 1.0, 0.0) AS score, p.id
             FROM pages_fts
             JOIN pages p ON p.id = pages_fts.rowid
             JOIN projects pr ON pr.id = p.project_id
             WHERE pages_fts MATCH :q AND pr.workspace = :ws AND pr.name = :project AND {READABLE}
             ORDER BY score LIMIT :limit"
        );
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            named_params! { ":q": &q, ":ws": ws, ":project": project, ":root": root, ":user": user, ":limit": limit },
            |r| {
                let hit = Hit {
                    workspace: r.get(0)?,
                    project: r.get(1)?,
                    path: r.get(2)?,
                    title: r.get(3)?,
                    summary: r.get(4)?,
                    snippet: r.get(5)?,
                    score: r.get(6)?,
                };
                Ok((r.get(7)?, hit))
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn project_id(&self, ws: &str, project: &str) -> Result<Option<i64>, IndexError> {
        use rusqlite::OptionalExtension;
        Ok(self
            .conn()
            .query_row(
                "SELECT id FROM projects WHERE workspace = ?1 AND name = ?2",
                params![ws, project],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Every page whose frontmatter sets `applies_to` or `enforced_by`, in order: what
    /// `profile review` checks (a hand edit may have put them where a write would refuse them).
    pub fn pages_with_entry_keys(&self) -> Result<Vec<EntryKeys>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT pr.workspace, pr.name, p.path, json_extract(p.frontmatter, '$.applies_to'),
                    json_extract(p.frontmatter, '$.enforced_by')
             FROM pages p JOIN projects pr ON pr.id = p.project_id
             WHERE json_extract(p.frontmatter, '$.applies_to') IS NOT NULL
                OR json_extract(p.frontmatter, '$.enforced_by') IS NOT NULL
             ORDER BY 1, 2, 3",
        )?;
        let rows = stmt.query_map([], |r| {
            let tags: Option<String> = r.get(3)?;
            Ok(EntryKeys {
                workspace: r.get(0)?,
                project: r.get(1)?,
                path: r.get(2)?,
                applies_to: tags.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default(),
                enforced_by: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every page row with its project, in order: what two indexes of one wiki must share.
    pub fn dump(&self) -> Result<Vec<DumpRow>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT pr.workspace, pr.name, p.path, p.title, p.summary, p.frontmatter, p.body
             FROM pages p JOIN projects pr ON pr.id = p.project_id ORDER BY 1, 2, 3",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(DumpRow {
                workspace: r.get(0)?,
                project: r.get(1)?,
                path: r.get(2)?,
                title: r.get(3)?,
                summary: r.get(4)?,
                frontmatter: r.get(5)?,
                body: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// `Index::upsert_page` on a connection the caller holds (inside its transaction).
pub(crate) fn upsert_page_in(
    conn: &rusqlite::Connection,
    project: &ProjectRow,
    stored: &Stored,
) -> Result<(), IndexError> {
    let fallback = stored
        .location
        .path
        .as_str()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .trim_end_matches(".md");
    let frontmatter =
        serde_json::to_string(&stored.page.frontmatter).unwrap_or_else(|_| "{}".into());
    conn.execute(
            "INSERT INTO pages (project_id, path, project_key, title, summary, frontmatter, body, seq)
             VALUES (?1, ?2, 'p' || ?1, ?3, ?4, ?5, ?6, (SELECT COALESCE(MAX(seq), 0) + 1 FROM pages))
             ON CONFLICT (project_id, path) DO UPDATE SET title = excluded.title,
                summary = excluded.summary, frontmatter = excluded.frontmatter, body = excluded.body,
                seq = excluded.seq",
            params![
                project.id,
                stored.location.path.as_str(),
                stored.page.title(fallback),
                stored.page.summary(),
                frontmatter,
                stored.page.body,
            ],
        )?;
    let id: i64 = conn.query_row(
        "SELECT id FROM pages WHERE project_id = ?1 AND path = ?2",
        params![project.id, stored.location.path.as_str()],
        |r| r.get(0),
    )?;
    crate::links::set_links_in(conn, project, id, &stored.location.path, &stored.page)
}

pub(crate) fn delete_page_in(
    conn: &rusqlite::Connection,
    project: &ProjectRow,
    path: &PagePath,
) -> Result<bool, IndexError> {
    let n = conn.execute(
        "DELETE FROM pages WHERE project_id = ?1 AND path = ?2",
        params![project.id, path.as_str()],
    )?;
    Ok(n > 0)
}

/// A page's `applies_to` / `enforced_by`, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryKeys {
    pub workspace: String,
    pub project: String,
    pub path: String,
    pub applies_to: Vec<String>,
    pub enforced_by: Option<String>,
}

/// A page as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpRow {
    pub workspace: String,
    pub project: String,
    pub path: String,
    pub title: String,
    pub summary: Option<String>,
    pub frontmatter: String,
    pub body: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_text_becomes_quoted_words() {
        assert_eq!(fts_query("pnpm workspaces?").as_deref(), Some("\"pnpm\" OR \"workspaces\""));
        assert_eq!(fts_query("  ?!  "), None);
        assert_eq!(fts_query("NEAR(x y)").as_deref(), Some("\"NEAR\" OR \"x\" OR \"y\""));
    }

    #[test]
    fn function_words_are_left_out_unless_nothing_else_is_left() {
        assert_eq!(fts_query("what is pnpm?").as_deref(), Some("\"pnpm\""));
        assert_eq!(
            fts_query("When did Caroline go to the LGBTQ support group?").as_deref(),
            Some("\"Caroline\" OR \"go\" OR \"LGBTQ\" OR \"support\" OR \"group\"")
        );
        assert_eq!(
            fts_query("Qual é o gerenciador de pacotes?").as_deref(),
            Some("\"gerenciador\" OR \"pacotes\"")
        );
        assert_eq!(fts_query("who is it").as_deref(), Some("\"who\" OR \"is\" OR \"it\""));
    }

    #[test]
    fn a_repeated_word_counts_once() {
        assert_eq!(fts_query("queue Queue queues").as_deref(), Some("\"queue\" OR \"queues\""));
    }

    #[test]
    fn stop_words_are_sorted_lowercase() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
        assert!(STOP_WORDS.iter().all(|w| *w == w.to_lowercase() && w.len() <= 5));
    }
}
