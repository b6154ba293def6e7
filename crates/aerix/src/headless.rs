//! `aerix -p`: one request, run in place, ending with the diff it made.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use aerix_config::{Env, Settings};
use aerix_core::{CoreError, Sink as _};
use aerix_hooks::{EndReason, Fire};
use aerix_request::{Request, Root, Start as RootStart, run_request};
use aerix_session::{Event, Outcome, Store, rebuild};
use aerix_tools::Cancel;
use anyhow::Context as _;

use crate::attach::SessionBranch;
use crate::bridge;
use crate::checkpoint;
use crate::exit::Exit;
use crate::hooks::{AgentHooks, SessionHooks};
use crate::output::{Ending, Format, Inputs, Output};
use crate::signals::{self, Pending, Signals};
use crate::sink::HeadlessSink;
use crate::startup::{
    self, Changes, Files, Front, Pool, ProfileAt, Profiled, Snapshot, Stop, Trust,
};

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
    /// `--permission-mode`.
    pub permission_mode: Option<aerix_permissions::Mode>,
    /// When the process started (for `AERIX_TIMING`).
    pub started: Instant,
    /// `--output-format`.
    pub output: Format,
    /// `--input-format stream-json`: the requests after the first (`prompt`), read from stdin.
    pub inputs: Option<Inputs>,
}

/// `future`'s output, or `None` when the run is cancelled first.
async fn unless_cancelled<T>(cancel: &Cancel, future: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        out = future => Some(out),
        () = signals::cancelled(cancel) => None,
    }
}

/// The headless front end: a note is a line on stderr, a signal cancels the step it interrupts.
struct Lines<'a> {
    cancel: &'a Cancel,
}

impl Front for Lines<'_> {
    fn note(&mut self, note: &str) {
        eprintln!("{note}");
    }

    async fn step<T>(&mut self, step: impl Future<Output = T>) -> Option<T> {
        unless_cancelled(self.cancel, step).await
    }

    /// No permission prompts headless: an untrusted project's parts are skipped (`--trust`).
    async fn trust(&mut self, _: &Path, _: &[String], _: bool) -> Option<bool> {
        Some(false)
    }
}

