//! The SQLite index of the wiki: projects and their access, pages with full-text search
//! (FTS5, bm25), operators and grants, sessions and captured prompts.
//!
//! The wiki (git) is the truth for pages and project settings; `rebuild` makes the page
//! tables again from it alone. Operators, grants, sessions and prompts live only here.

mod access;
mod events;
mod handoffs;
mod links;
mod pages;
mod profile;
mod sync;
mod transfer;
mod vectors;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

pub use access::{Level, Principal, ProjectRow};
pub use events::{PromptRow, SessionStart};
pub use handoffs::{HandoffRow, OpenSession};
pub use links::{Backlink, Brief, LinkOut, MAX_BACKLINKS_LISTED};
pub use pages::{DumpRow, EntryKeys, Hit, PageRow, QueryResult};
pub use profile::{CandidateRow, SourcePage, SourcePrompt, Sources};
pub use sync::Synced;
pub use transfer::{
    CandidateRecord, CursorRecord, ForgottenRecord, GrantRecord, HandoffRecord, IndexState, Merged,
    OperatorRecord, ProfileRef, ProjectRecord, PromptRecord, SessionRecord, StackRecord,
};
pub use vectors::{
    EmbeddingState, FUSION_CANDIDATES, MIN_SIMILARITY, Near, PendingPage, VECTOR_CACHE_FLOATS,
    WORDS_WEIGHT, embedding_hash,
};

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index database: {0}")]
    Sql(rusqlite::Error),
    #[error("not allowed: {0}")]
    Denied(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("cannot make a token: {0}")]
    Random(std::io::Error),
    #[error(transparent)]
    Store(#[from] ai_memory_store::StoreError),
}

// By hand, not `#[from]`: the message holds the cause, so it is not a `source` too (a printed
// chain would say it twice; ARCHITECTURE.md, errors).
impl From<rusqlite::Error> for IndexError {
    fn from(e: rusqlite::Error) -> Self {
        IndexError::Sql(e)
    }
}

