//! The startup both front ends run, step by step (`aerix -p` in `headless.rs`, the screen in
//! `interactive/startup.rs`): the files, the session, the pool, the profile, the snapshot, the
//! session hooks, then each request's `UserPromptSubmit`. A front end supplies only what
//! differs ([`Front`]: how a note is shown, how a step is waited on); every hook event and
//! every answer to it is handled here, once, so both front ends end alike on it.

mod hooks;
pub mod mcp;
mod snapshot;
mod trust;
mod worktrees;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aerix_config::{AgentDefinitions, Env, InstructionFile, Settings};
use aerix_hooks::ClaudeSettings;
use aerix_session::{Event, Log, Store, read_log};
use aerix_skills::Skills;
use anyhow::Context as _;

pub use hooks::{Stop, hook_session, prompt_submit, session_start};
pub use snapshot::{Changes, Snapshot};
pub use trust::{Trust, record};

use crate::attach::{self, Attached};
use crate::exit::Exit;
use crate::extensions::{self, Extensions};
use crate::pool;

/// What a front end does its own way.
#[allow(
    async_fn_in_trait,
    reason = "the binary's front ends implement it; each startup's Send-ness is checked at its \
              concrete front end (aerix acp spawns its startup on the runtime)"
)]
pub trait Front {
    /// A startup note: a line on stderr headless, a row of the startup block on the screen.
    fn note(&mut self, note: &str);
    /// `step`'s output, or `None` when the run is cancelled (or the user leaves) first.
    async fn step<T>(&mut self, step: impl Future<Output = T>) -> Option<T>;
    /// Whether the user trusts `root`, which would run `items` (`changed`: it was trusted
    /// before they changed); `None` when the user leaves. Headless never asks (`--trust`).
    async fn trust(&mut self, root: &Path, items: &[String], changed: bool) -> Option<bool>;
    /// The `loaded: ...` line.
    fn loaded(&mut self, line: &str) {
        self.note(line);
    }
    /// The session is known: new, or resumed (`earlier`: its log's events); its log at `log`.
    fn session(&mut self, _id: &str, _earlier: Option<&[Event]>, _log: &Path) {}
    /// The session's log is open: what writes to it (`aerix -p` hands it to its second signal).
    fn recording(&mut self, _record: &crate::session::Recorder) {}
    /// The main member is bound.
    fn bound(&mut self, _main: &pool::Bound, _settings: &Settings) {}
    /// The profile is attached (or the embedded prompts are used).
    fn profile(&mut self, _attached: &Attached) {}
}

/// Step 0: an untrusted project's parts are asked about (the screen) or skipped (headless);
/// `None` when the user left instead of answering.
pub async fn ask_trust(trust: &mut Trust, front: &mut impl Front) -> Option<()> {
    if trust.allows() {
        return Some(());
    }
    if front.trust(trust.root(), &trust.items(), trust.changed()).await?
        && let Err(e) = trust.trust()
    {
        front.note(&format!("trust: {e}; the project's parts are not run"));
    }
    Some(())
}

/// Step 1: what the directory holds (instruction files, hooks, agents, plugins, skills).
pub struct Files {
    pub root: PathBuf,
    pub instructions: Vec<InstructionFile>,
    pub data: PathBuf,
    pub store: Store,
    pub project: String,
    pub hooks: aerix_hooks::Loaded,
    pub agents: AgentDefinitions,
    pub extensions: Extensions,
    /// The startup `loaded` row (`loaded: ...`), when anything was loaded.
    pub loaded: Option<String>,
    /// Every startup note so far; each becomes a `Notification` once `SessionStart` fired.
    pub notes: Vec<String>,
    /// The permission rules of every settings file, read once (`permissions` makes them the
    /// session's, with the mode and the front end).
    pub rules: aerix_permissions::Loaded,
    /// Where pieces' worktrees live; `None`: pieces run in place (not a git work tree).
    pub worktrees: Option<crate::delegate::WorktreePlace>,
    /// The repository's test commands (`verify.commands`, else detected).
    pub checks: Vec<String>,
}