/// `trust`: what the project may run (the settings came through it already).
pub async fn run(
    settings: &Settings,
    env: &Env,
    trust: &Trust,
    mut options: Options,
) -> anyhow::Result<Exit> {
    let signals = Signals::install().context("handling SIGINT, SIGTERM and SIGHUP")?;
    let cancel = &signals.cancel;
    let mut front = Lines { cancel };
    // Startup notes are printed now, and become `Notification`s once `SessionStart` fired.
    let mut files = Files::read(settings, env, &options.cwd, trust, &mut front)?;
    if let Some(line) = &files.loaded {
        eprintln!("{line}");
    }
    // A first line `/name` naming no skill is a usage error before anything starts.
    files
        .extensions
        .skills
        .expand_prompt(&options.prompt)
        .map_err(|e| anyhow::anyhow!(Exit::Usage.with(e.to_string())))?;

    // The session first: a bad --resume is a usage error before any pool is started.
    let resume_id = files.resume_id(options.resume.as_deref(), options.continue_latest)?;
    let mut request_number = 1;
    let (log, resumed, earlier) = match &resume_id {
        Some(id) => {
            let resumed = files.resume(id, &mut front)?;
            request_number = checkpoint::next_request(&resumed.events);
            let rebuilt = rebuild(&resumed.events, "a1")?;
            (resumed.log, Some((rebuilt, resumed.recorded)), resumed.events)
        }
        None => (
            files.store.create(
                &files.project,
                &options.cwd,
                &settings.main.model,
                &options.prompt,
            )?,
            None,
            Vec::new(),
        ),
    };
    let (rebuilt, recorded) = match resumed {
        Some((rebuilt, recorded)) => (Some(rebuilt), recorded),
        None => (None, None),
    };
    let session_id = log.id().to_owned();
    let store = files.store.clone();
    let project = files.project.clone();
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
    let hooks = std::mem::take(&mut files.hooks.hooks);
    // No one to ask: an ask rule denies, the mode's own asking lets the call through.
    let permissions =
        files.permissions(options.permission_mode, aerix_permissions::Front::Headless);
    let hooks =
        startup::session_hooks(hooks, &log, &options.cwd, &files.root, permissions.mode(), None);
    let mut output = Output::new(options.output, &session_id, &earlier);
    drop(earlier);
    output.set_permission_mode(permissions.mode().as_str());
    output.begin();
    let mut sink =
        HeadlessSink { log, failed: None, quiet: options.quiet, output, answer: String::new() };
    let mut end = End {
        store: &store,
        project: &project,
        signals: &signals,
        hooks: None,
        snapshot: None,
        start: Some(start),
        branch: None,
    };
    eprintln!("session {session_id}{}", if rebuilt.is_some() { " (resumed)" } else { "" });

    // Until the runtime runs, a signal ends the run at the step it interrupts.
    let Pool { mut client, main, decision, members } =
        match Pool::bind(settings, env, &mut files, &mut front).await {
            Some(Ok(pool)) => pool,
            Some(Err(e)) => return end.finish(&mut sink, Outcome::Failed, Err(e)),
            None => return end.finish(&mut sink, Outcome::Cancelled, Ok(())),
        };
    // The MCP servers, started at once; one that fails is a note, never a hang.
    let Some(mut servers) = startup::mcp::start(trust, settings, &mut files, &mut front).await
    else {
        return end.finish(&mut sink, Outcome::Cancelled, Ok(()));
    };
    servers.hide(|tool| permissions.hides(tool));
    sink.output.set_mcp_servers(
        servers
            .servers
            .iter()
            .map(|s| serde_json::json!({"name": s.spec.name, "status": s.state.to_string()}))
            .collect(),
    );

    let mut servers = Arc::new(servers);
    // The profile, after the pool is bound: its prompts, overlays and lines, read once.
    let at = ProfileAt {
        flag: options.profile.as_deref(),
        recorded: recorded.as_ref(),
        refresh: options.profile_refresh,
        session: &session_id,
        cwd: &options.cwd,
    };
    let Profiled { attached, skills, definitions } = files.profile(settings, env, &at, &mut front);
    // Shared by `Arc` with every request's runtime and the pieces it runs.
    let (skills, definitions) = (Arc::new(skills), Arc::new(definitions));
    let (prompts, permissions) = (Arc::new(attached.prompts), Arc::new(permissions));
    // The snapshot the diff is taken against, recorded as the request's start commit (one
    // source: `aerix tune --eval` replays the request at it).
    end.snapshot = Snapshot::take(&files.root);
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
    // This run is the session's request: its `session.start` makes `session/<id>`.
    end.branch = attached.branch;
    // A later request of a stream-json input writes it again, as its own.
    let first_start = end.start.clone();
    end.write_start(&mut sink);
    let base = end.snapshot.as_ref().and_then(|s| s.base.as_deref());
    sink.event(checkpoint::take(&files.root, &session_id, request_number, base));

    // The session hooks: SessionStart's context is pinned in the root's context,
    // UserPromptSubmit's is appended to the prompt; a block or `continue: false` ends the run.
    let hooks = &**end.hooks.insert(Arc::new(hooks));
    let resumed = rebuilt.is_some();
    let hook_context = match startup::session_start(
        hooks,
        resumed,
        &files.instructions,
        &files.notes,
        cancel,
        &mut sink,
    ) {
        Ok(context) => context,
        Err(stop) => return end.stopped(&mut sink, stop),
    };
    // The session's first request is the prompt; with `--input-format stream-json`, each
    // later stdin message is another request of the session, as the screen runs them.
    let mut raw_prompt = options.prompt.clone();
    let mut start = match rebuilt {
        Some(rebuilt) => RootStart::Rebuilt(rebuilt),
        None => RootStart::Fresh,
    };
    let mut live: Option<Root> = None;
    let exit = loop {
        let ran = request(
            RequestIn {
                settings,
                options: &options,
                files: &files,
                skills: &skills,
                definitions: &definitions,
                prompts: &prompts,
                permissions: &permissions,
                members: &members,
                main: &main,
                servers: &servers,
                decision: decision.clone(),
                hook_context: hook_context.clone(),
            },
            &mut client,
            &mut sink,
            &end,
            raw_prompt,
            std::mem::replace(&mut start, RootStart::Fresh),
            cancel,
        )
        .await;
        let (outcome, result, root) = match ran {
            Ran::Ended(outcome, result, root) => (outcome, result, root),
            Ran::Stopped(stop) => break end.stopped(&mut sink, stop),
        };
        let Some(inputs) = options.inputs.as_mut() else {
            if let Some(root) = root {
                root.drop_context(&mut client).await;
            }
            break end.finish(&mut sink, outcome, result);
        };
        // The session's next request runs on this root, still in the pool.
        live = root;
        // This request's result, then the next message (a signal ends the wait).
        end.report(&mut sink, outcome, &result);
        let next = match unless_cancelled(cancel, inputs.next()).await {
            None => break end.finish(&mut sink, Outcome::Cancelled, Ok(())),
            Some(None) => break end.finish(&mut sink, outcome, result),
            // A bad line ends the session as its last request ended, then says what is wrong.
            Some(Some(Err(e))) => {
                let finished = end.finish(&mut sink, outcome, result);
                break finished.and_then(|_| Err(Exit::Usage.with(e).into()));
            }
            Some(Some(Ok(prompt))) => {
                if let Err(e) = &result {
                    eprintln!("aerix: {e:#}");
                }
                prompt
            }
        };
        // The next request: its own snapshot (its diff), its `session.start`, the live root
        // (from the log only when the last request failed or was cancelled).
        sink.output.begin();
        end.snapshot = Snapshot::take(&files.root);
        if let Some(mut start) = first_start.clone() {
            if let Event::SessionStart { prompt, resumed, start_commit, .. } = &mut start {
                prompt.clone_from(&next);
                *resumed = true;
                *start_commit = end.snapshot.as_ref().and_then(|s| s.base.clone());
            }
            sink.event(start);
        }
        request_number += 1;
        let base = end.snapshot.as_ref().and_then(|s| s.base.as_deref());
        sink.event(checkpoint::take(&files.root, &session_id, request_number, base));
        start = match RootStart::next(live.take(), sink.log.path()) {
            Ok(start) => start,
            Err(e) => {
                let failed = Err(anyhow::anyhow!("the session log: {e}"));
                break end.finish(&mut sink, Outcome::Failed, failed);
            }
        };
        raw_prompt = next;
    };
    if let Some(root) = live.take() {
        root.drop_context(&mut client).await;
    }
    // The MCP servers outlive every request of the session. Every runtime holding them has
    // ended; were one left, dropping the servers still ends their processes.
    if let Some(servers) = Arc::get_mut(&mut servers) {
        servers.shutdown().await;
    }
    exit
}

