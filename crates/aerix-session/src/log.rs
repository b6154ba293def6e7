//! Appending events to a log, and reading one back.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Event, SessionError, now_rfc3339};

/// An open session log, appended one flushed line per event.
#[derive(Debug)]
pub struct Log {
    id: String,
    path: PathBuf,
    file: File,
}

impl Log {
    /// A new log; `None` when a file of that name exists (another process took the id).
    pub(crate) fn create_new(id: &str, path: &Path) -> Result<Option<Log>, SessionError> {
        match OpenOptions::new().create_new(true).append(true).open(path) {
            Ok(file) => Ok(Some(Log { id: id.to_owned(), path: path.to_owned(), file })),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
            Err(error) => Err(SessionError::Io {
                what: "cannot create the session log",
                path: path.to_owned(),
                error,
            }),
        }
    }

    pub(crate) fn open(id: &str, path: &Path) -> Result<Log, SessionError> {
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(|source| {
            SessionError::Io {
                what: "cannot open the session log",
                path: path.to_owned(),
                error: source,
            }
        })?;
        let mut log = Log { id: id.to_owned(), path: path.to_owned(), file };
        log.end_cut_line()?;
        Ok(log)
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Another handle on the same open file. Both append (each event is one write of one
    /// line), so their events never interleave within a line.
    pub fn try_clone(&self) -> Result<Log, SessionError> {
        let file = self.file.try_clone().map_err(|error| SessionError::Io {
            what: "cannot open the session log",
            path: self.path.clone(),
            error,
        })?;
        Ok(Log { id: self.id.clone(), path: self.path.clone(), file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory of this session's spool files.
    pub fn spool_dir(&self) -> PathBuf {
        self.path.with_extension("").join("spool")
    }

    /// Appends one event as one line, with its time, and flushes it.
    pub fn append(&mut self, event: &Event) -> Result<(), SessionError> {
        let line = event_line(event, &now_rfc3339());
        self.file.write_all(line.as_bytes()).map_err(|error| SessionError::Io {
            what: "cannot write the session log",
            path: self.path.clone(),
            error,
        })
    }

    /// Writes `text` to the spool once and returns its path.
    pub fn spool(&self, name: &str, text: &str) -> Result<PathBuf, SessionError> {
        spool(&self.spool_dir(), name, text)
    }

    /// A log whose last line was cut by a crash gets a newline, so the next event starts a line
    /// of its own (the cut line stays, and readers skip it).
    fn end_cut_line(&mut self) -> Result<(), SessionError> {
        let bytes = std::fs::read(&self.path).unwrap_or_default();
        if bytes.last().is_some_and(|b| *b != b'\n') {
            self.file.write_all(b"\n").map_err(|error| SessionError::Io {
                what: "cannot write the session log",
                path: self.path.clone(),
                error,
            })?;
        }
        Ok(())
    }
}

/// One event as a log line (with its `ts` and the newline).
pub(crate) fn event_line(event: &Event, ts: &str) -> String {
    let mut value = serde_json::to_value(event).unwrap_or_default();
    if let serde_json::Value::Object(map) = &mut value {
        map.insert("ts".into(), ts.into());
    }
    let mut line = value.to_string();
    line.push('\n');
    line
}

/// A log read back.
#[derive(Debug, Default)]
pub struct ReadLog {
    pub events: Vec<Event>,
    /// Lines that are not complete events (a crash cut them): their 1-based numbers.
    pub skipped: Vec<usize>,
}

/// Reads every complete event of a log. A line that is not JSON is skipped and counted (a crash
/// can leave one anywhere a later run appended after it); a complete object that is not an
/// event (an unknown type, label, role or route) is an error naming its line and the word.
pub fn read_log(path: &Path) -> Result<ReadLog, SessionError> {
    let text = std::fs::read(path).map_err(|error| SessionError::Io {
        what: "cannot read the session log",
        path: path.to_owned(),
        error,
    })?;
    let mut out = ReadLog::default();
    for (i, line) in text.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
            out.skipped.push(i + 1);
            continue;
        };
        if !value.is_object() {
            out.skipped.push(i + 1);
            continue;
        }
        match serde_json::from_value::<Event>(value) {
            Ok(event) => out.events.push(event),
            Err(e) => {
                return Err(SessionError::Corrupt {
                    path: path.to_owned(),
                    line: i + 1,
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// Writes `text` as `name` in the spool directory `dir` (made when missing) and returns its
/// path: a log's spool, or a delegated piece's writing into its caller's.
pub fn spool(dir: &Path, name: &str, text: &str) -> Result<PathBuf, SessionError> {
    let io =
        |error| SessionError::Io { what: "cannot write the spool", path: dir.to_owned(), error };
    std::fs::create_dir_all(dir).map_err(io)?;
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(io)?;
    Ok(path)
}
