//! `ai-memory profile apply`: the profile written into a repository rules file (helper).
//!
//! The only command that writes into the user's repository, so it is planned first (pure text in,
//! text out: what `--dry-run` shows) and then executed (backup, then an atomic write or a delete).
//! Everything it owns sits between [`START`] and [`END`]; nothing outside them is ever changed.
//!
//! Separator rule, chosen so that `--remove` gives back the original bytes in every case: a new
//! block goes at the end as `text + eol + block + eol` (an empty or absent file gets `block + eol`
//! alone), where `eol` is the file's own line ending (that of its first line; `\n` if it has none).
//! Removal takes out the block's lines (START through END and END's line ending); when the block
//! ends the file, where apply put it, it also takes the one line ending apply added before it.
//! So `a` becomes `a\n<block>\n` and back, `a\n` becomes `a\n\n<block>\n` (a blank line before
//! the block) and back, `a\n\n` keeps its two; a block moved mid-file leaves its neighbours be.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// First line of the block.
pub const START: &str = "<!-- ai-memory:profile:start -->";
/// Last line of the block.
pub const END: &str = "<!-- ai-memory:profile:end -->";
/// The fixed line after [`START`]: tells a reader where the block came from and how to undo it.
pub const HEADER: &str = "Your usual choices, written by `ai-memory profile apply` (remove with `ai-memory profile apply --remove`).";
/// [`HEADER`] in a file `apply` created for the block: how `--remove` knows it may delete the
/// file (one it found, even empty, is only given its old bytes back).
pub const HEADER_CREATED: &str = "Your usual choices, written by `ai-memory profile apply`, which created this file (`ai-memory profile apply --remove` deletes it).";

const AGENTS: &str = "AGENTS.md";
const CLAUDE: &str = "CLAUDE.md";

