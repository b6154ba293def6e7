//! A repository's test commands, and a check that is one of them run by the harness: its exit
//! status is the verdict, never a model's reading of it.
//!
//! Detection reads only the names and a few small files at the tree's top (a project file the
//! user did not write is never run here: the command runs later, as `bash` would run it, in an
//! attempt's tree).

use std::path::Path;
use std::time::Duration;

use aerix_tools::{Ending, ToolEnv, ToolError};

/// How long a command check may run (`bash`'s default timeout: the same bounds as the model's
/// own call).
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(aerix_tools::DEFAULT_TIMEOUT_SECS);
/// The output's tail a failing check's reason quotes.
const REASON_TAIL: usize = 1_500;
/// The bytes of a file detection reads (a Makefile, a `package.json`).
const READ_CAP: u64 = 256 * 1024;

/// A test command and the file it was found from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detected {
    pub command: String,
    pub from: &'static str,
}

/// The commands a piece's check may name: `configured` (`verify.commands`) when set, else those
/// detected in `root`.
pub fn commands(configured: &[String], root: &Path) -> Vec<String> {
    let configured: Vec<String> =
        configured.iter().map(|c| c.trim().to_owned()).filter(|c| !c.is_empty()).collect();
    if !configured.is_empty() {
        return configured;
    }
    detect(root).into_iter().map(|d| d.command).collect()
}

/// The test commands `root`'s files name, most specific first.
pub fn detect(root: &Path) -> Vec<Detected> {
    let mut found = Vec::new();
    let mut add = |command: &str, from: &'static str| {
        if !found.iter().any(|d: &Detected| d.command == command) {
            found.push(Detected { command: command.to_owned(), from });
        }
    };
    let file = |name: &str| root.join(name).is_file();
    for script in ["test.sh", "run_tests.sh", "tests.sh"] {
        if file(script) {
            add(&format!("sh {script}"), "a test script");
        }
    }
    for makefile in ["Makefile", "makefile", "GNUmakefile"] {
        if read(&root.join(makefile)).is_some_and(|text| has_make_target(&text, "test")) {
            add("make test", "the Makefile's `test` target");
            break;
        }
    }
    if file("Cargo.toml") {
        add("cargo test", "Cargo.toml");
    }
    if file("go.mod") {
        add("go test ./...", "go.mod");
    }
    if read(&root.join("package.json")).is_some_and(|t| npm_test(&t).is_some()) {
        add("npm test", "package.json's `scripts.test`");
    }
    let pytest = file("pytest.ini")
        || file("conftest.py")
        || read(&root.join("pyproject.toml")).is_some_and(|t| t.contains("[tool.pytest"))
        || read(&root.join("setup.cfg")).is_some_and(|t| t.contains("[tool:pytest]"));
    if pytest {
        add("python3 -m pytest -q", "the pytest configuration");
    } else if root.join("tests").is_dir() && has_python_tests(&root.join("tests")) {
        add("python3 -m unittest discover -s tests -t .", "the tests/ directory");
    } else if has_python_tests(root) {
        add("python3 -m unittest", "the test_*.py files");
    }
    found
}

fn read(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(READ_CAP).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Whether a Makefile has a rule for `target` (`test:` or `test :` at a line's start, not a
/// variable assignment `test := ...`).
fn has_make_target(text: &str, target: &str) -> bool {
    text.lines().any(|line| {
        let Some(rest) = line.strip_prefix(target) else { return false };
        let rest = rest.trim_start();
        rest.starts_with(':') && !rest.starts_with(":=") && !rest.starts_with("::=")
    })
}

/// `scripts.test` of a `package.json`, unless it is npm's placeholder that only fails.
fn npm_test(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let script = value.get("scripts")?.get("test")?.as_str()?.trim();
    (!script.is_empty() && !script.contains("no test specified")).then(|| script.to_owned())
}

/// Whether `dir` holds a `test_*.py` or `*_test.py` file.
fn has_python_tests(dir: &Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|entry| {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
    })
}

/// A command check's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRun {
    pub command: String,
    /// The exit status (`None`: killed by a signal, timed out or cancelled; `ending` says).
    pub exit: Option<i32>,
    pub ending: Ending,
    /// The output's last lines, within `REASON_TAIL` bytes.
    pub tail: String,
}

impl CheckRun {
    pub fn passed(&self) -> bool {
        self.exit == Some(0)
    }

