//! `settings.toml`: the user's, the project's and the project's local overrides, merged key by
//! key (later files win), every key checked, every error naming its file, line and key.
//!
//! `keys.rs` declares every key once (`declare.rs` says how); this file reads a file's tables
//! into them and checks what spans several keys (a decision member's model, a remote member's
//! settings, `target_ratio` under `soft_ratio`, `tune.flags` with `tune.member`).

pub(crate) mod declare;
mod keys;
mod layers;

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

use crate::{ConfigError, FilePermissions, SettingsScope};
use declare::{Bad, Class, Section, unknown};
pub use keys::{
    ContextSettings, DEFAULT_MODEL, DEFAULT_TOOL_CAP, Delegation, EditFormat, HookSettings,
    LOCAL_ATTEMPTS, MAX_ATTEMPTS, McpServer, McpServers, McpSettings, Member, PermissionSettings,
    PluginSettings, PoolSettings, SandboxSettings, Settings, TuneSettings, VerifySettings,
    valid_profile_name,
};
pub use layers::{Layered, ProjectSetting, load_layered};

/// The tables of a settings file besides the top-level keys, in the order errors list them.
const TABLES: [&str; 11] = [
    "members",
    "pool",
    "delegation",
    "context",
    "hooks",
    "plugins",
    "tune",
    "sandbox",
    "verify",
    "mcp",
    "permissions",
];
const ROLES: [&str; 2] = ["main", "decision"];

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

/// Whether the project's files are trusted, for what their keys may set (see [`Class`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Only the keys declared inert (and the stricter value of a protection).
    Untrusted,
    /// Every key but the user's own and a protection's weaker value.
    Trusted,
}

/// What a project's files set that did not apply.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Gated keys of an untrusted project: they apply once it is trusted.
    pub withheld: Vec<ProjectSetting>,
    /// Keys a project may never set, or a protection it would weaken: never applied.
    pub refused: Vec<ProjectSetting>,
}

/// Reads and merges the settings files that exist (a missing file is no error) over the
/// defaults, the project's files trusted (what the project would set; the run's settings come
/// from [`load_layered`], which gates them).
pub fn load(paths: &SettingsPaths, env: &crate::Env) -> Result<Settings, ConfigError> {
    load_as(paths, env, Admit::Trusted).map(|(settings, _)| settings)
}

/// [`load`], a project's keys admitted as `admit` says, with what was held back.
pub(crate) fn load_as(
    paths: &SettingsPaths,
    env: &crate::Env,
    admit: Admit,
) -> Result<(Settings, Held), ConfigError> {
    apply_as(&read_files(paths)?, env, admit)
}

/// A settings file's text, read once (`load_layered` applies it three ways).
pub(crate) struct FileText {
    path: PathBuf,
    text: String,
    scope: SettingsScope,
}

impl FileText {
    pub(crate) fn is_user(&self) -> bool {
        self.scope == SettingsScope::User
    }
}

/// The files that exist, in the order they apply.
pub(crate) fn read_files(paths: &SettingsPaths) -> Result<Vec<FileText>, ConfigError> {
    let files = [
        (&paths.user, SettingsScope::User),
        (&paths.project, SettingsScope::Project),
        (&paths.local, SettingsScope::Local),
    ];
    let mut texts = Vec::new();
    for (path, scope) in files {
        let Some(path) = path else { continue };
        match std::fs::read_to_string(path) {
            Ok(text) => texts.push(FileText { path: path.clone(), text, scope }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(ConfigError::Read { path: path.clone(), error }),
        }
    }
    Ok(texts)
}

/// The files' settings as `admit` lets their keys apply.
pub(crate) fn apply_as(
    texts: &[FileText],
    env: &crate::Env,
    admit: Admit,
) -> Result<(Settings, Held), ConfigError> {
    let held = RefCell::new(Held::default());
    let mut settings = defaults(env);
    for FileText { path, text, scope } in texts {
        let file = File { path, text, scope: *scope, admit, held: &held };
        apply(&mut settings, &file)?;
        settings.sources.push(path.clone());
    }
    Ok((settings, held.into_inner()))
}

/// The settings when no file sets anything.
pub fn defaults(env: &crate::Env) -> Settings {
    Settings::declared(env)
}

/// One settings file being read: what its errors name, and what its keys may set.
struct File<'a> {
    path: &'a Path,
    text: &'a str,
    scope: SettingsScope,
    admit: Admit,
    held: &'a RefCell<Held>,
}

