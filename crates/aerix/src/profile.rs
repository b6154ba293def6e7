//! `aerix profile list|show|edit|log|diff`: reading a profile's branches and texts, and the
//! one hand edit aerix offers, committed by compare-and-swap after the guards.

use std::path::Path;

use aerix_config::{Env, Settings};
use aerix_profile::guards;
use aerix_profile::{
    Change, MAIN, OverlayKind, Profile, ProfileError, UPSTREAM_DIR, UPSTREAM_FILE, Upstream,
    Written, overlay_path, sha256_hex,
};

use crate::attach::{own_name, release, source};
use crate::exit::Exit;
use crate::{ProfileCommand, extensions};

/// The author of an edit's commit.
const EDIT_AUTHOR: &str = "aerix profile edit";

pub struct Where<'a> {
    pub data: &'a Path,
    pub name: &'a str,
    pub project_key: &'a str,
    pub root: &'a Path,
    pub cwd: &'a Path,
    pub settings: &'a Settings,
    pub env: &'a Env,
}

pub fn run(at: &Where<'_>, command: &ProfileCommand) -> anyhow::Result<Exit> {
    let profile = Profile::open(at.data, at.name).map_err(usage)?;
    match command {
        ProfileCommand::List => {
            for (branch, commit) in profile.branches()? {
                let subject = profile
                    .history(&commit, None, 1)?
                    .first()
                    .map(|c| c.message.lines().next().unwrap_or_default().to_owned())
                    .unwrap_or_default();
                println!("{branch}  {}  {subject}", short(&commit));
            }
        }
        ProfileCommand::Show { rev, path } => {
            let commit = profile.resolve(rev).map_err(usage)?;
            match profile.read(&commit, path)? {
                Some(text) => print!("{text}"),
                None => {
                    return Err(Exit::Usage
                        .with(format!("profile {}: no `{path}` at {rev}", at.name))
                        .into());
                }
            }
        }
        ProfileCommand::Log { rev, path } => {
            for commit in profile.history(rev, path.as_deref(), usize::MAX).map_err(usage)? {
                let subject = commit.message.lines().next().unwrap_or_default();
                println!("{}  {}  {}  {subject}", short(&commit.id), commit.time, commit.author);
            }
        }
        ProfileCommand::Diff { from, to } => {
            let diff = match to {
                Some(to) => profile.diff(Some(from), to),
                // One commit: against its parent (the empty tree for the first commit).
                None => {
                    let commit = profile.resolve(from).map_err(usage)?;
                    let parent = profile.history(&commit, None, 2)?.get(1).map(|c| c.id.clone());
                    profile.diff(parent.as_deref(), &commit)
                }
            };
            print!("{}", diff.map_err(usage)?);
        }
        ProfileCommand::Edit { branch, path } => return edit(at, &profile, branch, path),
        // `aerix profile sync` binds a pool when it must: `tune::sync` runs it.
        ProfileCommand::Sync => {
            anyhow::bail!("profile sync runs through tune::sync");
        }
    }
    Ok(Exit::Done)
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// A bad revision or a missing profile is the command line's fault.
fn usage(e: ProfileError) -> anyhow::Error {
    match e {
        ProfileError::Git { .. } | ProfileError::Missing { .. } | ProfileError::BadName(_) => {
            Exit::Usage.with(e.to_string()).into()
        }
        e => e.into(),
    }
}

/// What an edited path is.
enum Artifact {
    /// A built-in prompt, with this release's text.
    Builtin(&'static str),
    /// An overlay of a loaded skill or definition, with its file's body.
    Overlay(String),
}

fn refuse(name: &str, why: impl std::fmt::Display) -> anyhow::Error {
    Exit::Usage.with(format!("profile {name}: edit refuses {why}; nothing written")).into()
}

fn edit(at: &Where<'_>, profile: &Profile, branch: &str, path: &str) -> anyhow::Result<Exit> {
    let name = at.name;
    if branch == MAIN {
        return Err(refuse(
            name,
            "main: it is the model-agnostic base; edit a model branch (model/<model>)",
        ));
    }
    if branch.starts_with("session/") {
        return Err(refuse(
            name,
            format_args!(
                "{branch}: nothing reads a session branch's later commits; edit its model branch"
            ),
        ));
    }
    if !branch.starts_with("model/") {
        return Err(refuse(
            name,
            format_args!("{branch}: only model branches (model/<model>) are edited"),
        ));
    }
    if path == UPSTREAM_FILE || path.starts_with(UPSTREAM_DIR) {
        return Err(refuse(name, format_args!("{path}: aerix records the upstream texts itself")));
    }
    let artifact = artifact(at, path)?;
    let Some(head) = profile.head(branch)? else {
        return Err(Exit::Usage
            .with(format!(
                "profile {name}: no branch `{branch}` (a session of that model makes it)"
            ))
            .into());
    };
    let read = profile.read_commit(&head, &release(), name == at.project_key)?;
    if read.upstream.is_none() {
        return Err(refuse(
            name,
            format_args!(
                "{path}: {UPSTREAM_FILE} on {branch} does not parse (fix it by hand first)"
            ),
        ));
    }
    // What sessions of the branch use now: the starting text.
    let (before, tuned) = match &artifact {
        Artifact::Builtin(_) => (
            read.prompts.get(path).cloned().unwrap_or_default(),
            matches!(read.states.get(path), Some(aerix_profile::BuiltinState::Tuned { .. })),
        ),
        Artifact::Overlay(body) => match read.files.get(path) {
            Some(text) if read.recorded_upstream(path) != Some(sha256_hex(text.as_bytes())) => {
                (text.clone(), true)
            }
            _ => (body.clone(), false),
        },
    };
    let file_name = path.rsplit('/').next().unwrap_or("prompt.md");
    let after = crate::editor::edit(file_name, &before)
        .map_err(|e| anyhow::anyhow!("{e:#}; nothing written"))?;
    if after == before {
        println!("{path} unchanged; nothing written");
        return Ok(Exit::Done);
    }
    let (embedded, source) = match &artifact {
        Artifact::Builtin(text) => (Some(*text), None),
        Artifact::Overlay(body) => (None, Some(body.as_str())),
    };
    if let Err(refusal) = guards::check(path, &after, embedded, source) {
        eprintln!("aerix: profile {name}: {refusal}; nothing written");
        return Ok(Exit::Failed);
    }
    let at_head = read.files.get(path).cloned();
    let message = format!("edit {path}\n\nBy hand, with aerix profile edit.");
    let written = profile.write(branch, &message, EDIT_AUTHOR, |head| {
        // A concurrent change to this file is refused, not overwritten.
        if head.files.get(path) != at_head.as_ref() {
            return Err(ProfileError::Refused {
                profile: name.to_owned(),
                reason: format!("{path} changed on {branch} while it was edited"),
            });
        }
        let mut changes =
            vec![Change::Put { path: path.to_owned(), bytes: after.clone().into_bytes() }];
        if !tuned {
            // The first edit records the upstream it was made from.
            let mut upstream = match head.files.get(UPSTREAM_FILE) {
                Some(text) => Upstream::parse(text).map_err(|why| ProfileError::Refused {
                    profile: name.to_owned(),
                    reason: format!("{UPSTREAM_FILE} on {branch} does not parse ({why})"),
                })?,
                None => Upstream::default(),
            };
            let upstream_text = match &artifact {
                Artifact::Builtin(text) => (*text).to_owned(),
                Artifact::Overlay(body) => {
                    changes.push(Change::Put {
                        path: format!("{UPSTREAM_DIR}{path}"),
                        bytes: body.clone().into_bytes(),
                    });
                    body.clone()
                }
            };
            upstream.hashes.insert(path.to_owned(), sha256_hex(upstream_text.as_bytes()));
            changes.push(Change::Put {
                path: UPSTREAM_FILE.to_owned(),
                bytes: upstream.render().into_bytes(),
            });
        }
        Ok(changes)
    })?;
    match written {
        Written::Committed(commit) => println!("committed {commit} on {branch}"),
        Written::Unchanged(_) => println!("{path} unchanged; nothing written"),
    }
    Ok(Exit::Done)
}

/// A built-in prompt's path, or an overlay path a loaded skill or definition has.
fn artifact(at: &Where<'_>, path: &str) -> anyhow::Result<Artifact> {
    if let Some((_, text)) = aerix_agent::runtime::EMBEDDED.iter().find(|(p, _)| *p == path) {
        return Ok(Artifact::Builtin(text));
    }
    if !(path.starts_with("skills/") || path.starts_with("agents/")) {
        return Err(refuse(
            at.name,
            format_args!("{path}: it is neither a built-in prompt nor an overlay path"),
        ));
    }
    let mut agents =
        aerix_config::load_agents(&aerix_config::AgentDirs::standard(at.env, at.root, at.cwd));
    let mut hooks = aerix_hooks::Loaded::default();
    let found =
        extensions::Found::read(&extensions::every_source(at.settings, at.env, at.root), None);
    let extensions = extensions::load(&found, at.env, at.root, at.cwd, &mut agents, &mut hooks);
    let skills =
        extensions.skills.iter().map(|s| (OverlayKind::Skill, &s.name, &s.origin, &s.body));
    let defs = agents.definitions.iter().map(|a| (OverlayKind::Agent, &a.name, &a.origin, &a.body));
    for (kind, name, origin, body) in skills.chain(defs) {
        let own = own_name(name, origin);
        if overlay_path(kind, &source(origin), &own).as_deref() == Ok(path) {
            if *origin == aerix_config::Origin::Project && at.name != at.project_key {
                return Err(refuse(
                    at.name,
                    format_args!(
                        "{path}: project overlays are edited only from the profile's own project"
                    ),
                ));
            }
            return Ok(Artifact::Overlay(body.clone()));
        }
    }
    Err(refuse(
        at.name,
        format_args!("{path}: no loaded skill or agent definition has this overlay path"),
    ))
}