/// What a request needs of the run's startup.
struct RequestIn<'a> {
    settings: &'a Settings,
    options: &'a Options,
    files: &'a Files,
    skills: &'a Arc<aerix_skills::Skills>,
    definitions: &'a Arc<aerix_config::AgentDefinitions>,
    prompts: &'a Arc<aerix_core::Prompts>,
    permissions: &'a Arc<aerix_permissions::Permissions>,
    members: &'a [String],
    main: &'a crate::pool::Bound,
    servers: &'a Arc<aerix_mcp::Servers>,
    decision: Option<String>,
    hook_context: Option<String>,
}

/// How a request ended: by its outcome, or stopped by a `UserPromptSubmit` hook or a signal.
enum Ran {
    /// With the root, live for the next request when the agent ran to an end.
    Ended(Outcome, anyhow::Result<()>, Option<Root>),
    Stopped(Stop),
}

/// One request of the session: its prompt submitted (the hooks), routed and run; the answer
/// printed (text) or kept for the `result`.
#[allow(clippy::too_many_arguments, reason = "the run's parts a request borrows")]
async fn request(
    at: RequestIn<'_>,
    client: &mut caldrix_client::Client,
    sink: &mut HeadlessSink,
    end: &End<'_>,
    raw_prompt: String,
    start: RootStart,
    cancel: &Cancel,
) -> Ran {
    let RequestIn { settings, options, files, skills, definitions, prompts, permissions, .. } = at;
    let Some(hooks) = end.hooks.as_ref() else {
        return Ran::Ended(
            Outcome::Failed,
            Err(anyhow::anyhow!("the session hooks are not set")),
            None,
        );
    };
    // `/name args` on the first line: that line becomes the skill's text (checked above).
    let prompt = match skills.expand_prompt(&raw_prompt) {
        Ok(Some(expanded)) => expanded,
        Ok(None) => raw_prompt,
        Err(e) => {
            start.release(client).await;
            return Ran::Ended(Outcome::Failed, Err(anyhow::anyhow!(e.to_string())), None);
        }
    };
    let prompt_context = match startup::prompt_submit(hooks, &prompt, cancel, sink) {
        Ok(context) => context,
        Err(stop) => {
            start.release(client).await;
            return Ran::Stopped(stop);
        }
    };

    let request = Request {
        prompt,
        instructions: files.instructions.clone(),
        hook_context: at.hook_context,
        prompt_context,
        main: at.main.alias.clone(),
        window: at.main.window,
        json: at.main.json,
        decision: at.decision,
        max_turns: options.max_turns.unwrap_or(settings.max_turns),
        start,
    };
    let (worktrees, checks) = (files.worktrees.clone(), files.checks.clone());
    let agent_hooks = AgentHooks {
        hooks: Arc::clone(hooks),
        log: sink.log.try_clone().ok().map(Mutex::new),
        cancel: cancel.clone(),
        quiet: options.quiet,
    };
    let core_agents = bridge::Agents(Arc::clone(definitions));
    let core_skills = bridge::SkillSet(Arc::clone(skills));
    let failed = Box::new(|line: String| eprintln!("aerix: {line}"));
    let rules = bridge::Rules { permissions: Arc::clone(permissions), failed };
    let runtime = bridge::runtime(
        client,
        sink,
        settings,
        Arc::clone(prompts),
        bridge::Place {
            cwd: &options.cwd,
            additional: permissions.additional_directories(),
            worktrees: worktrees.as_ref(),
            checks: &checks,
        },
        cancel.clone(),
    )
    .with_members(at.members.to_vec())
    .with_hooks(Arc::new(agent_hooks))
    .with_definitions(Arc::new(core_agents))
    .with_skills(Arc::new(core_skills))
    .with_permissions(Arc::new(rules));
    let mut runtime =
        runtime.with_external(Arc::clone(at.servers) as Arc<dyn aerix_core::ExternalTools>);
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
    drop(runtime);
    match result {
        Ok(request_end) => {
            match (sink.output.format(), request_end.end.final_text) {
                (Format::Text, Some(text)) => println!("{text}"),
                (Format::Text, None) => {}
                (_, text) => sink.answer = text.unwrap_or_default(),
            }
            Ran::Ended(request_end.end.outcome, Ok(()), request_end.root)
        }
        Err(CoreError::Cancelled) => Ran::Ended(Outcome::Cancelled, Ok(()), None),
        // A hook's `continue: false` before the root ran (RouteDecision).
        Err(CoreError::Killed(reason)) => {
            Ran::Ended(Outcome::Killed, Err(anyhow::anyhow!(reason)), None)
        }
        Err(e) => Ran::Ended(Outcome::Failed, Err(anyhow::Error::from(e)), None),
    }
}

