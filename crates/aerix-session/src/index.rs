//! The session store of a data directory, and each project's `index.json`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::log::event_line;
use crate::time::{id_at, is_session_id};
use crate::{Event, Log, SessionError, now_rfc3339};

/// `<data>/aerix/sessions`.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

/// One session in `index.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub id: String,
    pub created: String,
    pub updated: String,
    pub cwd: String,
    pub model: String,
    /// The first request's first line, cut to 80 characters.
    pub title: String,
    pub requests: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Where a session copied from another program came from (`claude-code`); such a session
    /// is listed but cannot be resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The copied session's own id, so importing it again replaces it instead of adding one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// What [`Store::import`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportOutcome {
    pub id: String,
    /// It replaced an earlier import of the same origin.
    pub replaced: bool,
    /// The earlier import held exactly this.
    pub unchanged: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    sessions: Vec<IndexEntry>,
}

impl Store {
    pub fn new(data_home: &Path) -> Store {
        Store { root: data_home.join("aerix/sessions") }
    }

    pub fn project_dir(&self, project: &str) -> PathBuf {
        self.root.join(project)
    }

    pub fn log_path(&self, project: &str, id: &str) -> PathBuf {
        self.project_dir(project).join(format!("{id}.jsonl"))
    }

    /// A new session: its log file and its index entry.
    pub fn create(
        &self,
        project: &str,
        cwd: &Path,
        model: &str,
        prompt: &str,
    ) -> Result<Log, SessionError> {
        let dir = self.project_dir(project);
        std::fs::create_dir_all(&dir).map_err(|error| SessionError::Io {
            what: "cannot create the sessions directory",
            path: dir.clone(),
            error,
        })?;
        // Ids carry the second and 16 random bits: a clash is taken as a retry, atomically.
        let log = loop {
            let id = crate::session_id();
            if let Some(log) = Log::create_new(&id, &self.log_path(project, &id))? {
                break log;
            }
        };
        let id = log.id().to_owned();
        let now = now_rfc3339();
        let title: String = prompt.lines().next().unwrap_or("").chars().take(80).collect();
        self.update_index(project, |index| {
            index.sessions.push(IndexEntry {
                id: id.clone(),
                created: now.clone(),
                updated: now.clone(),
                cwd: cwd.display().to_string(),
                model: model.to_owned(),
                title,
                requests: 1,
                outcome: None,
                tag: None,
                origin: None,
            });
        })?;
        Ok(log)
    }

    /// A session copied from another program (`entry.tag`, `entry.origin`): its log written
    /// whole (`events` of the id chosen), each event with its own time, then `files` beside it (`(suffix, bytes)`, written to
    /// `<id><suffix>`: `.claude.jsonl`, `/subagents/agent-x.jsonl`), then its index entry. Its
    /// id is the one an earlier import of the same origin got, else one made from
    /// `entry.created` and `origin`.
    pub fn import(
        &self,
        project: &str,
        mut entry: IndexEntry,
        events: impl FnOnce(&str) -> Vec<(Event, Option<String>)>,
        files: &[(String, Vec<u8>)],
    ) -> Result<ImportOutcome, SessionError> {
        let dir = self.project_dir(project);
        let io = |what, path: &Path, source| SessionError::Io {
            what,
            path: path.to_owned(),
            error: source,
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| io("cannot create the sessions directory", &dir, e))?;
        let earlier = self
            .read_index(project)?
            .sessions
            .into_iter()
            .find(|e| e.origin.is_some() && e.origin == entry.origin && e.tag == entry.tag);
        let id = match &earlier {
            Some(e) => e.id.clone(),
            None => {
                let origin = entry.origin.clone().unwrap_or_default();
                let mut salt = 0;
                loop {
                    let id = id_at(&entry.created, &origin, salt);
                    if !self.log_path(project, &id).exists() {
                        break id;
                    }
                    salt += 1;
                }
            }
        };
        let now = now_rfc3339();
        let log: String = events(&id)
            .iter()
            .map(|(e, ts)| event_line(e, ts.as_deref().unwrap_or(&now)))
            .collect();
        let path = self.log_path(project, &id);
        let at = |suffix: &str| dir.join(format!("{id}{suffix}"));
        let unchanged = earlier.is_some()
            && std::fs::read(&path).is_ok_and(|b| b == log.as_bytes())
            && files
                .iter()
                .all(|(suffix, bytes)| std::fs::read(at(suffix)).is_ok_and(|b| b == *bytes));
        if !unchanged {
            let subagents = dir.join(&id).join("subagents");
            if subagents.exists() {
                std::fs::remove_dir_all(&subagents)
                    .map_err(|e| io("cannot remove", &subagents, e))?;
            }
            write_whole(&path, log.as_bytes())?;
            for (suffix, bytes) in files {
                write_whole(&at(suffix), bytes)?;
            }
        }
        entry.id = id.clone();
        self.update_index(project, |index| {
            index.sessions.retain(|e| e.id != entry.id);
            index.sessions.push(entry);
        })?;
        Ok(ImportOutcome { id, replaced: earlier.is_some(), unchanged })
    }

