//! `aerix-tune` on real profile repositories (`aerix-profile`), with a scripted reflection
//! member that can act on the repository while it answers.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod corpus;
mod sync;
mod tune;

use std::path::Path;

use aerix_profile::{Profile, Release};
use aerix_tune::{Artifacts, Guards, ProfileStore, Reflector, TuneError};
use serde_json::json;

pub const MODEL: &str = "m.gguf";
pub const PROFILE: &str = "proj";

pub const EMBEDDED: [(&str, &str); 5] = [
    ("system.md", "You are a coding agent.\nRead before you edit.\n"),
    ("routing.md", "answer edit investigate plan\n"),
    ("tools/bash.md", "Runs a shell command.\n"),
    ("tune/reflect.md", "Revise the prompt.\n"),
    ("tune/reconcile.md", "Reconcile the prompt.\n"),
];

pub fn release(embedded: &'static [(&'static str, &'static str)]) -> Release<'static> {
    Release { version: "0.1.0", embedded }
}

pub fn artifacts(embedded: &[(&str, &str)]) -> Artifacts {
    Artifacts {
        upstream: embedded.iter().map(|(p, t)| ((*p).to_owned(), (*t).to_owned())).collect(),
        ..Artifacts::default()
    }
}

/// A profile with its model base, as a session's startup leaves it.
pub fn profile(data: &Path) -> (ProfileStore, String) {
    let profile = Profile::create_or_open(data, PROFILE, &release(&EMBEDDED)).unwrap();
    let (branch, _) = profile.model_base(MODEL).unwrap();
    (ProfileStore { profile, author: "aerix tune" }, branch)
}

pub const GUARDS: Guards = Guards;

/// A session of the profile and model: `events` after its `session.start`, then its end.
pub fn session(data: &Path, prompt: &str, events: &[serde_json::Value]) -> String {
    let store = aerix_session::Store::new(data);
    let log = store.create("proj", Path::new("/w"), MODEL, prompt).unwrap();
    let id = log.id().to_owned();
    let mut lines = vec![
        json!({"type": "session.start", "session": id, "project": "proj", "cwd": "/w", "model": MODEL, "prompt": prompt, "resumed": false, "version": "0.1.0", "profile": PROFILE, "profile_branch": "model/m%2Egguf", "profile_commit": "0"}),
    ];
    lines.extend(events.iter().cloned());
    lines.push(json!({"type": "session.end", "outcome": "done", "exit_code": 0}));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(log.path(), text).unwrap();
    store.finish("proj", &id, "done").unwrap();
    id
}

/// A tool call's error in a session.
pub fn tool_error(tool: &str, text: &str) -> serde_json::Value {
    json!({"type": "message", "agent": "a1", "role": "tool", "turn": 1, "call": "c1", "tool": tool, "input": {}, "text": text, "error": true})
}

/// What runs before the reply to the ask whose data names a path.
pub type Before<'a> = (&'a str, Box<dyn FnMut() + 'a>);

/// Replies in order; `before` runs before the reply of the ask whose data names its path.
pub struct Scripted<'a> {
    pub replies: Vec<String>,
    pub asked: Vec<String>,
    pub before: Option<Before<'a>>,
}

impl<'a> Scripted<'a> {
    pub fn new(replies: &[serde_json::Value]) -> Scripted<'a> {
        Scripted {
            replies: replies.iter().rev().map(|r| r.to_string()).collect(),
            asked: Vec::new(),
            before: None,
        }
    }
}

impl Reflector for Scripted<'_> {
    fn member(&self) -> &str {
        "script@test"
    }

    async fn ask(&mut self, _system: &str, user: &str, _schema: &str) -> Result<String, TuneError> {
        self.asked.push(user.to_owned());
        if let Some((path, hook)) = &mut self.before
            && user.contains(&format!("`{path}`"))
        {
            hook();
        }
        self.replies.pop().ok_or_else(|| TuneError::Pool("no reply left".into()))
    }
}

pub fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
}