impl File<'_> {
    /// Whether `key` (dotted, from the top) of class `class` applies from this file; a key that
    /// does not is noted as withheld or refused.
    fn admits(&self, key: &str, class: Class, value: &Value) -> bool {
        if self.scope == SettingsScope::User {
            return true;
        }
        let class = match class {
            Class::Model if value.as_str().is_some_and(declare::inert_model) => Class::Inert,
            Class::Model => Class::Gated,
            other => other,
        };
        // Withheld until trust, or refused for good (the user's own, a protection's weaker value).
        let withheld = match class {
            Class::Inert => return true,
            Class::Gated if self.admit == Admit::Trusted => return true,
            Class::Narrows(stricter) if *value == stricter => return true,
            Class::Gated => true,
            _ => false,
        };
        let setting = ProjectSetting {
            key: key.to_owned(),
            value: value.to_string(),
            file: self.path.into(),
        };
        let mut held = self.held.borrow_mut();
        if withheld {
            held.withheld.push(setting)
        } else {
            held.refused.push(setting)
        }
        false
    }

    /// An error about `key` (dotted, from the top), on the line that sets it when one does.
    fn invalid(&self, key: &str, message: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_owned(),
            line: find_key(self.text, key),
            key: Some(key.to_owned()),
            message,
        }
    }

    /// A refused value of `key` in `table` (`""`: the top level), `expected` the table's keys.
    fn bad(&self, table: &str, key: &str, bad: Bad, expected: &[&str]) -> ConfigError {
        let full = if table.is_empty() { key.to_owned() } else { format!("{table}.{key}") };
        match bad {
            Bad::Unknown => self.invalid(&full, unknown(key, expected)),
            Bad::Value { entry: Some(entry), message } => {
                self.invalid(&format!("{full}.{entry}"), message)
            }
            Bad::Value { entry: None, message } => self.invalid(&full, message),
        }
    }

    /// The table a key holds, or an error naming it.
    fn table(&self, key: &str, value: Value) -> Result<Table, ConfigError> {
        match value {
            Value::Table(table) => Ok(table),
            other => Err(self.invalid(key, format!("must be a table, not {}", other.type_str()))),
        }
    }

    /// Every key of `value` (the table `name`) set on `section`; `only` narrows the keys.
    fn section<S: Section>(
        &self,
        section: &mut S,
        name: &str,
        value: Value,
        only: Option<&[&str]>,
    ) -> Result<(), ConfigError> {
        let expected = only.unwrap_or(S::KEYS);
        for (key, value) in self.table(name, value)? {
            let set = if !expected.contains(&key.as_str()) {
                Err(Bad::Unknown)
            } else if self.admits(&format!("{name}.{key}"), S::class(&key), &value) {
                section.set(&key, value)
            } else {
                Ok(())
            };
            set.map_err(|bad| self.bad(name, &key, bad, expected))?;
        }
        Ok(())
    }
}

fn apply(settings: &mut Settings, file: &File<'_>) -> Result<(), ConfigError> {
    let (path, text) = (file.path, file.text);
    let root: Table = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|span| line_of(text, span.start));
        let key = line.and_then(|line| key_at(text, line));
        ConfigError::Invalid { path: path.to_owned(), line, key, message: e.message().to_owned() }
    })?;
    let sets_target = root
        .get("context")
        .and_then(Value::as_table)
        .is_some_and(|c| c.contains_key("target_ratio"));
    for (key, value) in root {
        match key.as_str() {
            "members" => members(settings, file, value)?,
            "pool" => file.section(&mut settings.pool, "pool", value, None)?,
            "delegation" => file.section(&mut settings.delegation, "delegation", value, None)?,
            "context" => file.section(&mut settings.context, "context", value, None)?,
            "hooks" => file.section(&mut settings.hooks, "hooks", value, None)?,
            "plugins" => file.section(&mut settings.plugins, "plugins", value, None)?,
            "tune" => tune(settings, file, value)?,
            "sandbox" => file.section(&mut settings.sandbox, "sandbox", value, None)?,
            "verify" => file.section(&mut settings.verify, "verify", value, None)?,
            "mcp" => file.section(&mut settings.mcp, "mcp", value, None)?,
            // Every file's rules are kept with its scope: `aerix-permissions` applies a
            // project's deny and ask rules always and its grants only once it is trusted.
            "permissions" => {
                let mut table = PermissionSettings::declared();
                let user = File { scope: SettingsScope::User, ..*file };
                user.section(&mut table, "permissions", value, None)?;
                let scope = file.scope;
                settings.permissions.push(FilePermissions { path: path.to_owned(), scope, table });
            }
            _ => {
                let expected: Vec<&str> = Settings::KEYS.iter().chain(&TABLES).copied().collect();
                if !Settings::KEYS.contains(&key.as_str()) {
                    return Err(file.bad("", &key, Bad::Unknown, &expected));
                }
                if file.admits(&key, Settings::class(&key), &value) {
                    settings.set(&key, value).map_err(|bad| file.bad("", &key, bad, &expected))?;
                }
            }
        }
    }
    for (role, member) in [("main", Some(&settings.main)), ("decision", settings.decision.as_ref())]
    {
        let Some(member) = member else { continue };
        check_remote(member, &format!("members.{role}"), file)?;
    }
    let ctx = &settings.context;
    if !(ctx.target_ratio > 0.0 && ctx.target_ratio < ctx.soft_ratio) {
        let key = if sets_target { "target_ratio" } else { "soft_ratio" };
        return Err(file.invalid(
            &format!("context.{key}"),
            format!(
                "target_ratio ({}) must be above 0 and below soft_ratio ({})",
                ctx.target_ratio, ctx.soft_ratio
            ),
        ));
    }
    Ok(())
}

