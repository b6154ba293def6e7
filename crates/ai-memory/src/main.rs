//! `ai-memory`: the memory server for coding agents, its hooks, and its command line.

/// `print!` that ends the program quietly when stdout is closed (`ai-memory query x | head`),
/// as a command-line tool should, instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => { $crate::write_out(format_args!($($arg)*), false) };
}

/// `println!`, ending quietly when stdout is closed.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::write_out(format_args!($($arg)*), true) };
}

mod cli;
mod hook;
mod install;
mod models;
mod profile;
mod transfer;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use ai_memory_core::{Identity, Settings};
use ai_memory_index::{Level, Principal};
use ai_memory_server::{Caller, Memory, PageRef, Query, WritePage};
use anyhow::Context;
use clap::Parser;

use cli::{Cli, Command, ModelsCommand, UserCommand};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = std::env::var("AI_MEMORY_LOG")
        .unwrap_or_else(|_| "warn,ai_memory=info,ai_memory_server=info".into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ai-memory: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes to stdout; a reader that has gone (a closed pipe) ends the program with success, as
/// it would have on SIGPIPE, and any other failure to write ends it with an error.
fn write_out(args: std::fmt::Arguments<'_>, line: bool) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let written =
        stdout.write_fmt(args).and_then(|()| if line { stdout.write_all(b"\n") } else { Ok(()) });
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("ai-memory: writing to standard output: {e}");
            std::process::exit(1);
        }
    }
}

/// `--data-dir`, else `$AI_MEMORY_DATA_DIR`, else `$XDG_DATA_HOME/ai-memory`, else
/// `~/.local/share/ai-memory`.
pub fn data_dir(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = flag.or_else(|| std::env::var_os("AI_MEMORY_DATA_DIR").map(PathBuf::from)) {
        return Ok(dir);
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("ai-memory"));
    }
    let home = std::env::var_os("HOME").context("no HOME, XDG_DATA_HOME or --data-dir")?;
    Ok(PathBuf::from(home).join(".local/share/ai-memory"))
}

pub fn settings(dir: &std::path::Path) -> anyhow::Result<Settings> {
    let env: Vec<(String, String)> = std::env::vars().collect();
    Ok(Settings::load(dir, &env)?)
}

fn open(flag: Option<PathBuf>) -> anyhow::Result<Memory> {
    let dir = data_dir(flag)?;
    let settings = settings(&dir)?;
    Ok(Memory::open(&dir, settings)?)
}

