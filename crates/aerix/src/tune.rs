//! `aerix tune` and `aerix profile sync`: the binary's side of `aerix-tune` (the profile's
//! repository, the pool and the reflection member, stdout).

use std::path::Path;
use std::time::Duration;

use aerix_config::{Env, Member, Settings};
use aerix_tune::{Artifacts, Guards, PoolReflector, ProfileStore, TuneError, TuneOptions};
use anyhow::Context as _;
use caldrix_client::Client;
use caldrix_proto::Request;

use crate::exit::Exit;
use crate::pool;

pub struct TuneArgs {
    pub sessions: Option<u32>,
    pub dry_run: bool,
}

/// Where a run works: the profile, its model base and the project's sessions.
struct Place {
    profile: String,
    branch: String,
    data: std::path::PathBuf,
    project: String,
}

fn place(settings: &Settings, env: &Env, root: &Path, name: &str) -> anyhow::Result<Place> {
    let data = env.data_home().context("no data directory: set HOME or XDG_DATA_HOME")?;
    let project = aerix_session::project_key(root);
    let profile = name.to_owned();
    let branch = aerix_profile::model_branch(&settings.main.model);
    Ok(Place { profile, branch, data, project })
}

fn open(place: &Place, author: &'static str) -> anyhow::Result<ProfileStore> {
    let profile = aerix_profile::Profile::open(&place.data, &place.profile)?;
    Ok(ProfileStore { profile, author })
}

/// The artifacts: the embedded prompts, and each loaded skill's and agent definition's
/// overlay path with its file's body (`project` ones only when the profile is the project's).
fn artifacts(settings: &Settings, env: &Env, root: &Path, cwd: &Path, place: &Place) -> Artifacts {
    use aerix_profile::{OverlayKind, overlay_path};
    let mut artifacts = Artifacts {
        upstream: aerix_core::EMBEDDED
            .iter()
            .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
            .collect(),
        ..Artifacts::default()
    };
    let hook_files = aerix_hooks::HookFiles::standard(
        env.config_home().as_deref(),
        env.home.as_deref(),
        root,
        settings.hooks.claude_settings,
    );
    let mut hooks = aerix_hooks::load(&hook_files.paths());
    let mut agents = aerix_config::load_agents(&aerix_config::AgentDirs::standard(env, root, cwd));
    let extensions = crate::extensions::load(settings, env, root, cwd, &mut agents, &mut hooks);
    let own_project = place.profile == place.project;
    let mut add = |kind, name: &str, origin: &aerix_config::Origin, body: &str| {
        if matches!(origin, aerix_config::Origin::Project) && !own_project {
            return;
        }
        let own = crate::attach::own_name(name, origin);
        let Ok(path) = overlay_path(kind, &crate::attach::source(origin), &own) else { return };
        artifacts.upstream.insert(path.clone(), body.to_owned());
        let by_name = match kind {
            OverlayKind::Skill => &mut artifacts.skills,
            OverlayKind::Agent => &mut artifacts.agents,
        };
        by_name.insert(name.to_owned(), path);
    };
    for skill in extensions.skills.iter() {
        add(OverlayKind::Skill, &skill.name, &skill.origin, &skill.body);
    }
    for agent in agents.definitions.iter() {
        add(OverlayKind::Agent, &agent.name, &agent.origin, &agent.body);
    }
    artifacts
}

