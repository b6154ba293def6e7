//! What an attempt changed: edits, new files, deletions, the executable bit; never an ignored
//! file.

use std::os::unix::fs::PermissionsExt;

use aerix_worktrees::{Content, FileChange, Mode};

use crate::{Fixture, write};

/// An edit, a new file, a deletion and a `chmod +x` are the change, each with its base and
/// new content; a file ignored by `.gitignore` is not; the patch applies to the user's tree
/// by hand and the lines count what it adds and removes.
#[test]
fn a_change_holds_edits_new_files_deletions_and_modes_but_no_ignored_file() {
    let f = Fixture::new();
    f.write("run.sh", "echo hi\n");
    f.git(&["add", "run.sh"]);
    f.git(&["commit", "-qm", "script"]);
    let snapshot = f.store.snapshot().unwrap();
    let worktree = f.store.create("w1", &snapshot, None).unwrap();
    assert!(worktree.change().unwrap().is_empty(), "a change before any edit");

    let wt = &worktree.path;
    write(wt, "a.txt", "one\nTWO\nthree\nfour\nfive\nsix\nseven\n");
    write(wt, "src/new.rs", "fn main() {}\n");
    std::fs::remove_file(wt.join("b.txt")).unwrap();
    std::fs::set_permissions(wt.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    write(wt, "test.log", "ignored output\n");
    write(wt, "target/debug/x.log", "ignored too\n");

    let change = worktree.change().unwrap();
    assert_eq!(change.paths(), ["a.txt", "b.txt", "run.sh", "src/new.rs"]);
    assert_eq!(change.base(), snapshot.commit);
    let regular = |text: &str| Some(Content { mode: Mode::Regular, bytes: text.into() });
    let files = change.files();
    assert_eq!(
        files[1],
        FileChange { path: "b.txt".into(), before: regular("bee\n"), after: None }
    );
    assert_eq!(files[3].before, None);
    assert_eq!(files[3].after, regular("fn main() {}\n"));
    assert_eq!(files[2].before, regular("echo hi\n"));
    let script = Some(Content { mode: Mode::Executable, bytes: "echo hi\n".into() });
    assert_eq!(files[2].after, script);
    assert_eq!(files[0].after, regular("one\nTWO\nthree\nfour\nfive\nsix\nseven\n"));
    // One line replaced (2), one file deleted (1), one added (1); a mode change has no lines.
    assert_eq!(change.lines_changed(), 4);

    let patch = String::from_utf8(change.patch().to_vec()).unwrap();
    assert!(patch.contains("+TWO") && patch.contains("-two"), "{patch}");
    assert!(patch.contains("new mode 100755"), "{patch}");
    assert!(!patch.contains("ignored"), "{patch}");
    let file = f.data_home.join("attempt.patch");
    std::fs::write(&file, change.patch()).unwrap();
    f.git(&["apply", "--check", file.to_str().unwrap()]);
    f.store.remove(&worktree).unwrap();
    // The change outlives its worktree.
    assert_eq!(change.paths().len(), 4);
}

/// A file's bytes that are not UTF-8 travel whole, in the contents and in a binary patch
/// that `git apply` takes.
#[test]
fn binary_contents_are_carried_whole() {
    let f = Fixture::new();
    let snapshot = f.store.snapshot().unwrap();
    let worktree = f.store.create("w1", &snapshot, None).unwrap();
    let bytes = [0u8, 159, 146, 150, 255, 10, 0];
    std::fs::write(worktree.path.join("blob.bin"), bytes).unwrap();
    let change = worktree.change().unwrap();
    assert_eq!(change.files()[0].after.as_ref().unwrap().bytes, bytes);
    assert_eq!(change.lines_changed(), 1);
    let file = f.data_home.join("binary.patch");
    std::fs::write(&file, change.patch()).unwrap();
    f.git(&["apply", file.to_str().unwrap()]);
    assert_eq!(std::fs::read(f.root.join("blob.bin")).unwrap(), bytes);
}
