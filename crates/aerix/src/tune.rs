//! `aerix tune` and `aerix profile sync`: the binary's side of `aerix-tune` (the profile's
//! repository, the pool and the reflection member, stdout).

use std::path::Path;
use std::time::Duration;

use aerix_config::{Env, Member, Settings};
use aerix_tune::{Artifacts, Committed, PoolReflector, Store, TuneError, TuneOptions};
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
    repo: std::path::PathBuf,
    data: std::path::PathBuf,
    project: String,
}

fn place(settings: &Settings, env: &Env, root: &Path) -> anyhow::Result<Place> {
    let data = env.data_home().context("no data directory: set HOME or XDG_DATA_HOME")?;
    let project = aerix_session::project_key(root);
    let profile = project.clone();
    let repo = data.join("aerix/profiles").join(format!("{profile}.git"));
    let branch = format!("model/{}", encode(&settings.main.model));
    Ok(Place { profile, branch, repo, data, project })
}

/// Every byte outside `[A-Za-z0-9_-]` as `%XX`: one ref component.
fn encode(model: &str) -> String {
    let mut out = String::new();
    for b in model.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The artifacts: the embedded prompts (overlays join them with the profile store).
fn artifacts() -> Artifacts {
    Artifacts {
        upstream: aerix_core::EMBEDDED
            .iter()
            .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
            .collect(),
        ..Artifacts::default()
    }
}

pub async fn tune(
    settings: &Settings,
    env: &Env,
    root: &Path,
    args: &TuneArgs,
) -> anyhow::Result<Exit> {
    let place = place(settings, env, root)?;
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
    let store = ProfileRepo::open(&place.repo)?;
    let artifacts = artifacts();
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
    print!("{}", report.render(|parent, commit| format!("aerix profile diff {parent} {commit}")));
    Ok(Exit::Done)
}

pub async fn sync(settings: &Settings, env: &Env, root: &Path) -> anyhow::Result<Exit> {
    let place = place(settings, env, root)?;
    let store = ProfileRepo::open(&place.repo)?;
    let artifacts = artifacts();
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

/// The profile repository through `gitstore::Bare`.
struct ProfileRepo {
    bare: gitstore::bare::Bare,
}

impl ProfileRepo {
    fn open(path: &Path) -> anyhow::Result<ProfileRepo> {
        if !path.is_dir() {
            anyhow::bail!("no profile at {}: run a session first", path.display());
        }
        let bare = gitstore::bare::Bare::open_or_init(path)
            .with_context(|| format!("opening the profile {}", path.display()))?;
        Ok(ProfileRepo { bare })
    }
}

fn store_err(e: impl std::fmt::Display) -> TuneError {
    TuneError::Store(e.to_string())
}

fn text(bytes: Option<Vec<u8>>) -> Option<String> {
    bytes.map(|b| String::from_utf8_lossy(&b).into_owned())
}

impl Store for ProfileRepo {
    fn head(&self, branch: &str) -> Result<Option<String>, TuneError> {
        self.bare.head(branch).map_err(store_err)
    }

    fn read(&self, commit: &str, path: &str) -> Result<Option<String>, TuneError> {
        self.bare.read_at(commit, path).map(text).map_err(store_err)
    }

    fn history(&self, branch: &str, path: &str) -> Result<Vec<String>, TuneError> {
        let mut out = Vec::new();
        for commit in self.bare.log(branch, path, 200).map_err(store_err)? {
            if let Some(t) = self.read(&commit.id, path)? {
                out.push(t);
            }
        }
        Ok(out)
    }

    fn commit(
        &self,
        branch: &str,
        parent: &str,
        files: &[(String, String)],
        message: &str,
    ) -> Result<Committed, TuneError> {
        let head = self.head(branch)?.unwrap_or_default();
        if head != parent {
            return Ok(Committed::Moved(head));
        }
        let changes: Vec<gitstore::bare::Change> = files
            .iter()
            .map(|(path, text)| gitstore::bare::Change::Put {
                path: path.clone(),
                bytes: text.as_bytes().to_vec(),
            })
            .collect();
        self.bare.commit(branch, &changes, message, "aerix").map(Committed::Done).map_err(store_err)
    }
}

/// The guards (placeholders, the verdict shape, routing's shape words, the size).
struct Guards;

impl aerix_tune::Guard for Guards {
    fn check(&self, path: &str, text: &str, source: &str) -> Result<(), String> {
        let placeholders: &[&str] = match path {
            "brief.md" => &["brief", "check", "done_looks_like"],
            "verifier.md" => &["brief", "check", "summary", "files"],
            _ => &[],
        };
        for name in placeholders {
            if !text.contains(&format!("{{{{{name}}}}}")) {
                return Err(format!("it drops the placeholder {{{{{name}}}}}"));
            }
        }
        if path == "verifier.md" {
            for word in ["\"verdict\"", "\"pass\"", "\"fail\"", "\"reason\""] {
                if !text.contains(word) {
                    return Err(format!("it drops the verdict shape word {word}"));
                }
            }
        }
        if path == "routing.md" {
            for word in aerix_core::ROUTES {
                if !text.contains(word) {
                    return Err(format!("it drops the routing shape word `{word}`"));
                }
            }
        }
        if text.len() > 2 * source.len() {
            return Err(format!(
                "it is over twice its {} size ({} bytes, {} allowed)",
                if Artifacts::is_overlay(path) { "source's" } else { "embedded" },
                text.len(),
                2 * source.len()
            ));
        }
        Ok(())
    }
}
