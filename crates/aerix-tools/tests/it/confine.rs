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

/// The refusal of every file tool at `path`, each naming `place` (what follows the path).
fn refused_as_git(s: &Scratch, path: &str, place: &str) {
    let calls: [(&str, Value); 5] = [
        ("read", json!({"path": path})),
        ("write", json!({"path": path, "content": "[core]\n\tfsmonitor = /tmp/planted\n"})),
        ("edit", json!({"path": path, "old": "bare", "new": "fsmonitor = /tmp/planted\n\tbare"})),
        ("glob", json!({"pattern": "*", "path": path})),
        ("grep", json!({"pattern": "bare", "path": path})),
    ];
    for (tool, input) in calls {
        let error = s.refused(tool, input.clone());
        assert_eq!(
            error,
            format!("refused: {path} {place}, which the file tools do not touch"),
            "{tool} {input}"
        );
    }
}

/// `.git` is outside the tree for every file tool: `.git/config` (what aerix's own git reads),
/// a hook, `.git` itself, a path reaching it through `..`, a link, another case or a nested
/// repository; nothing in it is changed or created.
#[test]
fn a_git_directory_is_refused_by_every_file_tool() {
    let s = Scratch::new("git-dir", true);
    let config = s.read(".git/config");
    refused_as_git(&s, ".git/config", "is inside .git");
    refused_as_git(&s, ".git", "is git's own .git");
    refused_as_git(&s, "sub/../.git/config", "is inside .git");
    refused_as_git(&s, ".git/hooks/pre-commit", "is inside .git");
    let absolute = s.path().join(".git/config").display().to_string();
    refused_as_git(&s, &absolute, "is inside .git");
    refused_as_git(&s, ".GIT/config", "is inside .GIT");
    refused_as_git(&s, "vendor/lib/.git/config", "is inside .git");
    symlink(".git/config", s.path().join("cfg")).unwrap();
    symlink(".git", s.path().join("g")).unwrap();
    let target = s.path().join(".git/config").display().to_string();
    refused_as_git(&s, "cfg", &format!("resolves to {target}, which is inside .git"));
    refused_as_git(&s, "g/config", &format!("resolves to {target}, which is inside .git"));
    assert_eq!(s.read(".git/config"), config, ".git/config changed");
    assert!(!s.path().join(".git/hooks/pre-commit").exists());
    assert!(!s.path().join(".GIT").exists() && !s.path().join("vendor").exists());
    // Names that only begin with `.git` are files like any other.
    s.ok("write", json!({"path": ".gitignore", "content": "target\n"}));
    s.ok("write", json!({"path": ".github/workflows/ci.yml", "content": "on: push\n"}));
    s.ok("edit", json!({"path": ".gitignore", "old": "target", "new": "build"}));
    assert!(s.ok("read", json!({"path": "a.git/../.gitignore"})).contains("build"));
}

/// Outside a repository, `.git` cannot be made: a `write` there would turn the tree into one
/// whose configuration aerix's git then reads.
#[test]
fn a_git_directory_cannot_be_created_outside_a_repository() {
    let s = Scratch::new("git-create", false);
    let error = s.refused("write", json!({"path": ".git/config", "content": "[core]\n"}));
    assert_eq!(error, "refused: .git/config is inside .git, which the file tools do not touch");
    let error = s.refused("write", json!({"path": ".git", "content": "gitdir: elsewhere\n"}));
    assert_eq!(error, "refused: .git is git's own .git, which the file tools do not touch");
    assert!(!s.path().join(".git").exists());
}

/// A `.git` file (`gitdir: DIR`, as a worktree or a submodule has) or a `.git` link: the
/// directory it names is refused too, though its own name is not `.git`.
#[test]
fn the_git_directory_a_git_file_or_link_names_is_refused() {
    let s = Scratch::new("git-file", false);
    s.write("store/config", "[core]\n\tbare = false\n");
    s.write(".git", "gitdir: store\n");
    let store = s.path().join("store").display().to_string();
    let place = format!("is inside {store} (the repository's git directory)");
    refused_as_git(&s, "store/config", &place);
    refused_as_git(&s, ".git", "is git's own .git");
    let s = Scratch::new("git-link", false);
    s.write("store/config", "[core]\n\tbare = false\n");
    symlink("store", s.path().join(".git")).unwrap();
    let store = s.path().join("store").display().to_string();
    refused_as_git(
        &s,
        "store/config",
        &format!("is inside {store} (the repository's git directory)"),
    );
    assert_eq!(s.read("store/config"), "[core]\n\tbare = false\n");
}

/// `glob`, `grep` and `repo_map` never list a file of a git directory, nor a link into one,
/// whether git lists the files or a walk does.
#[test]
fn listings_never_show_a_git_directory() {
    for git in [true, false] {
        let s = Scratch::new("git-listing", git);
        s.write("inside.txt", "bare needle\n");
        s.write("vendor/.git/config", "[core]\n\tbare = needle\n");
        s.write("vendor/.git/HEAD", "ref: refs/heads/main\n");
        if !git {
            s.write(".git/config", "[core]\n\tbare = needle\n");
            // A `gitdir:` file, as a submodule's: git would not list it, a walk does.
            s.write("sub/.git", "gitdir: ../.git/modules/sub bare\n");
        }
        symlink(".git/config", s.path().join("cfg")).unwrap();
        if git {
            let t = gitstore::GIT_TIMEOUT;
            let repo = gitstore::Repo::at(s.path());
            repo.run(&["add", "inside.txt", "cfg"], t).unwrap();
            repo.run(&["commit", "-qm", "a link into .git"], t).unwrap();
        }
        assert_eq!(s.ok("glob", json!({"pattern": "*"})), "inside.txt", "git: {git}");
        let grep = s.ok("grep", json!({"pattern": "bare|HEAD|refs"}));
        assert_eq!(grep, "inside.txt:1:bare needle", "git: {git}");
        let map = s.ok("repo_map", json!({})).to_lowercase();
        assert!(!map.contains("config") && !map.contains("cfg"), "git: {git}: {map}");
    }
}
