//! What an attempt changed in its worktree against the snapshot it started from: per file
//! the base and the new content (as a checkout writes them), the patch, the lines touched.

use gitstore::{GIT_TIMEOUT, Repo};

use crate::Error;

/// An attempt's change: the files that differ between its base and its worktree, in path
/// order. Self-contained: it outlives the worktree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    base: String,
    files: Vec<FileChange>,
    patch: Vec<u8>,
    lines: u64,
}

/// One file of a change: absent before (a new file) or after (a deletion), or both present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    /// Relative to the work tree's top, `/`-separated.
    pub path: String,
    pub before: Option<Content>,
    pub after: Option<Content>,
}

/// A file's content as a checkout writes it (the repository's filters and line endings
/// applied), and its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    pub mode: Mode,
    pub bytes: Vec<u8>,
}

/// The kinds of entry git records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Regular,
    Executable,
    /// `bytes` is the link's target.
    Symlink,
    /// A nested repository (a gitlink): `bytes` is the commit id.
    Submodule,
}

impl Change {
    /// The change of the work tree `repo` is opened at against commit `base`: its files as
    /// `git add -A` would stage them (written through a temporary index), renames as a
    /// deletion and a new file.
    pub(crate) fn between(repo: &Repo, base: &str) -> Result<Change, Error> {
        let tree = repo.working_tree()?;
        let raw = repo.run(&["diff-tree", "-r", "-z", "--no-renames", base, &tree], GIT_TIMEOUT)?;
        let mut files = Vec::new();
        let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
        while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
            let path = String::from_utf8(path.to_vec()).map_err(|e| Error::NonUtf8Path {
                path: String::from_utf8_lossy(e.as_bytes()).into(),
            })?;
            // `:<old mode> <new mode> <old id> <new id> <status>`
            let meta = String::from_utf8_lossy(meta);
            let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            let (Some(old_mode), Some(new_mode), Some(old_id), Some(new_id)) =
                (parts.first(), parts.get(1), parts.get(2), parts.get(3))
            else {
                continue;
            };
            let before = content(repo, &path, old_mode, old_id)?;
            let after = content(repo, &path, new_mode, new_id)?;
            files.push(FileChange { path, before, after });
        }
        // Fixed prefixes and no relative paths, whatever the user's diff settings say: the
        // patch is for `git apply` at the top of the tree.
        let common = [
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
        ];
        let mut args = common.to_vec();
        args.extend(["--binary", base, &tree]);
        let patch = repo.run(&args, GIT_TIMEOUT)?;
        let mut args = common.to_vec();
        args.extend(["--numstat", "-z", base, &tree]);
        let numstat = repo.run(&args, GIT_TIMEOUT)?;
        Ok(Change { base: base.to_owned(), files, patch, lines: count_lines(&numstat) })
    }

    /// The commit the change was made against.
    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn files(&self) -> &[FileChange] {
        &self.files
    }

    /// The paths it touches, in order.
    pub fn paths(&self) -> Vec<String> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }

    /// The change as a patch a person applies by hand at the top of the tree (`git apply`):
    /// `git diff --binary` of base to attempt. Bytes, since a file's lines may not be UTF-8.
    pub fn patch(&self) -> &[u8] {
        &self.patch
    }

    /// Lines added plus lines removed; a binary file counts one.
    pub fn lines_changed(&self) -> u64 {
        self.lines
    }
}

/// A side's content from its diff-tree fields; `None` for the all-zero mode of an absent side.
fn content(repo: &Repo, path: &str, mode: &str, id: &str) -> Result<Option<Content>, Error> {
    let mode = match mode {
        "000000" => return Ok(None),
        "100755" => Mode::Executable,
        "120000" => Mode::Symlink,
        "160000" => {
            return Ok(Some(Content { mode: Mode::Submodule, bytes: id.as_bytes().to_vec() }));
        }
        _ => Mode::Regular,
    };
    let bytes = if mode == Mode::Symlink {
        repo.run(&["cat-file", "blob", id], GIT_TIMEOUT)?
    } else {
        let at = format!("--path={path}");
        repo.run(&["cat-file", "--filters", &at, id], GIT_TIMEOUT)?
    };
    Ok(Some(Content { mode, bytes }))
}

/// The sum of `--numstat -z` lines (`added\tremoved\tpath`, `-\t-\tpath` for a binary file).
fn count_lines(numstat: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(numstat);
    text.split('\0')
        .filter_map(|entry| {
            let mut parts = entry.splitn(3, '\t');
            let (added, removed) = (parts.next()?, parts.next()?);
            parts.next()?;
            match (added.parse::<u64>(), removed.parse::<u64>()) {
                (Ok(a), Ok(r)) => Some(a + r),
                _ => Some(1),
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_lines_are_summed_and_a_binary_file_counts_one() {
        assert_eq!(count_lines(b"3\t1\ta.txt\x000\t2\tb.txt\x00-\t-\tlogo.png\x00"), 7);
        assert_eq!(count_lines(b""), 0);
    }
}