/// What can stop `profile apply`; each names the file (or directory) and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("no git repository: no .git in {} or any directory above it", .0.display())]
    NoRepo(PathBuf),
    #[error("--target {}: {reason}", target.display())]
    BadTarget { target: PathBuf, reason: &'static str },
    #[error("{}: cannot {action}: {error}", path.display())]
    Io { path: PathBuf, action: &'static str, error: io::Error },
    #[error("{}: not UTF-8 text, refusing to edit it", .0.display())]
    NotUtf8(PathBuf),
    #[error("{}:{line}: malformed profile block: {what}; fix or delete it by hand", path.display())]
    Malformed { path: PathBuf, line: usize, what: &'static str },
    #[error("profile line {0} holds a line break or a block delimiter")]
    BadLine(usize),
    #[error("{}: changed since it was read; run the command again", .0.display())]
    Changed(PathBuf),
    #[error("{}: resolves to {}, outside the repository {}; refusing to write there", path.display(), resolved.display(), root.display())]
    Outside { path: PathBuf, resolved: PathBuf, root: PathBuf },
    #[error("{}: a symbolic link to a missing file; refusing to write through it", .0.display())]
    DanglingLink(PathBuf),
}

/// What `apply` or `--remove` would do to one file: shown by `--dry-run`, carried out by [`execute`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The repository root: `file` is relative to it (for display and the backup name).
    pub root: PathBuf,
    /// The rules file, relative to `root`.
    pub file: PathBuf,
    /// The file's text before (None: absent).
    pub before: Option<String>,
    /// The text after (None: the file is deleted, or stays absent).
    pub after: Option<String>,
    /// Lines beyond `max_lines`, left out of the block.
    pub dropped_lines: usize,
}

impl Plan {
    /// The rules file's full path.
    pub fn path(&self) -> PathBuf {
        self.root.join(&self.file)
    }

    /// False when the file would stay byte-identical (then [`execute`] writes nothing).
    pub fn changes(&self) -> bool {
        self.before != self.after
    }

    /// The block (START to END line) the file will hold, for `--dry-run` output; None after a removal.
    pub fn block(&self) -> Option<&str> {
        let after = self.after.as_deref()?;
        let span = find_block(after, &self.file).ok()??;
        Some(&after[span.start..span.end])
    }
}

/// The nearest directory from `dir` up holding `.git` (a directory, or the file of a linked
/// worktree: a worktree writes its own checkout, not the main one).
pub fn repo_root(dir: &Path) -> Result<PathBuf, ApplyError> {
    let dir = std::path::absolute(dir).map_err(io_err(dir, "resolve"))?;
    dir.ancestors()
        .find(|d| fs::symlink_metadata(d.join(".git")).is_ok())
        .map(Path::to_path_buf)
        .ok_or(ApplyError::NoRepo(dir))
}

/// Which file a new block goes to, relative to `root`: `target` if given (it must stay inside the
/// root); else an existing AGENTS.md; else an existing CLAUDE.md unless it only imports
/// `@AGENTS.md` (the block then belongs in AGENTS.md, which both tools read); else a new AGENTS.md.
pub fn choose_file(root: &Path, target: Option<&Path>) -> Result<PathBuf, ApplyError> {
    if let Some(target) = target {
        check_target(target)?;
        return Ok(target.to_path_buf());
    }
    if root.join(AGENTS).exists() {
        return Ok(PathBuf::from(AGENTS));
    }
    Ok(match read_text(&root.join(CLAUDE))? {
        Some(text) if !only_imports_agents(&text) => PathBuf::from(CLAUDE),
        _ => PathBuf::from(AGENTS),
    })
}

/// Writes (or replaces in place) the block holding the first `max_lines` of `lines`.
pub fn plan_apply(
    root: &Path,
    target: Option<&Path>,
    lines: &[String],
    max_lines: usize,
) -> Result<Plan, ApplyError> {
    // A line break or a delimiter inside a line would make a block `--remove` cannot find again.
    let bad = |l: &String| l.contains(['\n', '\r']) || [START, END].contains(&l.trim());
    if let Some(i) = lines.iter().position(bad) {
        return Err(ApplyError::BadLine(i + 1));
    }
    let kept = &lines[..lines.len().min(max_lines)];
    let (file, before) = locate(root, target)?;
    let after = match before.as_deref() {
        None => format!("{}\n", render(kept, "\n", true)),
        Some("") => format!("{}\n", render(kept, "\n", false)),
        Some(text) => match find_block(text, &root.join(&file))? {
            Some(s) => {
                let created = s.created(text);
                [&text[..s.start], &render(kept, s.eol, created), &text[s.end..]].concat()
            }
            None => {
                let eol = eol_of_text(text);
                [text, eol, &render(kept, eol, false), eol].concat()
            }
        },
    };
    Ok(Plan {
        root: root.to_path_buf(),
        file,
        before,
        after: Some(after),
        dropped_lines: lines.len() - kept.len(),
    })
}

/// Takes the block out again (see the separator rule above); a file `apply` created, left
/// empty, is deleted; one it found is given its old bytes back, even when they were none.
pub fn plan_remove(root: &Path, target: Option<&Path>) -> Result<Plan, ApplyError> {
    let (file, before) = locate(root, target)?;
    let after = match before.as_deref() {
        None => None,
        Some(text) => match find_block(text, &root.join(&file))? {
            None => Some(text.to_owned()),
            Some(s) => {
                let (mut head, mut tail) = (&text[..s.start], &text[s.end..]);
                tail = tail.strip_prefix(s.eol).or_else(|| tail.strip_prefix('\n')).unwrap_or(tail);
                if tail.is_empty() {
                    // The block ends the file, where apply put it: also drop the eol it added.
                    head = head
                        .strip_suffix(s.eol)
                        .or_else(|| head.strip_suffix('\n'))
                        .unwrap_or(head);
                }
                let rest = [head, tail].concat();
                (!rest.is_empty() || !s.created(text)).then_some(rest)
            }
        },
    };
    Ok(Plan { root: root.to_path_buf(), file, before, after, dropped_lines: 0 })
}

/// Carries out the plan: the previous version goes to `backups_dir` first (outside the
/// repository, so `git status` shows nothing extra), then the file is written atomically or
/// deleted. Returns the backup path if one was made; a no-op when `!plan.changes()`.
pub fn execute(plan: &Plan, backups_dir: &Path) -> Result<Option<PathBuf>, ApplyError> {
    if !plan.changes() {
        return Ok(None);
    }
    let path = plan.path();
    if read_text(&path)? != plan.before {
        return Err(ApplyError::Changed(path));
    }
    let backup = match &plan.before {
        Some(old) => Some(backup(&plan.file, old, backups_dir)?),
        None => None,
    };
    match &plan.after {
        Some(new) => write_atomic(&path, new)?,
        None => fs::remove_file(&path).map_err(io_err(&path, "delete"))?,
    }
    Ok(backup)
}

/// The file to act on and its text: `target`, else whichever of AGENTS.md and CLAUDE.md already
/// holds a block (so re-running and `--remove` find it), else [`choose_file`].
fn locate(root: &Path, target: Option<&Path>) -> Result<(PathBuf, Option<String>), ApplyError> {
    if target.is_none() {
        for name in [AGENTS, CLAUDE] {
            let path = root.join(name);
            if let Some(text) = read_text(&path)?
                && find_block(&text, &path)?.is_some()
            {
                check_inside(root, Path::new(name))?;
                return Ok((PathBuf::from(name), Some(text)));
            }
        }
    }
    let file = choose_file(root, target)?;
    check_inside(root, &file)?;
    let text = read_text(&root.join(&file))?;
    Ok((file, text))
}

/// The file, its links resolved (those of the folders on its way too), must lie inside the
/// repository: `apply` writes no file outside it.
fn check_inside(root: &Path, file: &Path) -> Result<(), ApplyError> {
    let real_root = fs::canonicalize(root).map_err(io_err(root, "resolve"))?;
    let path = root.join(file);
    let mut existing = path.clone();
    let mut rest = Vec::new();
    let resolved = loop {
        match fs::canonicalize(&existing) {
            Ok(real) => break rest.iter().rev().fold(real, |p: PathBuf, c| p.join(c)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if fs::symlink_metadata(&existing).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(ApplyError::DanglingLink(existing));
                }
                match (existing.file_name().map(ToOwned::to_owned), existing.parent()) {
                    (Some(name), Some(parent)) => {
                        rest.push(name);
                        existing = parent.to_path_buf();
                    }
                    _ => return Err(io_err(&path, "resolve")(e)),
                }
            }
            Err(e) => return Err(io_err(&existing, "resolve")(e)),
        }
    };
    if resolved.starts_with(&real_root) {
        Ok(())
    } else {
        Err(ApplyError::Outside { path, resolved, root: real_root })
    }
}

