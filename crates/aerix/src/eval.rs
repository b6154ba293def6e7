//! `aerix tune --eval`: the latest tune commit on the model base measured against its parent.
//! Held-out requests of the corpus (sessions the commit did not read) are replayed with their
//! recorded prompts, each in a scratch git worktree at the request's recorded start commit,
//! once on each commit, by this binary run
//! headless against a scratch copy of the profile; the two runs' logs give the table.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use aerix_config::{Env, Settings};
use aerix_session::{Event, read_log};
use aerix_tune::eval::{Compared, Figures, table};
use anyhow::Context as _;

use crate::exit::Exit;

/// Held-out requests replayed at most (each runs twice).
pub const EVAL_REQUESTS: usize = 10;
/// The bound of one git call of the replay (a worktree, a clone).
const GIT: Duration = Duration::from_secs(30);

pub fn run(
    settings: &Settings,
    env: &Env,
    root: &Path,
    profile_name: &str,
    sessions: usize,
    trusted: bool,
) -> anyhow::Result<Exit> {
    let data = env.data_home().context("no data directory: set HOME or XDG_DATA_HOME")?;
    let project = aerix_session::project_key(root);
    let branch = aerix_profile::model_branch(&settings.main.model);
    let profile = aerix_profile::Profile::open(&data, profile_name)?;
    let history = profile.history(&branch, None, 1_000)?;
    let Some(tuned) = history.iter().find(|c| c.message.starts_with("tune: ")) else {
        return Err(Exit::Usage
            .with(format!("no tune commit on {branch} to measure: run `aerix tune` first"))
            .into());
    };
    let base = profile.resolve(&format!("{}^", tuned.id))?;
    let read: Vec<&str> = tuned
        .message
        .lines()
        .find_map(|l| l.strip_prefix("sessions: "))
        .map(|l| l.split(", ").collect())
        .unwrap_or_default();
    let corpus = aerix_tune::read_corpus(
        &aerix_session::Store::new(&data),
        &project,
        profile_name,
        &settings.main.model,
        sessions,
    )?;
    let held: Vec<_> = corpus
        .matching()
        .filter(|r| !read.contains(&r.session.as_str()))
        .take(EVAL_REQUESTS)
        .collect();
    if held.is_empty() {
        return Err(Exit::Usage
            .with(format!(
                "no held-out requests: every session read has been evidence for {}; run new sessions first",
                &tuned.id[..12.min(tuned.id.len())]
            ))
            .into());
    }
    let top = gitstore::Repo::toplevel(root)
        .ok_or_else(|| Exit::Usage.with("aerix tune --eval replays in a git repository"))?;
    let repo = gitstore::Repo::at(&top);
    let head = String::from_utf8_lossy(&repo.run(&["rev-parse", "HEAD"], GIT)?).trim().to_owned();
    let mut rows = Vec::new();
    for request in &held {
        let start = replay_start(&repo, request, &head);
        let mut figures = Vec::new();
        for commit in [&base, &tuned.id] {
            figures.push(replay(&Replay {
                repo: &repo,
                profile: &profile,
                name: profile_name,
                branch: &branch,
                commit,
                start: &start,
                prompt: &request.prompt,
                trusted,
            })?);
        }
        let tuned_figures = figures.pop().unwrap_or_default();
        let base_figures = figures.pop().unwrap_or_default();
        let prompt: String = request.prompt.chars().take(40).collect();
        rows.push(Compared {
            label: format!("{}#{} {prompt:?}", request.session, request.number),
            base: base_figures,
            tuned: tuned_figures,
        });
    }
    println!(
        "eval: {} held-out requests of {} sessions on {branch}: base {} against tuned {}",
        rows.len(),
        corpus.sessions.len(),
        &base[..12.min(base.len())],
        &tuned.id[..12.min(tuned.id.len())]
    );
    print!("{}", table(&base, &tuned.id, &rows));
    Ok(Exit::Done)
}

/// The commit a request is replayed at: its recorded start commit, else (none recorded, or
/// one the repository no longer has, as a start snapshot after a gc) `HEAD`, with
/// one line naming it.
fn replay_start(repo: &gitstore::Repo, request: &aerix_tune::Request, head: &str) -> String {
    let name = format!("session {} request {}", request.session, request.number);
    let Some(start) = &request.start_commit else {
        eprintln!("eval: {name} records no start commit; replayed at HEAD");
        return head.to_owned();
    };
    let object = format!("{start}^{{commit}}");
    if repo.run(&["cat-file", "-e", &object], GIT).is_ok() {
        return start.clone();
    }
    eprintln!(
        "eval: {name}: its start commit {start} is gone from the repository; replayed at HEAD"
    );
    head.to_owned()
}

struct Replay<'a> {
    repo: &'a gitstore::Repo,
    profile: &'a aerix_profile::Profile,
    name: &'a str,
    branch: &'a str,
    commit: &'a str,
    start: &'a str,
    prompt: &'a str,
    /// The project is trusted: so is its scratch worktree, for the replay (`--trust`).
    trusted: bool,
}

/// One run of a request on one commit: a scratch worktree at `start`, a scratch data home
/// whose profile is a copy of this one with the model base at `commit`, `aerix -p` in it.
fn replay(r: &Replay<'_>) -> anyhow::Result<Figures> {
    let scratch = tempfile::Builder::new().prefix("aerix-eval-").tempdir()?;
    let work = scratch.path().join("work");
    let data = scratch.path().join("data");
    let work_arg = work.display().to_string();
    r.repo.run(&["worktree", "add", "--detach", "--quiet", &work_arg, r.start], GIT)?;
    let result = (|| -> anyhow::Result<Figures> {
        let copy = aerix_profile::profile_path(&data, r.name);
        std::fs::create_dir_all(copy.parent().unwrap_or(&data))?;
        let (from, to) = (r.profile.path().display().to_string(), copy.display().to_string());
        gitstore::Repo::at(scratch.path()).run(&["clone", "--bare", "--quiet", &from, &to], GIT)?;
        let refname = format!("refs/heads/{}", r.branch);
        gitstore::Repo::at(&copy).run(&["update-ref", &refname, r.commit], GIT)?;
        let exe = std::env::current_exe().context("the aerix binary")?;
        let mut args = vec!["-q", "-p", r.prompt, "--profile", r.name];
        if r.trusted {
            args.push("--trust");
        }
        let out = Command::new(exe)
            .args(args)
            .current_dir(&work)
            .env("XDG_DATA_HOME", &data)
            .output()
            .context("running the replay")?;
        let log = latest_log(&data.join("aerix/sessions")).with_context(|| {
            format!(
                "the replay on {} wrote no session: {}",
                &r.commit[..12.min(r.commit.len())],
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
        let events: Vec<Event> = read_log(&log)?.events;
        Ok(Figures::of(&events))
    })();
    let _ = r.repo.run(&["worktree", "remove", "--force", &work_arg], GIT);
    result
}

/// The one session log a replay wrote.
fn latest_log(sessions: &Path) -> Option<PathBuf> {
    let project = std::fs::read_dir(sessions).ok()?.flatten().next()?.path();
    std::fs::read_dir(project).ok()?.flatten().map(|e| e.path()).find(|p| {
        p.extension().is_some_and(|e| e == "jsonl")
            && !p.to_string_lossy().ends_with(".claude.jsonl")
    })
}