impl Files {
    /// A file that cannot be used is a note; the others load.
    /// `trust` says which hook files and plugins load (step 0 decided it).
    pub fn read(
        settings: &Settings,
        env: &Env,
        cwd: &Path,
        trust: &Trust,
        front: &mut impl Front,
    ) -> anyhow::Result<Files> {
        let root = aerix_config::project_root(cwd);
        // `sandbox.enabled` without a working bwrap: nothing starts (never an unsandboxed run).
        if let Some(sandbox) = crate::bridge::sandbox(settings) {
            sandbox
                .check(&aerix_tools::Roots::new(&root))
                .map_err(|e| Exit::Config.with(e.to_string()))?;
        }
        let aerix_config::Instructions { files: instructions, notes: skipped } =
            aerix_config::instruction_files(&root, cwd)?;
        let data = env.data_home().context("no data directory: set HOME or XDG_DATA_HOME")?;
        let store = Store::new(&data);
        let project = aerix_session::project_key(&root);
        let mut hooks = trust.hooks();
        let mut agents =
            aerix_config::load_agents(&aerix_config::AgentDirs::standard(env, &root, cwd));
        // Plugins and skills: a plugin's agents and hooks join the others.
        let extensions =
            extensions::load(trust.plugins(), env, &root, cwd, &mut agents, &mut hooks);
        let loaded = loaded_line(&instructions, &hooks.files, &agents.definitions, &extensions);
        // A project's allow rules, default mode and added directories count only once trusted.
        let rules = trust.permission_rules();
        let (worktrees, tree_notes) = worktrees::place(settings, &root, &data, &project);
        let checks = crate::delegate::checks::commands(&settings.verify.commands, &root);
        let mut files = Files {
            root,
            instructions,
            data,
            store,
            project,
            agents: agents.definitions,
            extensions,
            loaded,
            notes: Vec::new(),
            hooks,
            rules,
            worktrees,
            checks,
        };
        let notes: Vec<String> = trust
            .notes()
            .iter()
            .chain(&files.hooks.notes)
            .chain(&agents.notes)
            .chain(&files.extensions.notes)
            .chain(&files.rules.notes)
            .chain(&skipped)
            .chain(&tree_notes)
            .cloned()
            .collect();
        files.tell(front, notes);
        Ok(files)
    }

    /// The session's permissions: the rules read, the mode (`--permission-mode`, else the
    /// settings' `defaultMode`), and who answers when a call asks.
    pub fn permissions(
        &self,
        flag: Option<aerix_permissions::Mode>,
        front: aerix_permissions::Front,
    ) -> aerix_permissions::Permissions {
        aerix_permissions::Permissions::new(self.rules.clone(), flag, front)
    }

    /// Shows `lines` and keeps them for the startup `Notification`s.
    pub fn tell(&mut self, front: &mut impl Front, lines: impl IntoIterator<Item = String>) {
        for line in lines {
            front.note(&line);
            self.notes.push(line);
        }
    }

    /// Step 2: the session to resume (`--resume ID`, or `--continue`: the latest), if any.
    pub fn resume_id(
        &self,
        resume: Option<&str>,
        continue_latest: bool,
    ) -> anyhow::Result<Option<String>> {
        Ok(match (resume, continue_latest) {
            (Some(id), _) => Some(id.to_owned()),
            (None, true) => Some(self.store.latest(&self.project)?.ok_or_else(|| {
                anyhow::anyhow!(Exit::Usage.with("no session to continue in this project"))
            })?),
            (None, false) => None,
        })
    }

    /// Step 2, resuming: the session's log and its complete events. An unknown session, or an
    /// imported one, is a usage error before any pool is started.
    pub fn resume(&mut self, id: &str, front: &mut impl Front) -> anyhow::Result<Resumed> {
        let path = self
            .store
            .existing(&self.project, id)
            .map_err(|e| anyhow::anyhow!(Exit::Usage.with(e.to_string())))?;
        if let Some(tag) = self.store.entry(&self.project, id)?.and_then(|e| e.tag) {
            return Err(Exit::Usage
                .with(format!("session {id} was imported ({tag}) and cannot be resumed"))
                .into());
        }
        let read = read_log(&path)?;
        if !read.skipped.is_empty() {
            let note = format!(
                "note: {} line(s) of {} were not complete events and are skipped",
                read.skipped.len(),
                path.display()
            );
            self.tell(front, [note]);
        }
        let recorded = attach::recorded(&read.events);
        Ok(Resumed { log: self.store.open(&self.project, id)?, events: read.events, recorded })
    }

