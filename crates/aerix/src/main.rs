//! `aerix`: the coding agent. `aerix -p PROMPT` runs one request headless; `aerix sessions`
//! lists and removes sessions; `aerix profile` reads and edits prompt profiles; `aerix import
//! claude` copies Claude Code's sessions in. Plain `aerix` on a terminal opens the interactive
//! screen (`interactive.rs`).

mod acp;
mod editor;
mod eval;
mod headless;
mod import;
mod interactive;
mod mcp;
mod output;
mod profile;
mod progress;
mod rewind;
mod sessions;
mod signals;
mod trust;
mod tune;

// The session and its parts live in aerix-agent; the binary's modules name them as before.
pub(crate) use aerix_agent::{attach, checkpoint, exit, extensions, pool, session, startup};

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use aerix_config::{Env, SettingsPaths};
use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::exit::{Exit, ExitError};

#[derive(Parser)]
#[command(name = "aerix", version, about = "A local-first coding agent")]
struct Cli {
    /// Run one request headless and exit (with `--input-format stream-json`, the requests are
    /// read from stdin and PROMPT is left out).
    #[arg(short = 'p', long = "print", value_name = "PROMPT", num_args = 0..=1, default_missing_value = "")]
    prompt: Option<String>,
    /// What `-p` prints on stdout: text (the answer, then the diff), json (one result object
    /// at the end) or stream-json (a line per message as it happens, then the result).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    output_format: output::Format,
    /// Where `-p`'s requests come from: text (PROMPT, or stdin) or stream-json (a user
    /// message a line on stdin, each a request of one session; needs `--output-format
    /// stream-json`).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    input_format: output::InputFormat,
    /// The main member's model for this run (a GGUF path or a Hugging Face reference).
    #[arg(long, value_name = "REF")]
    model: Option<String>,
    /// The root agent's turn budget.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: Option<u32>,
    /// Resume a session of this project: rebuild its root context and plan, then run the prompt.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    resume: Option<String>,
    /// Resume the project's latest session.
    #[arg(long = "continue", short = 'c')]
    continue_latest: bool,
    /// Accepted for compatibility: headless runs always work in place.
    #[arg(long)]
    in_place: bool,
    /// Work in this directory instead of the current one.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// The prompt profile to attach (default: settings' `profile`, else the project key).
    #[arg(long, value_name = "NAME", global = true, value_parser = profile_name)]
    profile: Option<String>,
    /// Move the session's profile branch to its model base's head first (a resumed session
    /// then reads the newest prompts).
    #[arg(long)]
    profile_refresh: bool,
    /// Trust the project for this run: its hooks, plugins and program settings run (nothing is
    /// recorded; `aerix trust` trusts it for good).
    #[arg(long, global = true)]
    trust: bool,
    /// How calls no permission rule decides are treated: default, acceptEdits, plan,
    /// bypassPermissions or dontAsk (else the settings' defaultMode).
    #[arg(long, value_name = "MODE", value_parser = permission_mode)]
    permission_mode: Option<aerix_permissions::Mode>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Trust a project (default: this one): its hooks, plugins and settings that run a program
    /// run from now on, until what it would run changes.
    Trust {
        /// The project's directory.
        #[arg(value_name = "DIR", conflicts_with_all = ["list", "revoke"])]
        dir: Option<PathBuf>,
        /// The trusted projects, and whether each still brings what it was trusted with.
        #[arg(long)]
        list: bool,
        /// Forget a project's trust.
        #[arg(long, value_name = "DIR", conflicts_with = "list")]
        revoke: Option<PathBuf>,
    },
    /// Serve the Agent Client Protocol on stdin and stdout (Zed, Neovim's and Emacs's ACP
    /// clients): each of the client's sessions is an aerix session in its directory.
    Acp,
    /// The project's sessions.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// The prompt profile: its branches, texts and history, and hand edits.
    Profile {
        #[command(subcommand)]
        command: ProfileCommand,
    },
    /// Copy another program's sessions into the project's session store.
    Import {
        #[command(subcommand)]
        command: ImportCommand,
    },
    /// Put the files and the conversation back to before a request of a session (its
    /// checkpoint): the next request continues from there.
    Rewind {
        /// The session (default: the one used last, as `--continue` picks).
        #[arg(long, value_name = "ID")]
        resume: Option<String>,
        /// The request to rewind to before, as `--list` numbers them (default: the last).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        to: Option<u32>,
        /// Restore the files only; the conversation keeps every request.
        #[arg(long)]
        files_only: bool,
        /// List the session's requests with their numbers, and rewind nothing.
        #[arg(long, conflicts_with_all = ["to", "files_only"])]
        list: bool,
    },
    /// Revise the model base's prompts from the profile's sessions (one commit), or measure a
    /// tune with `--eval`.
    Tune {
        /// Read at most N sessions (default `tune.sessions`, 20).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        sessions: Option<u32>,
        /// Print each revision as a diff and commit none (the sync before it still commits).
        #[arg(long)]
        dry_run: bool,
        /// Measure the latest tune commit: replay held-out requests on it and on its parent.
        #[arg(long, conflicts_with = "dry_run")]
        eval: bool,
    },
    /// The MCP servers (`[mcp.servers]`, `.mcp.json`, `~/.claude.json`).
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
}

