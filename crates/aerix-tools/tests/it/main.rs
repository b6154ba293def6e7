//! Each tool's success and refusal cases, on real files, a real shell and real git.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod bash;
mod confine;
mod files;
mod limits;
mod sandbox;
mod search;

use std::path::{Path, PathBuf};

use aerix_tools::{Cancel, FileSet, Jobs, Roots, Sandbox, ToolEnv, ToolError};
use serde_json::Value;

/// A scratch directory; with `git`, a repository with one commit.
pub struct Scratch {
    pub dir: PathBuf,
    pub cancel: Cancel,
    pub jobs: Jobs,
    pub files: FileSet,
    /// The working tree, unless a test sets other roots.
    pub roots: Roots,
    pub sandbox: Option<Sandbox>,
}

impl Scratch {
    pub fn new(name: &str, git: bool) -> Scratch {
        // One directory per call: tests sharing a helper (and so a name) run in parallel.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("aerix-tools-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if git {
            let repo = gitstore::Repo::at(&dir);
            let t = gitstore::GIT_TIMEOUT;
            repo.run(&["init", "-q"], t).unwrap();
            repo.run(&["config", "user.email", "t@example.com"], t).unwrap();
            repo.run(&["config", "user.name", "t"], t).unwrap();
        }
        let dir = dir.canonicalize().unwrap();
        Scratch {
            files: FileSet::new(&dir),
            roots: Roots::new(&dir),
            sandbox: None,
            dir,
            cancel: Cancel::default(),
            jobs: Jobs::default(),
        }
    }

    pub fn write(&self, path: &str, text: &str) {
        let path = self.dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.dir.join(path)).unwrap()
    }

    /// A fresh file set (a new request).
    pub fn refresh(&mut self) {
        self.files = FileSet::new(&self.dir);
    }

    pub fn call(&self, tool: &str, input: Value) -> Result<String, ToolError> {
        let env = ToolEnv {
            cwd: &self.dir,
            cancel: &self.cancel,
            jobs: &self.jobs,
            files: &self.files,
            roots: &self.roots,
            sandbox: self.sandbox.as_ref(),
        };
        aerix_tools::run(tool, &input, &env)
    }

    pub fn ok(&self, tool: &str, input: Value) -> String {
        self.call(tool, input.clone()).unwrap_or_else(|e| panic!("{tool} {input}: {e}"))
    }

    pub fn refused(&self, tool: &str, input: Value) -> String {
        match self.call(tool, input.clone()) {
            Ok(out) => panic!("{tool} {input} should be refused, gave: {out}"),
            Err(e) => e.0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// A directory beside the tree (outside it), made empty; removed with the scratch.
    pub fn outside(&self, name: &str) -> PathBuf {
        let dir = self.outside_root().join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn outside_root(&self) -> PathBuf {
        let name = format!("{}-outside", self.dir.file_name().unwrap().to_string_lossy());
        self.dir.with_file_name(name)
    }
}

/// `f`'s value, or a failure naming `what` when it takes longer than `secs`: a guard removed
/// must fail its test, not hang the run.
pub fn within<T: Send + 'static>(
    secs: u64,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what} did not return within {secs} s"))
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.jobs.kill_all();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(self.outside_root());
    }
}

#[test]
fn every_tool_has_a_closed_input_schema() {
    for tool in aerix_tools::TOOLS {
        let schema = aerix_tools::input_schema(tool).unwrap();
        assert_eq!(schema["type"], "object", "{tool}");
        assert_eq!(schema["additionalProperties"], false, "{tool}");
    }
    assert!(aerix_tools::input_schema("web_fetch").is_none());
}

#[test]
fn bad_input_is_a_result_not_a_panic() {
    let s = Scratch::new("bad-input", false);
    let error = s.refused("read", serde_json::json!({"file": "x"}));
    assert!(error.contains("bad input") && error.contains("file"), "{error}");
    let error = s.refused("nope", serde_json::json!({}));
    assert!(error.contains("unknown tool `nope`"), "{error}");
}