fn check_target(target: &Path) -> Result<(), ApplyError> {
    let reason = if target.as_os_str().is_empty() {
        "is empty"
    } else if target.has_root() || target.is_absolute() {
        "is absolute; give a path relative to the repository root"
    } else if target.components().any(|c| c == Component::ParentDir) {
        "uses `..`; the file must stay inside the repository"
    } else {
        return Ok(());
    };
    Err(ApplyError::BadTarget { target: target.to_path_buf(), reason })
}

/// True when every non-blank line is an `@AGENTS.md` import (and there is at least one).
fn only_imports_agents(text: &str) -> bool {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty()).peekable();
    lines.peek().is_some() && lines.all(|l| l == "@AGENTS.md" || l == "@./AGENTS.md")
}

/// The block from START to END (no line ending after END: that belongs to the surroundings).
fn render(lines: &[String], eol: &str, created: bool) -> String {
    let body: String = lines.iter().flat_map(|l| [l.as_str(), eol]).collect();
    let header = if created { HEADER_CREATED } else { HEADER };
    [START, eol, header, eol, eol, &body, END].concat()
}

/// Where a block sits: byte offset of its START line and of the end of its END line (before the
/// line ending), and the block's own line ending (its START line's).
struct Span {
    start: usize,
    end: usize,
    eol: &'static str,
}

impl Span {
    /// Whether `apply` created the file for this block (its header says so).
    fn created(&self, text: &str) -> bool {
        text[self.start..self.end].lines().nth(1).map(str::trim) == Some(HEADER_CREATED)
    }
}