    /// A session's index entry.
    pub fn entry(&self, project: &str, id: &str) -> Result<Option<IndexEntry>, SessionError> {
        Ok(self.read_index(project)?.sessions.into_iter().find(|e| e.id == id))
    }

    /// An existing session's log, opened to append.
    pub fn open(&self, project: &str, id: &str) -> Result<Log, SessionError> {
        let path = self.existing(project, id)?;
        let log = Log::open(id, &path)?;
        self.update_index(project, |index| {
            if let Some(entry) = index.sessions.iter_mut().find(|e| e.id == id) {
                entry.requests += 1;
                entry.updated = now_rfc3339();
            }
        })?;
        Ok(log)
    }

    /// Appends one event to an existing session's log outside a request (`aerix rewind`); the
    /// session counts as used now, so `--continue` picks it.
    pub fn append(&self, project: &str, id: &str, event: &Event) -> Result<(), SessionError> {
        let path = self.existing(project, id)?;
        Log::open(id, &path)?.append(event)?;
        self.update_index(project, |index| {
            if let Some(entry) = index.sessions.iter_mut().find(|e| e.id == id) {
                entry.updated = now_rfc3339();
            }
        })
    }

    /// The path of an existing session's log.
    pub fn existing(&self, project: &str, id: &str) -> Result<PathBuf, SessionError> {
        if !is_session_id(id) {
            return Err(SessionError::BadId(id.to_owned()));
        }
        let path = self.log_path(project, id);
        if !path.is_file() {
            return Err(SessionError::NotFound {
                id: id.to_owned(),
                dir: self.project_dir(project),
            });
        }
        Ok(path)
    }

    /// Records how a request of a session ended.
    pub fn finish(&self, project: &str, id: &str, outcome: &str) -> Result<(), SessionError> {
        self.update_index(project, |index| {
            if let Some(entry) = index.sessions.iter_mut().find(|e| e.id == id) {
                entry.updated = now_rfc3339();
                entry.outcome = Some(outcome.to_owned());
            }
        })
    }

    /// The project's sessions, oldest first.
    pub fn list(&self, project: &str) -> Result<Vec<IndexEntry>, SessionError> {
        let mut sessions = self.read_index(project)?.sessions;
        sessions.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(sessions)
    }

    /// The project's session used last that can be resumed (for `--continue`): the latest
    /// `updated` (a request opened or finished), then the latest id; imported ones cannot be
    /// resumed. An index rebuilt from the logs knows no use, so it falls back to the id.
    pub fn latest(&self, project: &str) -> Result<Option<String>, SessionError> {
        Ok(self
            .list(project)?
            .into_iter()
            .filter(|e| e.tag.is_none() && self.log_path(project, &e.id).is_file())
            // RFC 3339 in UTC with milliseconds (`now_rfc3339`): text order is time order.
            .max_by(|a, b| (&a.updated, &a.id).cmp(&(&b.updated, &b.id)))
            .map(|e| e.id))
    }

