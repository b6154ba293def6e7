//! The roots: `..`, an absolute path and a link out of the tree are refused by every file tool,
//! and a listing never shows what lies outside.

use std::os::unix::fs::symlink;

use aerix_tools::Roots;
use serde_json::{Value, json};

use crate::Scratch;

/// A tree, and beside it a directory holding `secret.txt`.
fn world(name: &str, git: bool) -> (Scratch, std::path::PathBuf) {
    let s = Scratch::new(name, git);
    s.write("inside.txt", "inside needle\n");
    let outside = s.outside("secrets");
    std::fs::write(outside.join("secret.txt"), "secret needle\n").unwrap();
    (s, outside)
}

/// Every file tool's call at `path`, refused naming it; nothing outside changed or created.
fn refused_everywhere(s: &Scratch, path: &str, outside: &std::path::Path) {
    let calls: [(&str, Value); 6] = [
        ("read", json!({"path": path})),
        ("write", json!({"path": path, "content": "pwned"})),
        ("edit", json!({"path": path, "old": "secret", "new": "pwned"})),
        ("glob", json!({"pattern": "*", "path": path})),
        ("grep", json!({"pattern": "needle", "path": path})),
        ("write", json!({"path": format!("{path}/../new.txt"), "content": "x"})),
    ];
    for (tool, input) in calls {
        let error = s.refused(tool, input.clone());
        assert!(
            error.starts_with("refused: ") && error.contains("outside the working tree"),
            "{tool} {input}: {error}"
        );
        assert!(error.contains("permissions.additionalDirectories"), "{error}");
    }
    assert_eq!(std::fs::read_to_string(outside.join("secret.txt")).unwrap(), "secret needle\n");
    let names: Vec<_> =
        std::fs::read_dir(outside).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(names, ["secret.txt"], "nothing is created outside");
}

#[test]
fn a_dotdot_escape_is_refused_by_every_file_tool() {
    let (s, outside) = world("escape-dotdot", false);
    // `../<tree>-outside/secrets/secret.txt`, and the directory itself for glob and grep.
    let up =
        format!("../{}/secrets", outside.parent().unwrap().file_name().unwrap().to_string_lossy());
    refused_everywhere(&s, &format!("{up}/secret.txt"), &outside);
    refused_everywhere(&s, &up, &outside);
    // `..` that comes back inside is fine.
    let name = s.path().file_name().unwrap().to_string_lossy().into_owned();
    assert!(s.ok("read", json!({"path": format!("../{name}/inside.txt")})).contains("inside"));
}

#[test]
fn an_absolute_path_outside_is_refused_by_every_file_tool() {
    let (s, outside) = world("escape-absolute", false);
    refused_everywhere(&s, &outside.join("secret.txt").display().to_string(), &outside);
    refused_everywhere(&s, &outside.display().to_string(), &outside);
    let error = s.refused("read", json!({"path": "/etc/passwd"}));
    assert_eq!(
        error,
        format!(
            "refused: /etc/passwd is outside the working tree {}; add it to \
             permissions.additionalDirectories to allow it",
            s.path().display()
        )
    );
}

#[test]
fn a_link_out_of_the_tree_is_refused_by_every_file_tool() {
    let (s, outside) = world("escape-link", false);
    symlink(outside.join("secret.txt"), s.path().join("file-link")).unwrap();
    symlink(&outside, s.path().join("dir-link")).unwrap();
    refused_everywhere(&s, "file-link", &outside);
    refused_everywhere(&s, "dir-link/secret.txt", &outside);
    refused_everywhere(&s, "dir-link", &outside);
    // The refusal says where the link leads.
    let error = s.refused("write", json!({"path": "dir-link/new.txt", "content": "x"}));
    assert!(
        error.starts_with(&format!(
            "refused: dir-link/new.txt resolves to {}, which is outside",
            outside.join("new.txt").display()
        )),
        "{error}"
    );
    // A write never creates parents through a link, and a dangling link is no way out either.
    symlink(outside.join("planted"), s.path().join("dangling")).unwrap();
    s.refused("write", json!({"path": "dangling", "content": "x"}));
    s.refused("write", json!({"path": "dir-link/deep/er/x.txt", "content": "x"}));
    assert!(!outside.join("planted").exists() && !outside.join("deep").exists());
}