/// The one well-formed block in `text`, if any; anything else with a delimiter is an error naming
/// the line, so a half-edited block is never guessed at.
fn find_block(text: &str, path: &Path) -> Result<Option<Span>, ApplyError> {
    let (mut open, mut found, mut offset) = (None, None, 0);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let body = body.strip_suffix('\r').unwrap_or(body);
        let what = match body.trim() {
            START if open.is_some() || found.is_some() => "a second start delimiter",
            START => {
                open = Some((i + 1, offset, eol_of_text(line)));
                ""
            }
            END => match open.take() {
                Some((_, start, eol)) => {
                    found = Some(Span { start, end: offset + body.len(), eol });
                    ""
                }
                None if found.is_some() => "a second end delimiter",
                None => "an end delimiter before any start",
            },
            _ => "",
        };
        if !what.is_empty() {
            return Err(malformed(path, i + 1, what));
        }
        offset += line.len();
    }
    match open {
        Some((line, ..)) => Err(malformed(path, line, "a start delimiter without an end")),
        None => Ok(found),
    }
}

fn malformed(path: &Path, line: usize, what: &'static str) -> ApplyError {
    ApplyError::Malformed { path: path.to_path_buf(), line, what }
}

/// The line ending of the first line (`\n` when there is none), so a CRLF file stays CRLF.
fn eol_of_text(text: &str) -> &'static str {
    match text.find('\n') {
        Some(i) if text[..i].ends_with('\r') => "\r\n",
        _ => "\n",
    }
}

/// The file's text, None if absent.
fn read_text(path: &Path) -> Result<Option<String>, ApplyError> {
    match fs::read(path) {
        Ok(bytes) => {
            String::from_utf8(bytes).map(Some).map_err(|_| ApplyError::NotUtf8(path.to_path_buf()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path, "read")(e)),
    }
}

fn io_err(path: &Path, action: &'static str) -> impl FnOnce(io::Error) -> ApplyError {
    let path = path.to_path_buf();
    move |error| ApplyError::Io { path, action, error }
}

fn now() -> (u64, u32) {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (t.as_secs(), t.subsec_nanos())
}

/// Saves `old` as `<backups_dir>/<secs>-<nanos>-<file with / as __>`; `create_new`, so a backup
/// is never overwritten.
fn backup(file: &Path, old: &str, backups_dir: &Path) -> Result<PathBuf, ApplyError> {
    fs::create_dir_all(backups_dir).map_err(io_err(backups_dir, "create backups directory"))?;
    let flat: Vec<_> = file.iter().filter(|c| *c != ".").map(|c| c.to_string_lossy()).collect();
    let (secs, nanos) = now();
    let path = backups_dir.join(format!("{secs}-{nanos}-{}", flat.join("__")));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut f| f.write_all(old.as_bytes()).and_then(|()| f.sync_all()))
        .map_err(io_err(&path, "write backup"))?;
    Ok(path)
}