    /// Deletes a session's log, its directory (spool, subagent transcripts), its Claude Code
    /// transcript, its `<id>.stderr` (the screen's) and its index entry.
    pub fn remove(&self, project: &str, id: &str) -> Result<(), SessionError> {
        let path = self.existing(project, id)?;
        let io = |path: &Path, source| SessionError::Io {
            what: "cannot remove",
            path: path.to_owned(),
            error: source,
        };
        let spool = path.with_extension("");
        if spool.exists() {
            std::fs::remove_dir_all(&spool).map_err(|e| io(&spool, e))?;
        }
        // The Claude Code transcript, and what the screen sent to stderr.
        for beside in [path.with_extension("claude.jsonl"), path.with_extension("stderr")] {
            if beside.exists() {
                std::fs::remove_file(&beside).map_err(|e| io(&beside, e))?;
            }
        }
        std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
        self.update_index(project, |index| index.sessions.retain(|e| e.id != id))
    }

    fn index_path(&self, project: &str) -> PathBuf {
        self.project_dir(project).join("index.json")
    }

    fn read_index(&self, project: &str) -> Result<Index, SessionError> {
        let path = self.index_path(project);
        match std::fs::read(&path) {
            // A broken index is rebuilt from the logs rather than refusing to run.
            Ok(bytes) => {
                Ok(serde_json::from_slice(&bytes).unwrap_or_else(|_| self.rebuild_index(project)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Index::default()),
            Err(error) => Err(SessionError::Io { what: "cannot read", path, error }),
        }
    }

    /// An index from the logs alone (ids, and what their `session.start` says).
    fn rebuild_index(&self, project: &str) -> Index {
        let mut sessions = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.project_dir(project)) else {
            return Index::default();
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".jsonl") else { continue };
            if !is_session_id(id) {
                continue;
            }
            let events = crate::read_log(&entry.path()).map(|l| l.events).unwrap_or_default();
            let (cwd, model, title, version) = events
                .iter()
                .find_map(|e| match e {
                    crate::Event::SessionStart { cwd, model, prompt, version, .. } => Some((
                        cwd.clone(),
                        model.clone(),
                        prompt.lines().next().unwrap_or("").chars().take(80).collect(),
                        version.clone(),
                    )),
                    _ => None,
                })
                .unwrap_or_default();
            // An imported session's version names the program that wrote it.
            let tag = version.starts_with("claude-code").then(|| "claude-code".to_owned());
            sessions.push(IndexEntry {
                id: id.to_owned(),
                created: String::new(),
                updated: String::new(),
                cwd,
                model,
                title,
                requests: 1,
                outcome: None,
                tag,
                origin: None,
            });
        }
        Index { sessions }
    }

    /// Read, change, write to a temporary file and rename over the index: a reader never sees a
    /// half-written index.
    fn update_index(
        &self,
        project: &str,
        change: impl FnOnce(&mut Index),
    ) -> Result<(), SessionError> {
        let path = self.index_path(project);
        // Every aerix process of the project updates this file: one at a time (an advisory lock
        // on a file beside it, released when `_lock` drops), so no update is lost.
        let lock_path = path.with_extension("lock");
        let _lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .and_then(|file| file.lock().map(|()| file))
            .map_err(|error| SessionError::Io { what: "cannot lock", path: lock_path, error })?;
        let mut index = self.read_index(project)?;
        change(&mut index);
        let tmp = path.with_extension(format!("json.{}", std::process::id()));
        let text = serde_json::to_string_pretty(&index).unwrap_or_default();
        let io = |error| SessionError::Io { what: "cannot write", path: path.clone(), error };
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }
}

/// Writes a file whole: a temporary file beside it, renamed over it.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    let io = |error| SessionError::Io { what: "cannot write", path: path.to_owned(), error };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(name);
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}
