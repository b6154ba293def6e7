//! An implementer's opening, the turns aerix takes for it before its first own one: the check
//! run when it is a command, then the files the brief, the check and the check's output name,
//! read (as Aider shows the files added to its chat). A small model's first own turn then sees
//! what fails and the code, instead of guessing at both.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

/// Files read in the opening, at most: the ones named first.
pub(crate) const FILES: usize = 3;
/// A file whose first this many bytes hold a NUL is not text, and is not read.
const SNIFF: usize = 8192;

pub(crate) struct Opening {
    /// The check, when it is a command the harness knows.
    command: Option<String>,
    brief: String,
    check: String,
    tree: PathBuf,
    step: Step,
}

#[derive(Clone, Copy, PartialEq)]
enum Step {
    Check,
    Read,
    Done,
}

impl Opening {
    pub(crate) fn new(command: Option<String>, brief: &str, check: &str, tree: &Path) -> Opening {
        Opening {
            command,
            brief: brief.to_owned(),
            check: check.to_owned(),
            tree: tree.to_owned(),
            step: Step::Check,
        }
    }
}

impl aerix_core::Opening for Opening {
    fn next(&mut self, results: &[String]) -> Option<(String, Vec<(String, Value)>)> {
        if self.step == Step::Check {
            self.step = Step::Read;
            if let Some(command) = &self.command {
                let call = ("bash".to_owned(), json!({"command": command}));
                return Some(("First I run the check, to see what fails.".to_owned(), vec![call]));
            }
        }
        if self.step != Step::Read {
            return None;
        }
        self.step = Step::Done;
        // The brief and the check first: the first place to look for names.
        let text = format!("{}\n{}\n{}", self.brief, self.check, results.join("\n"));
        let files = named_files(&text, &self.tree, FILES);
        if files.is_empty() {
            return None;
        }
        let thought = format!("Then I read {}, named above.", list(&files));
        let calls = files.into_iter().map(|f| ("read".to_owned(), json!({"path": f}))).collect();
        Some((thought, calls))
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list(files: &[String]) -> String {
    match files {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The text files of `tree` that `text` names, in the order first named, at most `max`: a
/// path relative to the tree, or an absolute one inside it (a traceback's); never one outside
/// it, under `.git`, through a symbolic link, or not text.
pub(crate) fn named_files(text: &str, tree: &Path, max: usize) -> Vec<String> {
    let trees: Vec<PathBuf> =
        [Some(tree.to_owned()), tree.canonicalize().ok()].into_iter().flatten().collect();
    let mut found: Vec<String> = Vec::new();
    for word in path_words(text) {
        if found.len() >= max {
            break;
        }
        let word = word.trim_end_matches('.');
        if !word.contains(['.', '/']) {
            continue;
        }
        let Some(relative) = inside(word, &trees) else { continue };
        let name = relative.to_string_lossy().into_owned();
        if !found.contains(&name) && is_text_file(tree, &relative) {
            found.push(name);
        }
    }
    found
}

/// The words of `text` that may be paths: runs of letters, digits and `_./-`.
pub(crate) fn path_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || "_./-".contains(c)))
}

/// `word` as a path relative to one of `trees`, if it is one and stays inside.
fn inside(word: &str, trees: &[PathBuf]) -> Option<PathBuf> {
    let path = Path::new(word);
    let relative = if path.is_absolute() {
        trees.iter().find_map(|t| path.strip_prefix(t).ok())?
    } else {
        path
    };
    let mut clean = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) if part != ".git" => clean.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!clean.as_os_str().is_empty()).then_some(clean)
}

/// A regular file (not a link, whose every directory on the way is no link either) whose first
/// bytes hold no NUL.
fn is_text_file(tree: &Path, relative: &Path) -> bool {
    let mut path = tree.to_owned();
    for part in relative.components() {
        path.push(part);
        match path.symlink_metadata() {
            Ok(meta) if !meta.file_type().is_symlink() => {}
            _ => return false,
        }
    }
    if !path.symlink_metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::with_capacity(SNIFF);
    let read = std::fs::File::open(&path).and_then(|f| f.take(SNIFF as u64).read_to_end(&mut head));
    read.is_ok() && !head.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aerix_core::Opening as _;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("calc.sh"), "echo $(( $1 - $2 ))\n").unwrap();
        std::fs::write(dir.path().join("test.sh"), "sh calc.sh 2 3\n").unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(dir.path().join("blob.bin"), b"\x7fELF\0\0\0").unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
        dir
    }

    #[test]
    fn names_are_found_in_order_inside_the_tree_and_text_only() {
        let dir = tree();
        let abs = dir.path().join("src/lib.rs");
        let text = format!(
            "`sh test.sh` fails. Fix calc.sh.\nFile \"{}\", line 1\n../etc/passwd /etc/passwd blob.bin .git/config test.sh ./calc.sh nothing.txt",
            abs.display()
        );
        assert_eq!(named_files(&text, dir.path(), 5), ["test.sh", "calc.sh", "src/lib.rs"]);
        assert_eq!(named_files(&text, dir.path(), 2), ["test.sh", "calc.sh"]);
        assert_eq!(named_files("src/lib.rs:1:5 error", dir.path(), 3), ["src/lib.rs"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_is_never_followed() {
        let dir = tree();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "key\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("s.txt"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        assert!(named_files("s.txt out/secret.txt", dir.path(), 3).is_empty());
    }

    #[test]
    fn a_command_check_is_run_then_the_files_read() {
        let dir = tree();
        let mut opening =
            Opening::new(Some("sh test.sh".into()), "Fix calc.sh.", "sh test.sh", dir.path());
        let (_, calls) = opening.next(&[]).unwrap();
        assert_eq!(calls, [("bash".to_owned(), json!({"command": "sh test.sh"}))]);
        let (thought, calls) = opening.next(&["[bash c1]\nsrc/lib.rs: exit 1".into()]).unwrap();
        let paths: Vec<_> = calls.iter().map(|(_, i)| i["path"].as_str().unwrap()).collect();
        assert_eq!(paths, ["calc.sh", "test.sh", "src/lib.rs"]);
        assert_eq!(thought, "Then I read calc.sh, test.sh and src/lib.rs, named above.");
        assert!(opening.next(&[]).is_none());
    }

    #[test]
    fn a_prose_check_only_reads_and_nothing_named_is_no_opening() {
        let dir = tree();
        let mut opening = Opening::new(None, "Fix calc.sh.", "it adds", dir.path());
        let (_, calls) = opening.next(&[]).unwrap();
        assert_eq!(calls, [("read".to_owned(), json!({"path": "calc.sh"}))]);
        assert!(opening.next(&[]).is_none());
        let mut none = Opening::new(None, "Make it faster.", "it is faster", dir.path());
        assert!(none.next(&[]).is_none());
    }
}
