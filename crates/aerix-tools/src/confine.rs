//! Where the file tools may act. Every path is resolved as the kernel would (`..`, `.` and each
//! symbolic link, one component at a time) and must then lie inside a root: the working tree
//! and the directories the caller adds may be read and changed; aerix's own (the session's
//! spool, where a capped result is kept whole) may only be read. Anything else is refused,
//! naming the path and what would allow it. A repository's git directory is outside too,
//! wherever it lies: a `.git` under a root (any case, a directory or a `gitdir:` file, and all
//! below it) and the directory a root's `.git` link or file names. What it holds is what
//! aerix's own git reads (`.git/config`, `.git/hooks`), so no file tool reads or writes it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::ToolError;

/// Symbolic links followed while resolving one path (the kernel's `MAXSYMLINKS`).
pub const MAX_LINKS: u32 = 40;

/// The directories the tools may act in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots {
    /// The working tree first, then the directories added (`with_dir`); each resolved.
    writable: Vec<PathBuf>,
    /// Read, never changed (`with_read_only`).
    read_only: Vec<PathBuf>,
}

/// What a call does at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl Roots {
    /// The working tree alone (a repository's root, or the working directory outside one).
    pub fn new(tree: &Path) -> Roots {
        Roots { writable: vec![resolve_root(tree)], read_only: Vec::new() }
    }

    /// Also `dir`, read and written: an attempt's worktree, a `permissions.additionalDirectories`
    /// entry.
    pub fn with_dir(mut self, dir: &Path) -> Roots {
        let dir = resolve_root(dir);
        if !self.writable.contains(&dir) {
            self.writable.push(dir);
        }
        self
    }

    /// Also `dir`, read only (aerix's spool: a capped result's pointer names a file there).
    pub fn with_read_only(mut self, dir: &Path) -> Roots {
        let dir = resolve_root(dir);
        if !self.read_only.contains(&dir) {
            self.read_only.push(dir);
        }
        self
    }

    /// The working tree.
    pub fn tree(&self) -> &Path {
        &self.writable[0]
    }

    /// The tree, then every added directory: what `bash`'s sandbox binds writable.
    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    pub fn read_only(&self) -> &[PathBuf] {
        &self.read_only
    }

    /// `path` (absolute, or relative to `cwd`) resolved, when `access` is allowed there.
    pub fn check(&self, cwd: &Path, path: &str, access: Access) -> Result<PathBuf, ToolError> {
        let given = Path::new(path);
        let joined = if given.is_absolute() { given.to_owned() } else { cwd.join(given) };
        let resolved =
            resolve(&joined).map_err(|why| ToolError::new(format!("refused: {path}: {why}")))?;
        match self.allows(&resolved, access) {
            Ok(()) => Ok(resolved),
            Err(outside) => Err(self.refusal(path, &joined, &resolved, outside)),
        }
    }

    /// Whether a resolved path may be read or written; `Err` says why not.
    fn allows(&self, resolved: &Path, access: Access) -> Result<(), Outside> {
        if let Some(dir) = self.git_dir_holding(resolved) {
            return Err(Outside::Git(dir));
        }
        let read_only = self.read_only.iter().find(|r| resolved.starts_with(r));
        match (access, read_only) {
            // aerix's own files are not the agent's to change, even inside the tree.
            (Access::Write, Some(root)) => Err(Outside::ReadOnly(root.clone())),
            (Access::Read, Some(_)) => Ok(()),
            _ if self.writable.iter().any(|r| resolved.starts_with(r)) => Ok(()),
            _ => Err(Outside::Roots),
        }
    }

    /// The git directory `resolved` is or is in, when it lies under a root: its first `.git`
    /// component below the root (compared without case: a case-insensitive file system opens
    /// `.GIT` as `.git`), else the directory a root's `.git` link or `gitdir:` file names.
    fn git_dir_holding(&self, resolved: &Path) -> Option<PathBuf> {
        for root in self.writable.iter().chain(&self.read_only) {
            let Ok(below) = resolved.strip_prefix(root) else { continue };
            let mut dir = root.clone();
            for part in below.components() {
                dir.push(part);
                if part.as_os_str().eq_ignore_ascii_case(".git") {
                    return Some(dir);
                }
            }
            if let Some(named) = named_git_dir(root)
                && resolved.starts_with(&named)
            {
                return Some(named);
            }
        }
        None
    }

    fn refusal(&self, path: &str, joined: &Path, resolved: &Path, why: Outside) -> ToolError {
        // Name where the path really goes when `..` or a link took it elsewhere.
        let lexical = lexical(joined);
        let what = if lexical == resolved {
            format!("{path} is")
        } else {
            format!("{path} resolves to {}, which is", resolved.display())
        };
        match why {
            Outside::Git(dir) => {
                let name = dir.file_name().unwrap_or_default();
                let place = match (name.eq_ignore_ascii_case(".git"), resolved == dir) {
                    (true, true) => format!("git's own {}", name.to_string_lossy()),
                    (true, false) => format!("inside {}", name.to_string_lossy()),
                    (false, true) => format!("{} (the repository's git directory)", dir.display()),
                    (false, false) => {
                        format!("inside {} (the repository's git directory)", dir.display())
                    }
                };
                ToolError::new(format!(
                    "refused: {what} {place}, which the file tools do not touch"
                ))
            }
            Outside::ReadOnly(root) => ToolError::new(format!(
                "refused: {what} in {}, which the tools may read but not change",
                root.display()
            )),
            Outside::Roots => {
                let mut inside = format!("the working tree {}", self.tree().display());
                let extra: Vec<String> =
                    self.writable[1..].iter().map(|d| d.display().to_string()).collect();
                if !extra.is_empty() {
                    inside.push_str(&format!(" and the allowed directories {}", extra.join(", ")));
                }
                ToolError::new(format!(
                    "refused: {what} outside {inside}; add it to permissions.additionalDirectories \
                     to allow it"
                ))
            }
        }
    }

    /// The files of a listing (`glob`, `grep`, `repo_map`) that may be shown: regular files
    /// (a link's target counted) that resolve inside a root, none in a git directory. A
    /// listing may go through a link: git lists what its index holds, even where a directory
    /// became a link since.
    pub(crate) fn listed(&self, paths: Vec<PathBuf>) -> Vec<PathBuf> {
        // Each directory resolved once, `None` where it may not be read.
        let mut dirs: HashMap<PathBuf, Option<PathBuf>> = HashMap::new();
        paths
            .into_iter()
            .filter(|path| {
                let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                    return false;
                };
                let parent = dirs.entry(parent.to_owned()).or_insert_with(|| {
                    resolve(parent).ok().filter(|r| self.allows(r, Access::Read).is_ok())
                });
                let Some(parent) = parent else { return false };
                match std::fs::symlink_metadata(path) {
                    // A `.git` file (a worktree's or a submodule's `gitdir:`) is git's too.
                    Ok(meta) if meta.is_file() => {
                        self.allows(&parent.join(name), Access::Read).is_ok()
                    }
                    Ok(meta) if meta.file_type().is_symlink() => resolve(path).is_ok_and(|r| {
                        self.allows(&r, Access::Read).is_ok()
                            && std::fs::symlink_metadata(&r).is_ok_and(|m| m.is_file())
                    }),
                    _ => false,
                }
            })
            .collect()
    }
}

