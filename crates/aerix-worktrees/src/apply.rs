//! An attempt's change applied to the user's tree, three-way per file and all or nothing:
//! every file's result is computed first, and the tree is written only when all are clean.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use gitstore::Repo;

use crate::change::{Change, Content, FileChange, Mode};
use crate::{Error, Store};

/// What [`apply`] did, per path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Unchanged in the user's tree since the snapshot: now the attempt's version.
    pub written: Vec<String>,
    /// Changed in the user's tree meanwhile: merged with the attempt's edits.
    pub merged: Vec<String>,
    /// Deleted by the attempt (and unchanged by the user).
    pub deleted: Vec<String>,
    /// Already as the attempt has it: left alone.
    pub unchanged: Vec<String>,
}

/// Applies `change` to the user's work tree (`store.root()`), three-way per file: base = the
/// attempt's base version, ours = the file in the user's tree now, theirs = the attempt's. A
/// file unchanged since the snapshot takes the attempt's version; one changed meanwhile is
/// merged (`git merge-file`). Any conflict (edits that overlap, a file deleted on one side and
/// edited on the other, added on both, something else in its place) is
/// [`Error::Conflict`] naming every such path, and nothing is written; so is any other
/// error. Writes only regular files under the root: a path through `..`, `.git` or a symbolic
/// link, or a symbolic link or submodule in the change, is [`Error::Unsafe`]. Never touches
/// the user's index or branches.
pub fn apply(store: &Store, change: &Change) -> Result<Applied, Error> {
    let root = store.root();
    let repo = Repo::at(root);
    let mut plan = Vec::new();
    let mut conflicts = Vec::new();
    for file in change.files() {
        let target = checked_path(root, file)?;
        match step(&repo, file, &target)? {
            Some(step) => plan.push((file.path.as_str(), target, step)),
            None => conflicts.push(file.path.clone()),
        }
    }
    if !conflicts.is_empty() {
        return Err(Error::Conflict { paths: conflicts });
    }
    write(root, plan)
}

/// What one file becomes.
#[derive(Debug)]
enum Step {
    Write { content: Content, merged: bool },
    Delete,
    Unchanged,
}

/// The file's step, or `None` on a conflict.
fn step(repo: &Repo, file: &FileChange, target: &Path) -> Result<Option<Step>, Error> {
    let Some(ours) = read_ours(target, &file.path)? else {
        return Ok(None);
    };
    let (base, theirs) = (&file.before, &file.after);
    if ours == *theirs {
        return Ok(Some(Step::Unchanged));
    }
    if ours == *base {
        return Ok(Some(match theirs {
            Some(content) => Step::Write { content: content.clone(), merged: false },
            None => Step::Delete,
        }));
    }
    // Both sides changed the file; only two edits of one file can merge.
    let (Some(ours), Some(base), Some(theirs)) = (ours, base, theirs) else {
        return Ok(None);
    };
    let bytes = if ours.bytes == base.bytes {
        theirs.bytes.clone()
    } else if theirs.bytes == base.bytes {
        ours.bytes.clone()
    } else {
        match repo.merge_file(&ours.bytes, &base.bytes, &theirs.bytes)? {
            Some(merged) => merged,
            None => return Ok(None),
        }
    };
    // A mode changed on one side only is that side's; changed on both, the two agree.
    let mode = if ours.mode == base.mode { theirs.mode } else { ours.mode };
    let content = Content { mode, bytes };
    Ok(Some(if content == ours { Step::Unchanged } else { Step::Write { content, merged: true } }))
}

/// The user's file now: `Some(None)` when absent, `None` when something other than a regular
/// file is in its place (a conflict).
fn read_ours(target: &Path, path: &str) -> Result<Option<Option<Content>>, Error> {
    let io = |error| Error::Io { what: "read", path: target.to_owned(), error };
    let meta = match target.symlink_metadata() {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(None)),
        // A file where one of its directories should be.
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    if meta.file_type().is_symlink() {
        return Err(Error::Unsafe { path: path.to_owned(), reason: "is a symbolic link" });
    }
    if !meta.is_file() {
        return Ok(None);
    }
    let bytes = std::fs::read(target).map_err(io)?;
    let mode = if executable(meta.permissions().mode()) { Mode::Executable } else { Mode::Regular };
    Ok(Some(Some(Content { mode, bytes })))
}

/// The file's place under `root`, refused when the path leaves the tree or enters `.git`,
/// passes through a symbolic link, or the change has something other than a regular file.
fn checked_path(root: &Path, file: &FileChange) -> Result<PathBuf, Error> {
    let unsafe_ = |reason| Error::Unsafe { path: file.path.clone(), reason };
    for side in [&file.before, &file.after].into_iter().flatten() {
        match side.mode {
            Mode::Regular | Mode::Executable => {}
            Mode::Symlink => return Err(unsafe_("is a symbolic link in the change")),
            Mode::Submodule => return Err(unsafe_("is a submodule in the change")),
        }
    }
    let parts: Vec<&str> = file.path.split('/').collect();
    for part in &parts {
        if part.is_empty() || *part == "." || *part == ".." || part.contains('\0') {
            return Err(unsafe_("is not a plain relative path"));
        }
        if part.eq_ignore_ascii_case(".git") {
            return Err(unsafe_("is inside `.git`"));
        }
    }
    let mut at = root.to_owned();
    for part in &parts[..parts.len() - 1] {
        at.push(part);
        match at.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(unsafe_("passes through a symbolic link"));
            }
            // A file where a directory should be: `read_ours` of the target meets it.
            Ok(_) => {}
            // The rest is made when written.
            Err(_) => break,
        }
    }
    Ok(root.join(&file.path))
}

