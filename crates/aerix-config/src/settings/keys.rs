//! Every key of `settings.toml`, each declared once: its doc comment, name, type, default and
//! bound (`docs/configuration.md` has the table for users; a test keeps the two the same).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::declare::{Bad, at_least, section};

pub const DEFAULT_MODEL: &str = "bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M";
pub const DEFAULT_TOOL_CAP: u64 = 20_000;

section! {
    /// The effective settings of one run.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Settings(env) {
        /// The root agent's turn budget when `--max-turns` is not given.
        @inert max_turns: u32 = 40, at_least(1);
        /// The prompt profile sessions attach (`--profile` wins); `None`: the project key.
        @inert profile: Option<String> = None, profile_name;
    }
    and {
        /// Members by role: `main` (always) and `decision` (optional), `[members.<role>]`.
        main: Member = Member::of(DEFAULT_MODEL.to_owned());
        decision: Option<Member> = None;
        pool: PoolSettings = PoolSettings::declared(env);
        delegation: Delegation = Delegation::declared();
        context: ContextSettings = ContextSettings::declared();
        hooks: HookSettings = HookSettings::declared();
        plugins: PluginSettings = PluginSettings::declared();
        tune: TuneSettings = TuneSettings::declared();
        sandbox: SandboxSettings = SandboxSettings::declared();
        verify: VerifySettings = VerifySettings::declared();
        mcp: McpSettings = McpSettings::declared();
        /// Each file's `[permissions]` table, in the order the files were read (the rules add
        /// up; `aerix-permissions` applies a project's only as far as its trust allows).
        permissions: Vec<crate::FilePermissions> = Vec::new();
        /// The files the settings came from, in the order they were applied.
        sources: Vec<PathBuf> = Vec::new();
    }
}

section! {
    /// A member: a model reference (a GGUF path, a Hugging Face reference, `openai:URL#MODEL`
    /// for a remote engine, or `script:...` for the scripted member) and its serving flags.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Member {
        @model model: String = String::new();
        /// Context window in tokens.
        @inert ctx: Option<u32> = None, at_least(1);
        /// CPU threads.
        @inert threads: Option<u32> = None, at_least(1);
        /// Prefill batch.
        @inert batch: Option<u32> = None, at_least(1);
        @inert gpu_layers: Option<u32> = None;
        /// Generations decoded together (`--max-batch`, 1 to `caldrix_proto::MAX_BATCH`).
        @inert max_batch: Option<u32> = None, max_batch;
        /// `true` passes `--fast-forward`, `--draft` (both off by default: not yet measured
        /// faster).
        @inert fast_forward: Option<bool> = None;
        @inert draft: Option<bool> = None;
        /// A remote member: the NAME of the environment variable holding the engine's API key
        /// (read by the pool; the key is in no settings file and no session file).
        api_key_env: Option<String> = None;
        /// A remote member: a local reference of the same model, for its vocabulary and
        /// template.
        tokenizer: Option<String> = None;
        /// A remote member: who applies the chat template (`pool` or `engine`; unset: the pool
        /// when it has a template, else the engine).
        render: Option<caldrix_proto::Render> = None;
    }
}

/// The keys of `tune.flags`: a member's serving flags without its model or remote settings.
pub(crate) const FLAGS: &[&str] =
    &["ctx", "threads", "batch", "gpu_layers", "max_batch", "fast_forward", "draft"];

section! {
    /// `[pool]`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct PoolSettings(env) {
        /// The `caldrix` binary autostart runs.
        caldrix: PathBuf = PathBuf::from("caldrix");
        socket: PathBuf = env.default_socket();
        start_timeout_secs: u64 = 900, at_least(1);
        max_connections: u32 = 4, at_least(1);
    }
}