/// The caller of a command-line operation: the local operator (root), in the project of the
/// current directory.
fn local_caller() -> anyhow::Result<Caller> {
    let cwd = std::env::current_dir()?;
    let id = Identity::of(&cwd)?;
    Ok(Caller { who: Principal::Root, workspace: Some(id.workspace), project: Some(id.project) })
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve { bind } => {
            let memory = Arc::new(open(cli.data_dir)?);
            ai_memory_server::embedding::start_background(&memory);
            let bind = bind.unwrap_or_else(|| memory.settings.server.bind.clone());
            let addr: std::net::SocketAddr =
                bind.parse().with_context(|| format!("--bind `{bind}` is not ADDRESS:PORT"))?;
            ai_memory_server::http::check_bind(&memory, addr)?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen on {addr}"))?;
                // The address as bound (a port of 0 picks one): scripts and tests read it here.
                outln!("ai-memory listening on {}", listener.local_addr()?);
                ai_memory_server::http::serve(memory, listener).await?;
                anyhow::Ok(())
            })?;
        }
        Command::Mcp => {
            let memory = Arc::new(open(cli.data_dir)?);
            let token = std::env::var("AI_MEMORY_TOKEN").ok();
            let who = memory.authenticate(token.as_deref())?.context(
                "this server has operators: set AI_MEMORY_TOKEN to your API key for `ai-memory mcp`",
            )?;
            let caller = Caller { who, ..local_caller()? };
            ai_memory_server::embedding::start_background(&memory);
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            rt.block_on(async move {
                use rmcp::ServiceExt;
                // Passes here too: `install` registers this server for every harness, and a
                // user who never runs `serve` must still have a profile learned.
                tokio::spawn(ai_memory_server::http::profile_passes(memory.clone()));
                let server = ai_memory_server::MemoryMcp::new(memory, Some(caller));
                let running = server.serve(rmcp::transport::stdio()).await?;
                running.waiting().await?;
                anyhow::Ok(())
            })?;
        }
        Command::WritePage { page, body, file, applies_to, enforced_by, restricted } => {
            let body = match (body, file) {
                (Some(b), _) => b,
                (None, Some(f)) => std::fs::read_to_string(&f)
                    .with_context(|| format!("reading {}", f.display()))?,
                (None, None) => std::io::read_to_string(std::io::stdin())?,
            };
            let req = WritePage {
                scope: page.scope,
                path: page.path,
                body,
                applies_to: (!applies_to.is_empty()).then_some(applies_to),
                enforced_by,
                workspace: page.workspace,
                project: page.project,
                restricted: restricted.then_some(true),
            };
            print_json(&open(cli.data_dir)?.write_page(&local_caller()?, &req)?)?;
        }
        Command::ReadPage { page } => {
            let req = PageRef::from(page);
            let out = open(cli.data_dir)?.read_page(&local_caller()?, &req)?;
            out!("{}", out.text);
        }
        Command::DeletePage { page } => {
            let req = PageRef::from(page);
            let commit = open(cli.data_dir)?.delete_page(&local_caller()?, &req)?;
            outln!("deleted ({commit})");
        }
        Command::Query { text, workspace, project, limit } => {
            let req = Query { query: text.join(" "), workspace, project, limit };
            print_json(&open(cli.data_dir)?.query(&local_caller()?, &req)?)?;
        }
        Command::Hook { event, harness } => return Ok(hook::run(cli.data_dir, &event, &harness)),
        Command::Install { harness, dry_run } => {
            let dir = data_dir(cli.data_dir)?;
            for line in install::install(&dir, &harness, dry_run)? {
                outln!("{line}");
            }
        }
        Command::Profile { command } => {
            let dir = data_dir(cli.data_dir)?;
            return profile::run(&dir, command);
        }
        Command::Reindex => {
            let memory = open(cli.data_dir)?;
            let started = std::time::Instant::now();
            let (pages, broken) = memory.reindex()?;
            outln!("indexed {pages} pages in {:.2}s", started.elapsed().as_secs_f64());
            for b in &broken {
                outln!("not indexed: {b}");
            }
            let started = std::time::Instant::now();
            let embedded = memory.embed_pending(None)?;
            if embedded > 0 {
                outln!("embedded {embedded} pages in {:.2}s", started.elapsed().as_secs_f64());
            }
        }
        Command::Models { command } => {
            let memory = open(cli.data_dir)?;
            match command {
                None => models::status(&memory)?,
                Some(ModelsCommand::Fetch { from }) => {
                    models::fetch(&memory, from)?;
                    let embedded = memory.embed_pending(None)?;
                    outln!("embedded {embedded} pages");
                }
            }
        }
        Command::Export { path, force } => transfer::export(&open(cli.data_dir)?, &path, force)?,
        Command::Import { path, replace, workspace, project } => {
            let options = transfer::options(replace, workspace, project)?;
            transfer::import(&open(cli.data_dir)?, &path, &options)?;
        }
        Command::Config { .. } => {
            let dir = data_dir(cli.data_dir)?;
            out!("{}", settings(&dir)?.show());
        }
        Command::User { command } => {
            let memory = open(cli.data_dir)?;
            let index = memory.index();
            match command {
                UserCommand::Add { name } => {
                    let (id, token) = index.add_user(&name)?;
                    outln!("user {name} (id {id}); API key, shown once:\n{token}");
                }
                UserCommand::List => {
                    for (id, name) in index.users()? {
                        outln!("{id}\t{name}");
                    }
                }
                UserCommand::Grant { user, workspace, project, level } => {
                    let id = index.user_id(&user)?;
                    let ws = ai_memory_core::WorkspaceName::new(&workspace)?;
                    let p = ai_memory_core::ProjectName::new(&project)?;
                    let row = index.ensure_project(&ws, &p, false, None)?;
                    index.grant(id, row.id, Level::parse(&level)?)?;
                    outln!("{user}: {level} on {workspace}/{project}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