/// Writes the plan: every new content first to a temporary file beside its target (so a
/// failure leaves the tree as it was), then the renames and the deletions.
fn write(root: &Path, plan: Vec<(&str, PathBuf, Step)>) -> Result<Applied, Error> {
    let mut applied = Applied::default();
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut made_dirs: Vec<PathBuf> = Vec::new();
    let mut deletions = Vec::new();
    let mut stage_all = || -> Result<(), Error> {
        for (i, (path, target, step)) in plan.iter().enumerate() {
            match step {
                Step::Unchanged => applied.unchanged.push((*path).to_owned()),
                Step::Delete => {
                    deletions.push(target.clone());
                    applied.deleted.push((*path).to_owned());
                }
                Step::Write { content, merged } => {
                    make_parents(root, target, &mut made_dirs)?;
                    staged.push((stage(target, content, i)?, target.clone()));
                    let list = if *merged { &mut applied.merged } else { &mut applied.written };
                    list.push((*path).to_owned());
                }
            }
        }
        Ok(())
    };
    if let Err(e) = stage_all() {
        for (tmp, _) in &staged {
            let _ = std::fs::remove_file(tmp);
        }
        for dir in made_dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
        return Err(e);
    }
    for (tmp, target) in &staged {
        std::fs::rename(tmp, target).map_err(|error| Error::Io {
            what: "write",
            path: target.clone(),
            error,
        })?;
    }
    for target in &deletions {
        std::fs::remove_file(target).map_err(|error| Error::Io {
            what: "delete",
            path: target.clone(),
            error,
        })?;
        // As a checkout does: a directory its last file left goes too.
        let mut dir = target.parent();
        while let Some(d) = dir.filter(|d| *d != root && d.starts_with(root)) {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
    Ok(applied)
}

/// Creates the missing directories above `target`, remembering them for a rollback.
fn make_parents(root: &Path, target: &Path, made: &mut Vec<PathBuf>) -> Result<(), Error> {
    let mut missing = Vec::new();
    let mut dir = target.parent();
    while let Some(d) = dir.filter(|d| *d != root && d.symlink_metadata().is_err()) {
        missing.push(d.to_owned());
        dir = d.parent();
    }
    for d in missing.into_iter().rev() {
        std::fs::create_dir(&d).map_err(|error| Error::Io {
            what: "create the directory",
            path: d.clone(),
            error,
        })?;
        made.push(d);
    }
    Ok(())
}

/// Writes `content` to a new temporary file beside `target` with the mode it should have: an
/// existing file's permissions, else the umask's for a new file, the executable bit set
/// where it is readable (as git checks out) or cleared.
fn stage(target: &Path, content: &Content, i: usize) -> Result<PathBuf, Error> {
    let name = target.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let tmp = target.with_file_name(format!(".{name}.aerix-{}-{i}.tmp", std::process::id()));
    let io = |error| Error::Io { what: "write", path: target.to_owned(), error };
    let written = (|| {
        let mut out = std::fs::File::create_new(&tmp)?;
        std::io::Write::write_all(&mut out, &content.bytes)?;
        out.sync_all()?;
        let mut mode = match target.symlink_metadata() {
            Ok(meta) => meta.permissions().mode(),
            Err(_) => out.metadata()?.permissions().mode(),
        } & 0o7777;
        mode = if content.mode == Mode::Executable {
            mode | ((mode & 0o444) >> 2)
        } else {
            mode & !0o111
        };
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(tmp)
}

/// git's executable bit: the owner's.
fn executable(mode: u32) -> bool {
    mode & 0o100 != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> FileChange {
        let content = Content { mode: Mode::Regular, bytes: b"x\n".to_vec() };
        FileChange { path: path.into(), before: None, after: Some(content) }
    }

    #[test]
    fn paths_out_of_the_tree_or_into_git_are_refused() {
        let root = tempfile::tempdir().unwrap();
        for bad in ["../x", "a/../../x", "/etc/passwd", ".git/config", "a/.GIT/hooks/x", "a//b"] {
            let error = checked_path(root.path(), &file(bad)).unwrap_err();
            assert!(matches!(error, Error::Unsafe { .. }), "{bad}: {error}");
        }
        assert_eq!(
            checked_path(root.path(), &file("a/b.txt")).unwrap(),
            root.path().join("a/b.txt")
        );
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("out")).unwrap();
        let error = checked_path(root.path(), &file("out/x.txt")).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        let mut link = file("l");
        link.after = Some(Content { mode: Mode::Symlink, bytes: b"/etc".to_vec() });
        assert!(matches!(checked_path(root.path(), &link), Err(Error::Unsafe { .. })));
    }

    #[test]
    fn a_staged_file_takes_the_mode_it_should_have() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("run.sh");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
        let content = Content { mode: Mode::Executable, bytes: b"new".to_vec() };
        let tmp = stage(&target, &content, 0).unwrap();
        assert_eq!(std::fs::metadata(&tmp).unwrap().permissions().mode() & 0o777, 0o750);
        assert_eq!(std::fs::read(&tmp).unwrap(), b"new");
        let content = Content { mode: Mode::Regular, bytes: b"new".to_vec() };
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        let tmp = stage(&target, &content, 1).unwrap();
        assert_eq!(std::fs::metadata(&tmp).unwrap().permissions().mode() & 0o777, 0o644);
    }
}