/// Why a resolved path is refused.
enum Outside {
    Roots,
    ReadOnly(PathBuf),
    /// Inside (or being) this git directory.
    Git(PathBuf),
}

/// The largest `.git` file read for the directory it names (git writes one line).
const GITDIR_FILE_BYTES: u64 = 4096;

/// The git directory `root`'s `.git` names when it is not a directory: a link's target, or a
/// `gitdir:` file's path (relative to `root`), resolved. `None` for a directory or nothing.
fn named_git_dir(root: &Path) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    if meta.file_type().is_symlink() {
        return resolve(&dot_git).ok();
    }
    if !meta.is_file() || meta.len() > GITDIR_FILE_BYTES {
        return None;
    }
    // Opened as the tools open a file: a FIFO swapped in meanwhile cannot hang the call.
    let (file, _) = crate::open::regular(&dot_git, ".git").ok()?;
    let mut text = String::new();
    file.take(GITDIR_FILE_BYTES).read_to_string(&mut text).ok()?;
    let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    resolve(&root.join(named)).ok()
}

/// A root as given, resolved (it need not exist yet: the spool is made on first use).
fn resolve_root(dir: &Path) -> PathBuf {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    resolve(&absolute).unwrap_or(absolute)
}

/// `path` (absolute) as the kernel would reach it: each component that is a symbolic link is
/// replaced by its target (then resolved in turn), `..` goes up from where the links led, and
/// what does not exist yet is taken as written. The result holds no link, no `.` and no `..`.
pub fn resolve(path: &Path) -> Result<PathBuf, String> {
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, path);
    let mut out = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = pending.pop() {
        if part == ".." {
            out.pop();
            continue;
        }
        out.push(&part);
        let is_link = std::fs::symlink_metadata(&out).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(format!("more than {MAX_LINKS} symbolic links to follow"));
        }
        let target = std::fs::read_link(&out)
            .map_err(|e| format!("cannot read the link {}: {e}", out.display()))?;
        out.pop();
        if target.is_absolute() {
            out = PathBuf::from("/");
        }
        push_components(&mut pending, &target);
    }
    Ok(out)
}

