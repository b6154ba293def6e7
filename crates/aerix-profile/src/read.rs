//! What a session reads from its profile: one commit's prompts (the embedded text where the
//! commit lacks one or never tuned it), its skill and agent overlays, and the startup lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ProfileError;
use crate::names::{overlay_path, session_branch};
use crate::store::{Profile, Release};
use crate::upstream::{UPSTREAM_DIR, UPSTREAM_FILE, Upstream, sha256_hex};

/// Entries of a legacy prompts directory the check looks at; past them it gets the line too.
pub const MAX_LEGACY_ENTRIES: usize = 256;

/// How a session attaches to its profile.
#[derive(Clone, Copy, Debug)]
pub struct Attach<'a> {
    /// The main member's model reference, exactly as configured.
    pub model: &'a str,
    pub session: &'a str,
    /// A resumed session's recorded commit.
    pub recorded: Option<&'a str>,
    /// `--profile-refresh`: the session's branch moves to its model base's head first.
    pub refresh: bool,
    /// The cwd's project key: `project` overlays apply only when it is the profile's name.
    pub project_key: &'a str,
}

/// An attached session: its model base, the commit it reads (where its first request points
/// `session/<id>`), and what it read.
#[derive(Clone, Debug)]
pub struct Attached {
    pub branch: String,
    pub session_branch: String,
    pub read: Read,
}

/// A built-in prompt at the read commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuiltinState {
    /// The commit lacks it: the embedded text is used.
    Missing,
    /// Its text is still the upstream it records (a file inherited from `main`): this
    /// release's embedded text is used.
    NeverTuned,
    /// Tuned: its text is used. `stale`: the upstream it records is not this release's text.
    Tuned { stale: bool },
}

/// Skill or agent definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverlayKind {
    Skill,
    Agent,
}

/// Where a skill or agent definition was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source<'a> {
    User,
    Project,
    Plugin(&'a str),
}

impl Source<'_> {
    pub fn as_str(&self) -> &str {
        match self {
            Source::User => "user",
            Source::Project => "project",
            Source::Plugin(id) => id,
        }
    }
}

/// A loaded skill or agent definition an overlay may replace.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub kind: OverlayKind,
    pub source: Source<'a>,
    /// Its own name (a plugin's skill without the `plugin:` prefix).
    pub name: &'a str,
    /// Its body as loaded from its file: the overlay's upstream.
    pub text: &'a str,
}

/// What an overlay gives a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OverlayUse {
    /// The file's text (no overlay, an untuned one, or a project overlay skipped).
    File,
    /// The overlay's text; `stale`: the file changed since it was tuned.
    Overlay { text: String, stale: bool },
    /// No overlay path: the line naming why.
    NoPath(String),
}

/// One commit's prompts and overlays.
#[derive(Clone, Debug)]
pub struct Read {
    pub profile: String,
    pub commit: String,
    /// Every built-in prompt's text to use, by path.
    pub prompts: BTreeMap<String, String>,
    pub states: BTreeMap<String, BuiltinState>,
    /// `None` when the commit's `upstream.json` does not parse.
    pub upstream: Option<Upstream>,
    /// Every file of the commit.
    pub files: BTreeMap<String, String>,
    /// Whether the profile is the cwd's project's (its `project` overlays apply).
    pub own_project: bool,
    /// The startup lines, in order.
    pub lines: Vec<String>,
}

/// The first 12 digits of a commit id.
pub(crate) fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