#[test]
fn listings_never_show_what_lies_outside() {
    let (s, outside) = world("listing-walk", false);
    symlink(outside.join("secret.txt"), s.path().join("file-link.txt")).unwrap();
    symlink(&outside, s.path().join("dir-link")).unwrap();
    assert_eq!(s.ok("glob", json!({"pattern": "*.txt"})), "inside.txt");
    assert_eq!(s.ok("grep", json!({"pattern": "needle"})), "inside.txt:1:inside needle");
    assert!(!s.ok("repo_map", json!({})).contains("link"));
}

#[test]
fn a_git_listing_through_a_directory_turned_link_shows_nothing_outside() {
    let (s, outside) = world("listing-git", true);
    s.write("sub/secret.txt", "committed needle\n");
    s.write("in-tree.txt", "in tree\n");
    let t = gitstore::GIT_TIMEOUT;
    let git = gitstore::Repo::at(s.path());
    // A tracked link to outside, and a tracked directory later replaced by a link to outside:
    // git still lists `sub/secret.txt` from its index.
    symlink(outside.join("secret.txt"), s.path().join("tracked-link.txt")).unwrap();
    git.run(&["add", "."], t).unwrap();
    git.run(&["commit", "-qm", "init"], t).unwrap();
    std::fs::remove_dir_all(s.path().join("sub")).unwrap();
    symlink(&outside, s.path().join("sub")).unwrap();
    assert_eq!(s.ok("glob", json!({"pattern": "*.txt"})), "in-tree.txt\ninside.txt");
    let grep = s.ok("grep", json!({"pattern": "needle"}));
    assert_eq!(grep, "inside.txt:1:inside needle");
    let map = s.ok("repo_map", json!({}));
    assert!(!map.contains("secret") && !map.contains("tracked-link"), "{map}");
}

#[test]
fn links_inside_the_tree_added_directories_and_read_only_roots_work() {
    let (mut s, outside) = world("allowed", false);
    symlink("inside.txt", s.path().join("alias.txt")).unwrap();
    assert!(s.ok("read", json!({"path": "alias.txt"})).contains("inside needle"));
    s.ok("edit", json!({"path": "alias.txt", "old": "inside", "new": "edited"}));
    assert_eq!(s.read("inside.txt"), "edited needle\n");
    // Written through the link, the link stays a link.
    s.ok("write", json!({"path": "alias.txt", "content": "rewritten\n"}));
    assert_eq!(s.read("inside.txt"), "rewritten\n");
    assert!(s.path().join("alias.txt").symlink_metadata().unwrap().file_type().is_symlink());
    // An added directory is read and written like the tree.
    let spool = s.outside("spool");
    std::fs::write(spool.join("c1-bash.txt"), "the whole result\n").unwrap();
    s.roots = Roots::new(s.path()).with_dir(&outside).with_read_only(&spool);
    let secret = outside.join("secret.txt").display().to_string();
    s.ok("edit", json!({"path": secret, "old": "secret", "new": "shared"}));
    assert!(s.ok("grep", json!({"pattern": "needle", "path": outside})).contains("shared needle"));
    // The spool is read, never changed.
    let spooled = spool.join("c1-bash.txt").display().to_string();
    assert!(s.ok("read", json!({"path": spooled, "offset": 1})).contains("the whole result"));
    for (tool, input) in [
        ("write", json!({"path": spooled, "content": "x"})),
        ("edit", json!({"path": spooled, "old": "whole", "new": "x"})),
    ] {
        let error = s.refused(tool, input);
        assert!(error.contains("which the tools may read but not change"), "{error}");
    }
    assert_eq!(std::fs::read_to_string(&spooled).unwrap(), "the whole result\n");
}
