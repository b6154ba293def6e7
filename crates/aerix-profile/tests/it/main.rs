//! The profile store on real bare repositories: every branch rule, the startup lines, the
//! overlays and the compare-and-swap.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod branches;
mod lines;

use std::path::Path;

use aerix_profile::{Profile, Release};

pub const EMBEDDED: [(&str, &str); 4] = [
    ("system.md", "You are a coding agent.\n"),
    ("routing.md", "answer edit investigate plan\n"),
    ("brief.md", "{{brief}} {{check}} {{done_looks_like}}\n"),
    ("tools/read.md", "Reads a file.\n"),
];
pub const NEXT: [(&str, &str); 4] = [
    ("system.md", "You are a careful coding agent.\n"),
    ("routing.md", "answer edit investigate plan\n"),
    ("brief.md", "{{brief}} {{check}} {{done_looks_like}}\n"),
    ("tools/read.md", "Reads one file.\n"),
];

pub fn release() -> Release<'static> {
    Release { version: "0.1.0", embedded: &EMBEDDED }
}

pub fn next_release() -> Release<'static> {
    Release { version: "0.2.0", embedded: &NEXT }
}

pub fn open(data: &Path, name: &str) -> Profile {
    Profile::create_or_open(data, name, &release()).unwrap()
}

/// A write by git by hand: no lock file, just a compare-and-swap of its own.
pub fn hand_commit(profile: &Profile, branch: &str, path: &str, text: &str) -> String {
    let bare = gitstore::bare::Bare::open_or_init(profile.path()).unwrap();
    let change = gitstore::bare::Change::Put { path: path.into(), bytes: text.as_bytes().to_vec() };
    bare.commit(branch, &[change], "by hand", "someone").unwrap()
}
