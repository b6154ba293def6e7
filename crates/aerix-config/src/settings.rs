//! `settings.toml`: the user's, the project's and the project's local overrides, merged key by
//! key (later files win), every key checked, every error naming its file, line and key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::ConfigError;

/// The effective settings of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Members by role: `main` (always) and `decision` (optional).
    pub main: Member,
    pub decision: Option<Member>,
    pub pool: PoolSettings,
    pub delegation: Delegation,
    pub context: ContextSettings,
    pub hooks: HookSettings,
    pub plugins: PluginSettings,
    pub tune: TuneSettings,
    /// The root agent's turn budget when `--max-turns` is not given.
    pub max_turns: u32,
    /// The prompt profile sessions attach (`--profile` wins); `None`: the project key.
    pub profile: Option<String>,
    /// The files the settings came from, in the order they were applied.
    pub sources: Vec<PathBuf>,
}

/// Where hooks are read from (the hook files themselves are `aerix-hooks`'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookSettings {
    /// Claude Code's settings files (`~/.claude/settings.json`, the project's
    /// `.claude/settings.json` and `settings.local.json`) add their hooks after aerix's own.
    pub claude_settings: bool,
}

/// A member: a model reference (a GGUF path, a Hugging Face reference, `openai:URL#MODEL` for
/// a remote engine, or `script:...` for the scripted member) and its serving flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub model: String,
    pub ctx: Option<u32>,
    pub threads: Option<u32>,
    pub batch: Option<u32>,
    pub gpu_layers: Option<u32>,
    /// Generations decoded together (`--max-batch`, 1 to `caldrix_proto::MAX_BATCH`).
    pub max_batch: Option<u32>,
    /// `true` passes `--fast-forward`, `--draft` (both off by default: not yet measured faster).
    pub fast_forward: Option<bool>,
    pub draft: Option<bool>,
    /// A remote member: the NAME of the environment variable holding the engine's API key
    /// (read by the pool; the key is in no settings file and no session file).
    pub api_key_env: Option<String>,
    /// A remote member: a local reference of the same model, for its vocabulary and template.
    pub tokenizer: Option<String>,
    /// A remote member: who applies the chat template (`pool` or `engine`; unset: the pool
    /// when it has a template, else the engine).
    pub render: Option<caldrix_proto::Render>,
}

impl Member {
    /// A member of `model` with every serving flag left to the pool.
    pub fn of(model: String) -> Member {
        Member {
            model,
            ctx: None,
            threads: None,
            batch: None,
            gpu_layers: None,
            max_batch: None,
            fast_forward: None,
            draft: None,
            api_key_env: None,
            tokenizer: None,
            render: None,
        }
    }