/// Writes a temp file beside the target and renames it over, so a crash never leaves half a rules
/// file; keeps the old file's permissions, and writes through a symlink rather than replacing it.
fn write_atomic(path: &Path, text: &str) -> Result<(), ApplyError> {
    let dest = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::canonicalize(path).map_err(io_err(path, "resolve symlink"))?
        }
        _ => path.to_path_buf(),
    };
    let dir = dest.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_err(dir, "create directory"))?;
    let name = dest.file_name().unwrap_or_default().to_string_lossy();
    let (_, nanos) = now();
    let tmp = dir.join(format!(".{name}.{}-{nanos}.ai-memory.tmp", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        if let Ok(meta) = fs::metadata(&dest) {
            f.set_permissions(meta.permissions())?;
        }
        f.sync_all()?;
        fs::rename(&tmp, &dest)
    })();
    written.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err(&dest, "write")(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Removes a test's directory (repository, backups) when the test ends.
    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A fresh repository (`.git` directory) at `<temp>/<unique>/repo`; backups go beside it.
    fn repo(name: &str) -> (Cleanup, PathBuf) {
        let (secs, nanos) = now();
        let dir = std::env::temp_dir()
            .join(format!("ai-memory-apply-{name}-{}-{secs}-{nanos}", std::process::id()));
        fs::create_dir_all(dir.join("repo/.git")).unwrap();
        (Cleanup(dir.clone()), dir.join("repo"))
    }

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|l| format!("- {l}")).collect()
    }

    fn apply(root: &Path, v: &[&str]) -> Option<PathBuf> {
        let plan = plan_apply(root, None, &lines(v), 40).unwrap();
        execute(&plan, &root.with_file_name("backups")).unwrap()
    }

    fn remove(root: &Path) -> Option<PathBuf> {
        execute(&plan_remove(root, None).unwrap(), &root.with_file_name("backups")).unwrap()
    }

    fn read(root: &Path, name: &str) -> Option<String> {
        read_text(&root.join(name)).unwrap()
    }

    #[test]
    fn round_trip_on_existing_agents_md() {
        let (_c, root) = repo("round-trip");
        let (original, pnpm) =
            ("# Rules\n\nBe terse.\n", "Use pnpm, not npm. (profile/tools/pnpm.md)");
        fs::write(root.join(AGENTS), original).unwrap();
        let backup = apply(&root, &[pnpm]).unwrap();
        assert_eq!(fs::read_to_string(&backup).unwrap(), original);
        let first = read(&root, AGENTS).unwrap();
        assert_eq!(first, format!("{original}\n{START}\n{HEADER}\n\n- {pnpm}\n{END}\n"));

        assert!(!plan_apply(&root, None, &lines(&[pnpm]), 40).unwrap().changes());
        assert_eq!(apply(&root, &[pnpm]), None, "unchanged: no write, no backup");
        assert_eq!(read(&root, AGENTS).unwrap(), first);

        apply(&root, &["Use uv.", "Use ruff."]).unwrap();
        let changed = read(&root, AGENTS).unwrap();
        assert!(changed.starts_with(&format!("{original}\n{START}\n")));
        assert!(changed.ends_with(&format!("- Use uv.\n- Use ruff.\n{END}\n")));
        assert!(remove(&root).is_some());
        assert_eq!(read(&root, AGENTS).unwrap(), original);
    }

    #[test]
    fn claude_md_importing_agents_md_gets_a_new_agents_md() {
        let (_c, root) = repo("claude-import");
        let claude = "@AGENTS.md\n\n  @./AGENTS.md\n";
        fs::write(root.join(CLAUDE), claude).unwrap();
        assert_eq!(apply(&root, &["Use uv."]), None, "a new file has no backup");
        assert!(read(&root, AGENTS).unwrap().starts_with(START));
        assert!(remove(&root).is_some());
        assert_eq!(read(&root, AGENTS), None);
        assert_eq!(read(&root, CLAUDE).unwrap(), claude);
    }

    #[test]
    fn claude_md_with_rules_gets_the_block() {
        let (_c, root) = repo("claude-rules");
        fs::write(root.join(CLAUDE), "@AGENTS.md\nNever push to main.\n").unwrap();
        apply(&root, &["Use uv."]).unwrap();
        assert!(read(&root, CLAUDE).unwrap().contains(START));
        assert_eq!(read(&root, AGENTS), None);
    }

    #[test]
    fn no_rules_file_creates_agents_md_and_remove_deletes_it() {
        let (_c, root) = repo("none");
        let plan = plan_apply(&root, None, &lines(&["Use uv."]), 40).unwrap();
        let block = plan.block().unwrap();
        assert!(block.starts_with(START) && block.ends_with(END) && block.contains("- Use uv."));
        assert_eq!(plan.path(), root.join(AGENTS));
        assert_eq!(read(&root, AGENTS), None, "planning (--dry-run) writes nothing");
        execute(&plan, &root.with_file_name("backups")).unwrap();
        assert_eq!(read(&root, AGENTS).unwrap(), format!("{block}\n"));
        remove(&root).unwrap();
        assert!(!root.join(AGENTS).exists());
    }

    #[test]
    fn remove_keeps_a_file_it_did_not_create_even_an_empty_one() {
        let (_c, root) = repo("empty");
        fs::write(root.join(AGENTS), "").unwrap();
        apply(&root, &["Use uv."]).unwrap();
        assert!(read(&root, AGENTS).unwrap().contains(HEADER));
        remove(&root).unwrap();
        assert_eq!(read(&root, AGENTS).as_deref(), Some(""), "the user's empty file stays");
        // A file apply created keeps saying so when the block is replaced.
        fs::remove_file(root.join(AGENTS)).unwrap();
        assert_eq!(apply(&root, &["Use uv."]), None, "a new file has no backup");
        apply(&root, &["Use ruff."]).unwrap();
        assert!(read(&root, AGENTS).unwrap().contains(HEADER_CREATED));
        remove(&root).unwrap();
        assert_eq!(read(&root, AGENTS), None);
    }

    #[test]
    fn a_link_out_of_the_repository_is_refused_after_resolving_it() {
        let (_c, root) = repo("links");
        let outside = root.with_file_name("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("AGENTS.md"), "theirs\n").unwrap();
        std::os::unix::fs::symlink(outside.join("AGENTS.md"), root.join(AGENTS)).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("docs")).unwrap();
        let targets = [None, Some(Path::new("docs/rules.md")), Some(Path::new("AGENTS.md"))];
        for target in targets {
            let err = plan_apply(&root, target, &lines(&["u"]), 40).unwrap_err();
            assert!(matches!(err, ApplyError::Outside { .. }), "{target:?}: {err}");
            assert!(err.to_string().contains("outside the repository"), "{err}");
            assert!(plan_remove(&root, target).is_err());
        }
        assert_eq!(fs::read_to_string(outside.join("AGENTS.md")).unwrap(), "theirs\n");
        assert!(!outside.join("rules.md").exists());
        std::os::unix::fs::symlink(root.join("gone.md"), root.join("dangling.md")).unwrap();
        let err = plan_apply(&root, Some(Path::new("dangling.md")), &[], 40).unwrap_err();
        assert!(matches!(err, ApplyError::DanglingLink(_)), "{err}");
        // A link that stays inside is followed.
        fs::write(root.join("RULES.md"), "mine\n").unwrap();
        std::os::unix::fs::symlink(root.join("RULES.md"), root.join("rules-link.md")).unwrap();
        let plan = plan_apply(&root, Some(Path::new("rules-link.md")), &lines(&["u"]), 40);
        execute(&plan.unwrap(), &root.with_file_name("backups")).unwrap();
        assert!(read(&root, "RULES.md").unwrap().starts_with("mine\n\n<!--"));
    }

    #[test]
    fn routing_block_and_user_text_outside_are_untouched() {
        let (_c, root) = repo("routing");
        let head =
            "Mine.\r\n<!-- ai-memory:routing:start -->\r\nr\r\n<!-- ai-memory:routing:end -->\r\n";
        let text = format!("{head}{START}\r\nold\r\n{END}\r\nAfter, mine too.");
        fs::write(root.join(AGENTS), &text).unwrap();
        apply(&root, &["Use uv."]).unwrap();
        let want =
            format!("{head}{START}\r\n{HEADER}\r\n\r\n- Use uv.\r\n{END}\r\nAfter, mine too.");
        assert_eq!(read(&root, AGENTS).unwrap(), want, "replaced in place, CRLF kept");
        remove(&root).unwrap();
        assert_eq!(read(&root, AGENTS).unwrap(), format!("{head}After, mine too."));
    }

    #[test]
    fn every_trailing_newline_case_and_crlf_restores_byte_identically() {
        for original in ["a", "a\n", "a\n\n", "\n", "a\r\nb\r\n", "a\r\nb", "a\r\n\r\n"] {
            let (_c, root) = repo("newline");
            fs::write(root.join(AGENTS), original).unwrap();
            apply(&root, &["Use uv."]).unwrap();
            let applied = read(&root, AGENTS).unwrap();
            assert!(applied.starts_with(original) && applied.ends_with('\n'), "{original:?}");
            if original.contains('\r') {
                let lf = applied.matches('\n').count();
                assert_eq!(lf, applied.matches("\r\n").count(), "{applied:?}");
            }
            remove(&root).unwrap();
            assert_eq!(read(&root, AGENTS).unwrap(), original, "{original:?}");
        }
    }

    #[test]
    fn max_lines_drops_and_counts_and_bad_lines_are_refused() {
        let (_c, root) = repo("max");
        let plan = plan_apply(&root, None, &lines(&["one", "two", "three"]), 2).unwrap();
        assert_eq!(plan.dropped_lines, 1);
        let err = plan_apply(&root, None, &[END.into()], 2).unwrap_err();
        assert!(matches!(err, ApplyError::BadLine(1)), "{err}");
        assert!(
            plan.block().unwrap().contains("- two") && !plan.block().unwrap().contains("three")
        );
    }

    #[test]
    fn target_wins_and_escaping_targets_are_refused() {
        let (_c, root) = repo("target");
        fs::write(root.join(AGENTS), "x\n").unwrap();
        let plan = plan_apply(&root, Some(Path::new("docs/rules.md")), &lines(&["u"]), 40).unwrap();
        assert_eq!(plan.path(), root.join("docs/rules.md"));
        for bad in ["../x.md", "docs/../../x.md", "/etc/x.md"] {
            let err = choose_file(&root, Some(Path::new(bad))).unwrap_err();
            assert!(matches!(err, ApplyError::BadTarget { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn malformed_blocks_are_refused_with_file_and_line() {
        let cases = [
            (format!("a\n{START}\nb\n"), 2),
            (format!("a\nb\n{END}\n{START}\n"), 3),
            (format!("{START}\n{START}\n{END}\n"), 2),
        ];
        for (text, line) in cases {
            let (_c, root) = repo("malformed");
            fs::write(root.join(AGENTS), &text).unwrap();
            let err = plan_apply(&root, None, &lines(&["u"]), 40).unwrap_err();
            assert!(matches!(err, ApplyError::Malformed { line: l, .. } if l == line), "{err}");
            assert!(err.to_string().contains(&format!("AGENTS.md:{line}")), "{err}");
            assert!(plan_remove(&root, None).is_err());
            assert_eq!(read(&root, AGENTS).unwrap(), text);
        }
    }

    #[test]
    fn backups_land_in_the_backups_dir_with_the_old_bytes() {
        let (_c, root) = repo("backup");
        let target = Path::new("docs/rules.md");
        fs::create_dir_all(root.join("docs")).unwrap();
        fs::write(root.join(target), "old\n").unwrap();
        let plan = plan_apply(&root, Some(target), &lines(&["u"]), 40).unwrap();
        let backup = execute(&plan, &root.with_file_name("backups")).unwrap().unwrap();
        assert_eq!(backup.parent().unwrap(), root.with_file_name("backups"));
        let name = backup.file_name().unwrap().to_string_lossy().into_owned();
        let parts: Vec<_> = name.splitn(3, '-').collect();
        assert!(parts[0].parse::<u64>().is_ok() && parts[1].parse::<u32>().is_ok(), "{name}");
        assert_eq!(parts[2], "docs__rules.md");
        assert_eq!(fs::read_to_string(&backup).unwrap(), "old\n");
        let beside: Vec<_> = fs::read_dir(root.join("docs")).unwrap().map(|e| e.unwrap()).collect();
        assert_eq!(beside.len(), 1, "nothing extra beside the file");
    }

    #[test]
    fn remove_finds_the_block_and_without_one_changes_nothing() {
        let (_c, root) = repo("remove");
        fs::write(root.join(AGENTS), "a\n").unwrap();
        fs::write(root.join(CLAUDE), format!("c\n{START}\nx\n{END}\n")).unwrap();
        let plan = plan_remove(&root, None).unwrap();
        assert_eq!((plan.file.as_path(), plan.after.as_deref()), (Path::new(CLAUDE), Some("c")));
        remove(&root).unwrap();
        let plan = plan_remove(&root, None).unwrap();
        assert!(!plan.changes() && plan.block().is_none());
        assert_eq!(remove(&root), None);
        assert_eq!(read(&root, AGENTS).unwrap(), "a\n");
    }

    #[test]
    fn a_linked_worktree_is_its_own_root() {
        let (_c, main) = repo("worktree");
        let wt = main.join("wt");
        fs::create_dir_all(wt.join("src")).unwrap();
        fs::write(wt.join(".git"), "gitdir: ../.git/worktrees/wt\n").unwrap();
        assert_eq!(repo_root(&wt.join("src")).unwrap(), wt);
        let bare = main.with_file_name("norepo");
        fs::create_dir_all(&bare).unwrap();
        if !bare.ancestors().any(|d| d.join(".git").exists()) {
            let err = repo_root(&bare).unwrap_err();
            assert!(err.to_string().contains(&*bare.to_string_lossy()), "{err}");
        }
    }
}