/// `path`'s components onto the stack, the first on top (`.` and the root left out).
fn push_components(pending: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    pending.extend(parts.into_iter().rev());
}

/// `path` with `.` and `..` taken as written, links not looked at.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("aerix-confine-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    #[test]
    fn links_are_followed_where_they_lead_and_dotdot_goes_up_from_there() {
        let dir = scratch("resolve");
        std::fs::create_dir_all(dir.join("tree/sub")).unwrap();
        std::fs::create_dir_all(dir.join("out/deep")).unwrap();
        std::os::unix::fs::symlink(dir.join("out/deep"), dir.join("tree/link")).unwrap();
        std::os::unix::fs::symlink("../tree/sub", dir.join("out/back")).unwrap();
        // `link/..` is `out`, not `tree` (the kernel's reading, not the lexical one).
        assert_eq!(resolve(&dir.join("tree/link/../f")).unwrap(), dir.join("out/f"));
        // A missing part is taken as written, and a link after a `..` is still followed.
        assert_eq!(resolve(&dir.join("tree/nope/../link/x")).unwrap(), dir.join("out/deep/x"));
        assert_eq!(resolve(&dir.join("out/back/new/file")).unwrap(), dir.join("tree/sub/new/file"));
        // A dangling link resolves to its target, and a loop is refused by name.
        std::os::unix::fs::symlink("/nowhere/at/all", dir.join("tree/dangling")).unwrap();
        assert_eq!(resolve(&dir.join("tree/dangling")).unwrap(), Path::new("/nowhere/at/all"));
        std::os::unix::fs::symlink("loop", dir.join("tree/loop")).unwrap();
        assert!(resolve(&dir.join("tree/loop")).unwrap_err().contains("40 symbolic links"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn roots_allow_inside_and_name_what_would_allow_the_rest() {
        let dir = scratch("roots");
        std::fs::create_dir_all(dir.join("tree")).unwrap();
        std::fs::create_dir_all(dir.join("extra")).unwrap();
        let spool = dir.join("tree/.spool");
        let roots =
            Roots::new(&dir.join("tree")).with_dir(&dir.join("extra")).with_read_only(&spool);
        let cwd = dir.join("tree");
        assert_eq!(roots.check(&cwd, "a/b", Access::Write).unwrap(), dir.join("tree/a/b"));
        assert!(roots.check(&cwd, "../extra/x", Access::Write).is_ok());
        assert!(roots.check(&cwd, ".spool/c1.txt", Access::Read).is_ok());
        let refused = roots.check(&cwd, ".spool/c1.txt", Access::Write).unwrap_err().0;
        assert!(refused.contains("may read but not change"), "{refused}");
        let refused = roots.check(&cwd, "/etc/passwd", Access::Read).unwrap_err().0;
        assert_eq!(
            refused,
            format!(
                "refused: /etc/passwd is outside the working tree {} and the allowed directories \
                 {}; add it to permissions.additionalDirectories to allow it",
                dir.join("tree").display(),
                dir.join("extra").display()
            )
        );
        let refused = roots.check(&cwd, "../other", Access::Read).unwrap_err().0;
        assert!(refused.starts_with("refused: ../other is outside"), "{refused}");
        std::os::unix::fs::symlink("/etc", dir.join("tree/etc")).unwrap();
        let refused = roots.check(&cwd, "etc/passwd", Access::Read).unwrap_err().0;
        assert!(refused.starts_with("refused: etc/passwd resolves to /etc/passwd, which is"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A `.git` under any root, added and read-only ones too, is outside; a `.git` above a
    /// root is not looked at (the root is where the tools' paths start).
    #[test]
    fn a_git_directory_under_any_root_is_outside() {
        let dir = scratch("git");
        std::fs::create_dir_all(dir.join("tree/.git")).unwrap();
        std::fs::create_dir_all(dir.join("extra/.git/x")).unwrap();
        let spool = dir.join("spool");
        let roots =
            Roots::new(&dir.join("tree")).with_dir(&dir.join("extra")).with_read_only(&spool);
        let cwd = dir.join("tree");
        for (path, access) in [
            (".git/config", Access::Read),
            ("../extra/.git/x/y", Access::Write),
            ("../spool/sub/.Git/HEAD", Access::Read),
        ] {
            let refused = roots.check(&cwd, path, access).unwrap_err().0;
            let place = if path.contains(".Git") { ".Git" } else { ".git" };
            assert_eq!(
                refused,
                format!("refused: {path} is inside {place}, which the file tools do not touch")
            );
        }
        assert!(roots.check(&cwd, "../extra/a.git/b", Access::Write).is_ok());
        let inner = Roots::new(&dir.join("extra/.git/x"));
        assert!(inner.check(&dir.join("extra/.git/x"), "y", Access::Write).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