impl Profile {
    /// Attaches a session: the model base (made from `main` when new), the commit (the
    /// recorded one for a resumed session, unless refreshed or missing; else the base's head),
    /// and the read of that commit. `session/<id>` is not made here: the session's first
    /// request makes it at that commit ([`Profile::session_at`]), so a session that never ran
    /// one leaves no branch.
    pub fn attach(
        &self,
        attach: &Attach<'_>,
        release: &Release<'_>,
    ) -> Result<Attached, ProfileError> {
        let (branch, head) = self.model_base(attach.model)?;
        let mut lines = Vec::new();
        let commit = match attach.recorded {
            Some(recorded) if !attach.refresh => {
                if self.has_commit(recorded)? {
                    recorded.to_owned()
                } else {
                    lines.push(format!(
                        "profile {}: the recorded commit {recorded} no longer exists; {branch}'s head {} is used",
                        self.name(),
                        short(&head)
                    ));
                    head
                }
            }
            _ => head,
        };
        let mut read = self.read_commit(&commit, release, self.name() == attach.project_key)?;
        lines.append(&mut read.lines);
        read.lines = lines;
        Ok(Attached { branch, session_branch: session_branch(attach.session), read })
    }

    /// Reads `commit`: each built-in prompt's state and text, the upstream hashes, the lines.
    pub fn read_commit(
        &self,
        commit: &str,
        release: &Release<'_>,
        own_project: bool,
    ) -> Result<Read, ProfileError> {
        let files = self.files(commit)?;
        let name = self.name().to_owned();
        let mut lines = Vec::new();
        let upstream = match files.get(UPSTREAM_FILE).map(|t| Upstream::parse(t)) {
            None => Some(Upstream::default()),
            Some(Ok(upstream)) => Some(upstream),
            Some(Err(why)) => {
                lines.push(format!(
                    "profile {name}: {UPSTREAM_FILE} at {} does not parse ({why}); no file is named stale",
                    short(commit)
                ));
                None
            }
        };
        let empty = Upstream::default();
        let recorded = upstream.as_ref().unwrap_or(&empty);
        // A file without a recorded upstream is its own upstream when main ever held it.
        let unrecorded: Vec<String> = release
            .embedded
            .iter()
            .filter(|(path, _)| files.contains_key(*path) && recorded.get(path).is_none())
            .map(|(path, _)| (*path).to_owned())
            .collect();
        let main_blobs =
            if unrecorded.is_empty() { BTreeMap::new() } else { self.main_blobs(unrecorded)? };
        let mut prompts = BTreeMap::new();
        let mut states = BTreeMap::new();
        for (path, embedded) in release.embedded {
            let state = match files.get(*path) {
                None => {
                    lines.push(format!(
                        "profile {name}: {path} is not in commit {}; the embedded text is used",
                        short(commit)
                    ));
                    BuiltinState::Missing
                }
                Some(text) => {
                    let never_tuned = match recorded.get(path) {
                        Some(hash) => sha256_hex(text.as_bytes()) == hash,
                        None => gitstore::bare::blob_id(text.as_bytes()).is_some_and(|id| {
                            main_blobs.get(*path).is_some_and(|ids| ids.contains(&id))
                        }),
                    };
                    if never_tuned {
                        // Equal texts need no line: nothing differs from what the commit holds.
                        if text != embedded {
                            lines.push(format!(
                                "profile {name}: {path} was never tuned; this release's embedded text is used"
                            ));
                        }
                        BuiltinState::NeverTuned
                    } else {
                        let stale = recorded
                            .get(path)
                            .is_some_and(|hash| hash != sha256_hex(embedded.as_bytes()));
                        if stale {
                            lines.push(stale_line(&name, path));
                        }
                        BuiltinState::Tuned { stale }
                    }
                }
            };
            let text = match &state {
                BuiltinState::Tuned { .. } => files.get(*path).cloned().unwrap_or_default(),
                _ => (*embedded).to_owned(),
            };
            prompts.insert((*path).to_owned(), text);
            states.insert((*path).to_owned(), state);
        }
        if !own_project
            && files
                .keys()
                .any(|p| p.starts_with("skills/project/") || p.starts_with("agents/project/"))
        {
            lines.push(format!(
                "profile {name}: its project overlays are skipped: the profile is not this project's"
            ));
        }
        Ok(Read {
            profile: name,
            commit: commit.to_owned(),
            prompts,
            states,
            upstream,
            files,
            own_project,
            lines,
        })
    }
}

