//! Where rules come from, and the trust rule. Claude Code's settings files (`~/.claude/
//! settings.json`, the project's `.claude/settings.json` and `settings.local.json`) and aerix's
//! own `[permissions]` tables each add their rules; the last file that sets `defaultMode` sets
//! it. A project's files only narrow until the project is trusted: their `deny` and `ask` rules
//! always apply, their `allow` rules, `defaultMode` and `additionalDirectories` only once it is
//! (a cloned repository must not pre-approve `Bash(*)` or set `bypassPermissions`); each part
//! left out is one note. A rule that cannot be used is one note naming the file and the rule,
//! and is skipped, as Claude Code skips it with a warning; the file's other rules apply.

use std::path::{Path, PathBuf};

use aerix_config::{FilePermissions, PermissionMode, SettingsScope};
use serde_json::Value;

use crate::path::{Anchors, normalize};
use crate::rule::{Kind, Rule};

/// The files and directories rules are read for.
#[derive(Clone, Debug)]
pub struct Sources<'a> {
    /// `~/.claude/settings.json`: the user's own (its `/` is `~/.claude`, as Claude Code's).
    pub claude_user: Option<PathBuf>,
    /// `<root>/.claude/settings.json` (its `/` is the project root).
    pub claude_project: PathBuf,
    /// `<root>/.claude/settings.local.json` (its `/` is the working directory).
    pub claude_local: PathBuf,
    /// aerix's settings files' `[permissions]` tables, in the order they were read.
    pub aerix: &'a [FilePermissions],
    /// The project's "always" answers (`store_path`): the user's own, `/` the project root.
    pub remembered: Option<PathBuf>,
    pub cwd: PathBuf,
    pub root: PathBuf,
    pub home: Option<PathBuf>,
}

/// What the files say, before a mode and a front make `Permissions` of it.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub(crate) deny: Vec<Rule>,
    pub(crate) ask: Vec<Rule>,
    pub(crate) allow: Vec<Rule>,
    /// The last `defaultMode` a file that may set it sets.
    pub default_mode: Option<PermissionMode>,
    /// Every `additionalDirectories` entry a file that may set it gives, absolute.
    pub additional_directories: Vec<PathBuf>,
    /// One line per rule skipped and per part of an untrusted project's file left out.
    pub notes: Vec<String>,
    pub(crate) cwd: PathBuf,
    pub(crate) root: PathBuf,
    pub(crate) home: Option<PathBuf>,
    pub(crate) store: Option<PathBuf>,
}

impl Loaded {
    /// How many rules of each list apply: (deny, ask, allow).
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.deny.len(), self.ask.len(), self.allow.len())
    }
}

/// A file's tables, whoever wrote them.
#[derive(Clone, Debug)]
struct Table {
    lists: [(Kind, Vec<String>); 3],
    default_mode: Option<PermissionMode>,
    additional: Vec<String>,
}

/// Whether a file is the user's own or comes with the project.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    User,
    Project,
}

/// The rule files as read, once, before the trust rule: the trust step lists and hashes what
/// the project's would widen ([`Read::widening`]) and the session's rules come from the same
/// reads ([`Read::load`]), so a file rewritten in between changes neither.
#[derive(Clone, Debug)]
pub struct Read {
    files: Vec<FileRead>,
    cwd: PathBuf,
    root: PathBuf,
    home: Option<PathBuf>,
    store: Option<PathBuf>,
}

/// One file's table (`None`: nothing to apply) and the notes its reading made.
#[derive(Clone, Debug)]
struct FileRead {
    path: PathBuf,
    owner: Owner,
    /// What its rules' `/` is.
    source: PathBuf,
    table: Option<Table>,
    notes: Vec<String>,
}

/// Reads every source (a missing file holds nothing). `project_trusted`: whether the project's
/// files may widen what calls may do.
pub fn load(sources: &Sources<'_>, project_trusted: bool) -> Loaded {
    read(sources).load(project_trusted)
}

