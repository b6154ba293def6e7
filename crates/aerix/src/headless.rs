//! `aerix -p`: one request, run in place, ending with the diff it made.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aerix_config::{Env, Settings};
use aerix_core::{CoreError, Request, Runtime, Sink as _, run_request};
use aerix_hooks::{EndReason, Fire, HookFiles, StartSource};
use aerix_session::{Event, Outcome, Store, read_log, rebuild};
use aerix_tools::Cancel;
use anyhow::Context as _;

use crate::attach;
use crate::exit::Exit;
use crate::extensions;
use crate::hooks::{AgentHooks, SessionHooks};
use crate::pool;
use crate::signals::{self, Pending, Signals};
use crate::sink::HeadlessSink;

pub struct Options {
    pub prompt: String,
    pub cwd: PathBuf,
    pub max_turns: Option<u32>,
    pub resume: Option<String>,
    pub continue_latest: bool,
    pub quiet: bool,
    /// `--profile NAME` (checked by the command line).
    pub profile: Option<String>,
    /// `--profile-refresh`.
    pub profile_refresh: bool,
    /// When the process started (for `AERIX_TIMING`).
    pub started: Instant,
}

/// What the start of a request saw of the working tree.
struct Snapshot {
    repo: gitstore::Repo,
    base: Option<String>,
    untracked: BTreeSet<String>,
}

fn snapshot(root: &Path) -> Option<Snapshot> {
    let top = gitstore::Repo::toplevel(root)?;
    let repo = gitstore::Repo::at(&top);
    let base = repo.snapshot().ok().flatten();
    let untracked = repo.untracked().unwrap_or_default().into_iter().collect();
    Some(Snapshot { repo, base, untracked })
}

/// The diff of what the request changed, then `untracked: <path>` for new files git does not
/// know.
fn print_changes(snapshot: &Snapshot) -> anyhow::Result<()> {
    if let Some(base) = &snapshot.base {
        let diff = snapshot.repo.diff_against(base).context("the diff of the request's changes")?;
        print!("{diff}");
    }
    for path in snapshot.repo.untracked().context("listing untracked files")? {
        if !snapshot.untracked.contains(&path) {
            println!("untracked: {path}");
        }
    }
    Ok(())
}

/// `future`'s output, or `None` when the run is cancelled first.
async fn unless_cancelled<T>(cancel: &Cancel, future: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        out = future => Some(out),
        () = signals::cancelled(cancel) => None,
    }
}

