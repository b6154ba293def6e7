//! What a sweep removes: the worktrees of a run killed with `kill -9`, never a live run's.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use aerix_worktrees::Store;

use crate::{Fixture, listed};

/// Set in the environment of the child below: `<root>\n<data home>`.
const CHILD: &str = "AERIX_WORKTREES_TEST_CHILD";

/// Not a test of its own: the process `a_killed_runs_worktree_is_swept` starts (this test
/// binary again, filtered to this function), which makes a worktree as a run of aerix would,
/// says so, and waits to be killed. Without the variable it does nothing.
#[test]
fn child_that_makes_a_worktree_and_waits() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let (root, home) = spec.split_once('\n').unwrap();
    let store = Store::open(root.as_ref(), home.as_ref(), "proj-0123").unwrap().unwrap();
    let snapshot = store.snapshot().unwrap();
    let worktree = store.create("dead-run", &snapshot, None).unwrap();
    println!("ready {}", worktree.path.display());
    std::thread::sleep(std::time::Duration::from_secs(60));
}

/// The child above, running on one work tree; killed with `SIGKILL` when dropped too, so a
/// failed assertion leaves no process behind.
struct Run {
    child: Child,
    /// Its worktree.
    path: PathBuf,
}

impl Run {
    /// Starts the child on the work tree at `root`; returns once its worktree exists.
    fn start(root: &Path, data_home: &Path) -> Run {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["sweep::child_that_makes_a_worktree_and_waits", "--exact", "--nocapture"])
            .env(CHILD, format!("{}\n{}", root.display(), data_home.display()))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let path = stdout
            .lines()
            .map(|line| line.unwrap())
            .find_map(|line| line.strip_prefix("ready ").map(PathBuf::from));
        let mut run = Run { child, path: PathBuf::new() };
        run.path = path.expect("the child never made its worktree");
        run
    }

    /// `kill -9`, and reaped (a zombie has ended too, but is not what a next run meets).
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A run killed with `kill -9` left a worktree (directory, entry, ref, record); the next
/// sweep removes all of it, and keeps a live run's (this process's) whole.
#[test]
fn a_killed_runs_worktree_is_swept_and_a_live_ones_kept() {
    let f = Fixture::new();
    let live = f.store.create("live-run", &f.store.snapshot().unwrap(), None).unwrap();
    let mut run = Run::start(&f.root, &f.data_home);
    let dead = run.path.clone();
    // Both owners alive (the child and this process): nothing is swept.
    assert_eq!(f.store.sweep().unwrap(), Vec::<PathBuf>::new());
    assert!(dead.join("a.txt").is_file());
    run.kill();

    assert!(dead.is_dir() && listed(&f.root).contains(&dead), "the kill left nothing to sweep");
    assert_eq!(f.store.sweep().unwrap(), std::slice::from_ref(&dead));
    assert!(!dead.exists(), "the dead run's directory is left");
    assert!(!listed(&f.root).contains(&dead), "git still lists the dead run's worktree");
    let refs = f.git(&["for-each-ref", "--format=%(refname)", "refs/aerix"]);
    assert_eq!(refs, "refs/aerix/worktrees/live-run\n");
    assert!(!f.store.dir().join("dead-run.json").exists(), "the dead run's record is left");
    assert!(live.path.join("a.txt").is_file() && listed(&f.root).contains(&live.path));
    assert!(f.store.dir().join("live-run.json").is_file());
    // Nothing left to sweep.
    assert_eq!(f.store.sweep().unwrap(), Vec::<PathBuf>::new());
}

/// A dead run's worktree whose directory someone already deleted: the sweep drops git's
/// entry, the ref and the record.
#[test]
fn a_dead_runs_worktree_without_its_directory_is_swept() {
    let f = Fixture::new();
    let mut run = Run::start(&f.root, &f.data_home);
    let dead = run.path.clone();
    run.kill();
    std::fs::remove_dir_all(&dead).unwrap();
    assert_eq!(f.store.sweep().unwrap(), std::slice::from_ref(&dead));
    assert!(!listed(&f.root).contains(&dead));
    assert_eq!(f.git(&["for-each-ref", "refs/aerix"]), "");
    assert!(!f.store.dir().join("dead-run.json").exists());
}

/// Another clone sharing the project key (same remote) keeps its records: a sweep here
/// removes only this work tree's.
#[test]
fn a_sweep_leaves_another_clones_worktrees_alone() {
    let f = Fixture::new();
    let other = Fixture::new();
    // The other clone's store, under this fixture's data home (one project key for both).
    let theirs = Store::open(&other.root, &f.data_home, "proj-0123").unwrap().unwrap();
    assert_eq!(theirs.dir(), f.store.dir());
    let mut run = Run::start(&other.root, &f.data_home);
    let dead = run.path.clone();
    run.kill();
    assert_eq!(f.store.sweep().unwrap(), Vec::<PathBuf>::new());
    assert!(dead.join("a.txt").is_file(), "a sweep removed another clone's worktree");
    assert_eq!(theirs.sweep().unwrap(), std::slice::from_ref(&dead));
    assert!(!dead.exists());
}