pub async fn tune(
    settings: &Settings,
    env: &Env,
    root: &Path,
    cwd: &Path,
    name: &str,
    args: &TuneArgs,
) -> anyhow::Result<Exit> {
    let place = place(settings, env, root, name)?;
    let limit = args.sessions.unwrap_or(settings.tune.sessions) as usize;
    let sessions = aerix_session::Store::new(&place.data);
    let corpus = aerix_tune::read_corpus(
        &sessions,
        &place.project,
        &place.profile,
        &settings.main.model,
        limit,
    )?;
    if corpus.sessions.is_empty() {
        println!(
            "nothing to revise (no sessions of profile {} with model {})",
            place.profile, settings.main.model
        );
        return Ok(Exit::Done);
    }
    let store = open(&place, "aerix tune")?;
    let artifacts = artifacts(settings, env, root, cwd, &place);
    let guard = Guards;
    let mut notes = Vec::new();
    let mut client = pool::connect(settings, env, &mut notes).await?;
    for note in &notes {
        eprintln!("{note}");
    }
    let options = TuneOptions { branch: &place.branch, dry_run: args.dry_run };
    let report = with_reflector(settings, &mut client, async |reflector| {
        aerix_tune::tune(&store, &corpus, &artifacts, &guard, reflector, &options).await
    })
    .await?;
    for line in &report.sync.lines {
        eprintln!("sync: {line}");
    }
    if let Some(commit) = &report.sync.commit {
        eprintln!("sync: committed {commit} on {}", place.branch);
    }
    for path in &report.sync.stale {
        eprintln!("not tuned {path}: it stays stale");
    }
    // `--profile` only when the profile is not the project's own (settings may name it too).
    let flag = if place.profile == place.project {
        String::new()
    } else {
        format!(" --profile {}", place.profile)
    };
    print!(
        "{}",
        report.render(|parent, commit| format!("aerix profile{flag} diff {parent} {commit}"))
    );
    Ok(Exit::Done)
}

pub async fn sync(
    settings: &Settings,
    env: &Env,
    root: &Path,
    cwd: &Path,
    name: &str,
) -> anyhow::Result<Exit> {
    let place = place(settings, env, root, name)?;
    let store = open(&place, "aerix profile sync")?;
    let artifacts = artifacts(settings, env, root, cwd, &place);
    let plan = aerix_tune::plan_sync(&store, &place.branch, &artifacts)?;
    let report = if plan.needs_model() {
        let mut notes = Vec::new();
        let mut client = pool::connect(settings, env, &mut notes).await?;
        for note in &notes {
            eprintln!("{note}");
        }
        with_reflector(settings, &mut client, async |reflector| {
            aerix_tune::sync(&store, &place.branch, &artifacts, &Guards, Some(reflector)).await
        })
        .await?
    } else {
        // Nothing tuned is stale: no pool is bound.
        aerix_tune::sync::<PoolReflector<'_>>(&store, &place.branch, &artifacts, &Guards, None)
            .await?
    };
    for line in &report.lines {
        println!("{line}");
    }
    match &report.commit {
        Some(commit) => println!("committed {commit} on {}", place.branch),
        None => println!("nothing to sync on {}", place.branch),
    }
    Ok(Exit::Done)
}

/// Runs `work` with the reflection member: `tune.member` loaded for the run (and unloaded after
/// when this run loaded it), else the main member.
async fn with_reflector<T>(
    settings: &Settings,
    client: &mut Client,
    work: impl AsyncFnOnce(&mut PoolReflector<'_>) -> Result<T, TuneError>,
) -> anyhow::Result<T> {
    let timeout = Duration::from_secs(settings.pool.start_timeout_secs);
    let (member, alias): (&Member, &str) = match &settings.tune.member {
        Some(member) => (member, "tune"),
        None => (&settings.main, "main"),
    };
    let loaded_before = client
        .members()
        .await
        .map(|ms| ms.iter().any(|m| m.reference == member.model))
        .unwrap_or(false);
    let bound = pool::bind(client, member, alias, timeout).await?;
    let unload = settings.tune.member.is_some() && !loaded_before;
    let mut reflector = PoolReflector {
        client,
        alias: bound.alias.clone(),
        reference: member.model.clone(),
        json: bound.json,
        max_new_tokens: settings.context.max_new_tokens,
    };
    let result = work(&mut reflector).await;
    if unload {
        let request = Request::MemberUnload { alias: bound.alias.clone() };
        if let Err(e) = reflector.client.request(&request).await {
            eprintln!("aerix: unloading the reflection member `{}`: {e}", bound.alias);
        }
    }
    Ok(result?)
}