pub async fn run(settings: &Settings, env: &Env, options: Options) -> anyhow::Result<Exit> {
    let signals = Signals::install().context("handling SIGINT, SIGTERM and SIGHUP")?;
    let cancel = &signals.cancel;
    let root = aerix_config::project_root(&options.cwd);
    let instructions = aerix_config::instruction_files(&root, &options.cwd)?;
    let data = env.data_home().context("no data directory: set HOME or XDG_DATA_HOME")?;
    let store = Store::new(&data);
    let project = aerix_session::project_key(&root);
    // A hook file that cannot be used is a note; the run goes on without its hooks.
    let hook_files = HookFiles::standard(
        env.config_home().as_deref(),
        env.home.as_deref(),
        &root,
        settings.hooks.claude_settings,
    );
    let mut loaded = aerix_hooks::load(&hook_files.paths());
    // Agent definitions likewise: a file that cannot be used is a note, the others load.
    let mut agents =
        aerix_config::load_agents(&aerix_config::AgentDirs::standard(env, &root, &options.cwd));
    // Plugins and skills: a plugin's agents and hooks join the others.
    let extensions = extensions::load(settings, env, &root, &options.cwd, &mut agents, &mut loaded);
    // Startup notes are printed now, and become `Notification`s once `SessionStart` fired.
    let mut startup_notes = loaded.notes.clone();
    startup_notes.extend(agents.notes.iter().cloned());
    startup_notes.extend(extensions.notes.iter().cloned());
    for note in &startup_notes {
        eprintln!("{note}");
    }
    if let Some(line) = loaded_line(&instructions, &loaded.files, &agents.definitions, &extensions)
    {
        eprintln!("{line}");
    }
    // A first line `/name` naming no skill is a usage error before anything starts.
    extensions
        .skills
        .expand_prompt(&options.prompt)
        .map_err(|e| anyhow::anyhow!(Exit::Usage.with(e.to_string())))?;

    // The session first: a bad --resume is a usage error before any pool is started.
    let resume_id = match (&options.resume, options.continue_latest) {
        (Some(id), _) => Some(id.clone()),
        (None, true) => Some(store.latest(&project)?.ok_or_else(|| {
            anyhow::anyhow!(Exit::Usage.with("no session to continue in this project"))
        })?),
        (None, false) => None,
    };
    let mut recorded = None;
    let (log, rebuilt) = match &resume_id {
        Some(id) => {
            let path = store
                .existing(&project, id)
                .map_err(|e| anyhow::anyhow!(Exit::Usage.with(e.to_string())))?;
            if let Some(tag) = store.entry(&project, id)?.and_then(|e| e.tag) {
                return Err(Exit::Usage
                    .with(format!("session {id} was imported ({tag}) and cannot be resumed"))
                    .into());
            }
            let read = read_log(&path)?;
            if !read.skipped.is_empty() {
                eprintln!(
                    "note: {} line(s) of {} were not complete events and are skipped",
                    read.skipped.len(),
                    path.display()
                );
            }
            recorded = attach::recorded(&read.events);
            (store.open(&project, id)?, Some(rebuild(&read.events, "a1")))
        }
        None => {
            (store.create(&project, &options.cwd, &settings.main.model, &options.prompt)?, None)
        }
    };
    let session_id = log.id().to_owned();
    let mut skills = extensions.skills.with_session(&session_id);
    let hook_session = aerix_hooks::Session {
        id: session_id.clone(),
        transcript_path: aerix_claude::transcript_path(log.path()),
        subagents_dir: aerix_claude::subagents_dir(log.path()),
        cwd: options.cwd.clone(),
        project_dir: root.clone(),
        spool_dir: log.spool_dir(),
    };
    // `session.start` is written once the profile is attached (it records the commit read);
    // a run that ends before that writes it without one.
    let start = Event::SessionStart {
        session: session_id.clone(),
        project: project.clone(),
        cwd: options.cwd.display().to_string(),
        model: settings.main.model.clone(),
        decision: settings.decision.as_ref().map(|d| d.model.clone()),
        prompt: options.prompt.clone(),
        resumed: rebuilt.is_some(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        profile: None,
        profile_branch: None,
        profile_commit: None,
        start_commit: None,
    };
    match log.try_clone() {
        Ok(log) => signals.pending(Pending {
            log,
            store: store.clone(),
            project: project.clone(),
            start: Some(start.clone()),
        }),
        Err(e) => eprintln!("aerix: a second signal cannot end the session: {e}"),
    }
    let mut sink = HeadlessSink { log, failed: None, quiet: options.quiet };
    let mut end = End {
        store: &store,
        project: &project,
        signals: &signals,
        hooks: None,
        snapshot: None,
        start: Some(start),
    };
    eprintln!("session {session_id}{}", if rebuilt.is_some() { " (resumed)" } else { "" });

    // Until the runtime runs, a signal ends the run at the step it interrupts.
    let mut notes = Vec::new();
    let connected = unless_cancelled(cancel, pool::connect(settings, env, &mut notes)).await;
    for note in &notes {
        eprintln!("{note}");
    }
    startup_notes.extend(notes);
    let mut client = match connected {
        Some(Ok(client)) => client,
        Some(Err(e)) => return end.finish(&mut sink, Outcome::Failed, Err(e)),
        None => return end.finish(&mut sink, Outcome::Cancelled, Ok(())),
    };
    let load_timeout = Duration::from_secs(settings.pool.start_timeout_secs);
    let serving = pool::Serving::main(&settings.main, settings.delegation.parallel);
    let bound = pool::bind(&mut client, &settings.main, "main", serving, load_timeout);
    let main = match unless_cancelled(cancel, bound).await {
        Some(Ok(main)) => main,
        Some(Err(e)) => return end.finish(&mut sink, Outcome::Failed, Err(e)),
        None => return end.finish(&mut sink, Outcome::Cancelled, Ok(())),
    };
    if let Some(note) = serving.batching.note(&main) {
        eprintln!("{note}");
        startup_notes.push(note);
    }
    let decision = match &settings.decision {
        Some(member) => {
            let single = pool::Serving::other(member);
            let bound = pool::bind(&mut client, member, "decision", single, load_timeout);
            match unless_cancelled(cancel, bound).await {
                Some(Ok(bound)) => Some(bound.alias),
                Some(Err(e)) => return end.finish(&mut sink, Outcome::Failed, Err(e)),
                None => return end.finish(&mut sink, Outcome::Cancelled, Ok(())),
            }
        }
        None => None,
    };

    // The profile, after the pool is bound: its prompts, overlays and lines, read once.
    let mut definitions = agents.definitions.clone();
    let attached = attach::for_session(
        options.profile.as_deref(),
        recorded.as_ref(),
        options.profile_refresh,
        settings,
        env,
        &data,
        &project,
        &session_id,
        &options.cwd,
        &mut skills,
        &mut definitions,
    );
    for line in &attached.lines {
        eprintln!("{line}");
    }
    startup_notes.extend(attached.lines.iter().cloned());
    // The snapshot the diff is taken against, recorded as the request's start commit (one
    // source: `aerix tune --eval` replays the request at it).
    end.snapshot = snapshot(&root);
    if let Some(Event::SessionStart {
        profile, profile_branch, profile_commit, start_commit, ..
    }) = end.start.as_mut()
    {
        if let Some((name, branch, commit)) = &attached.profile {
            *profile = Some(name.clone());
            *profile_branch = Some(branch.clone());
            *profile_commit = Some(commit.clone());
        }
        *start_commit = end.snapshot.as_ref().and_then(|s| s.base.clone());
    }
    end.write_start(&mut sink);

    // The session hooks: SessionStart's context is pinned in the root's context,
    // UserPromptSubmit's is appended to the prompt; a block or `continue: false` ends the run.
    let source = if rebuilt.is_some() { StartSource::Resume } else { StartSource::Startup };
    let hooks =
        end.hooks.insert(SessionHooks { hooks: loaded.hooks, session: hook_session, notes: None });
    let started = hooks.fire(Fire::SessionStart(source), cancel, &mut sink);
    if cancel.is_cancelled() {
        return end.finish(&mut sink, Outcome::Cancelled, Ok(()));
    }
    if let Some(stop) = started.stop {
        let e = anyhow::anyhow!(
            "a SessionStart hook (`{}`) ended the run: {}",
            stop.command,
            stop.reason
        );
        return end.finish(&mut sink, Outcome::Killed, Err(e));
    }
    // The instruction files were read before the pool; their hooks fire once a session has
    // started. Only the project's files are read: `memory_type` is `Project`.
    for file in &instructions {
        let fire = Fire::InstructionsLoaded {
            file_path: &file.path,
            memory_type: "Project",
            load_reason: "session_start",
        };
        if let Some(stop) = hooks.fire(fire, cancel, &mut sink).stop {
            let e = anyhow::anyhow!(
                "an InstructionsLoaded hook (`{}`) ended the run: {}",
                stop.command,
                stop.reason
            );
            return end.finish(&mut sink, Outcome::Killed, Err(e));
        }
    }
    hooks.notify(&startup_notes, "startup_note", cancel, &mut sink);
    if cancel.is_cancelled() {
        return end.finish(&mut sink, Outcome::Cancelled, Ok(()));
    }
    // `/name args` on the first line: that line becomes the skill's text (checked above).
    let prompt = match skills.expand_prompt(&options.prompt) {
        Ok(Some(expanded)) => expanded,
        _ => options.prompt.clone(),
    };
    let submitted = hooks.fire(Fire::UserPromptSubmit { prompt: &prompt }, cancel, &mut sink);
    if cancel.is_cancelled() {
        return end.finish(&mut sink, Outcome::Cancelled, Ok(()));
    }
    if let Some(stop) = submitted.stop {
        let e = anyhow::anyhow!(
            "a UserPromptSubmit hook (`{}`) ended the run: {}",
            stop.command,
            stop.reason
        );
        return end.finish(&mut sink, Outcome::Killed, Err(e));
    }
    if let Some(block) = submitted.block {
        let e = anyhow::anyhow!(
            "the prompt was blocked by a UserPromptSubmit hook (`{}`): {}",
            block.command,
            block.reason
        );
        return end.finish(&mut sink, Outcome::Killed, Err(e));
    }

    let prompts = attached.prompts;
    let request = Request {
        prompt,
        instructions,
        hook_context: started.context,
        prompt_context: submitted.context,
        main: main.alias.clone(),
        window: main.window,
        json: main.json,
        decision,
        max_turns: options.max_turns.unwrap_or(settings.max_turns),
        resume: rebuilt,
    };
    let agent_hooks = end.hooks.as_ref().map(|hooks| AgentHooks {
        hooks,
        log: sink.log.try_clone().ok().map(Mutex::new),
        cancel: cancel.clone(),
        quiet: options.quiet,
    });
    // The turn schema's `agent.member` offers only what the pool has loaded.
    let members: Vec<String> = client
        .members()
        .await
        .map(|m| m.into_iter().map(|m| m.alias).collect())
        .unwrap_or_default();
    let mut runtime =
        Runtime::new(&mut client, &mut sink, settings, &prompts, &options.cwd, cancel.clone())
            .with_members(members);
    if let Some(agent_hooks) = &agent_hooks {
        runtime = runtime.with_hooks(agent_hooks);
    }
    let mut runtime = runtime.with_definitions(&definitions).with_skills(&skills);
    let request_start = Instant::now();
    let result = run_request(&mut runtime, request).await;
    let stats = runtime.stats.clone();
    if std::env::var_os("AERIX_TIMING").is_some() {
        // For scripts/bench-aerix: the runtime's own cost, apart from the pool's generations.
        let wall = request_start.elapsed();
        let overhead = wall.saturating_sub(stats.generating);
        let first = stats.first_generate.map(|t| t.duration_since(options.started));
        eprintln!(
            "timing: first_generate_ms={:.2} turns={} generations={} wall_ms={:.2} generating_ms={:.2} overhead_per_turn_ms={:.3}",
            first.map(|d| d.as_secs_f64() * 1e3).unwrap_or(f64::NAN),
            stats.turns,
            stats.generations,
            wall.as_secs_f64() * 1e3,
            stats.generating.as_secs_f64() * 1e3,
            overhead.as_secs_f64() * 1e3 / f64::from(stats.turns.max(1)),
        );
    }
    let (outcome, result) = match result {
        Ok(request_end) => {
            if let Some(text) = &request_end.end.final_text {
                println!("{text}");
            }
            (request_end.end.outcome, Ok(()))
        }
        Err(CoreError::Cancelled) => (Outcome::Cancelled, Ok(())),
        // A hook's `continue: false` before the root ran (RouteDecision).
        Err(CoreError::Killed(reason)) => (Outcome::Killed, Err(anyhow::anyhow!(reason))),
        Err(e) => (Outcome::Failed, Err(anyhow::Error::from(e))),
    };
    end.finish(&mut sink, outcome, result)
}

/// The startup `loaded` row: the instruction files, the hook files and the agent definitions
/// read, once (`None` when there are none).
pub(crate) fn loaded_line(
    instructions: &[aerix_config::InstructionFile],
    hook_files: &[PathBuf],
    agents: &aerix_config::AgentDefinitions,
    extensions: &extensions::Extensions,
) -> Option<String> {
    let list = |paths: Vec<String>| paths.join(", ");
    let mut parts = Vec::new();
    if !instructions.is_empty() {
        parts.push(format!(
            "instructions {}",
            list(instructions.iter().map(|f| f.path.display().to_string()).collect())
        ));
    }
    if !hook_files.is_empty() {
        parts.push(format!(
            "hooks {}",
            list(hook_files.iter().map(|p| p.display().to_string()).collect())
        ));
    }
    if !extensions.skills.is_empty() {
        parts.push(format!(
            "skills {}",
            list(extensions.skills.iter().map(|s| s.name.clone()).collect())
        ));
    }
    if !agents.is_empty() {
        parts.push(format!(
            "agents {}",
            list(agents.iter().map(|a| a.source.display().to_string()).collect())
        ));
    }
    if !extensions.plugins.is_empty() {
        parts.push(format!("plugins {}", list(extensions.plugins.clone())));
    }
    (!parts.is_empty()).then(|| format!("loaded: {}", parts.join("; ")))
}

/// How a run ends, whatever ended it.
struct End<'a> {
    store: &'a Store,
    project: &'a str,
    signals: &'a Signals,
    /// Set once `SessionStart` has fired: `SessionEnd` fires too.
    hooks: Option<SessionHooks>,
    /// Set once the request is about to run: its diff is printed.
    snapshot: Option<Snapshot>,
    /// `session.start` until it is written.
    start: Option<Event>,
}

