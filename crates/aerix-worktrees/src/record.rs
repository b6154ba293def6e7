//! One small JSON file per worktree in the store directory: where it is, the repository it
//! belongs to, and the process that owns it, so a later run can tell what a dead one left.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Error;

/// The process that owns a worktree: its pid and the start time the kernel gives it (clock
/// ticks since boot, `/proc/<pid>/stat` field 22), so a reused pid is not taken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Owner {
    pub(crate) pid: u32,
    /// `None` where `/proc` could not be read: the pid alone then decides.
    pub(crate) start: Option<u64>,
}

impl Owner {
    pub(crate) fn current() -> Owner {
        let pid = std::process::id();
        Owner { pid, start: proc_stat(pid).map(|(_, start)| start) }
    }

    /// Whether the owner still runs. `true` when this cannot be told (no `/proc`): a live
    /// run's worktree must never be taken for a dead one's.
    pub(crate) fn alive(&self) -> bool {
        if proc_stat(std::process::id()).is_none() {
            return true;
        }
        match proc_stat(self.pid) {
            None => false,
            // A zombie has ended: only its parent has not reaped it yet.
            Some(('Z' | 'X', _)) => false,
            Some((_, start)) => self.start.is_none_or(|recorded| recorded == start),
        }
    }
}

/// The state letter and start time of a process, from `/proc/<pid>/stat`.
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_stat(stat: &str) -> Option<(char, u64)> {
    // The command name (field 2) is in parentheses and may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state); the start time is field 22.
    let state = fields.first()?.chars().next()?;
    let start = fields.get(22 - 3)?.parse().ok()?;
    Some((state, start))
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) version: u32,
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    /// The top of the user's work tree the worktree was made from: stores of two clones with
    /// one project key share a directory, and each sweeps only its own.
    pub(crate) root: PathBuf,
    pub(crate) base: String,
    pub(crate) owner: Owner,
}

impl Record {
    /// Writes the record at `path` unless a file is there already (`NameTaken`): written
    /// whole beside it, then linked into place, so no reader ever sees half a record.
    pub(crate) fn create(&self, path: &Path) -> Result<(), Error> {
        let io = |what, source| Error::Io { what, path: path.to_owned(), error: source };
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| io("write the worktree record", std::io::Error::other(e)))?;
        let file_name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        let tmp = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
        let written = std::fs::File::create(&tmp)
            .and_then(|mut out| out.write_all(text.as_bytes()).and_then(|()| out.sync_all()));
        let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(Error::NameTaken { name: self.name.clone(), record: path.to_owned() })
            }
            Err(e) => Err(io("write the worktree record", e)),
        }
    }

    /// The record at `path`, or `None` when it is not one (another program's file, a
    /// version this build does not know): such a file is left alone.
    pub(crate) fn read(path: &Path) -> Option<Record> {
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str::<Record>(&text).ok().filter(|r| r.version == 1)
    }
}

/// Removes the file at `path`; one already gone is no error.
pub(crate) fn remove(path: &Path) -> Result<(), Error> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::Io { what: "remove the worktree record", path: path.to_owned(), error: e })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        let pid = child.id();
        child.kill().unwrap();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn an_owner_is_alive_while_its_process_runs_with_its_start_time() {
        let me = Owner::current();
        assert!(me.start.is_some(), "no start time from /proc");
        assert!(me.alive());
        let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        let live = Owner { pid: child.id(), start: proc_stat(child.id()).map(|(_, s)| s) };
        assert!(live.alive());
        // The same pid with another start time: a process that reused the pid.
        let reused = Owner { pid: live.pid, start: live.start.map(|s| s + 1) };
        assert!(!reused.alive());
        child.kill().unwrap();
        // Killed and not yet reaped: a zombie, which has ended.
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!live.alive(), "a zombie owner was taken for a live one");
        child.wait().unwrap();
        assert!(!live.alive());
        assert!(!Owner { pid: dead_pid(), start: None }.alive());
    }

    #[test]
    fn a_process_name_with_parentheses_and_spaces_is_read_past() {
        // `stat` of a process named `a) (b` (the name is field 2, in parentheses).
        let stat = "77 (a) (b) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 20\n";
        assert_eq!(parse_stat(stat), Some(('S', 4242)));
        assert_eq!(parse_stat("77 (a) S 1 2"), None, "a cut line");
    }

    #[test]
    fn a_record_is_written_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w1.json");
        let record = Record {
            version: 1,
            name: "w1".into(),
            path: dir.path().join("w1"),
            root: "/repo".into(),
            base: "abc".into(),
            owner: Owner::current(),
        };
        record.create(&path).unwrap();
        assert_eq!(Record::read(&path), Some(record.clone()));
        let error = record.create(&path).unwrap_err();
        assert!(matches!(error, Error::NameTaken { .. }), "{error}");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap()).collect();
        assert_eq!(names.len(), 1, "a temporary file was left: {names:?}");
        std::fs::write(&path, "{\"version\": 2}").unwrap();
        assert_eq!(Record::read(&path), None);
        remove(&path).unwrap();
        remove(&path).unwrap();
    }
}
