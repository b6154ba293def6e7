//! Snapshots and worktrees: what a worktree holds, what the user's repository keeps.

use aerix_worktrees::{Error, Store};

use crate::{Fixture, git, listed};

/// The user's uncommitted edit, staged edit and untracked file are all in the worktree (an
/// ignored file is not), and creating and removing it moves nothing of the user's: the
/// index's bytes, HEAD, branches, stash, status.
#[test]
fn a_worktree_holds_the_users_changes_and_moves_nothing_of_theirs() {
    let f = Fixture::new();
    // A stash entry, so a stash that moved would show.
    f.write("b.txt", "stashed\n");
    f.git(&["stash", "-q"]);
    f.write("a.txt", "one\nEDITED\n");
    f.write("b.txt", "bee\nstaged\n");
    f.git(&["add", "b.txt"]);
    f.write("notes/new.txt", "untracked\n");
    f.write("build.log", "ignored\n");
    let before = f.user_state();

    let snapshot = f.store.snapshot().unwrap();
    assert_eq!(f.user_state(), before, "the snapshot moved the user's state");
    let worktree = f.store.create("w1", &snapshot, None).unwrap();
    assert_eq!(worktree.path, f.store.dir().join("w1"));
    assert!(!worktree.path.starts_with(&f.root));
    let read = |path: &str| std::fs::read_to_string(worktree.path.join(path)).unwrap();
    assert_eq!(read("a.txt"), "one\nEDITED\n");
    assert_eq!(read("b.txt"), "bee\nstaged\n");
    assert_eq!(read("notes/new.txt"), "untracked\n");
    assert!(!worktree.path.join("build.log").exists(), "an ignored file was carried");
    // Detached: the worktree has no branch of its own.
    assert_eq!(git(&worktree.path, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(), "HEAD");
    assert_eq!(f.user_state(), before, "creating the worktree moved the user's state");

    f.store.remove(&worktree).unwrap();
    assert_eq!(f.user_state(), before, "removing the worktree moved the user's state");
    assert_eq!(f.read("a.txt"), "one\nEDITED\n");
}

/// Two worktrees of one snapshot editing one file each see only their own edit.
#[test]
fn two_worktrees_of_one_snapshot_see_only_their_own_edits() {
    let f = Fixture::new();
    let snapshot = f.store.snapshot().unwrap();
    let first = f.store.create("w1", &snapshot, None).unwrap();
    let second = f.store.create("w2", &snapshot, None).unwrap();
    std::fs::write(first.path.join("a.txt"), "first's\n").unwrap();
    std::fs::write(second.path.join("a.txt"), "second's\n").unwrap();
    std::fs::write(second.path.join("only2.txt"), "2\n").unwrap();
    assert_eq!(std::fs::read_to_string(first.path.join("a.txt")).unwrap(), "first's\n");
    assert!(!first.path.join("only2.txt").exists());
    assert_eq!(std::fs::read_to_string(second.path.join("a.txt")).unwrap(), "second's\n");
    assert_eq!(f.read("a.txt"), "one\ntwo\nthree\nfour\nfive\nsix\nseven\n");
    assert_eq!(first.change().unwrap().paths(), ["a.txt"]);
    assert_eq!(second.change().unwrap().paths(), ["a.txt", "only2.txt"]);
}

/// After `remove`: no directory, no `git worktree list` entry, no ref, no record; a second
/// `remove` is no error.
#[test]
fn remove_leaves_no_directory_no_entry_no_ref_and_is_idempotent() {
    let f = Fixture::new();
    let snapshot = f.store.snapshot().unwrap();
    let worktree = f.store.create("w1", &snapshot, None).unwrap();
    std::fs::write(worktree.path.join("scratch.txt"), "untracked in the worktree\n").unwrap();
    std::fs::write(worktree.path.join("a.txt"), "edited\n").unwrap();
    assert!(listed(&f.root).contains(&worktree.path));
    assert_eq!(
        f.git(&["for-each-ref", "--format=%(refname)", "refs/aerix"]),
        "refs/aerix/worktrees/w1\n"
    );
    let record = f.store.dir().join("w1.json");
    assert!(record.is_file());

    f.store.remove(&worktree).unwrap();
    assert!(!worktree.path.exists(), "the directory is left");
    assert!(!listed(&f.root).contains(&worktree.path), "git still lists it");
    assert_eq!(f.git(&["for-each-ref", "refs/aerix"]), "", "the ref is left");
    assert!(!record.exists(), "the record is left");
    f.store.remove(&worktree).unwrap();
    // The name is free again.
    f.store.create("w1", &snapshot, None).unwrap();
}

/// The ref keeps the base commit through a `git gc` that prunes every unreachable object,
/// even once the attempt moved its worktree's HEAD off it (the HEAD then holds it no more),
/// so the change against it can still be taken.
#[test]
fn the_base_survives_a_gc_while_its_worktree_exists() {
    let f = Fixture::new();
    f.write("a.txt", "uncommitted\n");
    let snapshot = f.store.snapshot().unwrap();
    let head = f.git(&["rev-parse", "HEAD"]);
    assert_ne!(snapshot.commit, head.trim(), "the snapshot should be a commit of its own");
    let worktree = f.store.create("w1", &snapshot, None).unwrap();
    git(&worktree.path, &["checkout", "-q", "--detach", head.trim()]);
    std::fs::write(worktree.path.join("b.txt"), "attempt\n").unwrap();
    let expire = ["-c", "gc.reflogExpire=now", "-c", "gc.reflogExpireUnreachable=now"];
    f.git(&[&expire[..], &["-c", "gc.pruneExpire=now", "gc", "-q", "--prune=now"]].concat());
    f.git(&["cat-file", "-e", &format!("{}^{{commit}}", snapshot.commit)]);
    assert_eq!(worktree.change().unwrap().paths(), ["a.txt", "b.txt"]);
    f.store.remove(&worktree).unwrap();
}

/// A path a hook chose is used (and removed); one inside the repository, or a directory
/// that already holds files, is refused with nothing made.
#[test]
fn a_chosen_path_is_used_and_one_inside_the_repository_or_taken_refused() {
    let f = Fixture::new();
    let snapshot = f.store.snapshot().unwrap();
    let place = tempfile::tempdir().unwrap();
    let chosen = place.path().join("hook-made");
    let worktree = f.store.create("w1", &snapshot, Some(&chosen)).unwrap();
    assert_eq!(worktree.path, chosen);
    assert!(chosen.join("a.txt").is_file());
    f.store.remove(&worktree).unwrap();
    assert!(!chosen.exists());

    let inside = f.root.join("wt");
    let error = f.store.create("w2", &snapshot, Some(&inside)).unwrap_err();
    assert!(matches!(error, Error::InsideRepository { .. }), "{error}");
    assert!(error.to_string().contains(&inside.display().to_string()), "{error}");
    assert!(!inside.exists());
    std::fs::create_dir(&chosen).unwrap();
    std::fs::write(chosen.join("mine.txt"), "someone's\n").unwrap();
    let error = f.store.create("w3", &snapshot, Some(&chosen)).unwrap_err();
    assert!(matches!(error, Error::PathTaken { .. }), "{error}");
    assert_eq!(std::fs::read_to_string(chosen.join("mine.txt")).unwrap(), "someone's\n");
    // Nothing of the refused ones is left: no record, no ref, no entry.
    assert_eq!(f.git(&["for-each-ref", "refs/aerix"]), "");
    assert_eq!(listed(&f.root).len(), 1);
    assert!(!f.store.dir().join("w2.json").exists() && !f.store.dir().join("w3.json").exists());
}

/// A second worktree of one name is refused, the first left whole.
#[test]
fn a_name_in_use_is_refused() {
    let f = Fixture::new();
    let snapshot = f.store.snapshot().unwrap();
    let first = f.store.create("w1", &snapshot, None).unwrap();
    let place = tempfile::tempdir().unwrap();
    let error = f.store.create("w1", &snapshot, Some(&place.path().join("x"))).unwrap_err();
    assert!(matches!(error, Error::NameTaken { .. }), "{error}");
    assert!(first.path.join("a.txt").is_file());
    assert_eq!(
        f.git(&["for-each-ref", "--format=%(refname)", "refs/aerix"]),
        "refs/aerix/worktrees/w1\n"
    );
    let error = f.store.create("../w", &snapshot, None).unwrap_err();
    assert!(matches!(error, Error::BadName { .. }), "{error}");
}

/// A directory outside any git work tree has no store (its pieces run in place).
#[test]
fn a_directory_outside_a_work_tree_opens_no_store() {
    let plain = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    assert!(Store::open(plain.path(), home.path(), "plain-01").unwrap().is_none());
    // The same directory once it is a repository does.
    git(plain.path(), &["init", "-q"]);
    let store = Store::open(plain.path(), home.path(), "plain-01").unwrap().unwrap();
    assert_eq!(store.root(), plain.path().canonicalize().unwrap());
    assert_eq!(store.dir(), home.path().join("aerix/worktrees/plain-01"));
    let error = Store::open(plain.path(), home.path(), "../x").unwrap_err();
    assert!(matches!(error, Error::BadKey { .. }), "{error}");
    // A data home inside the repository would put worktrees in it.
    let error = Store::open(plain.path(), &plain.path().join(".local"), "k").unwrap_err();
    assert!(matches!(error, Error::InsideRepository { .. }), "{error}");
}

/// In a repository without a commit, a staged and an untracked file are snapshot (a commit
/// without a parent) and checked out; no branch appears and the index is as it was.
#[test]
fn a_repository_without_a_commit_snapshots_and_creates() {
    let f = Fixture::with(|root| {
        crate::write(root, "staged.txt", "s\n");
        git(root, &["add", "staged.txt"]);
        crate::write(root, "loose.txt", "l\n");
    });
    let before = f.user_state();
    let snapshot = f.store.snapshot().unwrap();
    let worktree = f.store.create("w1", &snapshot, None).unwrap();
    assert_eq!(std::fs::read_to_string(worktree.path.join("staged.txt")).unwrap(), "s\n");
    assert_eq!(std::fs::read_to_string(worktree.path.join("loose.txt")).unwrap(), "l\n");
    assert_eq!(f.user_state(), before);
    assert_eq!(f.git(&["branch", "--list"]), "", "a branch appeared");
    std::fs::write(worktree.path.join("loose.txt"), "l\nmore\n").unwrap();
    assert_eq!(worktree.change().unwrap().paths(), ["loose.txt"]);
    f.store.remove(&worktree).unwrap();
    assert_eq!(f.user_state(), before);
}