section! {
    /// `[delegation]`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Delegation {
        @inert max_turns: u32 = 40, at_least(1);
        @inert retries: u32 = 2;
        @inert depth: u32 = 3;
        @inert parallel: u32 = 4, at_least(1);
        planner_tools: Vec<String> =
            ["repo_map", "agent", "plan", "context"].map(String::from).to_vec();
        /// Implementers one piece runs at once, each in a worktree of its own (1 to
        /// `MAX_ATTEMPTS`); unset: `LOCAL_ATTEMPTS` on a local main member, 1 on a remote one.
        @inert attempts: Option<u32> = None, attempts;
        /// The sampling temperature of every attempt but the first (which is greedy).
        @inert attempt_temperature: f64 = 0.8, temperature;
        /// How an implementer with a command check writes its first change after its opening:
        /// `json` (its own `edit`/`write` turn) or `whole` (aerix asks for the whole file the
        /// opening read, in a code fence, and applies it as a `write`).
        @inert edit_format: EditFormat = EditFormat::Json;
        /// The seed sampled attempts start from (attempt k of a piece gets a seed of its own
        /// made from it); unset: one drawn per request, written to the log.
        @inert seed: Option<u64> = None;
    }
}

/// `delegation.edit_format`: how an implementer with a command check writes its first change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EditFormat {
    /// Its own `edit`/`write` turn.
    Json,
    /// The whole file in a code fence, asked for by aerix after the opening.
    Whole,
}

/// Attempts a piece may run at once (`delegation.attempts`).
pub const MAX_ATTEMPTS: u32 = 8;
/// `delegation.attempts` when unset, on a local main member: the attempts benchmark fixed
/// nothing more with 4 or 8 on Gemma 3 270M, in 1.75× and 2.77× the time (2.8× and 4.2×
/// before the implementer's opening) (`docs/benchmarks.md`, attempts on twelve generated bugs).
pub const LOCAL_ATTEMPTS: u32 = 1;

section! {
    /// `[verify]`: how a piece's work is checked.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct VerifySettings {
        /// The repository's test commands (as Aider's `--test-cmd`); empty: detected from its
        /// files. A piece's check that is one of them is run by aerix, its exit status the
        /// verdict.
        commands: Vec<String> = Vec::new();
        /// After a command check passes, a model verifier reviews the work too.
        @inert review: bool = false;
    }
}

section! {
    /// `[context]`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ContextSettings {
        @inert soft_ratio: f64 = 0.70, ratio;
        /// Above 0 and below `soft_ratio` (checked once every key of a file is read).
        @inert target_ratio: f64 = 0.50;
        @inert max_new_tokens: u32 = 1024, at_least(64);
        @inert skills_chars: u32 = 4_000;
        /// Bytes a tool's result may hold before it is cut (and spooled whole), by tool name.
        @inert tool_caps: BTreeMap<String, u64> = [
            ("default", DEFAULT_TOOL_CAP),
            ("read", 24_000),
            ("bash", 16_000),
            ("grep", 12_000),
            ("glob", 8_000),
            ("repo_map", 12_000),
            ("agent", 4_000),
        ]
        .map(|(tool, cap)| (tool.to_owned(), cap))
        .into(), caps;
        /// Answer a call that repeats an earlier one whose result cannot have changed with a
        /// pointer to that result, and end an agent stuck repeating (a deviation from the spec).
        @inert repeat_guard: bool = true;
        /// Under the `Json` constraint, an agent's last turn of its budget may only be a `final`
        /// (a deviation from the spec, off by default: the budget then ends in an answer, not
        /// `budget`).
        @inert last_turn_final: bool = false;
    }
}

section! {
    /// Where hooks are read from (the hook files themselves are `aerix-hooks`'s).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct HookSettings {
        /// Claude Code's settings files (`~/.claude/settings.json`, the project's
        /// `.claude/settings.json` and `settings.local.json`) add their hooks after aerix's own.
        @user claude_settings: bool = true;
    }
}

