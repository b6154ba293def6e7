//! `ai-memory export PATH`: one consistent copy of a data directory, under the profile pass
//! lock (no pass writes candidates or entries meanwhile), the pages read at one wiki commit and
//! the database's records in one read transaction. Written to a temporary file beside PATH,
//! mode 0600 (it holds captured prompts), then moved into place: PATH is never half-written.

use std::io::Write;
use std::path::{Path, PathBuf};

use ai_memory_index::ProjectRecord;

use super::{FORMAT, Header, NOTE, PageRecord, Record, VERSION};
use crate::error::MemoryError;
use crate::service::Memory;

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exported {
    pub path: PathBuf,
    pub wiki_commit: Option<String>,
    pub projects: usize,
    pub pages: usize,
    pub operators: usize,
    pub grants: usize,
    pub sessions: usize,
    pub prompts: usize,
    pub candidates: usize,
    pub forgotten: usize,
    pub handoffs: usize,
    /// Stored files that do not parse as pages: left out, named (fix them and export again).
    pub skipped: Vec<String>,
}

impl Memory {
    /// Writes everything this data directory holds to `path` (refused when it exists, unless
    /// `force`).
    pub fn export_to(&self, path: &Path, force: bool) -> Result<Exported, MemoryError> {
        if !force && std::fs::symlink_metadata(path).is_ok() {
            return Err(MemoryError::Invalid(format!(
                "{} exists: pass --force to replace it",
                path.display()
            )));
        }
        let (lines, exported) = {
            let _no_pass = self.lock_passes()?;
            let snapshot = self.wiki().snapshot()?;
            let state = self.index().export_state()?;
            let mut out = Exported {
                path: path.to_owned(),
                wiki_commit: snapshot.commit.clone(),
                operators: state.operators.len(),
                grants: state.grants.len(),
                sessions: state.sessions.len(),
                prompts: state.prompts.len(),
                candidates: state.candidates.len(),
                forgotten: state.forgotten.len(),
                handoffs: state.handoffs.len(),
                ..Exported::default()
            };
            let header = Header {
                format: FORMAT.into(),
                version: VERSION,
                created: self.now(),
                wiki_commit: snapshot.commit.clone(),
                note: NOTE.into(),
            };
            let mut lines = vec![json(&header)?];
            // Projects: the database's rows, with the wiki's settings where it has them (the
            // wiki is the truth for access), and any project the wiki has that the rows lack.
            let mut projects = state.projects.clone();
            for (ws, name, meta) in &snapshot.metas {
                match projects
                    .iter_mut()
                    .find(|p| p.workspace == ws.as_str() && p.name == name.as_str())
                {
                    Some(p) => (p.restricted, p.creator) = (meta.restricted, meta.creator),
                    None => projects.push(project(
                        ws.as_str(),
                        name.as_str(),
                        meta.restricted,
                        meta.creator,
                    )),
                }
            }
            for (at, _) in &snapshot.pages {
                if !projects
                    .iter()
                    .any(|p| p.workspace == at.workspace.as_str() && p.name == at.project.as_str())
                {
                    let restricted = at.project.is_private_profile();
                    projects.push(project(
                        at.workspace.as_str(),
                        at.project.as_str(),
                        restricted,
                        None,
                    ));
                }
            }
            out.projects = projects.len();
            lines.extend(
                projects
                    .into_iter()
                    .map(|p| json(&Record::Project(p)))
                    .collect::<Result<Vec<_>, _>>()?,
            );
            for (at, read) in snapshot.pages {
                match read {
                    Ok(stored) => {
                        out.pages += 1;
                        lines.push(json(&Record::Page(PageRecord {
                            workspace: at.workspace.to_string(),
                            project: at.project.to_string(),
                            path: at.path.to_string(),
                            text: stored.text,
                        }))?);
                    }
                    Err(e) => out.skipped.push(e.to_string()),
                }
            }
            let records = state
                .operators
                .into_iter()
                .map(Record::Operator)
                .chain(state.grants.into_iter().map(Record::Grant))
                .chain(state.sessions.into_iter().map(Record::Session))
                .chain(state.prompts.into_iter().map(Record::Prompt))
                .chain(state.candidates.into_iter().map(Record::Candidate))
                .chain(state.cursors.into_iter().map(Record::Cursor))
                .chain(state.forgotten.into_iter().map(Record::Forgotten))
                .chain(state.stacks.into_iter().map(Record::Stack))
                .chain(state.handoffs.into_iter().map(Record::Handoff));
            for r in records {
                lines.push(json(&r)?);
            }
            (lines, out)
        };
        write_private(path, &lines, force)?;
        Ok(exported)
    }
}

fn project(ws: &str, name: &str, restricted: bool, creator: Option<i64>) -> ProjectRecord {
    ProjectRecord {
        workspace: ws.into(),
        name: name.into(),
        restricted,
        creator,
        contribute: None,
        consume: None,
    }
}

fn json(value: &impl serde::Serialize) -> Result<String, MemoryError> {
    serde_json::to_string(value).map_err(|e| MemoryError::Invalid(format!("cannot encode: {e}")))
}

/// Writes `lines` to a new file beside `path` (mode 0600), flushed to disk, then moves it to
/// `path`: replacing what is there only when `force` (without it, a file that appeared
/// meanwhile is not replaced either).
fn write_private(path: &Path, lines: &[String], force: bool) -> Result<(), MemoryError> {
    let shown = path.display();
    let fail = |what: &str, e: std::io::Error| MemoryError::Invalid(format!("{what} {shown}: {e}"));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&tmp).map_err(|e| fail("cannot create a file beside", e))?;
        let mut w = std::io::BufWriter::new(file);
        for line in lines {
            w.write_all(line.as_bytes())
                .and_then(|()| w.write_all(b"\n"))
                .map_err(|e| fail("cannot write", e))?;
        }
        let file = w.into_inner().map_err(|e| fail("cannot write", e.into_error()))?;
        file.sync_all().map_err(|e| fail("cannot write", e))?;
        if force {
            std::fs::rename(&tmp, path).map_err(|e| fail("cannot write", e))
        } else {
            // A link fails when `path` exists: it is never replaced without --force.
            std::fs::hard_link(&tmp, path).map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => {
                    MemoryError::Invalid(format!("{shown} exists: pass --force to replace it"))
                }
                _ => fail("cannot write", e),
            })
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    result?;
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;

    #[test]
    fn the_file_is_private_and_not_replaced_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        write_private(&path, &["a".into()], false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let e = write_private(&path, &["b".into()], false).unwrap_err().to_string();
        assert!(e.contains("exists: pass --force"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\n");
        write_private(&path, &["b".into()], true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "b\n");
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
