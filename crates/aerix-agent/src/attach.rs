//! Startup's profile step: which profile a session attaches, attaching it (`aerix-profile`),
//! and turning the read into the runtime's prompts and the skills' and agents' overlaid
//! bodies. Every problem is a line; a profile that cannot be opened leaves the embedded set.

use std::path::{Path, PathBuf};

use crate::runtime::{EMBEDDED, Prompts};
use aerix_config::{AgentDefinitions, Env, Origin, Settings};
use aerix_profile::{Attach, BuiltinState, OverlayKind, Profile, Release, Source, Target};
use aerix_session::Event;
use aerix_skills::Skills;

/// This release's prompts.
pub fn release() -> Release<'static> {
    Release { version: env!("CARGO_PKG_VERSION"), embedded: &EMBEDDED }
}

/// The profile a command or a new session uses: `--profile`, else settings' `profile`, else
/// the project key.
pub fn profile_name(flag: Option<&str>, settings: Option<&Settings>, project_key: &str) -> String {
    flag.map(str::to_owned)
        .or_else(|| settings.and_then(|s| s.profile.clone()))
        .unwrap_or_else(|| project_key.to_owned())
}

/// The profile and commit a session's log recorded last (its latest `session.start` naming one).
pub fn recorded(events: &[Event]) -> Option<(String, String)> {
    events.iter().rev().find_map(|event| match event {
        Event::SessionStart { profile: Some(p), profile_commit: Some(c), .. } => {
            Some((p.clone(), c.clone()))
        }
        _ => None,
    })
}

/// What a session got from its profile.
pub struct Attached {
    pub prompts: Prompts,
    /// `session.start`'s `profile`, `profile_branch`, `profile_commit` (none without a profile).
    pub profile: Option<(String, String, String)>,
    /// How many built-in prompts the commit tunes; `None` when its `upstream.json` does not
    /// parse (the screen's profile row leaves the count out then).
    pub tuned: Option<u32>,
    pub lines: Vec<String>,
    /// Where the session's first request makes `session/<id>` (none without a profile).
    pub branch: Option<SessionBranch>,
}

/// `session/<id>` to be made at the commit the session read, by its first request.
#[derive(Clone, Debug)]
pub struct SessionBranch {
    data: PathBuf,
    profile: String,
    session: String,
    commit: String,
}

impl SessionBranch {
    /// Makes (or moves) the branch; a line naming why when it cannot (the session goes on: it
    /// read its prompts already).
    pub fn make(&self) -> Option<String> {
        let made = Profile::open(&self.data, &self.profile)
            .and_then(|profile| profile.session_at(&self.session, &self.commit));
        made.err().map(|e| format!("{e}; the session's branch is not made"))
    }
}

pub struct Request<'a> {
    pub data: &'a Path,
    pub name: &'a str,
    pub model: &'a str,
    pub session: &'a str,
    pub recorded: Option<&'a str>,
    pub refresh: bool,
    pub project_key: &'a str,
    pub cwd: &'a Path,
    pub env: &'a Env,
}

/// A session's profile at startup (headless and the screen alike): `--profile`, else the one
/// a resumed session recorded (read at its recorded commit), else settings' or the project's;
/// then [`attach`].
#[allow(clippy::too_many_arguments, reason = "startup's inputs, each used once")]
pub fn for_session(
    flag: Option<&str>,
    recorded: Option<&(String, String)>,
    refresh: bool,
    settings: &Settings,
    env: &Env,
    data: &Path,
    project_key: &str,
    session: &str,
    cwd: &Path,
    skills: &mut Skills,
    agents: &mut AgentDefinitions,
) -> Attached {
    let name = match (flag, recorded) {
        (Some(flag), _) => flag.to_owned(),
        (None, Some((recorded, _))) => recorded.clone(),
        (None, None) => profile_name(None, Some(settings), project_key),
    };
    let request = Request {
        data,
        name: &name,
        model: &settings.main.model,
        session,
        recorded: recorded.filter(|(p, _)| *p == name).map(|(_, c)| c.as_str()),
        refresh,
        project_key,
        cwd,
        env,
    };
    attach(&request, skills, agents)
}