section! {
    /// One file's `[permissions]`, in Claude Code's terms (`aerix-permissions` reads them with
    /// Claude Code's settings files).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct PermissionSettings {
        /// Rules that let a call through without asking (`Bash(npm run test:*)`).
        allow: Vec<String> = Vec::new();
        /// Rules that ask before a call, whatever allows it.
        ask: Vec<String> = Vec::new();
        /// Rules that refuse a call, in every mode.
        deny: Vec<String> = Vec::new();
        /// The mode when `--permission-mode` is not given.
        default_mode: Option<crate::PermissionMode> = None;
        /// Directories besides the working tree that count as working directories.
        additional_directories: Vec<String> = Vec::new();
    }
}

section! {
    /// Which plugins load (`aerix-skills` finds them).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct PluginSettings {
        /// Plugins of aerix's plugin directories by name, or Claude Code's `name@marketplace`.
        enabled: Vec<String> = Vec::new(), names;
        /// Also load the plugins Claude Code's settings enable (`enabledPlugins`).
        @user claude_code: bool = true;
    }
}

section! {
    /// `[sandbox]`: `bash` under bubblewrap (`aerix-tools`' `Sandbox`).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct SandboxSettings {
        /// Run every `bash` command (background jobs too) under `bwrap`: `/` read-only, the
        /// working tree and the added directories writable, a fresh `/tmp`.
        @narrows(true) enabled: bool = false;
        /// Inside the sandbox, keep the host's network (off: none, not even loopback).
        @narrows(false) network: bool = false;
        /// Unix sockets (absolute paths) reachable inside, each bound in as itself; every other
        /// socket is hidden (the pool's, `$XDG_RUNTIME_DIR`'s, the host's).
        @user allow_unix_sockets: Vec<String> = Vec::new(), absolute_paths;
    }
}

/// `sandbox.allow_unix_sockets`: a relative path would name a different socket in each
/// working directory.
fn absolute_paths(paths: &[String]) -> Result<(), Bad> {
    match paths.iter().find(|p| !std::path::Path::new(p).is_absolute()) {
        Some(path) => Err(Bad::new(format!("`{path}` is not an absolute path"))),
        None => Ok(()),
    }
}

section! {
    /// `[mcp]`: the MCP servers aerix starts (`aerix-mcp` adds Claude Code's `.mcp.json` and
    /// `~/.claude.json` servers to these).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct McpSettings {
        /// Seconds one MCP tool call may take before it is an error (1 to 3600).
        timeout_secs: u64 = 60, timeout_secs;
        /// `[mcp.servers.<name>]`: `command`, `args`, `env` (stdio) or `url`, `headers` (HTTP).
        servers: McpServers = McpServers::default();
    }
}

/// `mcp.timeout_secs`: 1 to an hour.
fn timeout_secs(secs: &u64) -> Result<(), Bad> {
    if (1..=3600).contains(secs) { Ok(()) } else { Err(Bad::new("must be 1 to 3600 seconds")) }
}

/// One `[mcp.servers.<name>]`: a program over stdio or a streamable-HTTP endpoint. Values may
/// hold `${VAR}` (`${VAR:-default}`), expanded from the environment when the server starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// The servers by name; a later file's server replaces an earlier one of the same name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McpServers(pub BTreeMap<String, McpServer>);

impl super::declare::Layer for McpServers {
    #[cfg(test)]
    const ENTRY: &'static str = ".<name>";

    fn parse(value: toml::Value) -> Result<Self, Bad> {
        let toml::Value::Table(table) = value else {
            return Err(Bad::new(format!("must be a table, not {}", value.type_str())));
        };
        let mut out = BTreeMap::new();
        for (name, value) in table {
            let bad = |message: String| Bad::Value { entry: Some(name.clone()), message };
            let server: McpServer =
                value.try_into().map_err(|e: toml::de::Error| bad(e.message().to_owned()))?;
            if server.command.is_some() == server.url.is_some() {
                return Err(bad("needs either `command` (stdio) or `url` (HTTP)".to_owned()));
            }
            let chars = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if name.is_empty() || name.contains("__") || !chars {
                return Err(bad(
                    "a server's name has letters, digits, `-` and `_`, and no `__`".to_owned()
                ));
            }
            out.insert(name, server);
        }
        Ok(McpServers(out))
    }