    /// Why it failed, for the next attempt's brief and the caller's result.
    pub fn reason(&self) -> String {
        let how = match &self.ending {
            Ending::Exit(n) => format!("exited {n}"),
            Ending::Signal(n) => format!("was killed by signal {n}"),
            Ending::Timeout(s) => format!("timed out after {s}s"),
            Ending::Cancelled => "was cancelled".to_owned(),
        };
        format!("`{}` {how}. Its output ends:\n{}", self.command, self.tail)
    }
}

/// Runs `command` in `env`'s tree as `bash` runs it (its sandbox, its timeout, the cancel).
pub fn run(command: &str, env: &ToolEnv<'_>) -> Result<CheckRun, ToolError> {
    let (ending, output) = aerix_tools::run_command(command, CHECK_TIMEOUT, env)?;
    let exit = match ending {
        Ending::Exit(n) => Some(n),
        _ => None,
    };
    Ok(CheckRun { command: command.to_owned(), exit, ending, tail: tail(&output, REASON_TAIL) })
}

/// The last whole lines of `text` within `cap` bytes, after a `[...]` line when cut.
pub(crate) fn tail(text: &str, cap: usize) -> String {
    let text = text.trim_end();
    if text.len() <= cap {
        return text.to_owned();
    }
    let mut start = text.len() - cap;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let cut = &text[start..];
    let cut = cut.find('\n').map_or(cut, |i| &cut[i + 1..]);
    format!("[...]\n{cut}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn detected(files: &[(&str, &str)]) -> Vec<String> {
        let dir = tree(files);
        detect(dir.path()).into_iter().map(|d| d.command).collect()
    }

    #[test]
    fn each_kind_of_repository_names_its_test_command() {
        assert_eq!(detected(&[("test.sh", "sh calc.sh")]), ["sh test.sh"]);
        assert_eq!(detected(&[("Makefile", "all:\n\tcc a.c\ntest: all\n\t./a\n")]), ["make test"]);
        assert_eq!(detected(&[("Cargo.toml", "[package]\n")]), ["cargo test"]);
        assert_eq!(detected(&[("go.mod", "module x\n")]), ["go test ./..."]);
        assert_eq!(detected(&[("package.json", r#"{"scripts": {"test": "jest"}}"#)]), ["npm test"]);
        assert_eq!(detected(&[("pytest.ini", "[pytest]\n")]), ["python3 -m pytest -q"]);
        assert_eq!(
            detected(&[("pyproject.toml", "[tool.pytest.ini_options]\n")]),
            ["python3 -m pytest -q"]
        );
        assert_eq!(
            detected(&[("tests/test_calc.py", "import unittest\n")]),
            ["python3 -m unittest discover -s tests -t ."]
        );
        assert_eq!(detected(&[("test_calc.py", "import unittest\n")]), ["python3 -m unittest"]);
        // Several: the script first.
        assert_eq!(
            detected(&[("test.sh", "x"), ("Cargo.toml", "[package]\n")]),
            ["sh test.sh", "cargo test"]
        );
    }

    #[test]
    fn what_names_no_test_is_not_a_test_command() {
        assert!(detected(&[("README.md", "sh test.sh")]).is_empty());
        assert!(detected(&[("Makefile", "TEST := 1\ntest := 2\nbuild:\n\tcc a.c\n")]).is_empty());
        let placeholder = r#"{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#;
        assert!(detected(&[("package.json", placeholder)]).is_empty());
        assert!(detected(&[("package.json", "{not json")]).is_empty());
        assert!(detected(&[("calc.py", "x = 1\n")]).is_empty());
        // A directory named like the script is not one.
        assert!(detected(&[("test.sh/x", "")]).is_empty());
    }

    #[test]
    fn configured_commands_replace_the_detected_ones() {
        let dir = tree(&[("test.sh", "x")]);
        assert_eq!(commands(&[], dir.path()), ["sh test.sh"]);
        let set = ["make check".to_owned(), "  ".to_owned()];
        assert_eq!(commands(&set, dir.path()), ["make check"]);
    }

    #[test]
    fn a_long_output_keeps_its_last_whole_lines() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let cut = tail(&text, 100);
        assert!(cut.starts_with("[...]\n") && cut.ends_with("line 999"), "{cut}");
        assert!(cut.len() <= 100 + 6);
        assert!(!cut.contains("line 1\n"));
        assert_eq!(tail("short\n", 100), "short");
    }
}
