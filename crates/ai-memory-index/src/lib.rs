//! The SQLite index of the wiki: projects and their access, pages with full-text search
//! (FTS5, bm25), operators and grants, sessions and captured prompts.
//!
//! The wiki (git) is the truth for pages and project settings; `rebuild` makes the page
//! tables again from it alone. Operators, grants, sessions and prompts live only here.

mod access;
mod events;
mod pages;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

pub use access::{Level, Principal, ProjectRow};
pub use events::{PromptRow, SessionStart};
pub use pages::{DumpRow, Hit, PageRow, QueryResult};

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index database: {0}")]
    Sql(#[from] rusqlite::Error),
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
    title TEXT NOT NULL,
    summary TEXT,
    frontmatter TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (project_id, path)
);
CREATE VIRTUAL TABLE IF NOT EXISTS pages_fts USING fts5(
    title, path, body, content = 'pages', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS pages_ai AFTER INSERT ON pages BEGIN
    INSERT INTO pages_fts (rowid, title, path, body) VALUES (new.id, new.title, new.path, new.body);
END;
CREATE TRIGGER IF NOT EXISTS pages_ad AFTER DELETE ON pages BEGIN
    INSERT INTO pages_fts (pages_fts, rowid, title, path, body)
        VALUES ('delete', old.id, old.title, old.path, old.body);
END;
CREATE TRIGGER IF NOT EXISTS pages_au AFTER UPDATE ON pages BEGIN
    INSERT INTO pages_fts (pages_fts, rowid, title, path, body)
        VALUES ('delete', old.id, old.title, old.path, old.body);
    INSERT INTO pages_fts (rowid, title, path, body) VALUES (new.id, new.title, new.path, new.body);
END;
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    harness TEXT NOT NULL,
    user_id INTEGER,
    started INTEGER NOT NULL,
    ended INTEGER
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

/// The index database. One connection behind a lock: SQLite serializes writers anyway, and a
/// query over 10k pages takes a few milliseconds.
#[derive(Debug)]
pub struct Index {
    conn: Mutex<Connection>,
}

impl Index {
    pub fn open(path: &Path) -> Result<Index, IndexError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.execute_batch(SCHEMA)?;
        Ok(Index { conn: Mutex::new(conn) })
    }

    /// An index in memory (tests, benchmarks).
    pub fn in_memory() -> Result<Index, IndexError> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(Index { conn: Mutex::new(conn) })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