fn stale_line(profile: &str, path: &str) -> String {
    format!(
        "profile {profile}: {path} is stale: its upstream changed since it was tuned (`aerix profile sync` reconciles it)"
    )
}

impl Read {
    /// How many of the built-in prompts this commit tunes.
    pub fn tuned(&self) -> usize {
        self.states.values().filter(|s| matches!(s, BuiltinState::Tuned { .. })).count()
    }

    /// The upstream hash recorded for `path`: `upstream.json`'s, else `upstream/<path>`'s text's.
    pub fn recorded_upstream(&self, path: &str) -> Option<String> {
        self.upstream.as_ref().and_then(|u| u.get(path).map(str::to_owned)).or_else(|| {
            self.files.get(&format!("{UPSTREAM_DIR}{path}")).map(|t| sha256_hex(t.as_bytes()))
        })
    }

    /// What the commit gives `target`.
    pub fn overlay(&self, target: &Target<'_>) -> OverlayUse {
        let what = match target.kind {
            OverlayKind::Skill => "skill",
            OverlayKind::Agent => "agent",
        };
        let path = match overlay_path(target.kind, &target.source, target.name) {
            Ok(path) => path,
            Err(why) => {
                return OverlayUse::NoPath(format!(
                    "profile {}: {what} `{}` ({}) has no overlay path: {why}; it loads from its file",
                    self.profile,
                    target.name.escape_debug(),
                    target.source.as_str().escape_debug()
                ));
            }
        };
        if target.source == Source::Project && !self.own_project {
            return OverlayUse::File;
        }
        let Some(text) = self.files.get(&path) else { return OverlayUse::File };
        let recorded = self.recorded_upstream(&path);
        if recorded.as_deref() == Some(sha256_hex(text.as_bytes()).as_str()) {
            return OverlayUse::File;
        }
        let stale = recorded.is_some_and(|hash| hash != sha256_hex(target.text.as_bytes()));
        OverlayUse::Overlay { text: text.clone(), stale }
    }

    /// Each target's overlay text (`None`: its file's) and the lines: one per target without
    /// an overlay path, one per stale overlay.
    pub fn overlays(&self, targets: &[Target<'_>]) -> (Vec<Option<String>>, Vec<String>) {
        let mut lines = Vec::new();
        let texts = targets
            .iter()
            .map(|target| match self.overlay(target) {
                OverlayUse::File => None,
                OverlayUse::NoPath(line) => {
                    lines.push(line);
                    None
                }
                OverlayUse::Overlay { text, stale } => {
                    if stale
                        && let Ok(path) = overlay_path(target.kind, &target.source, target.name)
                    {
                        lines.push(stale_line(&self.profile, &path));
                    }
                    Some(text)
                }
            })
            .collect();
        (texts, lines)
    }
}

/// One line per directory of `dirs` that still holds files (a symlink to a file counts;
/// subdirectories are looked into; past `MAX_LEGACY_ENTRIES` entries it gets the line too).
pub fn legacy_prompt_dirs(dirs: &[PathBuf]) -> Vec<String> {
    dirs.iter()
        .filter(|dir| holds_files(dir))
        .map(|dir| {
            format!(
                "{} holds files; they are ignored: prompts are read from the session's profile (aerix profile edit)",
                dir.display()
            )
        })
        .collect()
}

fn holds_files(dir: &Path) -> bool {
    let mut pending = vec![dir.to_owned()];
    let mut seen = 0usize;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            seen += 1;
            if seen > MAX_LEGACY_ENTRIES {
                return true;
            }
            let Ok(entry) = entry else { continue };
            let path = entry.path();
            let Ok(link) = std::fs::symlink_metadata(&path) else { continue };
            if link.is_dir() {
                pending.push(path);
            } else if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                return true;
            }
        }
    }
    false
}