    /// Step 4: the session's profile, after the pool is bound: its prompts, overlays and
    /// lines, read once. Its `session/<id>` branch is made by the session's first request
    /// (`attach::SessionBranch::make`).
    pub fn profile(
        &mut self,
        settings: &Settings,
        env: &Env,
        at: &ProfileAt<'_>,
        front: &mut impl Front,
    ) -> Profiled {
        let mut skills = self.extensions.skills.clone().with_session(at.session);
        let mut definitions = self.agents.clone();
        let attached = attach::for_session(
            at.flag,
            at.recorded,
            at.refresh,
            settings,
            env,
            &self.data,
            &self.project,
            at.session,
            at.cwd,
            &mut skills,
            &mut definitions,
        );
        self.tell(front, attached.lines.clone());
        Profiled { attached, skills, definitions }
    }
}

/// Where the permission rules are read: Claude Code's settings files, aerix's `[permissions]`
/// tables, and `remembered` (the project's "always" answers).
fn permission_sources<'a>(
    settings: &'a Settings,
    env: &Env,
    (root, cwd): (PathBuf, PathBuf),
    remembered: Option<PathBuf>,
) -> aerix_permissions::Sources<'a> {
    let claude = ClaudeSettings::standard(env.home.as_deref(), &root);
    aerix_permissions::Sources {
        claude_user: claude.user,
        claude_project: claude.project,
        claude_local: claude.local,
        aerix: &settings.permissions,
        remembered,
        cwd,
        root,
        home: env.home.clone(),
    }
}

/// A resumed session, read.
pub struct Resumed {
    pub log: Log,
    pub events: Vec<Event>,
    /// The profile and commit it recorded last.
    pub recorded: Option<(String, String)>,
}

/// Which profile a session attaches.
pub struct ProfileAt<'a> {
    /// `--profile NAME`.
    pub flag: Option<&'a str>,
    /// What a resumed session recorded.
    pub recorded: Option<&'a (String, String)>,
    /// `--profile-refresh`.
    pub refresh: bool,
    pub session: &'a str,
    pub cwd: &'a Path,
}

/// What the profile gave: the prompts and lines, and the skills and agents with its overlays.
pub struct Profiled {
    pub attached: Attached,
    pub skills: Skills,
    pub definitions: AgentDefinitions,
}

/// Step 3: the pool found or started, the main member bound (and the decision member).
pub struct Pool {
    pub client: caldrix_client::Client,
    pub main: pool::Bound,
    pub decision: Option<String>,
    /// What the turn schema's `agent.member` offers: the members the pool has loaded.
    pub members: Vec<String>,
}

impl Pool {
    /// `None` when cancelled (or left) first.
    pub async fn bind(
        settings: &Settings,
        env: &Env,
        files: &mut Files,
        front: &mut impl Front,
    ) -> Option<anyhow::Result<Pool>> {
        let mut notes = Vec::new();
        let connected = front.step(pool::connect(settings, env, &mut notes)).await;
        files.tell(front, notes);
        let mut client = match connected? {
            Ok(client) => client,
            Err(e) => return Some(Err(e)),
        };
        let load_timeout = Duration::from_secs(settings.pool.start_timeout_secs);
        let serving = pool::Serving::main(&settings.main, pool::generations(settings));
        let bound = pool::bind(&mut client, &settings.main, "main", serving, load_timeout);
        let main = match front.step(bound).await? {
            Ok(main) => main,
            Err(e) => return Some(Err(e)),
        };
        files.tell(front, serving.batching.note(&main));
        let decision = match &settings.decision {
            Some(member) => {
                let single = pool::Serving::other(member);
                let bound = pool::bind(&mut client, member, "decision", single, load_timeout);
                match front.step(bound).await? {
                    Ok(bound) => Some(bound.alias),
                    Err(e) => return Some(Err(e)),
                }
            }
            None => None,
        };
        let members = front.step(client.members()).await?;
        let members = members.map(|m| m.into_iter().map(|m| m.alias).collect()).unwrap_or_default();
        Some(Ok(Pool { client, main, decision, members }))
    }
}

/// The startup `loaded` row: the instruction files, the hook files and the agent definitions
/// read, once (`None` when there are none).
fn loaded_line(
    instructions: &[InstructionFile],
    hook_files: &[PathBuf],
    agents: &AgentDefinitions,
    extensions: &Extensions,
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