/// Reads every source once, in the order their rules apply: the last to set `defaultMode` sets
/// it (local over project over user).
pub fn read(sources: &Sources<'_>) -> Read {
    // A user's table's `/` is its file's directory; a project's, the root or the cwd.
    let aerix = |scope: SettingsScope, owner: Owner, source: Option<PathBuf>| -> Vec<FileRead> {
        let at = |file: &FilePermissions| {
            source.clone().unwrap_or_else(|| {
                file.path.parent().map_or_else(|| sources.cwd.clone(), Path::to_owned)
            })
        };
        sources
            .aerix
            .iter()
            .filter(|f| f.scope == scope)
            .map(|file| FileRead {
                path: file.path.clone(),
                owner,
                source: at(file),
                table: Some(aerix_table(file)),
                notes: Vec::new(),
            })
            .collect()
    };
    let mut files = Vec::new();
    if let Some(path) = &sources.claude_user {
        let home_claude = sources.home.as_ref().map(|h| h.join(".claude"));
        files.push(claude_file(
            path,
            Owner::User,
            home_claude.unwrap_or_else(|| sources.cwd.clone()),
        ));
    }
    files.extend(aerix(SettingsScope::User, Owner::User, None));
    if let Some(path) = &sources.remembered {
        files.push(claude_file(path, Owner::User, sources.root.clone()));
    }
    files.push(claude_file(&sources.claude_project, Owner::Project, sources.root.clone()));
    files.extend(aerix(SettingsScope::Project, Owner::Project, Some(sources.root.clone())));
    files.push(claude_file(&sources.claude_local, Owner::Project, sources.cwd.clone()));
    files.extend(aerix(SettingsScope::Local, Owner::Project, Some(sources.cwd.clone())));
    Read {
        files,
        cwd: sources.cwd.clone(),
        root: sources.root.clone(),
        home: sources.home.clone(),
        store: sources.remembered.clone(),
    }
}

impl Read {
    /// The rules, the project's files only narrowing unless `project_trusted`.
    pub fn load(&self, project_trusted: bool) -> Loaded {
        let mut loaded = Loaded {
            deny: Vec::new(),
            ask: Vec::new(),
            allow: Vec::new(),
            default_mode: None,
            additional_directories: Vec::new(),
            notes: Vec::new(),
            cwd: self.cwd.clone(),
            root: self.root.clone(),
            home: self.home.clone(),
            store: self.store.clone(),
        };
        for file in &self.files {
            loaded.notes.extend(file.notes.iter().cloned());
            if let Some(table) = &file.table {
                let anchors = Anchors {
                    source: file.source.clone(),
                    cwd: self.cwd.clone(),
                    home: self.home.clone(),
                };
                loaded.table(&file.path, file.owner, table.clone(), &anchors, project_trusted);
            }
        }
        loaded
    }

    /// What the project's files would widen, trusted or not (its file, `key = value`): the
    /// trust step lists and hashes it with what the project would run.
    pub fn widening(&self) -> Vec<(PathBuf, String)> {
        let mut widening = Vec::new();
        for file in self.files.iter().filter(|f| f.owner == Owner::Project) {
            let Some(table) = &file.table else { continue };
            let mut widen = |what: String| widening.push((file.path.clone(), what));
            for (kind, rules) in &table.lists {
                if *kind == Kind::Allow {
                    rules.iter().for_each(|r| widen(format!("permissions.allow = {r}")));
                }
            }
            if let Some(mode) = table.default_mode {
                widen(format!("permissions.defaultMode = {mode}"));
            }
            table
                .additional
                .iter()
                .for_each(|d| widen(format!("permissions.additionalDirectories = {d}")));
        }
        widening
    }
}

fn aerix_table(file: &FilePermissions) -> Table {
    let t = &file.table;
    Table {
        lists: [
            (Kind::Deny, t.deny.clone()),
            (Kind::Ask, t.ask.clone()),
            (Kind::Allow, t.allow.clone()),
        ],
        default_mode: t.default_mode,
        additional: t.additional_directories.clone(),
    }
}