/// How a run ends, whatever ended it.
struct End<'a> {
    store: &'a Store,
    project: &'a str,
    signals: &'a Signals,
    /// Set once `SessionStart` has fired: `SessionEnd` fires too.
    hooks: Option<Arc<SessionHooks>>,
    /// Set once the request is about to run: its diff is printed.
    snapshot: Option<Snapshot>,
    /// `session.start` until it is written.
    start: Option<Event>,
    /// The profile's `session/<id>`, made when `session.start` is written.
    branch: Option<SessionBranch>,
}

impl End<'_> {
    /// Writes `session.start` if it is not written yet.
    fn write_start(&mut self, sink: &mut HeadlessSink) {
        if let Some(start) = self.start.take() {
            sink.event(start);
            self.signals.started();
            if let Some(line) = self.branch.as_ref().and_then(SessionBranch::make) {
                eprintln!("{line}");
            }
        }
    }

    /// A startup step or the prompt's submission ended the run.
    fn stopped(&mut self, sink: &mut HeadlessSink, stop: Stop) -> anyhow::Result<Exit> {
        match stop {
            Stop::Cancelled => self.finish(sink, Outcome::Cancelled, Ok(())),
            Stop::Killed(reason) => {
                self.finish(sink, Outcome::Killed, Err(anyhow::anyhow!(reason)))
            }
        }
    }

    /// What the request changed, or `None` outside git (a failure to read it is said).
    fn changes(&self) -> Option<Changes> {
        match self.snapshot.as_ref().map(Snapshot::changes)? {
            Ok(changes) => Some(changes),
            Err(e) => {
                eprintln!("aerix: {e:#}");
                None
            }
        }
    }

    /// The request's `result` object (`json`, `stream-json`), once: its answer or what ended
    /// it, and what it changed.
    fn report(&self, sink: &mut HeadlessSink, outcome: Outcome, result: &anyhow::Result<()>) {
        if sink.output.format() == Format::Text {
            return;
        }
        let exit = match outcome {
            Outcome::Cancelled => self.signals.exit(),
            _ => Exit::of(outcome),
        };
        let text = match result {
            Ok(()) => std::mem::take(&mut sink.answer),
            Err(e) => format!("{e:#}"),
        };
        let changes = self.changes().unwrap_or_default();
        sink.output.result(&Ending {
            outcome,
            exit_code: exit.code(),
            result: &text,
            diff: &changes.diff,
            untracked: &changes.untracked,
        });
    }

    /// `session.end` and the index, `SessionEnd`, the diff (or the `result`), and the exit
    /// status.
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
            // Its answers mean nothing: the run has ended.
            let _ = hooks.fire(Fire::SessionEnd(reason), &self.signals.cancel, sink);
        }
        match sink.output.format() {
            Format::Text => {
                if let Some(changes) = self.changes() {
                    print!("{changes}");
                }
            }
            _ => self.report(sink, outcome, &result),
        }
        if let Some(failed) = &sink.failed {
            eprintln!("aerix: the session log could not be written: {failed}");
        }
        Ok(exit)
    }
}
