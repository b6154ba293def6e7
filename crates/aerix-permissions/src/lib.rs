//! Permissions in Claude Code's format: `permissions.allow`, `ask`, `deny`, `defaultMode` and
//! `additionalDirectories` from Claude Code's settings files and aerix's own `[permissions]`,
//! Claude Code's rule syntax (`Tool`, `Tool(specifier)`, `Bash(npm run test:*)`,
//! `Read(./.env)`, `Edit(/src/**)`, `mcp__server__tool`) and order (deny, then ask, then allow,
//! then the mode), and the modes (`default`, `acceptEdits`, `plan`, `bypassPermissions`,
//! `dontAsk`).
//!
//! The crate decides; it asks no one and runs nothing. [`Permissions::check`] gives a call's
//! [`Verdict`]; aerix-agent's runtime checks every call with it, and asks the user (the
//! screen) when the verdict says to. Headless runs never ask: their verdict is
//! allow or deny already ([`Front`]).

mod command;
mod decide;
mod load;
mod path;
mod remember;
mod rule;
mod shell;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use aerix_turn::tools::Key;
use serde_json::Value;

pub use aerix_config::PermissionMode as Mode;
pub use load::{Loaded, Read, Sources, load, read};
pub use remember::store_path;
pub use rule::Kind;

use decide::{CallView, Dirs, Doubt, MAX_ALWAYS, Part, held_allows};
use path::Anchors;
use rule::Rule;

/// Who answers when a call needs asking about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Front {
    /// `aerix -p`: no one. An ask rule denies, as does a deny or ask rule that may match what
    /// a command leaves unknown until it runs; the mode's own asking lets the call through
    /// (`default`, `acceptEdits`) or denies it (`plan`, but for reads).
    Headless,
    /// The screen: the user is asked.
    Screen,
}

/// What a call may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused, with the reason the model reads (`denied by permission rule Bash(rm:*)`).
    Deny(String),
    /// Ask the user first: why, and the rules an "always for this project" answer keeps (none:
    /// not offered).
    Ask {
        reason: String,
        always: Vec<String>,
    },
}

/// An agent definition's tool patterns (`Bash(git diff:*)`, as written) holding the agent it
/// runs and every piece that agent delegates to: the runtime carries them on each agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub definition: String,
    pub patterns: Vec<String>,
}

