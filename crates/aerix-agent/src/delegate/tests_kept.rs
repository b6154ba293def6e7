//! A passing command check counts only when the change left the tests alone: an attempt that
//! empties `test.sh`, rewrites `test_calc.py` or deletes a `#[test]` makes the command pass
//! without fixing anything (Gemma 3 270M did all three on the attempts benchmark). The tests
//! are the files the check command names and the files named as tests by their language's
//! convention; a piece whose brief names a test file may change that one.

/// Why a passing attempt's change does not count, if it does not: it changes a test file the
/// brief does not name, or removes more tests than it adds.
pub(crate) fn broken(paths: &[String], patch: &str, brief: &str, check: &str) -> Option<String> {
    let touched: Vec<&str> =
        paths.iter().map(String::as_str).filter(|p| is_kept(p, brief, check)).collect();
    if !touched.is_empty() {
        return Some(format!(
            "`{check}` passed, but the change edits {}, the check's own tests: a fix changes the code they test and leaves them as they are",
            touched.join(", ")
        ));
    }
    let (removed, added) = test_lines(patch);
    (removed > added).then(|| {
        let n = removed - added;
        let s = if n == 1 { "" } else { "s" };
        format!(
            "`{check}` passed, but the change removes {n} test{s}: a fix leaves the tests in place"
        )
    })
}

/// Whether `path` is one of the check's tests a piece with `brief` must leave alone.
pub(crate) fn is_kept(path: &str, brief: &str, check: &str) -> bool {
    (is_test_path(path) || names(check, path)) && !names_outside(brief, check, path)
}

/// A path that holds tests by its language's convention.
pub(crate) fn is_test_path(path: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    let Some(name) = parts.pop() else { return false };
    let dirs = ["tests", "test", "__tests__", "spec", "testdata"];
    if parts.iter().any(|d| dirs.contains(d)) {
        return true;
    }
    let stem = name.split('.').next().unwrap_or(name);
    matches!(name, "test.sh" | "tests.sh" | "conftest.py")
        || name.starts_with("test_") && name.ends_with(".py")
        || name.ends_with("_test.py")
        || name.ends_with("_test.go")
        || name.contains(".test.")
        || name.contains(".spec.")
        || stem.ends_with("_spec") && name.ends_with(".rb")
}

/// Whether `text` names `path` (as a word: `test.sh` in `sh test.sh`, not in `mytest.sh`).
fn names(text: &str, path: &str) -> bool {
    crate::delegate::opening::path_words(text)
        .any(|w| w.trim_start_matches("./").trim_end_matches('.') == path)
}

/// Whether the brief names `path` other than by quoting the check.
fn names_outside(brief: &str, check: &str, path: &str) -> bool {
    let rest = if check.trim().is_empty() { brief.to_owned() } else { brief.replace(check, " ") };
    names(&rest, path)
}

/// Test definitions a unified diff removes and adds: Rust's `#[test]`, Python's `def test…`,
/// Go's `func Test…`, JavaScript's `it(`/`test(`, shell's test lines are a file's (see above).
fn test_lines(patch: &str) -> (usize, usize) {
    let marks =
        ["#[test]", "#[tokio::test", "def test", "async def test", "func Test", "it(", "test("];
    let (mut removed, mut added) = (0, 0);
    for line in patch.lines() {
        let (sign, text) = match line.split_at_checked(1) {
            Some((sign, text)) if !line.starts_with("---") && !line.starts_with("+++") => {
                (sign, text.trim_start())
            }
            _ => continue,
        };
        if !marks.iter().any(|m| text.starts_with(m)) {
            continue;
        }
        match sign {
            "-" => removed += 1,
            "+" => added += 1,
            _ => {}
        }
    }
    (removed, added)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_change_to_the_tests_or_the_checks_own_script_does_not_count() {
        let brief = "sh test.sh fails. Fix calc.sh.";
        let why = broken(&paths(&["calc.sh", "test.sh"]), "", brief, "sh test.sh").unwrap();
        assert!(why.contains("edits test.sh, the check's own tests"), "{why}");
        for p in ["test_calc.py", "tests/it.rs", "pkg/calc_test.go", "src/a.test.ts", "conftest.py"]
        {
            assert!(broken(&paths(&[p]), "", "Fix it.", "make check").is_some(), "{p}");
        }
        // The check names its script: changed, it is the check's, whatever its name.
        assert!(
            broken(&paths(&["run_checks.py"]), "", "Fix it.", "python3 run_checks.py").is_some()
        );
        assert_eq!(
            broken(&paths(&["calc.sh", "contest.py", "latest.sh"]), "", brief, "sh test.sh"),
            None
        );
    }

    #[test]
    fn a_brief_that_names_a_test_file_lets_it_change() {
        let brief = "Add a test for add() to test_calc.py; check with python3 -m unittest.";
        let check = "python3 -m unittest";
        assert_eq!(broken(&paths(&["calc.py", "test_calc.py"]), "", brief, check), None);
        // Quoting the check does not name its script.
        let brief = "`sh test.sh` fails. Fix calc.sh.";
        assert!(broken(&paths(&["test.sh"]), "", brief, "sh test.sh").is_some());
    }

    #[test]
    fn removing_tests_from_a_source_file_does_not_count() {
        let patch = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,6 +0,0 @@\n-pub fn f() {}\n-#[cfg(test)]\n-mod tests {\n-    #[test]\n-    fn f_works() {}\n-}\n";
        let why = broken(&paths(&["src/lib.rs"]), patch, "Fix f.", "cargo test").unwrap();
        assert!(why.contains("removes 1 test:"), "{why}");
        // Moved or rewritten, a test is still there.
        let moved = "-    #[test]\n-    fn a() {}\n+    #[test]\n+    fn b() {}\n";
        assert_eq!(broken(&paths(&["src/lib.rs"]), moved, "Fix f.", "cargo test"), None);
    }
}