/// Attaches the session's profile and applies its overlays to `skills` and `agents`.
pub fn attach(
    request: &Request<'_>,
    skills: &mut Skills,
    agents: &mut AgentDefinitions,
) -> Attached {
    let mut lines = legacy_lines(request.cwd, request.env);
    let release = release();
    let attached = Profile::create_or_open(request.data, request.name, &release).and_then(|p| {
        let attach = Attach {
            model: request.model,
            session: request.session,
            recorded: request.recorded,
            refresh: request.refresh,
            project_key: request.project_key,
        };
        p.attach(&attach, &release)
    });
    let attached = match attached {
        Ok(attached) => attached,
        Err(e) => {
            lines.push(format!("{e}; the embedded prompts are used"));
            return Attached {
                prompts: Prompts::embedded(),
                profile: None,
                tuned: None,
                lines,
                branch: None,
            };
        }
    };
    let read = &attached.read;
    lines.extend(read.lines.iter().cloned());
    // Overlays: each loaded skill and definition by its origin and own name.
    let skill_list: Vec<(String, Origin, String, String)> = skills
        .iter()
        .map(|s| (s.name.clone(), s.origin.clone(), own_name(&s.name, &s.origin), s.body.clone()))
        .collect();
    let agent_list: Vec<(String, Origin, String, String)> = agents
        .iter()
        .map(|a| (a.name.clone(), a.origin.clone(), own_name(&a.name, &a.origin), a.body.clone()))
        .collect();
    let targets: Vec<Target<'_>> = skill_list
        .iter()
        .map(|(_, origin, own, body)| Target {
            kind: OverlayKind::Skill,
            source: source(origin),
            name: own,
            text: body,
        })
        .chain(agent_list.iter().map(|(_, origin, own, body)| Target {
            kind: OverlayKind::Agent,
            source: source(origin),
            name: own,
            text: body,
        }))
        .collect();
    let (texts, overlay_lines) = read.overlays(&targets);
    lines.extend(overlay_lines);
    let names =
        skill_list.iter().map(|s| (true, &s.0)).chain(agent_list.iter().map(|a| (false, &a.0)));
    for ((is_skill, name), text) in names.zip(texts) {
        if let Some(text) = text {
            if is_skill {
                skills.set_body(name, text);
            } else {
                agents.set_body(name, text);
            }
        }
    }
    let tuned = read.upstream.as_ref().map(|_| {
        let tuned = read.states.values().filter(|s| matches!(s, BuiltinState::Tuned { .. }));
        u32::try_from(tuned.count()).unwrap_or(u32::MAX)
    });
    let branch = SessionBranch {
        data: request.data.to_owned(),
        profile: read.profile.clone(),
        session: request.session.to_owned(),
        commit: read.commit.clone(),
    };
    Attached {
        prompts: Prompts::from_texts(read.prompts.clone()),
        profile: Some((read.profile.clone(), attached.branch.clone(), read.commit.clone())),
        tuned,
        lines,
        branch: Some(branch),
    }
}

/// The overlay name: a plugin's skill or definition without its `plugin:` prefix.
pub fn own_name(name: &str, origin: &Origin) -> String {
    match origin {
        Origin::Plugin(id) => name.strip_prefix(&format!("{id}:")).unwrap_or(name).to_owned(),
        _ => name.to_owned(),
    }
}

pub fn source(origin: &Origin) -> Source<'_> {
    match origin {
        Origin::Project => Source::Project,
        Origin::User => Source::User,
        Origin::Plugin(id) => Source::Plugin(id),
    }
}

/// `<cwd>/.aerix/prompts/` and `$XDG_CONFIG_HOME/aerix/prompts/`: prompts are no longer read
/// from them.
fn legacy_lines(cwd: &Path, env: &Env) -> Vec<String> {
    let mut dirs: Vec<PathBuf> = vec![cwd.join(".aerix/prompts")];
    dirs.extend(env.config_home().map(|c| c.join("aerix/prompts")));
    aerix_profile::legacy_prompt_dirs(&dirs)
}
