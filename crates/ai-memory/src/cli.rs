//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "ai-memory",
    version,
    about = "Memory for coding agents: wiki pages in git, MCP tools, hooks"
)]
pub struct Cli {
    /// The data directory (default: $AI_MEMORY_DATA_DIR, else $XDG_DATA_HOME/ai-memory).
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// Which page: its path, and optionally its scope, workspace and project (default: the
/// project of the current directory).
#[derive(Debug, Args)]
pub struct PageArgs {
    #[arg(long)]
    pub path: String,
    /// project (default), global or profile.
    #[arg(long)]
    pub scope: Option<String>,
    #[arg(long)]
    pub workspace: Option<String>,
    #[arg(long)]
    pub project: Option<String>,
}

impl From<PageArgs> for ai_memory_server::PageRef {
    fn from(p: PageArgs) -> Self {
        ai_memory_server::PageRef {
            scope: p.scope,
            path: p.path,
            workspace: p.workspace,
            project: p.project,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over HTTP (`/mcp`) and the hook endpoint.
    Serve {
        /// ADDRESS:PORT (default: [server] bind, 127.0.0.1:7434).
        #[arg(long)]
        bind: Option<String>,
    },
    /// Serve MCP over stdio, for a harness that starts the server itself.
    Mcp,
    /// Write a page (the body from --body, --file or stdin).
    WritePage {
        #[command(flatten)]
        page: PageArgs,
        #[arg(long, allow_hyphen_values = true)]
        body: Option<String>,
        #[arg(long, conflicts_with = "body")]
        file: Option<PathBuf>,
        /// A stack tag the profile entry is scoped to (repeatable).
        #[arg(long = "applies-to")]
        applies_to: Vec<String>,
        #[arg(long)]
        enforced_by: Option<String>,
        /// Create the project restricted (readable by its creator, grantees and root only).
        #[arg(long)]
        restricted: bool,
    },
    /// Print a page.
    ReadPage {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Delete a page (git keeps its history).
    DeletePage {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Search pages of this project and of the global scope.
    Query {
        #[arg(required = true)]
        text: Vec<String>,
        #[arg(long)]
        workspace: Option<String>,
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Handle a harness hook event (session-start, prompt-submit, session-end); reads the
    /// harness's JSON on stdin.
    Hook {
        event: String,
        /// claude-code, codex, opencode or aerix.
        #[arg(long, default_value = "claude-code")]
        harness: String,
    },
    /// Register the hooks and the MCP server in a harness's configuration.
    Install {
        /// claude-code, codex, opencode or aerix.
        harness: String,
        /// Print what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Rebuild the index from the wiki.
    Reindex,
    /// Settings.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Operators (database users) and their grants.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective settings (config.toml and environment overrides).
    Show,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add an operator; prints their API key once.
    Add {
        name: String,
    },
    List,
    /// Grant an operator read or write on a project.
    Grant {
        #[arg(long)]
        user: String,
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        project: String,
        /// read or write.
        #[arg(long)]
        level: String,
    },
}