/// The rules of a session, its mode and who answers.
#[derive(Debug)]
pub struct Permissions {
    deny: Vec<Rule>,
    ask: Vec<Rule>,
    allow: Vec<Rule>,
    /// "Always for this project" answers given during this run.
    remembered: Mutex<Vec<Rule>>,
    mode: Mode,
    front: Front,
    dirs: Dirs,
    /// For rules made here (definitions' patterns, "always" answers): `/` is the project root.
    anchors: Anchors,
    additional: Vec<PathBuf>,
    store: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum PermissionsError {
    #[error("{}: {error}", path.display())]
    Store { path: PathBuf, error: std::io::Error },
}

/// What the mode and the rules say before the front is asked.
enum Outcome<'r> {
    Allow,
    Deny(String),
    AskRule(&'r Rule),
    /// A deny or ask rule may match what is known only when the command runs: refused
    /// headless, asked on the screen (never "always": the next call may differ).
    Doubt(String),
    Ask {
        reason: String,
        always: Vec<String>,
        reads: bool,
    },
}

impl Permissions {
    /// `flag`: `--permission-mode`, over the settings' `defaultMode` (else `default`).
    pub fn new(loaded: Loaded, flag: Option<Mode>, front: Front) -> Permissions {
        let mode = flag.or(loaded.default_mode).unwrap_or_default();
        let mut list = vec![loaded.cwd.clone(), loaded.root.clone()];
        list.extend(loaded.additional_directories.iter().cloned());
        // A path is checked as it resolves too: a directory reached through a symlink counts
        // as itself.
        let real: Vec<PathBuf> = list.iter().filter_map(|d| d.canonicalize().ok()).collect();
        for dir in real {
            if !list.contains(&dir) {
                list.push(dir);
            }
        }
        Permissions {
            deny: loaded.deny,
            ask: loaded.ask,
            allow: loaded.allow,
            remembered: Mutex::new(Vec::new()),
            mode,
            front,
            dirs: Dirs { cwd: loaded.cwd.clone(), list },
            anchors: Anchors { source: loaded.root, cwd: loaded.cwd, home: loaded.home },
            additional: loaded.additional_directories,
            store: loaded.store,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn front(&self) -> Front {
        self.front
    }

    /// `additionalDirectories`, resolved: where the file tools may work besides the tree.
    pub fn additional_directories(&self) -> &[PathBuf] {
        &self.additional
    }

    /// Where "always for this project" answers are kept.
    pub fn store(&self) -> Option<&Path> {
        self.store.as_deref()
    }

    /// Whether a deny rule takes the MCP tool `tool` (`mcp__<server>__<tool>`) out of the
    /// model's view, as Claude Code's bare names in `deny` do: an MCP tool's rules name it (or
    /// its server) whole, with no specifier.
    pub fn hides(&self, tool: &str) -> bool {
        if !tool.starts_with("mcp__") {
            return false;
        }
        let input = Value::Object(serde_json::Map::new());
        let view = CallView::new(tool, &input, &self.dirs.cwd);
        self.deny.iter().any(|r| view.caught_by(r))
    }

    /// The verdict on a call of aerix's tool `tool` with `input`, by an agent `held` to the
    /// patterns of the definitions it runs under.
    pub fn check(&self, tool: &str, input: &Value, held: &[Held]) -> Verdict {
        let view = CallView::new(tool, input, &self.dirs.cwd);
        if let Some(rule) = self.deny.iter().find(|r| view.caught_by(r)) {
            return Verdict::Deny(format!("denied by permission rule {}", rule.text));
        }
        for held in held {
            let rules: Vec<Rule> = held
                .patterns
                .iter()
                .map(|p| Rule::held(p, &self.anchors))
                .filter(|r| r.covers(tool))
                .collect();
            if !rules.is_empty() && !held_allows(&view, &rules) {
                let named: Vec<&str> = rules.iter().map(|r| r.text.as_str()).collect();
                return Verdict::Deny(format!(
                    "denied by the agent definition `{}`: it may call {tool} only as {}",
                    held.definition,
                    named.join(", ")
                ));
            }
        }
        let doubt = |rules: &[Rule], verb: &str| {
            rules.iter().find_map(|r| view.doubt(r).map(|d: Doubt| d.explain(&r.text, verb)))
        };
        if let Some(why) = doubt(&self.deny, "denies") {
            return self.answer(Outcome::Doubt(why));
        }
        let remembered = self.remembered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let allow: Vec<&Rule> = self.allow.iter().chain(remembered.iter()).collect();
        let outcome = match self.ask.iter().find(|r| view.caught_by(r)) {
            Some(rule) => Outcome::AskRule(rule),
            None => match doubt(&self.ask, "asks about") {
                Some(why) => Outcome::Doubt(why),
                None => self.baseline(&view, &allow),
            },
        };
        self.answer(outcome)
    }

    /// The user answered "always for this project": the rules the call's verdict offered are
    /// kept for this run and in the store, for the next. The rules kept.
    pub fn remember(
        &self,
        tool: &str,
        input: &Value,
        held: &[Held],
    ) -> Result<Vec<String>, PermissionsError> {
        let Verdict::Ask { always, .. } = self.check(tool, input, held) else {
            return Ok(Vec::new());
        };
        let rules: Vec<Rule> =
            always.iter().filter_map(|t| Rule::parse(t, Kind::Allow, &self.anchors).ok()).collect();
        self.remembered.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(rules);
        if let Some(path) = &self.store {
            remember::append(path, &always)
                .map_err(|error| PermissionsError::Store { path: path.clone(), error })?;
        }
        Ok(always)
    }

    /// What no rule decided: the mode's own answer.
    fn baseline<'r>(&self, view: &CallView<'_>, allow: &[&Rule]) -> Outcome<'r> {
        let mode = self.mode;
        if mode == Mode::BypassPermissions {
            return Outcome::Allow;
        }
        let ask =
            |reason: String, always: Vec<String>| Outcome::Ask { reason, always, reads: false };
        if view.is_bash() {
            let Some(parts) = view.unallowed_parts(allow) else {
                return match mode {
                    Mode::DontAsk => dont_ask(),
                    _ => ask(
                        format!(
                            "no permission rule allows this command, and it cannot be followed \
                             to its end: {}",
                            view.unparsed().map(ToString::to_string).unwrap_or_default()
                        ),
                        Vec::new(),
                    ),
                };
            };
            let parts: Vec<Part> = match mode {
                Mode::AcceptEdits => {
                    parts.into_iter().filter(|p| !p.is_edit_inside(&self.dirs)).collect()
                }
                _ => parts,
            };
            if parts.is_empty() {
                return Outcome::Allow;
            }
            if mode == Mode::Plan && parts.iter().any(Part::is_write) {
                return Outcome::Deny(
                    "denied by permission mode plan: the command writes a file, and plan mode \
                     changes none"
                        .to_owned(),
                );
            }
            if mode == Mode::DontAsk {
                return dont_ask();
            }
            let described: Vec<String> = parts.iter().map(Part::describe).collect();
            let always: Option<Vec<String>> = parts.iter().map(Part::always_rule).collect();
            let always = always.filter(|a| a.len() <= MAX_ALWAYS).unwrap_or_default();
            return ask(format!("no permission rule allows {}", described.join("; ")), always);
        }
        let path = || view.path().map(|p| p.display().to_string()).unwrap_or_default();
        match view.key {
            // Tools judged by a name run no command and touch no file the rules could name
            // (an agent's calls are checked in turn; a skill's file by the Read rules above).
            Some(Key::Name | Key::Names { .. }) => Outcome::Allow,
            _ if allow.iter().any(|r| view.allowed_by(r)) => Outcome::Allow,
            Some(Key::Reads { .. }) if view.inside(&self.dirs) => Outcome::Allow,
            Some(Key::Reads { .. }) => match mode {
                Mode::DontAsk => dont_ask(),
                _ => Outcome::Ask {
                    reason: format!("{} is outside the working directories", path()),
                    always: vec![format!("Read(/{})", glob_escaped(&path()))],
                    reads: true,
                },
            },
            Some(Key::Edits { .. }) => match mode {
                Mode::Plan => Outcome::Deny(format!(
                    "denied by permission mode plan: {} changes a file, and plan mode changes none",
                    view.tool
                )),
                Mode::AcceptEdits if view.inside(&self.dirs) => Outcome::Allow,
                Mode::DontAsk => dont_ask(),
                _ => ask(
                    format!("no permission rule allows this {} of {}", view.tool, path()),
                    vec![format!("Edit(/{})", glob_escaped(&path()))],
                ),
            },
            _ => match mode {
                Mode::DontAsk => dont_ask(),
                _ => ask(
                    format!("no permission rule allows {}", view.tool),
                    vec![view.tool.to_owned()],
                ),
            },
        }
    }