    fn layer(&mut self, new: Self) {
        self.0.extend(new.0);
    }
}

section! {
    /// `aerix tune` and `aerix profile sync` (`[tune]`).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct TuneSettings {
        /// How many sessions `aerix tune` reads when `--sessions` is not given.
        @inert sessions: u32 = 20, at_least(1);
    }
    and {
        /// The reflection member (`tune.member`, with `tune.flags` as its serving flags);
        /// `None`: the main member reflects.
        member: Option<Member> = None;
    }
}

/// The keys of `[tune]` that are not fields: `member` (a model reference) and `flags` (a table
/// of `FLAGS`), which together make `TuneSettings::member`.
pub(crate) const TUNE_MEMBER: [&str; 2] = ["member", "flags"];

impl Member {
    /// A member of `model` with every serving flag left to the pool.
    pub fn of(model: String) -> Member {
        Member { model, ..Member::declared() }
    }

    pub fn is_remote(&self) -> bool {
        self.model.starts_with("openai:")
    }
}

impl ContextSettings {
    /// The cap of a tool's results (`tool_caps.<tool>`, else `tool_caps.default`).
    pub fn tool_cap(&self, tool: &str) -> u64 {
        self.tool_caps
            .get(tool)
            .or_else(|| self.tool_caps.get("default"))
            .copied()
            .unwrap_or(DEFAULT_TOOL_CAP)
    }
}

/// A profile name: `[A-Za-z0-9_-][A-Za-z0-9._-]*` (it names a repository file and branches).
pub fn valid_profile_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok =
        chars.next().is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    first_ok && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn profile_name(profile: &Option<String>) -> Result<(), Bad> {
    match profile {
        Some(name) if !valid_profile_name(name) => {
            Err(Bad::new(format!("`{name}` is not a profile name ([A-Za-z0-9_-][A-Za-z0-9._-]*)")))
        }
        _ => Ok(()),
    }
}

/// `max_batch`: the pool's bound, refused here by key.
fn max_batch(value: &Option<u32>) -> Result<(), Bad> {
    let max = caldrix_proto::MAX_BATCH;
    match *value {
        Some(n) if !(1..=max).contains(&n) => {
            Err(Bad::new(format!("must be between 1 and {max}, not {n}")))
        }
        _ => Ok(()),
    }
}

fn attempts(value: &Option<u32>) -> Result<(), Bad> {
    match *value {
        Some(n) if !(1..=MAX_ATTEMPTS).contains(&n) => {
            Err(Bad::new(format!("must be between 1 and {MAX_ATTEMPTS}, not {n}")))
        }
        _ => Ok(()),
    }
}

fn temperature(value: &f64) -> Result<(), Bad> {
    if *value > 0.0 && *value <= 2.0 {
        Ok(())
    } else {
        Err(Bad::new(format!("must be above 0 and at most 2, not {value}")))
    }
}

fn ratio(value: &f64) -> Result<(), Bad> {
    if *value > 0.0 && *value < 1.0 { Ok(()) } else { Err(Bad::new("must be between 0 and 1")) }
}

fn caps(caps: &BTreeMap<String, u64>) -> Result<(), Bad> {
    match caps.iter().find(|(_, cap)| **cap < 256) {
        Some((tool, _)) => Err(Bad::Value {
            entry: Some(tool.clone()),
            message: "must be at least 256 bytes".to_owned(),
        }),
        None => Ok(()),
    }
}

fn names(names: &[String]) -> Result<(), Bad> {
    match names.iter().find(|n| n.trim().is_empty()) {
        Some(empty) => Err(Bad::new(format!("holds an empty name {empty:?}"))),
        None => Ok(()),
    }
}