const SCHEMA: &str = r#"
PRAGMA journal_mode = WAL;
PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS projects (
    id INTEGER PRIMARY KEY,
    workspace TEXT NOT NULL,
    name TEXT NOT NULL,
    restricted INTEGER NOT NULL DEFAULT 0,
    creator INTEGER,
    contribute INTEGER,
    consume INTEGER,
    UNIQUE (workspace, name)
);
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    token_hash TEXT NOT NULL UNIQUE,
    created INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS grants (
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    level TEXT NOT NULL CHECK (level IN ('read', 'write')),
    PRIMARY KEY (user_id, project_id)
);
CREATE TABLE IF NOT EXISTS pages (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    -- `p<project id>`, indexed by FTS5 so a search intersects with the project's pages
    -- instead of ranking every match of the whole wiki and filtering afterwards.
    project_key TEXT NOT NULL,
    title TEXT NOT NULL,
    summary TEXT,
    frontmatter TEXT NOT NULL,
    body TEXT NOT NULL,
    -- Bumped on every write: the profile's harvest reads only pages changed since its last
    -- pass.
    seq INTEGER NOT NULL DEFAULT 0,
    UNIQUE (project_id, path)
);
CREATE INDEX IF NOT EXISTS pages_seq ON pages (seq);
CREATE VIRTUAL TABLE IF NOT EXISTS pages_fts USING fts5(
    title, path, body, project_key, content = 'pages', content_rowid = 'id',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS pages_ai AFTER INSERT ON pages BEGIN
    INSERT INTO pages_fts (rowid, title, path, body, project_key)
        VALUES (new.id, new.title, new.path, new.body, new.project_key);
END;
CREATE TRIGGER IF NOT EXISTS pages_ad AFTER DELETE ON pages BEGIN
    INSERT INTO pages_fts (pages_fts, rowid, title, path, body, project_key)
        VALUES ('delete', old.id, old.title, old.path, old.body, old.project_key);
END;
CREATE TRIGGER IF NOT EXISTS pages_au AFTER UPDATE ON pages BEGIN
    INSERT INTO pages_fts (pages_fts, rowid, title, path, body, project_key)
        VALUES ('delete', old.id, old.title, old.path, old.body, old.project_key);
    INSERT INTO pages_fts (rowid, title, path, body, project_key)
        VALUES (new.id, new.title, new.path, new.body, new.project_key);
END;
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    harness TEXT NOT NULL,
    user_id INTEGER,
    started INTEGER NOT NULL,
    ended INTEGER
);
-- Sessions whose context went out with their first prompt (Kimi Code, whose prompt hook
-- output reaches the model on every prompt): the context goes once a session.
CREATE TABLE IF NOT EXISTS sessions_briefed (
    session_id TEXT PRIMARY KEY
);
-- The wiki commit the page tables were last brought to (`Index::sync`).
CREATE TABLE IF NOT EXISTS wiki_sync (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    tip TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS prompts (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id INTEGER,
    text TEXT NOT NULL,
    at INTEGER NOT NULL
);
"#;

/// Bumped when the page tables change shape: an index of another version has its page tables
/// made again (from the wiki, by the caller: see `Index::needs_rebuild`).
const SCHEMA_VERSION: i64 = 3;

/// The index database. One connection behind a lock: SQLite serializes writers anyway, and a
/// query over 10k pages takes a few milliseconds.
#[derive(Debug)]
pub struct Index {
    conn: Mutex<Connection>,
    /// Window vectors read once, by hash (`vectors`).
    vectors: Mutex<vectors::VectorCache>,
    /// The page tables were made empty on open (a new database, or another version's).
    fresh: bool,
}

impl Index {
    pub fn open(path: &Path) -> Result<Index, IndexError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let fresh = prepare(&conn)?;
        Ok(Index { conn: Mutex::new(conn), vectors: Mutex::default(), fresh })
    }

    /// An index in memory (tests, benchmarks).
    pub fn in_memory() -> Result<Index, IndexError> {
        let conn = Connection::open_in_memory()?;
        let fresh = prepare(&conn)?;
        Ok(Index { conn: Mutex::new(conn), vectors: Mutex::default(), fresh })
    }

    /// Whether the page tables started empty: the caller rebuilds them from the wiki.
    pub fn needs_rebuild(&self) -> bool {
        self.fresh
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Creates the tables; an index of another schema version loses its page tables first (they
/// are a cache of the wiki). Returns whether the page tables start empty.
fn prepare(conn: &Connection) -> Result<bool, IndexError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let has_pages: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'pages')",
        [],
        |r| r.get(0),
    )?;
    if has_pages && version != SCHEMA_VERSION {
        conn.execute_batch(
            "DROP TRIGGER IF EXISTS pages_ai; DROP TRIGGER IF EXISTS pages_ad;
             DROP TRIGGER IF EXISTS pages_au; DROP TABLE IF EXISTS pages_fts; DROP TABLE pages;",
        )?;
    }
    let had_links: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'page_links')",
        [],
        |r| r.get(0),
    )?;
    conn.execute_batch(SCHEMA)?;
    conn.execute_batch(profile::PROFILE_SCHEMA)?;
    let had_unlinked: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'embeddings_unlinked')",
        [],
        |r| r.get(0),
    )?;
    conn.execute_batch(vectors::VECTOR_SCHEMA)?;
    if !had_unlinked {
        // Vectors stored before unlinked hashes were recorded: the next prune looks at all.
        conn.execute(
            "INSERT OR IGNORE INTO embeddings_unlinked SELECT DISTINCT hash FROM embeddings",
            [],
        )?;
    }
    conn.execute_batch(handoffs::HANDOFF_SCHEMA)?;
    conn.execute_batch(links::LINKS_SCHEMA)?;
    // An index made before links were indexed: the next sync reads the whole wiki again, so
    // every page's links are there.
    let links_new = has_pages && version == SCHEMA_VERSION && !had_links;
    if links_new {
        conn.execute("DELETE FROM wiki_sync", [])?;
    }
    if has_pages && version != SCHEMA_VERSION {
        // The page tables are made again: their change numbers start over, and they follow
        // no commit of the wiki yet.
        conn.execute("DELETE FROM profile_page_cursors", [])?;
        conn.execute("DELETE FROM wiki_sync", [])?;
    }
    conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
    Ok(!has_pages || version != SCHEMA_VERSION || links_new)
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