    /// The outcome as the front can have it.
    fn answer(&self, outcome: Outcome<'_>) -> Verdict {
        match outcome {
            Outcome::Allow => Verdict::Allow,
            Outcome::Deny(why) => Verdict::Deny(why),
            Outcome::AskRule(rule) if self.mode == Mode::DontAsk => Verdict::Deny(format!(
                "denied by permission rule {} (an ask rule): mode dontAsk never asks",
                rule.text
            )),
            Outcome::AskRule(rule) => match self.front {
                Front::Headless => Verdict::Deny(format!(
                    "denied by permission rule {} (an ask rule): a headless run cannot ask",
                    rule.text
                )),
                // An ask rule asks every time: no "always" answer would stop it.
                Front::Screen => Verdict::Ask {
                    reason: format!("permission rule {} asks before this call", rule.text),
                    always: Vec::new(),
                },
            },
            Outcome::Doubt(why) => match (self.front, self.mode) {
                (Front::Headless, _) => {
                    Verdict::Deny(format!("denied: {why}; a headless run cannot ask"))
                }
                (Front::Screen, Mode::DontAsk) => {
                    Verdict::Deny(format!("denied: {why}; mode dontAsk never asks"))
                }
                (Front::Screen, _) => Verdict::Ask { reason: why, always: Vec::new() },
            },
            Outcome::Ask { reason, always, reads } => match (self.front, self.mode) {
                (Front::Screen, _) => Verdict::Ask { reason, always },
                (Front::Headless, Mode::Plan) if !reads => Verdict::Deny(format!(
                    "denied by permission mode plan: {reason}, and a headless run cannot ask"
                )),
                // Headless keeps the spec's "no permission prompts".
                (Front::Headless, _) => Verdict::Allow,
            },
        }
    }
}

fn dont_ask<'r>() -> Outcome<'r> {
    Outcome::Deny("denied by permission mode dontAsk: no permission rule allows this call".into())
}

/// A path as a pattern naming only itself.
fn glob_escaped(path: &str) -> String {
    decide::escape_glob(Path::new(path))
}

#[cfg(test)]
mod tests;