#[derive(Subcommand)]
enum McpCommand {
    /// Each server: where it is declared, its transport, its state and its tools.
    List,
}

#[derive(Subcommand)]
enum ImportCommand {
    /// The project's Claude Code sessions (`~/.claude/projects/<dir>/*.jsonl`), listed tagged
    /// `claude-code` and not resumable; importing one again replaces it.
    Claude {
        /// The project's working directory (default: the current one, or --cwd).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ProfileCommand {
    /// The profile's branches, with each head commit and its subject.
    List,
    /// One text at a branch or commit: `aerix profile show model/<model> system.md`.
    Show { rev: String, path: String },
    /// Edit one text of a model branch in $VISUAL/$EDITOR and commit it.
    Edit { branch: String, path: String },
    /// The commits of a branch (or from a commit), newest first; with PATH, those changing it.
    Log { rev: String, path: Option<String> },
    /// The diff between two commits, or of one commit against its parent.
    Diff { from: String, to: Option<String> },
    /// Reconcile the model base with this release's prompts and the current skill and agent
    /// files (the reflection member reconciles tuned ones).
    Sync,
}

#[derive(Subcommand)]
enum SessionsCommand {
    /// List the project's sessions, oldest first.
    List,
    /// Delete a session: its log, spool files and index entry, its checkpoints and its profile
    /// branch.
    Rm { id: String },
}

/// `--profile`'s value: `[A-Za-z0-9_-][A-Za-z0-9._-]*` (anything else is a usage error).
fn profile_name(value: &str) -> Result<String, String> {
    if aerix_profile::valid_name(value) {
        Ok(value.to_owned())
    } else {
        Err(format!("`{value}` is not a profile name ([A-Za-z0-9_-][A-Za-z0-9._-]*)"))
    }
}

/// `--permission-mode`'s value, by Claude Code's names.
fn permission_mode(value: &str) -> Result<aerix_permissions::Mode, String> {
    value.parse()
}

fn main() -> ExitCode {
    let started = std::time::Instant::now();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AERIX_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(Exit::Usage.code() as u8),
            };
        }
    };
    let code = match run(cli, started) {
        Ok(exit) => exit.code(),
        Err(e) => {
            eprintln!("aerix: {e:#}");
            match e.downcast_ref::<ExitError>() {
                Some(exit) => exit.exit.code(),
                None if e.downcast_ref::<aerix_config::ConfigError>().is_some() => {
                    Exit::Config.code()
                }
                None => Exit::Failed.code(),
            }
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn run(cli: Cli, started: std::time::Instant) -> anyhow::Result<Exit> {
    let env = Env::from_process();
    let cwd = match &cli.cwd {
        Some(dir) => dir
            .canonicalize()
            .map_err(|e| Exit::Usage.with(format!("--cwd {}: {e}", dir.display())))?,
        None => std::env::current_dir()?,
    };
    let root = aerix_config::project_root(&cwd);
    if let Some(Command::Sessions { command }) = &cli.command {
        let data =
            env.data_home().ok_or_else(|| Exit::Usage.with("no data directory: set HOME"))?;
        return sessions::run(&data, &root, cli.profile.as_deref(), command);
    }
    if let Some(Command::Rewind { resume, to, files_only, list }) = &cli.command {
        let data =
            env.data_home().ok_or_else(|| Exit::Usage.with("no data directory: set HOME"))?;
        let ask = rewind::Rewind {
            session: resume.as_deref(),
            to: *to,
            files_only: *files_only,
            list: *list,
        };
        return rewind::run(&data, &root, &ask);
    }
    if let Some(Command::Import { command: ImportCommand::Claude { project } }) = &cli.command {
        let data =
            env.data_home().ok_or_else(|| Exit::Usage.with("no data directory: set HOME"))?;
        let home =
            env.home.clone().ok_or_else(|| Exit::Usage.with("no home directory: set HOME"))?;
        return import::claude(&data, &home, project.as_deref().unwrap_or(&cwd));
    }
    if let Some(Command::Trust { dir, list, revoke }) = &cli.command {
        return match (dir, list, revoke) {
            (_, true, _) => trust::list(&env),
            (_, _, Some(dir)) => trust::revoke(&env, dir),
            (dir, _, None) => trust::trust(&env, dir.as_deref().unwrap_or(&cwd)),
        };
    }
    if let Some(Command::Acp) = &cli.command {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let serving = acp::Serving { env, model: cli.model, started };
        return runtime.block_on(acp::serve(serving));
    }
    let (layered, trust) = project(&env, &cwd, cli.trust)?;
    let asked = session::Asked {
        cwd: cwd.clone(),
        max_turns: cli.max_turns,
        resume: cli.resume.clone(),
        continue_latest: cli.continue_latest,
        profile: cli.profile.clone(),
        profile_refresh: cli.profile_refresh,
        permission_mode: cli.permission_mode,
        started,
    };
    let formats = (cli.output_format, cli.input_format);
    let plain = formats == (output::Format::Text, output::InputFormat::Text);
    let screen = cli.prompt.is_none() && cli.command.is_none() && plain && interactive::wanted();
    if screen {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let closed = runtime.block_on(interactive::run(
            layered,
            trust,
            &env,
            interactive::Options { asked, model: cli.model },
        ));
        // The screen has closed: a request it stopped waiting for (a signal's 10 s) holds no
        // one's exit.
        runtime.shutdown_background();
        return closed;
    }
    if cli.command.is_some() {
        // `aerix -p` tells its notes at startup; a command tells those about its settings.
        for note in trust.notes_of(aerix_trust::Kind::Setting) {
            eprintln!("{note}");
        }
    }
    let settings = finish(trust.settings(layered), cli.model);
    let project_key = aerix_session::project_key(&root);
    let name = attach::profile_name(cli.profile.as_deref(), Some(&settings), &project_key);
    match &cli.command {
        Some(Command::Mcp { command: McpCommand::List }) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            return runtime.block_on(mcp::list(&trust, &settings));
        }
        Some(Command::Tune { sessions, eval: true, .. }) => {
            let limit = sessions.unwrap_or(settings.tune.sessions) as usize;
            return eval::run(&settings, &env, &root, &name, limit, trust.allows());
        }
        Some(Command::Tune { sessions, dry_run, .. }) => {
            let args = tune::TuneArgs { sessions: *sessions, dry_run: *dry_run };
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            return runtime.block_on(tune::tune(&settings, &env, &root, &cwd, &name, &args));
        }
        Some(Command::Profile { command: ProfileCommand::Sync }) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            return runtime.block_on(tune::sync(&settings, &env, &root, &cwd, &name));
        }
        _ => {}
    }
    if let Some(Command::Profile { command }) = &cli.command {
        let data =
            env.data_home().ok_or_else(|| Exit::Usage.with("no data directory: set HOME"))?;
        let at = profile::Where {
            data: &data,
            name: &name,
            project_key: &project_key,
            root: &root,
            cwd: &cwd,
            settings: &settings,
            env: &env,
        };
        return profile::run(&at, command);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut inputs = None;
    let prompt = match cli.prompt {
        _ if cli.input_format == output::InputFormat::StreamJson => {
            if cli.output_format != output::Format::StreamJson {
                return Err(Exit::Usage
                    .with("--input-format stream-json needs --output-format stream-json")
                    .into());
            }
            if cli.prompt.as_deref().is_some_and(|p| !p.is_empty()) {
                return Err(Exit::Usage
                    .with("with --input-format stream-json the prompts come from stdin: leave PROMPT out")
                    .into());
            }
            let mut messages = output::Inputs::spawn();
            let first = match runtime.block_on(messages.next()) {
                Some(Ok(first)) => first,
                Some(Err(e)) => return Err(Exit::Usage.with(e).into()),
                None => return Err(Exit::Usage.with("no user message on stdin").into()),
            };
            inputs = Some(messages);
            first
        }
        Some(prompt) => prompt,
        // `NO_COLOR`, or no terminal: the plain output, the prompt read from stdin.
        None => {
            let mut prompt = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut prompt)
                .context("reading the prompt from stdin")?;
            if prompt.trim().is_empty() {
                return Err(Exit::Usage
                    .with(
                        "no prompt: the screen needs a terminal (and NO_COLOR unset); give one \
                         with `aerix -p PROMPT` or on stdin",
                    )
                    .into());
            }
            prompt
        }
    };
    if prompt.trim().is_empty() {
        return Err(Exit::Usage.with("the prompt is empty").into());
    }
    let _ = cli.in_place;
    runtime.block_on(headless::run(
        settings,
        &env,
        &trust,
        headless::Options { prompt, asked, quiet: cli.quiet, output: cli.output_format, inputs },
    ))
}

/// The settings files of the project at `cwd`, read once, and what its trust allows of them
/// (`for_run`: `--trust`, this run only).
pub(crate) fn project(
    env: &Env,
    cwd: &Path,
    for_run: bool,
) -> anyhow::Result<(aerix_config::Layered, startup::Trust)> {
    let root = aerix_config::project_root(cwd);
    let layered = aerix_config::load_layered(&SettingsPaths::standard(env, &root), env)?;
    let trust = startup::Trust::survey(&layered, env, (&root, cwd), for_run);
    Ok((layered, trust))
}

/// The settings as the command line completes them: `--model`, and `caldrix` beside `aerix`.
pub(crate) fn finish(
    mut settings: aerix_config::Settings,
    model: Option<String>,
) -> aerix_config::Settings {
    if let Some(model) = model {
        settings.main.model = model;
    }
    // Installed side by side (cargo install, a release archive), `caldrix` is found beside
    // `aerix` before the PATH.
    if settings.pool.caldrix == Path::new("caldrix")
        && let Some(sibling) = std::env::current_exe().ok().map(|exe| exe.with_file_name("caldrix"))
        && sibling.is_file()
    {
        settings.pool.caldrix = sibling;
    }
    settings
}