/// A Claude Code settings file's `permissions` (its other keys are others'): a missing file or
/// key holds nothing; a file that is not JSON, or a key of the wrong shape, is a note.
fn claude_file(path: &Path, owner: Owner, source: PathBuf) -> FileRead {
    let mut read =
        FileRead { path: path.to_owned(), owner, source, table: None, notes: Vec::new() };
    let note = |what: String| format!("permissions: {}: {what}", path.display());
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return read,
        Err(e) => {
            read.notes.push(note(format!("{e}; its permissions are skipped")));
            return read;
        }
    };
    let value: Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(e) => {
            read.notes.push(note(format!("not JSON ({e}); its permissions are skipped")));
            return read;
        }
    };
    let Some(permissions) = value.get("permissions") else { return read };
    let Some(permissions) = permissions.as_object() else {
        read.notes.push(note("`permissions` is not an object; skipped".to_owned()));
        return read;
    };
    let notes = &mut read.notes;
    let mut list = |key: &str| -> Vec<String> {
        match permissions.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|item| match item {
                    Value::String(rule) => Some(rule.clone()),
                    other => {
                        notes.push(note(format!(
                            "permissions.{key} rule {other} was skipped: not a string"
                        )));
                        None
                    }
                })
                .collect(),
            Some(_) => {
                notes.push(note(format!("permissions.{key} is not a list of rules; skipped")));
                Vec::new()
            }
        }
    };
    let lists =
        [(Kind::Deny, list("deny")), (Kind::Ask, list("ask")), (Kind::Allow, list("allow"))];
    let additional = list("additionalDirectories");
    let default_mode = match permissions.get("defaultMode") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => match name.parse::<PermissionMode>() {
            Ok(mode) => Some(mode),
            Err(why) => {
                notes.push(note(format!("permissions.defaultMode is skipped: {why}")));
                None
            }
        },
        Some(_) => {
            notes.push(note("permissions.defaultMode is not a string; skipped".to_owned()));
            None
        }
    };
    read.table = Some(Table { lists, default_mode, additional });
    read
}

impl Loaded {
    fn note(&mut self, path: &Path, what: String) {
        self.notes.push(format!("permissions: {}: {what}", path.display()));
    }

    /// One file's table: its rules parsed (a bad one a note), what widens left out of an
    /// untrusted project's file (one note each).
    fn table(&mut self, path: &Path, owner: Owner, table: Table, anchors: &Anchors, trusted: bool) {
        let narrows_only = owner == Owner::Project && !trusted;
        let untrusted = "the project is not trusted, so";
        for (kind, rules) in table.lists {
            if kind == Kind::Allow && narrows_only && !rules.is_empty() {
                let quoted: Vec<String> = rules.iter().map(|r| format!("`{r}`")).collect();
                self.note(
                    path,
                    format!(
                        "{untrusted} its allow rules are ignored: {} (deny and ask rules apply)",
                        quoted.join(", ")
                    ),
                );
                continue;
            }
            for text in rules {
                match Rule::parse(&text, kind, anchors) {
                    Ok(rule) => match kind {
                        Kind::Deny => self.deny.push(rule),
                        Kind::Ask => self.ask.push(rule),
                        Kind::Allow => self.allow.push(rule),
                    },
                    Err(why) => self.note(
                        path,
                        format!("permissions.{} rule `{text}` was skipped: {why}", kind.key()),
                    ),
                }
            }
        }
        if let Some(mode) = table.default_mode {
            if narrows_only {
                self.note(path, format!("{untrusted} its default mode `{mode}` is ignored"));
            } else {
                self.default_mode = Some(mode);
            }
        }
        if !table.additional.is_empty() {
            if narrows_only {
                self.note(
                    path,
                    format!(
                        "{untrusted} its additional directories are ignored: {}",
                        table.additional.join(", ")
                    ),
                );
                return;
            }
            for dir in table.additional {
                let expanded = match (dir.strip_prefix("~/"), &anchors.home) {
                    (Some(rest), Some(home)) => home.join(rest),
                    _ => PathBuf::from(&dir),
                };
                // A relative entry is relative to the project root.
                let dir = normalize(&expanded, &self.root);
                if !self.additional_directories.contains(&dir) {
                    self.additional_directories.push(dir);
                }
            }
        }
    }
}
