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
    /// What the project's files would widen, trusted or not (its file, `key = value`): the
    /// trust step lists and hashes it with what the project would run.
    pub widening: Vec<(PathBuf, String)>,
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
struct Table {
    lists: [(Kind, Vec<String>); 3],
    default_mode: Option<PermissionMode>,
    additional: Vec<String>,
}

/// Whether a file is the user's own or comes with the project.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    User,
    Project,
}

/// Reads every source (a missing file holds nothing). `project_trusted`: whether the project's
/// files may widen what calls may do.
pub fn load(sources: &Sources<'_>, project_trusted: bool) -> Loaded {
    let mut loaded = Loaded {
        deny: Vec::new(),
        ask: Vec::new(),
        allow: Vec::new(),
        default_mode: None,
        additional_directories: Vec::new(),
        notes: Vec::new(),
        widening: Vec::new(),
        cwd: sources.cwd.clone(),
        root: sources.root.clone(),
        home: sources.home.clone(),
        store: sources.remembered.clone(),
    };
    let anchors =
        |source: PathBuf| Anchors { source, cwd: sources.cwd.clone(), home: sources.home.clone() };
    let aerix = |scope: SettingsScope| sources.aerix.iter().filter(move |f| f.scope == scope);
    let home_claude = sources.home.as_ref().map(|h| h.join(".claude"));
    // In order: the last to set `defaultMode` sets it (local over project over user).
    if let Some(path) = &sources.claude_user {
        let source = home_claude.clone().unwrap_or_else(|| sources.cwd.clone());
        loaded.claude_file(path, Owner::User, &anchors(source), project_trusted);
    }
    for file in aerix(SettingsScope::User) {
        let source = file.path.parent().map_or_else(|| sources.cwd.clone(), Path::to_owned);
        loaded.table(&file.path, Owner::User, aerix_table(file), &anchors(source), true);
    }
    if let Some(path) = &sources.remembered {
        loaded.claude_file(path, Owner::User, &anchors(sources.root.clone()), project_trusted);
    }
    loaded.claude_file(
        &sources.claude_project,
        Owner::Project,
        &anchors(sources.root.clone()),
        project_trusted,
    );
    for file in aerix(SettingsScope::Project) {
        let table = aerix_table(file);
        loaded.table(
            &file.path,
            Owner::Project,
            table,
            &anchors(sources.root.clone()),
            project_trusted,
        );
    }
    loaded.claude_file(
        &sources.claude_local,
        Owner::Project,
        &anchors(sources.cwd.clone()),
        project_trusted,
    );
    for file in aerix(SettingsScope::Local) {
        let table = aerix_table(file);
        loaded.table(
            &file.path,
            Owner::Project,
            table,
            &anchors(sources.cwd.clone()),
            project_trusted,
        );
    }
    loaded
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

impl Loaded {
    fn note(&mut self, path: &Path, what: String) {
        self.notes.push(format!("permissions: {}: {what}", path.display()));
    }

    /// A Claude Code settings file's `permissions` (its other keys are others'): a missing file
    /// or key holds nothing; a file that is not JSON, or a key of the wrong shape, is a note.
    fn claude_file(&mut self, path: &Path, owner: Owner, anchors: &Anchors, trusted: bool) {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => return self.note(path, format!("{e}; its permissions are skipped")),
        };
        let value: Value = match serde_json::from_str(&text) {
            Ok(value) => value,
            Err(e) => {
                return self.note(path, format!("not JSON ({e}); its permissions are skipped"));
            }
        };
        let Some(permissions) = value.get("permissions") else { return };
        let Some(permissions) = permissions.as_object() else {
            return self.note(path, "`permissions` is not an object; skipped".to_owned());
        };
        let mut list = |key: &str| -> Vec<String> {
            match permissions.get(key) {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(|item| match item {
                        Value::String(rule) => Some(rule.clone()),
                        other => {
                            self.notes.push(format!(
                                "permissions: {}: permissions.{key} rule {other} was skipped: \
                                 not a string",
                                path.display()
                            ));
                            None
                        }
                    })
                    .collect(),
                Some(_) => {
                    self.notes.push(format!(
                        "permissions: {}: permissions.{key} is not a list of rules; skipped",
                        path.display()
                    ));
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
                    self.note(path, format!("permissions.defaultMode is skipped: {why}"));
                    None
                }
            },
            Some(_) => {
                self.note(path, "permissions.defaultMode is not a string; skipped".to_owned());
                None
            }
        };
        self.table(path, owner, Table { lists, default_mode, additional }, anchors, trusted);
    }

    /// One file's table: its rules parsed (a bad one a note), what widens left out of an
    /// untrusted project's file (one note each).
    fn table(&mut self, path: &Path, owner: Owner, table: Table, anchors: &Anchors, trusted: bool) {
        let narrows_only = owner == Owner::Project && !trusted;
        if owner == Owner::Project {
            let mut widen = |what: String| self.widening.push((path.to_owned(), what));
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