    pub fn is_remote(&self) -> bool {
        self.model.starts_with("openai:")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PoolSettings {
    /// The `caldrix` binary autostart runs.
    pub caldrix: PathBuf,
    pub socket: PathBuf,
    pub start_timeout_secs: u64,
    pub max_connections: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Delegation {
    pub max_turns: u32,
    pub retries: u32,
    pub depth: u32,
    pub parallel: u32,
    pub planner_tools: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ContextSettings {
    pub soft_ratio: f64,
    pub target_ratio: f64,
    pub max_new_tokens: u32,
    pub skills_chars: u32,
    /// Bytes a tool's result may hold before it is cut (and spooled whole), by tool name.
    pub tool_caps: BTreeMap<String, u64>,
    /// Answer a call that repeats an earlier one whose result cannot have changed with a
    /// pointer to that result, and end an agent stuck repeating (a deviation from the spec).
    pub repeat_guard: bool,
    /// Under the `Json` constraint, an agent's last turn of its budget may only be a `final`
    /// (a deviation from the spec, off by default: the budget then ends in an answer, not
    /// `budget`).
    pub last_turn_final: bool,
}

/// Which plugins load (`aerix-skills` finds them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginSettings {
    /// Plugins of aerix's plugin directories by name, or Claude Code's `name@marketplace`.
    pub enabled: Vec<String>,
    /// Also load the plugins Claude Code's settings enable (`enabledPlugins`).
    pub claude_code: bool,
}

/// `aerix tune` and `aerix profile sync` (`[tune]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TuneSettings {
    /// The reflection member, with `flags` as its serving flags (its `model` is `member`);
    /// `None`: the main member reflects.
    pub member: Option<Member>,
    /// How many sessions `aerix tune` reads when `--sessions` is not given.
    pub sessions: u32,
}

pub const DEFAULT_MODEL: &str = "bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M";
pub const DEFAULT_TOOL_CAP: u64 = 20_000;

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

/// One file's settings, every key optional; unknown keys are refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    max_turns: Option<u32>,
    profile: Option<String>,
    #[serde(default)]
    members: FileMembers,
    #[serde(default)]
    pool: FilePool,
    #[serde(default)]
    delegation: FileDelegation,
    #[serde(default)]
    context: FileContext,
    #[serde(default)]
    hooks: FileHooks,
    #[serde(default)]
    plugins: FilePlugins,
    #[serde(default)]
    tune: FileTune,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTune {
    member: Option<String>,
    flags: Option<FileFlags>,
    sessions: Option<u32>,
}

/// A member's serving flags without its model (`tune.flags`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFlags {
    ctx: Option<u32>,
    threads: Option<u32>,
    batch: Option<u32>,
    gpu_layers: Option<u32>,
    max_batch: Option<u32>,
    fast_forward: Option<bool>,
    draft: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHooks {
    claude_settings: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePlugins {
    enabled: Option<Vec<String>>,
    claude_code: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMembers {
    main: Option<FileMember>,
    decision: Option<FileMember>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMember {
    model: Option<String>,
    ctx: Option<u32>,
    threads: Option<u32>,
    batch: Option<u32>,
    gpu_layers: Option<u32>,
    max_batch: Option<u32>,
    fast_forward: Option<bool>,
    draft: Option<bool>,
    api_key_env: Option<String>,
    tokenizer: Option<String>,
    render: Option<caldrix_proto::Render>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePool {
    caldrix: Option<PathBuf>,
    socket: Option<PathBuf>,
    start_timeout_secs: Option<u64>,
    max_connections: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDelegation {
    max_turns: Option<u32>,
    retries: Option<u32>,
    depth: Option<u32>,
    parallel: Option<u32>,
    planner_tools: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileContext {
    soft_ratio: Option<f64>,
    target_ratio: Option<f64>,
    max_new_tokens: Option<u32>,
    skills_chars: Option<u32>,
    #[serde(default)]
    tool_caps: BTreeMap<String, u64>,
    repeat_guard: Option<bool>,
    last_turn_final: Option<bool>,
}

/// Where settings files are looked for.
#[derive(Clone, Debug)]
pub struct SettingsPaths {
    /// `$XDG_CONFIG_HOME/aerix/settings.toml` (or `~/.config/...`).
    pub user: Option<PathBuf>,
    /// `<project>/.aerix/settings.toml`.
    pub project: Option<PathBuf>,
    /// `<project>/.aerix/settings.local.toml`: the user's own overrides, not committed.
    pub local: Option<PathBuf>,
}

impl SettingsPaths {
    /// The standard places for a project rooted at `project_root`.
    pub fn standard(env: &crate::Env, project_root: &Path) -> SettingsPaths {
        let dir = project_root.join(".aerix");
        SettingsPaths {
            user: env.config_home().map(|c| c.join("aerix/settings.toml")),
            project: Some(dir.join("settings.toml")),
            local: Some(dir.join("settings.local.toml")),
        }
    }
}

/// Reads and merges the settings files that exist (a missing file is no error) over the
/// defaults.
pub fn load(paths: &SettingsPaths, env: &crate::Env) -> Result<Settings, ConfigError> {
    let mut settings = defaults(env);
    let files = [&paths.user, &paths.project, &paths.local];
    for path in files.into_iter().flatten() {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(ConfigError::Read { path: path.clone(), source }),
        };
        apply(&mut settings, path, &text)?;
        settings.sources.push(path.clone());
    }
    Ok(settings)
}

/// The settings when no file sets anything.
pub fn defaults(env: &crate::Env) -> Settings {
    let tool_caps = [
        ("default", DEFAULT_TOOL_CAP),
        ("read", 24_000),
        ("bash", 16_000),
        ("grep", 12_000),
        ("glob", 8_000),
        ("repo_map", 12_000),
        ("agent", 4_000),
    ];
    Settings {
        main: Member::of(DEFAULT_MODEL.to_owned()),
        decision: None,
        pool: PoolSettings {
            caldrix: PathBuf::from("caldrix"),
            socket: env.default_socket(),
            start_timeout_secs: 900,
            max_connections: 4,
        },
        delegation: Delegation {
            max_turns: 40,
            retries: 2,
            depth: 3,
            parallel: 4,
            planner_tools: ["repo_map", "agent", "plan", "context"].map(String::from).to_vec(),
        },
        context: ContextSettings {
            soft_ratio: 0.70,
            target_ratio: 0.50,
            max_new_tokens: 1024,
            skills_chars: 4_000,
            tool_caps: tool_caps.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            repeat_guard: true,
            last_turn_final: false,
        },
        hooks: HookSettings { claude_settings: true },
        plugins: PluginSettings { enabled: Vec::new(), claude_code: true },
        tune: TuneSettings { member: None, sessions: 20 },
        max_turns: 40,
        profile: None,
        sources: Vec::new(),
    }
}

fn apply(settings: &mut Settings, path: &Path, text: &str) -> Result<(), ConfigError> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|span| line_of(text, span.start));
        let key = line.and_then(|line| key_at(text, line));
        ConfigError::Invalid { path: path.to_owned(), line, key, message: e.message().to_owned() }
    })?;
    let invalid = |table: &str, key: &str, message: String| ConfigError::Invalid {
        path: path.to_owned(),
        line: find_key(text, table, key),
        key: Some(if table.is_empty() { key.to_owned() } else { format!("{table}.{key}") }),
        message,
    };
    if let Some(turns) = file.max_turns {
        if turns == 0 {
            return Err(invalid("", "max_turns", "must be at least 1".into()));
        }
        settings.max_turns = turns;
    }
    if let Some(profile) = file.profile {
        if !aerix_profile::valid_name(&profile) {
            return Err(invalid(
                "",
                "profile",
                format!("`{profile}` is not a profile name ([A-Za-z0-9_-][A-Za-z0-9._-]*)"),
            ));
        }
        settings.profile = Some(profile);
    }
    if let Some(main) = &file.members.main {
        merge_member(&mut settings.main, main);
    }
    if let Some(decision) = &file.members.decision {
        let mut member = settings.decision.clone().unwrap_or(Member::of(String::new()));
        merge_member(&mut member, decision);
        if member.model.is_empty() {
            return Err(invalid(
                "members.decision",
                "model",
                "a decision member needs a model".into(),
            ));
        }
        settings.decision = Some(member);
    }
    for (role, member) in [("main", &file.members.main), ("decision", &file.members.decision)] {
        let Some(member) = member else { continue };
        let table = format!("members.{role}");
        for (key, value) in
            [("ctx", member.ctx), ("threads", member.threads), ("batch", member.batch)]
        {
            if value == Some(0) {
                return Err(invalid(&table, key, "must be at least 1".into()));
            }
        }
        check_max_batch(member.max_batch, &table, &invalid)?;
    }
    for (role, member) in [("main", Some(&settings.main)), ("decision", settings.decision.as_ref())]
    {
        let Some(member) = member else { continue };
        check_remote(member, &format!("members.{role}"), &invalid)?;
    }
    let pool = &file.pool;
    if let Some(caldrix) = &pool.caldrix {
        settings.pool.caldrix = caldrix.clone();
    }
    if let Some(socket) = &pool.socket {
        settings.pool.socket = socket.clone();
    }
    if let Some(secs) = pool.start_timeout_secs {
        if secs == 0 {
            return Err(invalid("pool", "start_timeout_secs", "must be at least 1".into()));
        }
        settings.pool.start_timeout_secs = secs;
    }
    if let Some(n) = pool.max_connections {
        if n == 0 {
            return Err(invalid("pool", "max_connections", "must be at least 1".into()));
        }
        settings.pool.max_connections = n;
    }
    let d = &file.delegation;
    for (key, value, min, target) in [
        ("max_turns", d.max_turns, 1, &mut settings.delegation.max_turns),
        ("retries", d.retries, 0, &mut settings.delegation.retries),
        ("depth", d.depth, 0, &mut settings.delegation.depth),
        ("parallel", d.parallel, 1, &mut settings.delegation.parallel),
    ] {
        if let Some(value) = value {
            if value < min {
                return Err(invalid("delegation", key, format!("must be at least {min}")));
            }
            *target = value;
        }
    }
    if let Some(tools) = &d.planner_tools {
        settings.delegation.planner_tools = tools.clone();
    }
    let c = &file.context;
    if let Some(soft) = c.soft_ratio {
        settings.context.soft_ratio = soft;
    }
    if let Some(target) = c.target_ratio {
        settings.context.target_ratio = target;
    }
    if let Some(guard) = c.repeat_guard {
        settings.context.repeat_guard = guard;
    }
    if let Some(last) = c.last_turn_final {
        settings.context.last_turn_final = last;
    }
    if let Some(claude) = file.hooks.claude_settings {
        settings.hooks.claude_settings = claude;
    }
    let ctx = &settings.context;
    if !(ctx.soft_ratio > 0.0 && ctx.soft_ratio < 1.0) {
        return Err(invalid("context", "soft_ratio", "must be between 0 and 1".into()));
    }
    if !(ctx.target_ratio > 0.0 && ctx.target_ratio < ctx.soft_ratio) {
        let key = if c.target_ratio.is_some() { "target_ratio" } else { "soft_ratio" };
        return Err(invalid(
            "context",
            key,
            format!(
                "target_ratio ({}) must be above 0 and below soft_ratio ({})",
                ctx.target_ratio, ctx.soft_ratio
            ),
        ));
    }
    if let Some(n) = c.max_new_tokens {
        if n < 64 {
            return Err(invalid("context", "max_new_tokens", "must be at least 64".into()));
        }
        settings.context.max_new_tokens = n;
    }
    if let Some(n) = c.skills_chars {
        settings.context.skills_chars = n;
    }
    if let Some(enabled) = &file.plugins.enabled {
        if let Some(empty) = enabled.iter().find(|n| n.trim().is_empty()) {
            return Err(invalid("plugins", "enabled", format!("holds an empty name {empty:?}")));
        }
        settings.plugins.enabled = enabled.clone();
    }
    if let Some(on) = file.plugins.claude_code {
        settings.plugins.claude_code = on;
    }
    apply_tune(settings, &file.tune, &invalid)?;
    for (tool, cap) in &c.tool_caps {
        if *cap < 256 {
            return Err(invalid("context.tool_caps", tool, "must be at least 256 bytes".into()));
        }
        settings.context.tool_caps.insert(tool.clone(), *cap);
    }
    Ok(())
}

/// `[tune]`: a later file's `member` or `flags` merges into an earlier file's.
fn apply_tune(
    settings: &mut Settings,
    tune: &FileTune,
    invalid: &dyn Fn(&str, &str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    if let Some(n) = tune.sessions {
        if n == 0 {
            return Err(invalid("tune", "sessions", "must be at least 1".into()));
        }
        settings.tune.sessions = n;
    }
    if tune.member.is_none() && tune.flags.is_none() {
        return Ok(());
    }
    let mut member = settings.tune.member.clone().unwrap_or(Member::of(String::new()));
    if let Some(model) = &tune.member {
        if model.trim().is_empty() {
            return Err(invalid("tune", "member", "is empty".into()));
        }
        member.model = model.clone();
    }
    if let Some(flags) = &tune.flags {
        for (key, value) in [("ctx", flags.ctx), ("threads", flags.threads), ("batch", flags.batch)]
        {
            if value == Some(0) {
                return Err(invalid("tune.flags", key, "must be at least 1".into()));
            }
        }
        check_max_batch(flags.max_batch, "tune.flags", invalid)?;
        let file = FileMember {
            model: None,
            ctx: flags.ctx,
            threads: flags.threads,
            batch: flags.batch,
            gpu_layers: flags.gpu_layers,
            max_batch: flags.max_batch,
            fast_forward: flags.fast_forward,
            draft: flags.draft,
            api_key_env: None,
            tokenizer: None,
            render: None,
        };
        merge_member(&mut member, &file);
    }
    if member.model.is_empty() {
        return Err(invalid("tune", "flags", "`tune.flags` needs `tune.member`".into()));
    }
    settings.tune.member = Some(member);
    Ok(())
}

fn merge_member(member: &mut Member, file: &FileMember) {
    if let Some(model) = &file.model {
        member.model = model.clone();
    }
    member.ctx = file.ctx.or(member.ctx);
    member.threads = file.threads.or(member.threads);
    member.batch = file.batch.or(member.batch);
    member.gpu_layers = file.gpu_layers.or(member.gpu_layers);
    member.max_batch = file.max_batch.or(member.max_batch);
    member.fast_forward = file.fast_forward.or(member.fast_forward);
    member.draft = file.draft.or(member.draft);
    if file.api_key_env.is_some() {
        member.api_key_env.clone_from(&file.api_key_env);
    }
    if file.tokenizer.is_some() {
        member.tokenizer.clone_from(&file.tokenizer);
    }
    member.render = file.render.or(member.render);
}

/// A remote member's reference and settings, refused by key when malformed: `openai:URL#MODEL`
/// with an `http://` URL, `api_key_env` a variable's name (never the key itself), and both
/// settings only on a remote member. (The pool checks again, and probes the engine.)
fn check_remote(
    member: &Member,
    table: &str,
    invalid: &dyn Fn(&str, &str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    if !member.is_remote() {
        let render = member.render.map(|r| r.as_str().to_owned());
        for (key, value) in [
            ("api_key_env", &member.api_key_env),
            ("tokenizer", &member.tokenizer),
            ("render", &render),
        ] {
            if value.is_some() {
                return Err(invalid(
                    table,
                    key,
                    "is a setting of a remote member (model = \"openai:URL#MODEL\")".into(),
                ));
            }
        }
        return Ok(());
    }
    let rest = member.model.trim_start_matches("openai:");
    match rest.split_once('#') {
        Some((url, model)) if url.starts_with("http://") && url.len() > 7 && !model.is_empty() => {}
        Some((url, _)) if url.starts_with("https://") => {
            return Err(invalid(
                table,
                "model",
                "a remote engine is reached over plain http:// in this build (docs/remote.md)"
                    .into(),
            ));
        }
        _ => {
            return Err(invalid(
                table,
                "model",
                format!("a remote member is openai:http://HOST:PORT#MODEL, not {:?}", member.model),
            ));
        }
    }
    if let Some(var) = &member.api_key_env {
        let mut chars = var.chars();
        let first = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !first || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(invalid(
                table,
                "api_key_env",
                "must be an environment variable's name (letters, digits and _), not the key"
                    .into(),
            ));
        }
    }
    if member.tokenizer.as_deref().is_some_and(str::is_empty) {
        return Err(invalid(table, "tokenizer", "must name a model".into()));
    }
    if member.tokenizer.is_some() && member.render == Some(caldrix_proto::Render::Engine) {
        return Err(invalid(
            table,
            "render",
            "\"engine\" has the engine render and count, a tokenizer has the pool do both: \
             give one or the other"
                .into(),
        ));
    }
    Ok(())
}

/// `max_batch` of a member's table: the pool's bound, refused here by key.
fn check_max_batch(
    value: Option<u32>,
    table: &str,
    invalid: &dyn Fn(&str, &str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let max = caldrix_proto::MAX_BATCH;
    match value {
        Some(n) if !(1..=max).contains(&n) => {
            Err(invalid(table, "max_batch", format!("must be between 1 and {max}, not {n}")))
        }
        _ => Ok(()),
    }
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// `table.key` for the key assigned on a line, with the table header above it.
fn key_at(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let here = lines.get(line.checked_sub(1)?)?.trim();
    if here.starts_with('[') {
        // A broken table header: name the table.
        return Some(here.trim_matches(['[', ']']).trim().to_owned()).filter(|t| !t.is_empty());
    }
    let key = here.split_once('=').map(|(k, _)| k.trim().trim_matches('"').to_owned());
    let table = lines[..line - 1].iter().rev().find_map(|l| table_header(l));
    match (table, key) {
        (Some(table), Some(key)) => Some(format!("{table}.{key}")),
        (None, Some(key)) => Some(key),
        (Some(table), None) => Some(table),
        (None, None) => None,
    }
}

fn table_header(line: &str) -> Option<String> {
    let line = line.trim();
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    Some(inner.trim_matches(['[', ']']).trim().to_owned())
}

/// The line where `key` is set in `table` (`""` for the top level).
fn find_key(text: &str, table: &str, key: &str) -> Option<usize> {
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(header) = table_header(line) {
            current = header;
            continue;
        }
        let Some((k, _)) = line.split_once('=') else { continue };
        let k = k.trim().trim_matches('"');
        // Dotted keys (`context.soft_ratio = 0.6` at the top level) count too.
        let full = if current.is_empty() { k.to_owned() } else { format!("{current}.{k}") };
        let wanted = if table.is_empty() { key.to_owned() } else { format!("{table}.{key}") };
        if full == wanted {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> crate::Env {
        crate::Env::for_tests("/home/u")
    }

    fn check(text: &str) -> Result<Settings, ConfigError> {
        let mut settings = defaults(&env());
        apply(&mut settings, Path::new("/p/.aerix/settings.toml"), text).map(|()| settings)
    }

    #[test]
    fn defaults_are_the_spec_figures() {
        let s = defaults(&env());
        assert_eq!((s.context.soft_ratio, s.context.target_ratio), (0.70, 0.50));
        assert_eq!(s.pool.start_timeout_secs, 900);
        assert_eq!(s.pool.max_connections, 4);
        assert_eq!(
            (
                s.delegation.max_turns,
                s.delegation.retries,
                s.delegation.depth,
                s.delegation.parallel
            ),
            (40, 2, 3, 4)
        );
        assert_eq!(s.delegation.planner_tools, ["repo_map", "agent", "plan", "context"]);
        assert_eq!(s.pool.socket, PathBuf::from("/run/user/test/caldrix/pool.sock"));
    }

    #[test]
    fn keys_merge_over_defaults() {
        let s = check(
            "max_turns = 12\n[members.main]\nmodel = \"m.gguf\"\nctx = 4096\n\
             [members.decision]\nmodel = \"d.gguf\"\n[context.tool_caps]\nread = 1000\n",
        )
        .unwrap();
        assert_eq!(s.max_turns, 12);
        assert_eq!((s.main.model.as_str(), s.main.ctx), ("m.gguf", Some(4096)));
        assert_eq!(s.decision.unwrap().model, "d.gguf");
        assert_eq!(s.context.tool_cap("read"), 1000);
        assert_eq!(s.context.tool_cap("bash"), 16_000);
        assert_eq!(s.context.tool_cap("unheard_of"), DEFAULT_TOOL_CAP);
        assert!(s.context.repeat_guard, "on by default");
        assert!(!check("[context]\nrepeat_guard = false\n").unwrap().context.repeat_guard);
        assert!(!s.context.last_turn_final, "off by default");
        assert!(check("[context]\nlast_turn_final = true\n").unwrap().context.last_turn_final);
        assert!(s.hooks.claude_settings, "on by default");
        assert!(!check("[hooks]\nclaude_settings = false\n").unwrap().hooks.claude_settings);
    }

    #[test]
    fn the_tune_table_names_a_reflection_member_with_its_flags() {
        let s = defaults(&env());
        assert_eq!(s.tune, TuneSettings { member: None, sessions: 20 });
        let s = check(
            "[tune]\nmember = \"r.gguf\"\nsessions = 5\n[tune.flags]\nctx = 2048\nthreads = 1\n",
        )
        .unwrap();
        let member = s.tune.member.unwrap();
        assert_eq!(
            (member.model.as_str(), member.ctx, member.threads),
            ("r.gguf", Some(2048), Some(1))
        );
        assert_eq!(s.tune.sessions, 5);
        let e = check("[tune]\nsessions = 0\n").unwrap_err().to_string();
        assert!(e.contains("tune.sessions") && e.contains("at least 1"), "{e}");
        let e = check("[tune.flags]\nctx = 2048\n").unwrap_err().to_string();
        assert!(e.contains("needs `tune.member`"), "{e}");
        let e = check("[tune]\nmodel = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains("model"), "{e}");
    }

    #[test]
    fn a_member_s_batching_flags_are_kept_and_max_batch_is_bounded_by_key() {
        let s = defaults(&env());
        assert_eq!((s.main.max_batch, s.main.fast_forward, s.main.draft), (None, None, None));
        let s = check(
            "[members.main]\nmax_batch = 4\nfast_forward = false\n\
             [members.decision]\nmodel = \"d.gguf\"\ndraft = false\n\
             [tune]\nmember = \"r.gguf\"\n[tune.flags]\nmax_batch = 2\n",
        )
        .unwrap();
        assert_eq!(
            (s.main.max_batch, s.main.fast_forward, s.main.draft),
            (Some(4), Some(false), None)
        );
        assert_eq!(s.decision.unwrap().draft, Some(false));
        assert_eq!(s.tune.member.unwrap().max_batch, Some(2));
        for (text, key) in [
            ("[members.main]\nmax_batch = 0\n", "members.main.max_batch"),
            ("[members.main]\nmax_batch = 17\n", "members.main.max_batch"),
            ("[members.decision]\nmodel = \"d\"\nmax_batch = 99\n", "members.decision.max_batch"),
            ("[tune]\nmember = \"r\"\n[tune.flags]\nmax_batch = 0\n", "tune.flags.max_batch"),
        ] {
            let e = check(text).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")) && e.contains("between 1 and 16"), "{e}");
        }
    }

    #[test]
    fn a_remote_member_s_settings_are_kept_and_malformed_ones_refused_by_key() {
        let s = check(
            "[members.main]\nmodel = \"openai:http://h:8080#qwen\"\ntokenizer = \"q.gguf\"\n\
             api_key_env = \"TEAM_KEY\"\n",
        )
        .unwrap();
        assert!(s.main.is_remote());
        assert_eq!(
            (s.main.tokenizer.as_deref(), s.main.api_key_env.as_deref()),
            (Some("q.gguf"), Some("TEAM_KEY"))
        );
        let s =
            check("[members.main]\nmodel = \"openai:http://h:8000#qwen\"\nrender = \"engine\"\n")
                .unwrap();
        assert_eq!(s.main.render, Some(caldrix_proto::Render::Engine));
        let e = check("[members.main]\nmodel = \"openai:http://h#m\"\nrender = \"server\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("render") && e.contains("engine"), "{e}");
        for (text, key, said) in [
            ("[members.main]\nmodel = \"openai:h#m\"\n", "members.main.model", "openai:http://"),
            ("[members.main]\nmodel = \"openai:http://h\"\n", "members.main.model", "#MODEL"),
            (
                "[members.main]\nmodel = \"openai:https://h#m\"\n",
                "members.main.model",
                "plain http",
            ),
            (
                "[members.main]\nmodel = \"openai:http://h#m\"\napi_key_env = \"sk-123 x\"\n",
                "members.main.api_key_env",
                "not the key",
            ),
            (
                "[members.decision]\nmodel = \"d.gguf\"\ntokenizer = \"t.gguf\"\n",
                "members.decision.tokenizer",
                "a setting of a remote member",
            ),
            (
                "[members.decision]\nmodel = \"d.gguf\"\nrender = \"pool\"\n",
                "members.decision.render",
                "a setting of a remote member",
            ),
            (
                "[members.main]\nmodel = \"openai:http://h#m\"\ntokenizer = \"t\"\nrender = \"engine\"\n",
                "members.main.render",
                "one or the other",
            ),
        ] {
            let e = check(text).unwrap_err().to_string();
            assert!(e.contains(&format!("`{key}`")) && e.contains(said), "{text}: {e}");
        }
    }

    #[test]
    fn plugins_are_enabled_by_name_and_claude_code_s_are_read_by_default() {
        assert_eq!(defaults(&env()).plugins, PluginSettings { enabled: vec![], claude_code: true });
        let s =
            check("[plugins]\nenabled = [\"fmt\", \"review@mkt\"]\nclaude_code = false\n").unwrap();
        assert_eq!(s.plugins.enabled, ["fmt", "review@mkt"]);
        assert!(!s.plugins.claude_code);
        let e = check("[plugins]\nenabled = [\" \"]\n").unwrap_err().to_string();
        assert!(e.contains(":2:") && e.contains("`plugins.enabled`"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let cases = [
            ("[context]\nsoft_ratio = \"high\"\n", 2, "context.soft_ratio"),
            ("[pool]\nmax_conections = 3\n", 2, "pool.max_conections"),
            ("[delegation]\nparallel = 0\n", 2, "delegation.parallel"),
            ("[context]\nsoft_ratio = 0.4\n", 2, "context.soft_ratio"),
            ("max_turns = 3\n[members.main\nmodel = 1\n", 2, "members.main"),
            ("[members.decision]\nctx = 2048\n", 0, "members.decision.model"),
        ];
        for (text, line, key) in cases {
            let error = check(text).unwrap_err();
            let message = error.to_string();
            assert!(message.starts_with("/p/.aerix/settings.toml"), "{message}");
            if line > 0 {
                assert!(message.contains(&format!(":{line}:")), "{text:?}: {message}");
            }
            assert!(message.contains(&format!("`{key}`")), "{text:?}: {message}");
        }
    }
}
