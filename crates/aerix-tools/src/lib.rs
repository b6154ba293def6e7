//! The tools that touch the machine: `read`, `write`, `edit`, `bash`, `glob`, `grep` and
//! `repo_map`. Each takes the model's JSON input and returns the text of its result; an error is
//! a result too (`ToolError`, shown to the model as `error: ...`), never the end of a loop.
//! The file tools act only inside the `Roots` and only on regular files; `bash` runs in the
//! `Sandbox` when one is set.
//!
//! The tools that act on the agent itself (`plan`, `context`, `skill`, `agent`) live in
//! aerix-agent's runtime, which owns that state.

mod bash;
mod confine;
mod files;
mod fileset;
mod open;
mod sandbox;
mod search;
mod tolerant;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use bash::{
    DEFAULT_TIMEOUT_SECS, Ending, Job, JobEnd, Jobs, MAX_JOBS, MAX_TIMEOUT_SECS, run_command,
};
pub use confine::{Access, MAX_LINKS, Roots, resolve};
pub use files::{EDIT_MAX_BYTES, READ_BYTES};
pub use fileset::FileSet;
pub use sandbox::{BWRAP_PACKAGE, Sandbox, SandboxError};
pub use search::GREP_FILE_LIMIT;

/// A [`ToolEnv`]'s parts, owned: what a call takes to a blocking thread of its own (the jobs
/// and the file set shared with the agent by `Arc`).
#[derive(Clone, Debug)]
pub struct OwnedEnv {
    pub cwd: PathBuf,
    pub cancel: Cancel,
    pub jobs: Arc<Jobs>,
    pub files: Arc<FileSet>,
    pub roots: Roots,
    pub sandbox: Option<Sandbox>,
}

impl OwnedEnv {
    pub fn env(&self) -> ToolEnv<'_> {
        ToolEnv {
            cwd: &self.cwd,
            cancel: &self.cancel,
            jobs: &self.jobs,
            files: &self.files,
            roots: &self.roots,
            sandbox: self.sandbox.as_ref(),
        }
    }
}

/// What a tool call runs with.
pub struct ToolEnv<'a> {
    /// The working directory: relative paths start here.
    pub cwd: &'a Path,
    /// Set when the user cancels; long tools check it (`bash` every 100 ms).
    pub cancel: &'a Cancel,
    /// This agent's background jobs.
    pub jobs: &'a Jobs,
    /// The request's file set and repository map, computed at most once per request.
    pub files: &'a FileSet,
    /// Where the file tools may read and write.
    pub roots: &'a Roots,
    /// `bash`'s sandbox (`sandbox.enabled`); `None` runs commands as they are.
    pub sandbox: Option<&'a Sandbox>,
}

/// A cancellation flag shared by the runtime and the tools. Cancelled, a command gets `TERM`
/// and a grace before `KILL`; hurried as well (the user asked twice), no more grace. A child
/// (`child`) is cancelled with its parent or on its own (one attempt of several, ended when
/// another passed).
#[derive(Clone, Debug, Default)]
pub struct Cancel {
    own: Arc<AtomicU8>,
    parent: Option<Box<Cancel>>,
}

const CANCELLED: u8 = 1;
const HURRIED: u8 = 2;

impl Cancel {
    pub fn cancel(&self) {
        self.own.fetch_max(CANCELLED, Ordering::SeqCst);
    }

    /// Cancels, and ends the grace of commands already sent `TERM`.
    pub fn hurry(&self) {
        self.own.store(HURRIED, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.level() >= CANCELLED
    }

    pub fn is_hurried(&self) -> bool {
        self.level() >= HURRIED
    }

    /// A flag cancelled with this one, that can also be cancelled alone.
    pub fn child(&self) -> Cancel {
        Cancel { own: Arc::default(), parent: Some(Box::new(self.clone())) }
    }

    fn level(&self) -> u8 {
        let own = self.own.load(Ordering::SeqCst);
        self.parent.as_ref().map_or(own, |p| own.max(p.level()))
    }
}

/// A refusal or failure, given to the model as its call's result.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError(message.into())
    }
}

/// The tools of this crate, by name.
pub const TOOLS: [&str; 7] = ["read", "write", "edit", "bash", "glob", "grep", "repo_map"];

/// The JSON schema of a tool's `input` (for the turn schema), or `None` for a name this crate
/// does not have.
pub fn input_schema(tool: &str) -> Option<Value> {
    let int =
        |min: u32, max: u32| serde_json::json!({"type": "integer", "minimum": min, "maximum": max});
    let object = |properties: Value, required: &[&str]| {
        serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    };
    // A path, a command or a pattern that is empty is refused by the tool: the schema says so.
    let text = |max: u32| serde_json::json!({"type": "string", "minLength": 1, "maxLength": max});
    Some(match tool {
        "read" => object(
            serde_json::json!({"path": text(400), "offset": int(1, 10_000_000), "limit": int(1, 2000)}),
            &["path"],
        ),
        "write" => object(
            serde_json::json!({"path": text(400), "content": {"type": "string"}}),
            &["path", "content"],
        ),
        "edit" => object(
            serde_json::json!({"path": text(400), "old": {"type": "string", "minLength": 1}, "new": {"type": "string"}, "replace_all": {"type": "boolean"}}),
            &["path", "old", "new"],
        ),
        "bash" => object(
            serde_json::json!({"command": text(4000), "timeout_secs": int(1, MAX_TIMEOUT_SECS as u32), "background": {"type": "boolean"}}),
            &["command"],
        ),
        "glob" => {
            object(serde_json::json!({"pattern": text(400), "path": text(400)}), &["pattern"])
        }
        "grep" => object(
            serde_json::json!({"pattern": text(400), "path": text(400), "glob": text(400), "max_matches": int(1, 2000)}),
            &["pattern"],
        ),
        "repo_map" => object(serde_json::json!({}), &[]),
        _ => return None,
    })
}

/// Runs one call of a tool of this crate.
pub fn run(tool: &str, input: &Value, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    match tool {
        "read" => files::read(parse(input)?, env),
        "write" => files::write(parse(input)?, env),
        "edit" => files::edit(parse(input)?, env),
        "bash" => bash::run(parse(input)?, env),
        "glob" => search::glob(parse(input)?, env),
        "grep" => search::grep(parse(input)?, env),
        "repo_map" => search::repo_map(env),
        _ => Err(ToolError::new(format!("unknown tool `{tool}`"))),
    }
}

fn parse<T: DeserializeOwned>(input: &Value) -> Result<T, ToolError> {
    // `repo_map` and friends may be called with `null` input by a model without the constraint.
    let input = if input.is_null() { Value::Object(Default::default()) } else { input.clone() };
    serde_json::from_value(input).map_err(|e| ToolError::new(format!("bad input: {e}")))
}

#[cfg(test)]
mod tests {
    use super::Cancel;

    #[test]
    fn a_child_is_cancelled_with_its_parent_or_alone_and_never_cancels_it() {
        let parent = Cancel::default();
        let (a, b) = (parent.child(), parent.child());
        a.cancel();
        assert!(a.is_cancelled() && !b.is_cancelled() && !parent.is_cancelled());
        let grandchild = b.child();
        parent.hurry();
        assert!(b.is_hurried() && grandchild.is_hurried(), "down every level");
    }
}