/// `[members.main]` and `[members.decision]`; a decision member needs a model (from this file
/// or an earlier one).
fn members(settings: &mut Settings, file: &File<'_>, value: Value) -> Result<(), ConfigError> {
    for (role, value) in file.table("members", value)? {
        let table = format!("members.{role}");
        match role.as_str() {
            "main" => file.section(&mut settings.main, &table, value, None)?,
            "decision" => {
                let mut member = settings.decision.clone().unwrap_or(Member::of(String::new()));
                let before = file.held.borrow().withheld.len();
                file.section(&mut member, &table, value, None)?;
                if member.model.is_empty() && file.held.borrow().withheld.len() > before {
                    // Its model is withheld until the project is trusted: no decision member.
                    continue;
                }
                if member.model.is_empty() {
                    let message = "a decision member needs a model".to_owned();
                    return Err(file.invalid("members.decision.model", message));
                }
                settings.decision = Some(member);
            }
            _ => return Err(file.bad("members", &role, Bad::Unknown, &ROLES)),
        }
    }
    Ok(())
}

/// `[tune]`: a later file's `member` or `flags` merges into an earlier file's.
fn tune(settings: &mut Settings, file: &File<'_>, value: Value) -> Result<(), ConfigError> {
    let mut table = file.table("tune", value)?;
    let [member_key, flags_key] = keys::TUNE_MEMBER;
    let model = table.remove(member_key);
    let flags = table.remove(flags_key);
    let expected: Vec<&str> = keys::TUNE_MEMBER.iter().chain(TuneSettings::KEYS).copied().collect();
    for (key, value) in table {
        if !TuneSettings::KEYS.contains(&key.as_str()) {
            return Err(file.bad("tune", &key, Bad::Unknown, &expected));
        }
        if file.admits(&format!("tune.{key}"), TuneSettings::class(&key), &value) {
            settings.tune.set(&key, value).map_err(|bad| file.bad("tune", &key, bad, &expected))?;
        }
    }
    if model.is_none() && flags.is_none() {
        return Ok(());
    }
    let mut member = settings.tune.member.clone().unwrap_or(Member::of(String::new()));
    if let Some(model) = model.filter(|m| file.admits("tune.member", Class::Model, m)) {
        let model = <String as declare::Layer>::parse(model)
            .map_err(|bad| file.bad("tune", member_key, bad, &expected))?;
        if model.trim().is_empty() {
            return Err(file.invalid("tune.member", "is empty".to_owned()));
        }
        member.model = model;
    }
    if let Some(flags) = flags {
        file.section(&mut member, "tune.flags", flags, Some(keys::FLAGS))?;
    }
    if member.model.is_empty() {
        if file.held.borrow().withheld.iter().any(|s| s.key == "tune.member") {
            return Ok(());
        }
        return Err(file.invalid("tune.flags", "`tune.flags` needs `tune.member`".to_owned()));
    }
    settings.tune.member = Some(member);
    Ok(())
}

/// A remote member's reference and settings, refused by key when malformed: `openai:URL#MODEL`
/// with an `http://` URL, `api_key_env` a variable's name (never the key itself), and both
/// settings only on a remote member. (The pool checks again, and probes the engine.)
fn check_remote(member: &Member, table: &str, file: &File<'_>) -> Result<(), ConfigError> {
    let invalid = |key: &str, message: String| file.invalid(&format!("{table}.{key}"), message);
    if !member.is_remote() {
        let render = member.render.map(|r| r.as_str().to_owned());
        for (key, value) in [
            ("api_key_env", &member.api_key_env),
            ("tokenizer", &member.tokenizer),
            ("render", &render),
        ] {
            if value.is_some() {
                return Err(invalid(
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
                "model",
                "a remote engine is reached over plain http:// in this build (docs/remote.md)"
                    .into(),
            ));
        }
        _ => {
            return Err(invalid(
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
                "api_key_env",
                "must be an environment variable's name (letters, digits and _), not the key"
                    .into(),
            ));
        }
    }
    if member.tokenizer.as_deref().is_some_and(str::is_empty) {
        return Err(invalid("tokenizer", "must name a model".into()));
    }
    if member.tokenizer.is_some() && member.render == Some(caldrix_proto::Render::Engine) {
        return Err(invalid(
            "render",
            "\"engine\" has the engine render and count, a tokenizer has the pool do both: \
             give one or the other"
                .into(),
        ));
    }
    Ok(())
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

/// The line where the dotted `key` (from the top level) is set.
fn find_key(text: &str, key: &str) -> Option<usize> {
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
        if full == key {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests;
