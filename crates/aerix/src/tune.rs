//! `aerix tune` and `aerix profile sync`: the binary's side of `aerix-tune` (the profile's
//! repository, the pool and the reflection member, stdout).
//!
//! A SIGINT or SIGTERM stops a run at its next safe point: before the pool, after the
//! reflection member's load (it is then unloaded), or at the reflection's next wait on the pool
//! (the generation is dropped, its connection closed so the pool cancels it). Each commit is
//! one compare-and-swap of the ref with no wait inside it, so a revision is committed whole or
//! not at all. One line says so, and the status is 130 or 143.

use std::path::Path;
use std::time::Duration;

use aerix_config::{Env, Settings};
use aerix_tune::{Artifacts, Guards, PoolReflector, ProfileStore, TuneError, TuneOptions};
use anyhow::Context as _;
use caldrix_client::Client;
use caldrix_proto::{FrameFormat, Request};

use crate::exit::Exit;
use crate::pool;
use crate::signals::Interrupt;

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
        upstream: aerix_agent::runtime::EMBEDDED
            .iter()
            .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
            .collect(),
        ..Artifacts::default()
    };
    // The plugins' hooks are read and dropped: nothing here runs them.
    let mut hooks = aerix_hooks::Loaded::default();
    let mut agents = aerix_config::load_agents(&aerix_config::AgentDirs::standard(env, root, cwd));
    let found =
        crate::extensions::Found::read(&crate::extensions::every_source(settings, env, root), None);
    let extensions = crate::extensions::load(&found, env, root, cwd, &mut agents, &mut hooks);
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
    let interrupt = Interrupt::install(false, |_| {})?;
    let Some(mut client) = connect(settings, env, &interrupt).await? else {
        return Ok(interrupted(&interrupt, None));
    };
    let options = TuneOptions { branch: &place.branch, dry_run: args.dry_run };
    let report = with_reflector(settings, &mut client, &interrupt, async |reflector| {
        aerix_tune::tune(&store, &corpus, &artifacts, &guard, reflector, &options).await
    })
    .await?;
    let report = match report {
        Reflected::Done(report) => report,
        Reflected::Interrupted(unloaded) => return Ok(interrupted(&interrupt, unloaded)),
    };
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
        let interrupt = Interrupt::install(false, |_| {})?;
        let Some(mut client) = connect(settings, env, &interrupt).await? else {
            return Ok(interrupted(&interrupt, None));
        };
        let reflected = with_reflector(settings, &mut client, &interrupt, async |reflector| {
            aerix_tune::sync(&store, &place.branch, &artifacts, &Guards, Some(reflector)).await
        })
        .await?;
        match reflected {
            Reflected::Done(report) => report,
            Reflected::Interrupted(unloaded) => return Ok(interrupted(&interrupt, unloaded)),
        }
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

/// The pool, unless a signal comes first (`None`).
async fn connect(
    settings: &Settings,
    env: &Env,
    interrupt: &Interrupt,
) -> anyhow::Result<Option<Client>> {
    if interrupt.got().is_some() {
        return Ok(None);
    }
    let mut notes = Vec::new();
    let client = tokio::select! {
        client = pool::connect(settings, env, &mut notes) => Some(client?),
        _ = interrupt.wait() => None,
    };
    for note in &notes {
        eprintln!("{note}");
    }
    Ok(client)
}

/// The one line of an interrupted run, and its status.
fn interrupted(interrupt: &Interrupt, unloaded: Option<String>) -> Exit {
    let (name, exit) = interrupt.got().unwrap_or(("a signal", Exit::Cancelled));
    let unloaded = match unloaded {
        Some(alias) => format!("; the reflection member `{alias}` it loaded is unloaded"),
        None => String::new(),
    };
    eprintln!("interrupted by {name}: nothing half-done is committed{unloaded}");
    exit
}

/// What `with_reflector` ran to.
enum Reflected<T> {
    Done(T),
    /// A signal stopped it; the alias of the member it unloaded, if it loaded one.
    Interrupted(Option<String>),
}

/// Runs `work` with the reflection member: `tune.member` loaded for the run (and unloaded after
/// when this run loaded it), else the main member. A signal during the load is acted on once
/// the load is done; one during `work` drops it at its wait on the pool.
async fn with_reflector<T>(
    settings: &Settings,
    client: &mut Client,
    interrupt: &Interrupt,
    work: impl AsyncFnOnce(&mut PoolReflector<'_>) -> Result<T, TuneError>,
) -> anyhow::Result<Reflected<T>> {
    let timeout = Duration::from_secs(settings.pool.start_timeout_secs);
    let (member, alias, serving) = match &settings.tune.member {
        Some(member) => (member, "tune", pool::Serving::other(member)),
        None => (
            &settings.main,
            "main",
            pool::Serving::main(&settings.main, pool::generations(settings)),
        ),
    };
    let loaded_before = client
        .members()
        .await
        .map(|ms| ms.iter().any(|m| m.reference == member.model))
        .unwrap_or(false);
    let bound = pool::bind(client, member, alias, serving, timeout).await?;
    let unload = settings.tune.member.is_some() && !loaded_before;
    let mut reflector = PoolReflector {
        client,
        alias: bound.alias.clone(),
        reference: member.model.clone(),
        json: bound.json,
        max_new_tokens: settings.context.max_new_tokens,
    };
    let result = if interrupt.got().is_some() {
        None
    } else {
        tokio::select! {
            result = work(&mut reflector) => Some(result),
            _ = interrupt.wait() => None,
        }
    };
    let Some(result) = result else {
        // The connection may hold a generation dropped midway: unload on a fresh one.
        if unload {
            match Client::connect(&settings.pool.socket, FrameFormat::Cbor, "aerix").await {
                Ok(mut fresh) => unload_member(&mut fresh, &bound.alias).await,
                Err(e) => {
                    eprintln!("aerix: unloading the reflection member `{}`: {e}", bound.alias)
                }
            }
        }
        return Ok(Reflected::Interrupted(unload.then_some(bound.alias)));
    };
    if unload {
        unload_member(reflector.client, &bound.alias).await;
    }
    Ok(Reflected::Done(result?))
}

async fn unload_member(client: &mut Client, alias: &str) {
    let request = Request::MemberUnload { alias: alias.to_owned() };
    if let Err(e) = client.request(&request).await {
        eprintln!("aerix: unloading the reflection member `{alias}`: {e}");
    }
}
