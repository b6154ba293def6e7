//! Who may read and write what: projects and their access mode, operators (database users with
//! hashed API keys), grants, and the one SQL condition every read path filters with.

use ai_memory_core::{ProjectName, WorkspaceName};
use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::{Index, IndexError, now};

/// Who makes a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Principal {
    /// The root token, or the single user of a server without database users.
    Root,
    /// A database user.
    User(i64),
}

impl Principal {
    fn sql(self) -> (bool, i64) {
        match self {
            Principal::Root => (true, -1),
            Principal::User(id) => (false, id),
        }
    }

    pub fn user_id(self) -> Option<i64> {
        match self {
            Principal::Root => None,
            Principal::User(id) => Some(id),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Read,
    Write,
}

impl Level {
    pub fn parse(s: &str) -> Result<Level, IndexError> {
        match s {
            "read" => Ok(Level::Read),
            "write" => Ok(Level::Write),
            other => {
                Err(IndexError::Invalid(format!("unknown level `{other}`: use read or write")))
            }
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Read => "read",
            Level::Write => "write",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRow {
    pub id: i64,
    pub workspace: String,
    pub name: String,
    pub restricted: bool,
    pub creator: Option<i64>,
}

/// The condition "project `pr` is readable by (:root, :user)", for every read path's WHERE:
/// filtering happens inside SQL, before any LIMIT, so nothing of an unreadable project is
/// counted or returned.
pub(crate) const READABLE: &str = "(:root OR pr.restricted = 0 OR pr.creator = :user OR EXISTS \
     (SELECT 1 FROM grants g WHERE g.project_id = pr.id AND g.user_id = :user))";

pub(crate) fn hash_token(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn new_token() -> Result<String, IndexError> {
    use std::io::Read;
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(IndexError::Random)?;
    Ok(format!("aim_{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

impl Index {
    /// Whether any database user exists: a server with none is single-user.
    pub fn has_users(&self) -> Result<bool, IndexError> {
        Ok(self.conn().query_row("SELECT EXISTS (SELECT 1 FROM users)", [], |r| r.get(0))?)
    }

    /// Adds an operator; returns their id and API key (shown once, stored hashed).
    pub fn add_user(&self, name: &str) -> Result<(i64, String), IndexError> {
        if name.is_empty()
            || name.len() > 64
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(IndexError::Invalid(format!(
                "user name `{name}`: use 1 to 64 letters, digits, `-` or `_`"
            )));
        }
        let token = new_token()?;
        let conn = self.conn();
        let taken: bool =
            conn.query_row("SELECT EXISTS (SELECT 1 FROM users WHERE name = ?1)", [name], |r| {
                r.get(0)
            })?;
        if taken {
            return Err(IndexError::Invalid(format!("user `{name}` exists")));
        }
        conn.execute(
            "INSERT INTO users (name, token_hash, created) VALUES (?1, ?2, ?3)",
            params![name, hash_token(&token), now()],
        )?;
        Ok((conn.last_insert_rowid(), token))
    }

    /// The operator an API key belongs to.
    pub fn user_by_token(&self, token: &str) -> Result<Option<i64>, IndexError> {
        Ok(self
            .conn()
            .query_row("SELECT id FROM users WHERE token_hash = ?1", [hash_token(token)], |r| {
                r.get(0)
            })
            .optional()?)
    }

    pub fn user_id(&self, name: &str) -> Result<i64, IndexError> {
        self.conn()
            .query_row("SELECT id FROM users WHERE name = ?1", [name], |r| r.get(0))
            .optional()?
            .ok_or_else(|| IndexError::NotFound(format!("no user `{name}`")))
    }

    pub fn users(&self) -> Result<Vec<(i64, String)>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT id, name FROM users ORDER BY id")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The project, made if absent with the given access mode and creator.
    pub fn ensure_project(
        &self,
        workspace: &WorkspaceName,
        project: &ProjectName,
        restricted: bool,
        creator: Option<i64>,
    ) -> Result<ProjectRow, IndexError> {
        ensure_project_in(&self.conn(), workspace, project, restricted, creator)
    }

    pub fn project(
        &self,
        workspace: &WorkspaceName,
        project: &ProjectName,
    ) -> Result<Option<ProjectRow>, IndexError> {
        project_row(&self.conn(), workspace.as_str(), project.as_str())
    }

    pub fn grant(&self, user: i64, project: i64, level: Level) -> Result<(), IndexError> {
        self.conn().execute(
            "INSERT INTO grants (user_id, project_id, level) VALUES (?1, ?2, ?3)
             ON CONFLICT (user_id, project_id) DO UPDATE SET level = excluded.level",
            params![user, project, level.as_str()],
        )?;
        Ok(())
    }

    fn grant_level(&self, user: i64, project: i64) -> Result<Option<Level>, IndexError> {
        let level: Option<String> = self
            .conn()
            .query_row(
                "SELECT level FROM grants WHERE user_id = ?1 AND project_id = ?2",
                params![user, project],
                |r| r.get(0),
            )
            .optional()?;
        level.map(|l| Level::parse(&l)).transpose()
    }

    pub fn can_read(&self, who: Principal, project: &ProjectRow) -> Result<bool, IndexError> {
        Ok(match who {
            Principal::Root => true,
            Principal::User(id) => {
                !project.restricted
                    || project.creator == Some(id)
                    || self.grant_level(id, project.id)?.is_some()
            }
        })
    }

    /// Writing: root always; the creator of a restricted project or a `write` grant; anyone
    /// on an open project, except the reserved ones (`_global`, `_profile`), which need a
    /// `write` grant because their pages reach every operator.
    pub fn can_write(&self, who: Principal, project: &ProjectRow) -> Result<bool, IndexError> {
        let Principal::User(id) = who else { return Ok(true) };
        if project.creator == Some(id) || self.grant_level(id, project.id)? == Some(Level::Write) {
            return Ok(true);
        }
        let reserved = ProjectName::new(&project.name).is_ok_and(|p| p.is_reserved());
        Ok(!project.restricted && !reserved)
    }

    /// Whether `who` may create `project` (a first write makes it): a user may not create a
    /// reserved project other than their own private profile (`_profile.<their id>`).
    pub fn can_create(&self, who: Principal, project: &ProjectName) -> bool {
        match who {
            Principal::Root => true,
            Principal::User(id) => {
                !project.is_reserved() || project.as_str() == format!("_profile.{id}")
            }
        }
    }

    pub(crate) fn bind_principal(who: Principal) -> (bool, i64) {
        who.sql()
    }
}

/// `Index::ensure_project` on a connection the caller holds (inside its transaction).
pub(crate) fn ensure_project_in(
    conn: &rusqlite::Connection,
    workspace: &WorkspaceName,
    project: &ProjectName,
    restricted: bool,
    creator: Option<i64>,
) -> Result<ProjectRow, IndexError> {
    conn.execute(
        "INSERT INTO projects (workspace, name, restricted, creator) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (workspace, name) DO NOTHING",
        params![workspace.as_str(), project.as_str(), restricted, creator],
    )?;
    project_row(conn, workspace.as_str(), project.as_str())?
        .ok_or_else(|| IndexError::NotFound(format!("project {workspace}/{project}")))
}

pub(crate) fn project_row(
    conn: &rusqlite::Connection,
    ws: &str,
    name: &str,
) -> Result<Option<ProjectRow>, IndexError> {
    Ok(conn
        .query_row(
            "SELECT id, workspace, name, restricted, creator FROM projects WHERE workspace = ?1 AND name = ?2",
            params![ws, name],
            |r| {
                Ok(ProjectRow {
                    id: r.get(0)?,
                    workspace: r.get(1)?,
                    name: r.get(2)?,
                    restricted: r.get(3)?,
                    creator: r.get(4)?,
                })
            },
        )
        .optional()?)
}
