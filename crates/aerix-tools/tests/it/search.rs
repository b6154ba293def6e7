use serde_json::json;

use crate::Scratch;

fn repo() -> Scratch {
    let s = Scratch::new("search", true);
    s.write(".gitignore", "target/\n*.log\n");
    s.write("src/main.rs", "fn main() {\n    helper();\n}\n");
    s.write("src/util/helper.rs", "pub fn helper() {}\n");
    s.write("README.md", "# demo\nhelper docs\n");
    s.write("target/debug/out.rs", "fn helper() {}\n");
    s.write("run.log", "helper\n");
    let t = gitstore::GIT_TIMEOUT;
    let git = gitstore::Repo::at(s.path());
    git.run(&["add", "src/main.rs", ".gitignore"], t).unwrap();
    git.run(&["commit", "-qm", "init"], t).unwrap();
    s
}

#[test]
fn glob_sees_the_git_file_set_and_star_crosses_slashes() {
    let s = repo();
    // Tracked and untracked-not-ignored; never target/ or *.log.
    assert_eq!(s.ok("glob", json!({"pattern": "*.rs"})), "src/main.rs\nsrc/util/helper.rs");
    assert_eq!(s.ok("glob", json!({"pattern": "*.rs", "path": "src/util"})), "src/util/helper.rs");
    assert_eq!(s.ok("glob", json!({"pattern": "*.py"})), "no file matches `*.py`");
    assert!(s.refused("glob", json!({"pattern": "a[", "path": "."})).contains("bad glob"));
    assert!(s.refused("glob", json!({"pattern": "*", "path": "nowhere"})).contains("nowhere"));
}

#[test]
fn grep_reports_file_and_line_within_its_bounds() {
    let s = repo();
    let out = s.ok("grep", json!({"pattern": "helper"}));
    assert_eq!(
        out,
        "README.md:2:helper docs\nsrc/main.rs:2:    helper();\nsrc/util/helper.rs:1:pub fn helper() {}"
    );
    let out = s.ok("grep", json!({"pattern": "helper", "glob": "*.rs", "max_matches": 1}));
    assert_eq!(out, "src/main.rs:2:    helper();\n[stopped at 1 matches]");
    s.write("long.txt", &format!("needle {}", "y".repeat(600)));
    let out = s.ok("grep", json!({"pattern": "needle"}));
    assert!(
        out.contains("[... line cut at 400 characters]") && !out.contains(&"y".repeat(400)),
        "{out}"
    );
    let big = "needle\n".repeat((8 << 20) / 7 + 10);
    s.write("big.txt", &big);
    let mut s = s;
    s.refresh();
    let out = s.ok("grep", json!({"pattern": "needle"}));
    assert!(out.contains("long.txt:1:") && out.ends_with("[1 files over 8 MiB skipped]"), "{out}");
    // Not a regex: its text is searched, and the result says so first.
    let out = s.ok("grep", json!({"pattern": "helper("}));
    assert_eq!(
        out,
        "[note: `helper(` is not a regex (unclosed group); searched as plain text]\n\
         src/main.rs:2:    helper();\nsrc/util/helper.rs:1:pub fn helper() {}\n\
         [1 files over 8 MiB skipped]"
    );
    assert_eq!(
        s.ok("grep", json!({"pattern": "zzz"})),
        "no match for `zzz`\n[1 files over 8 MiB skipped]"
    );
}

#[test]
fn repo_map_lists_the_tree_with_sizes_and_languages_once_per_request() {
    let mut s = repo();
    let map = s.ok("repo_map", json!({}));
    // The git file set: run.log and target/ are ignored.
    let expected = "4 files, 80 B; Rust 2, Markdown 1\n.gitignore  14 B\nREADME.md  19 B  Markdown\nsrc/\n  main.rs  28 B  Rust\n  util/\n    helper.rs  19 B  Rust";
    assert_eq!(map, expected);
    // Computed once per request: a new file shows only in the next request.
    s.write("src/new.rs", "x");
    assert_eq!(s.ok("repo_map", json!({})), map);
    s.refresh();
    assert!(s.ok("repo_map", json!({})).contains("new.rs"));
}