impl End<'_> {
    /// Writes `session.start` if it is not written yet.
    fn write_start(&mut self, sink: &mut HeadlessSink) {
        if let Some(start) = self.start.take() {
            sink.event(start);
            self.signals.started();
        }
    }

    /// `session.end` and the index, `SessionEnd`, the diff, and the exit status.
    fn finish(
        &mut self,
        sink: &mut HeadlessSink,
        outcome: Outcome,
        result: anyhow::Result<()>,
    ) -> anyhow::Result<Exit> {
        self.write_start(sink);
        let exit = match outcome {
            Outcome::Cancelled => self.signals.exit(),
            _ => Exit::of(outcome),
        };
        if let Err(e) = &result {
            eprintln!("aerix: {e:#}");
        }
        self.signals.end_session(|_| {
            sink.event(Event::SessionEnd { outcome, exit_code: exit.code() });
            let _ = self.store.finish(self.project, sink.log.id(), outcome.as_str());
        });
        if let Some(hooks) = &self.hooks {
            // Its own bound (30 s), even after a cancel; a second signal ends it.
            let reason = match outcome {
                Outcome::Cancelled => EndReason::Cancelled,
                Outcome::Failed => EndReason::Error,
                _ => EndReason::Other,
            };
            hooks.fire(Fire::SessionEnd(reason), &self.signals.cancel, sink);
        }
        if let Some(snapshot) = &self.snapshot
            && let Err(e) = print_changes(snapshot)
        {
            eprintln!("aerix: {e:#}");
        }
        if let Some(failed) = &sink.failed {
            eprintln!("aerix: the session log could not be written: {failed}");
        }
        Ok(exit)
    }
}
