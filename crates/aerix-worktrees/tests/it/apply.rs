//! An attempt's change applied to the user's tree: clean, merged, or a conflict that writes
//! nothing.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use aerix_worktrees::{Applied, Error, Worktree, apply};

use crate::{Fixture, write};

const A: &str = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n";

/// Every file under `root` but `.git`, with its bytes and mode.
fn tree(root: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if name == ".git" {
                continue;
            }
            let meta = path.symlink_metadata().unwrap();
            if meta.is_dir() {
                files.insert(format!("{name}/"), (Vec::new(), meta.permissions().mode()));
                dirs.push(path);
            } else {
                files.insert(name, (std::fs::read(&path).unwrap(), meta.permissions().mode()));
            }
        }
    }
    files
}

fn attempt(f: &Fixture, name: &str, edit: impl FnOnce(&Path)) -> Worktree {
    let snapshot = f.store.snapshot().unwrap();
    let worktree = f.store.create(name, &snapshot, None).unwrap();
    edit(&worktree.path);
    worktree
}

/// The user's tree unchanged since the snapshot: the attempt's edit, new file (in a new
/// directory), deletion and `chmod +x` land as they are, and the index is untouched.
#[test]
fn a_change_lands_whole_on_a_tree_that_did_not_move() {
    let f = Fixture::new();
    let worktree = attempt(&f, "w1", |wt| {
        write(wt, "a.txt", &A.replace("two", "TWO"));
        write(wt, "src/deep/new.rs", "fn f() {}\n");
        std::fs::remove_file(wt.join("b.txt")).unwrap();
        std::fs::set_permissions(wt.join(".gitignore"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    });
    let change = worktree.change().unwrap();
    f.store.remove(&worktree).unwrap();
    let index = std::fs::read(f.root.join(".git/index")).unwrap();

    let applied = apply(&f.store, &change).unwrap();
    assert_eq!(
        applied,
        Applied {
            written: vec![".gitignore".into(), "a.txt".into(), "src/deep/new.rs".into()],
            deleted: vec!["b.txt".into()],
            ..Applied::default()
        }
    );
    assert_eq!(f.read("a.txt"), A.replace("two", "TWO"));
    assert_eq!(f.read("src/deep/new.rs"), "fn f() {}\n");
    assert!(!f.root.join("b.txt").exists());
    let mode = std::fs::metadata(f.root.join(".gitignore")).unwrap().permissions().mode();
    assert_ne!(mode & 0o100, 0, "the executable bit did not land: {mode:o}");
    assert_eq!(std::fs::read(f.root.join(".git/index")).unwrap(), index, "the index was written");
    let status = f.git(&["status", "--porcelain"]);
    assert_eq!(status, " M .gitignore\n M a.txt\n D b.txt\n?? src/\n");
    // Applying it again finds every file already so.
    let again = apply(&f.store, &change).unwrap();
    assert_eq!(again.unchanged.len(), 4, "{again:?}");
}

/// The user edited another part of the file meanwhile: both edits are in it.
#[test]
fn an_edit_made_meanwhile_elsewhere_in_the_file_is_merged() {
    let f = Fixture::new();
    let worktree = attempt(&f, "w1", |wt| write(wt, "a.txt", &A.replace("six", "SIX")));
    f.write("a.txt", &A.replace("one", "ONE"));
    let applied = apply(&f.store, &worktree.change().unwrap()).unwrap();
    assert_eq!(applied.merged, ["a.txt"]);
    assert_eq!(f.read("a.txt"), A.replace("one", "ONE").replace("six", "SIX"));
}

/// The user edited the same lines meanwhile, and another file is clean: a conflict naming
/// the one file, and no file of the tree written (bytes and modes as before, no temporary
/// file, no directory made).
#[test]
fn a_conflict_names_its_files_and_writes_nothing() {
    let f = Fixture::new();
    let worktree = attempt(&f, "w1", |wt| {
        write(wt, "a.txt", &A.replace("two", "attempt's two"));
        write(wt, "b.txt", "bee\nattempt\n");
        write(wt, "fresh/new.txt", "new\n");
    });
    f.write("a.txt", &A.replace("two", "user's two"));
    let before = tree(&f.root);
    let error = apply(&f.store, &worktree.change().unwrap()).unwrap_err();
    match &error {
        Error::Conflict { paths } => assert_eq!(paths, &["a.txt"]),
        other => panic!("not a conflict: {other}"),
    }
    assert!(error.to_string().contains("a.txt"), "{error}");
    assert_eq!(tree(&f.root), before, "a conflict wrote to the tree");
}

/// Deleted by the user and edited by the attempt, or the reverse: conflicts.
#[test]
fn a_file_deleted_on_one_side_and_edited_on_the_other_is_a_conflict() {
    let f = Fixture::new();
    let worktree = attempt(&f, "w1", |wt| {
        write(wt, "a.txt", &A.replace("two", "TWO"));
        std::fs::remove_file(wt.join("b.txt")).unwrap();
    });
    std::fs::remove_file(f.root.join("a.txt")).unwrap();
    f.write("b.txt", "bee\nuser's\n");
    let before = tree(&f.root);
    let error = apply(&f.store, &worktree.change().unwrap()).unwrap_err();
    assert!(matches!(&error, Error::Conflict { paths } if paths == &["a.txt", "b.txt"]), "{error}");
    assert_eq!(tree(&f.root), before);
}

/// Two attempts of one snapshot: the second, touching another file, merges after the first
/// landed; a third, touching the first's lines, is a conflict.
#[test]
fn attempts_of_one_base_apply_in_turn_and_clash_on_the_same_lines() {
    let f = Fixture::new();
    let snapshot = f.store.snapshot().unwrap();
    let make = |name: &str, path: &str, text: &str| {
        let worktree = f.store.create(name, &snapshot, None).unwrap();
        write(&worktree.path, path, text);
        worktree.change().unwrap()
    };
    let first = make("w1", "a.txt", &A.replace("three", "THREE"));
    let second = make("w2", "b.txt", "bee\nsecond\n");
    let third = make("w3", "a.txt", &A.replace("three", "3"));
    apply(&f.store, &first).unwrap();
    assert_eq!(apply(&f.store, &second).unwrap().written, ["b.txt"]);
    assert_eq!(f.read("a.txt"), A.replace("three", "THREE"));
    assert_eq!(f.read("b.txt"), "bee\nsecond\n");
    let error = apply(&f.store, &third).unwrap_err();
    assert!(matches!(&error, Error::Conflict { paths } if paths == &["a.txt"]), "{error}");
    assert_eq!(f.read("a.txt"), A.replace("three", "THREE"));
}

/// The user replaced a directory the attempt writes into with a symbolic link out of the
/// tree: refused, nothing written on either side of the link.
#[test]
fn a_write_through_a_symbolic_link_is_refused() {
    let f = Fixture::with(|root| {
        write(root, "sub/f.txt", "f\n");
        crate::git(root, &["add", "."]);
        crate::git(root, &["commit", "-qm", "sub"]);
    });
    let worktree = attempt(&f, "w1", |wt| write(wt, "sub/f.txt", "attempt\n"));
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "f.txt", "f\n");
    std::fs::remove_dir_all(f.root.join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), f.root.join("sub")).unwrap();
    let error = apply(&f.store, &worktree.change().unwrap()).unwrap_err();
    assert!(matches!(&error, Error::Unsafe { path, .. } if path == "sub/f.txt"), "{error}");
    assert_eq!(std::fs::read_to_string(outside.path().join("f.txt")).unwrap(), "f\n");
}
