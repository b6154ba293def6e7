//! Hook files: where they are, and what one holds. A file is used whole or not at all: any
//! shape error drops its hooks with one line naming the file and the key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::{HookEvent, HooksError, Matcher, NEVER_FIRED};

/// Where hook files are read. Every file that exists adds its handlers (levels merge, as
/// Claude Code's do); identical commands of one event run once.
#[derive(Clone, Debug)]
pub struct HookFiles {
    /// `$XDG_CONFIG_HOME/aerix/hooks.json` (what `ai-memory install aerix` writes).
    pub user: Option<PathBuf>,
    /// `<project>/.aerix/hooks.json`, committed with the project.
    pub project: PathBuf,
    /// `<project>/.aerix/hooks.local.json`, the user's own, kept out of git.
    pub local: PathBuf,
    /// Claude Code's settings files, after aerix's own (their `hooks` key; other keys are
    /// ignored): `~/.claude/settings.json`, `<project>/.claude/settings.json` and
    /// `settings.local.json`. Empty when `hooks.claude_settings` is off.
    pub claude: Vec<PathBuf>,
}

/// Claude Code's settings files: the user's, the project's and the project's local one (its
/// hooks here; its permissions are `aerix-permissions`'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaudeSettings {
    /// `~/.claude/settings.json`.
    pub user: Option<PathBuf>,
    /// `<project>/.claude/settings.json`.
    pub project: PathBuf,
    /// `<project>/.claude/settings.local.json`.
    pub local: PathBuf,
}

impl ClaudeSettings {
    /// For the user's `home` and the project at `project_root`.
    pub fn standard(home: Option<&Path>, project_root: &Path) -> ClaudeSettings {
        ClaudeSettings {
            user: home.map(|h| h.join(".claude/settings.json")),
            project: project_root.join(".claude/settings.json"),
            local: project_root.join(".claude/settings.local.json"),
        }
    }
}

impl HookFiles {
    /// aerix's files, and Claude Code's when `claude_settings` (`home`: the user's home).
    pub fn standard(
        config_home: Option<&Path>,
        home: Option<&Path>,
        project_root: &Path,
        claude_settings: bool,
    ) -> HookFiles {
        let dir = project_root.join(".aerix");
        let mut claude = Vec::new();
        if claude_settings {
            let files = ClaudeSettings::standard(home, project_root);
            claude.extend(files.user);
            claude.push(files.project);
            claude.push(files.local);
        }
        HookFiles {
            user: config_home.map(|c| c.join("aerix/hooks.json")),
            project: dir.join("hooks.json"),
            local: dir.join("hooks.local.json"),
            claude,
        }
    }

    /// In reading order: user, project, local, then Claude Code's.
    pub fn paths(&self) -> Vec<&Path> {
        let mut paths: Vec<&Path> = self.user.iter().map(PathBuf::as_path).collect();
        paths.push(&self.project);
        paths.push(&self.local);
        paths.extend(self.claude.iter().map(PathBuf::as_path));
        paths
    }
}

/// One command handler of one event.
#[derive(Clone, Debug)]
pub(crate) struct Handler {
    pub(crate) event: HookEvent,
    pub(crate) matcher: Matcher,
    pub(crate) command: String,
    /// The file's `timeout`, when it gives one.
    pub(crate) timeout: Option<Duration>,
    /// Set for its process besides `CLAUDE_PROJECT_DIR` (a plugin's `CLAUDE_PLUGIN_ROOT`).
    pub(crate) env: Vec<(String, String)>,
}

impl Handler {
    /// The file's timeout, else the event's default, within the event's cap.
    pub(crate) fn timeout(&self) -> Duration {
        let timeout = self.timeout.unwrap_or(self.event.default_timeout());
        match self.event.max_timeout() {
            Some(max) => timeout.min(max),
            None => timeout,
        }
    }
}

/// The handlers of every file read, in file order.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    handlers: Vec<Handler>,
}

impl Hooks {
    pub fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }

    /// Every handler as one line, `Event(matcher): command` (the matcher only when it narrows),
    /// in file order: what a trust question lists and its hash covers.
    pub fn commands(&self) -> Vec<String> {
        self.handlers
            .iter()
            .map(|h| match h.matcher.text() {
                m if m.is_empty() => format!("{}: {}", h.event.name(), h.command),
                m => format!("{}({m}): {}", h.event.name(), h.command),
            })
            .collect()
    }

    /// How many handlers are registered.
    pub fn len(&self) -> usize {
        self.handlers.len()
    }

    /// The handlers of `event` whose matcher takes one of `values` (events without a matcher,
    /// or no values, take every handler), an identical command once.
    pub(crate) fn matching(&self, event: HookEvent, values: &[&str]) -> Vec<&Handler> {
        let mut out: Vec<&Handler> = Vec::new();
        for handler in self.handlers.iter().filter(|h| h.event == event) {
            let matched = values.is_empty()
                || !event.takes_matcher()
                || values.iter().any(|v| handler.matcher.matches(v));
            // Two plugins' `${CLAUDE_PLUGIN_ROOT}/x.sh` are two commands.
            let same = |h: &&Handler| h.command == handler.command && h.env == handler.env;
            if matched && !out.iter().any(same) {
                out.push(handler);
            }
        }
        out
    }
}

/// Hooks read from files, and the lines to tell the user about them.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    pub hooks: Hooks,
    /// The files that held hooks.
    pub files: Vec<PathBuf>,
    /// One line each: a file that could not be used, handlers that are skipped, and (from
    /// [`join`]) the events aerix never fires that files name.
    pub notes: Vec<String>,
    /// Claude Code events with handlers that aerix never fires, and the files naming them.
    pub never_fired: Vec<(String, PathBuf)>,
}

impl Loaded {
    /// Adds `other`'s handlers, files, notes and never-fired events after these.
    pub fn extend(&mut self, other: Loaded) {
        self.hooks.handlers.extend(other.hooks.handlers);
        self.files.extend(other.files);
        self.notes.extend(other.notes);
        self.never_fired.extend(other.never_fired);
    }

    /// The same hooks, each handler run with `env` set (a plugin's `CLAUDE_PLUGIN_ROOT`).
    pub fn with_env(mut self, env: &[(String, String)]) -> Loaded {
        for handler in &mut self.hooks.handlers {
            handler.env.extend(env.iter().cloned());
        }
        self
    }
}

/// A hook file as read, once: what it holds (`None`: it does not exist), or the note that says
/// why its hooks are not run. The trust step reads a project's files so and hashes what they
/// hold; the session then joins the same reads ([`join`]), so a file rewritten in between
/// changes nothing that runs.
#[derive(Clone, Debug)]
pub struct FileRead {
    pub path: PathBuf,
    pub loaded: Result<Option<Loaded>, String>,
}

impl FileRead {
    /// The handlers' commands as the trust step lists them; none for a missing or broken file
    /// (a broken file runs nothing).
    pub fn commands(&self) -> Vec<String> {
        match &self.loaded {
            Ok(Some(loaded)) => loaded.hooks.commands(),
            _ => Vec::new(),
        }
    }
}

/// Reads one file.
pub fn read(path: &Path) -> FileRead {
    let loaded = load_file(path).map_err(|e| format!("hooks: {e}; its hooks are not run"));
    FileRead { path: path.to_owned(), loaded }
}

/// Files already read, in order, as one set of hooks: a missing file adds nothing, a broken one
/// is a note and its hooks are not run.
pub fn join<'a>(reads: impl IntoIterator<Item = &'a FileRead>) -> Loaded {
    let mut out = Loaded::default();
    for read in reads {
        match &read.loaded {
            Ok(Some(loaded)) => out.extend(loaded.clone()),
            Ok(None) => {}
            Err(note) => out.notes.push(note.clone()),
        }
    }
    // One line for every file: the names, each once.
    if !out.never_fired.is_empty() {
        let mut names: Vec<&str> = out.never_fired.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let mut files: Vec<String> =
            out.never_fired.iter().map(|(_, p)| p.display().to_string()).collect();
        files.dedup();
        out.notes.push(format!(
            "hooks: aerix never fires {} (in {}); those hooks are not run",
            names.join(", "),
            files.join(", ")
        ));
    }
    out
}

/// One file; `None` when it does not exist.
fn load_file(path: &Path) -> Result<Option<Loaded>, HooksError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(HooksError::Read { path: path.to_owned(), error }),
    };
    parse(path, &text).map(Some)
}

pub(crate) fn parse(path: &Path, text: &str) -> Result<Loaded, HooksError> {
    let invalid = |message: String| HooksError::Invalid { path: path.to_owned(), message };
    if text.trim().is_empty() {
        return Ok(Loaded::default());
    }
    let root: Value =
        serde_json::from_str(text).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
    let Value::Object(root) = root else {
        return Err(invalid("does not hold a JSON object".to_owned()));
    };
    let mut out = Loaded::default();
    let hooks = match root.get("hooks") {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Object(hooks)) => hooks,
        Some(_) => return Err(invalid("`hooks` is not an object".to_owned())),
    };
    let mut skipped_types = Vec::new();
    for (name, groups) in hooks {
        let event = HookEvent::parse(name);
        if event.is_none() && !NEVER_FIRED.contains(&name.as_str()) {
            // An event aerix does not know (a newer Claude Code's): accepted and ignored.
            continue;
        }
        let parsed = parse_groups(name, groups, &mut skipped_types).map_err(invalid)?;
        match event {
            Some(event) => {
                out.hooks.handlers.extend(parsed.into_iter().map(|(matcher, command, timeout)| {
                    Handler { event, matcher, command, timeout, env: Vec::new() }
                }))
            }
            None if !parsed.is_empty() => out.never_fired.push((name.clone(), path.to_owned())),
            None => {}
        }
    }
    if !out.hooks.is_empty() {
        out.files.push(path.to_owned());
    }
    if !skipped_types.is_empty() {
        skipped_types.sort();
        skipped_types.dedup();
        out.notes.push(format!(
            "hooks: {}: handlers of type {} are skipped (aerix runs `command` handlers)",
            path.display(),
            skipped_types.join(", ")
        ));
    }
    Ok(out)
}

/// A command handler as its file gives it: the group's matcher, the command, the timeout.
type Parsed = (Matcher, String, Option<Duration>);

/// The command handlers of one event's groups, checked.
fn parse_groups(
    name: &str,
    groups: &Value,
    skipped_types: &mut Vec<String>,
) -> Result<Vec<Parsed>, String> {
    let Value::Array(groups) = groups else {
        return Err(format!("`hooks.{name}` is not an array of matcher groups"));
    };
    let mut out = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let at = format!("hooks.{name}[{g}]");
        let Value::Object(group) = group else {
            return Err(format!("`{at}` is not an object"));
        };
        let matcher = match group.get("matcher") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => Some(m.as_str()),
            Some(_) => return Err(format!("`{at}.matcher` is not a string")),
        };
        let matcher = Matcher::parse(matcher).map_err(|e| format!("`{at}.matcher`: {e}"))?;
        let handlers = match group.get("hooks") {
            Some(Value::Array(handlers)) => handlers,
            Some(_) => return Err(format!("`{at}.hooks` is not an array")),
            None => return Err(format!("`{at}` has no `hooks` array")),
        };
        for (h, handler) in handlers.iter().enumerate() {
            let at = format!("{at}.hooks[{h}]");
            let Value::Object(handler) = handler else {
                return Err(format!("`{at}` is not an object"));
            };
            match handler.get("type") {
                Some(Value::String(t)) if t == "command" => {}
                Some(Value::String(t)) => {
                    skipped_types.push(format!("`{t}`"));
                    continue;
                }
                Some(_) => return Err(format!("`{at}.type` is not a string")),
                None => return Err(format!("`{at}` has no `type`")),
            }
            let command = match handler.get("command") {
                Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
                Some(Value::String(_)) => return Err(format!("`{at}.command` is empty")),
                Some(_) => return Err(format!("`{at}.command` is not a string")),
                None => return Err(format!("`{at}` has no `command`")),
            };
            let timeout = match handler.get("timeout") {
                None | Some(Value::Null) => None,
                Some(value) => Some(
                    value
                        .as_f64()
                        .filter(|t| *t > 0.0)
                        .and_then(|t| Duration::try_from_secs_f64(t).ok())
                        .ok_or_else(|| {
                            format!(
                                "`{at}.timeout` is {value}: it must be a positive number of seconds"
                            )
                        })?,
                ),
            };
            out.push((matcher.clone(), command, timeout));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::parse;
    use crate::HookEvent;

    fn error(text: &str) -> String {
        parse(Path::new("/h/hooks.json"), text).unwrap_err().to_string()
    }

    #[test]
    fn the_file_ai_memory_install_writes() {
        let text = r#"{
  "hooks": {
    "SessionStart": [{"hooks": [{"type": "command", "command": "ai-memory hook session-start --harness aerix", "timeout": 30}]}],
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "ai-memory hook prompt-submit --harness aerix", "timeout": 30}]}],
    "SessionEnd": [{"hooks": [{"type": "command", "command": "ai-memory hook session-end --harness aerix", "timeout": 30}]}]
  }
}"#;
        let loaded = parse(Path::new("/h/hooks.json"), text).unwrap();
        assert_eq!(loaded.hooks.len(), 3);
        assert!(loaded.notes.is_empty(), "{:?}", loaded.notes);
        let start = loaded.hooks.matching(HookEvent::SessionStart, &["startup"]);
        assert_eq!(start[0].command, "ai-memory hook session-start --harness aerix");
        assert_eq!(start[0].timeout(), Duration::from_secs(30));
    }

    #[test]
    fn matchers_defaults_caps_and_duplicates() {
        let text = r#"{"description": "x", "hooks": {
            "SessionStart": [
                {"matcher": "resume", "hooks": [{"type": "command", "command": "a"}]},
                {"matcher": "*", "hooks": [{"type": "command", "command": "b"}, {"type": "command", "command": "b"}]}
            ],
            "UserPromptSubmit": [{"matcher": "ignored", "hooks": [{"type": "command", "command": "u"}]}],
            "SessionEnd": [{"hooks": [{"type": "command", "command": "e", "timeout": 900}]}],
            "SomeFutureEvent": {"whatever": true}
        }}"#;
        let loaded = parse(Path::new("/h/hooks.json"), text).unwrap();
        let commands = |event, value: &[&str]| -> Vec<String> {
            loaded.hooks.matching(event, value).iter().map(|h| h.command.clone()).collect()
        };
        assert_eq!(commands(HookEvent::SessionStart, &["startup"]), ["b"]);
        assert_eq!(commands(HookEvent::SessionStart, &["resume"]), ["a", "b"]);
        assert_eq!(commands(HookEvent::UserPromptSubmit, &[]), ["u"]);
        let start = loaded.hooks.matching(HookEvent::SessionStart, &["startup"]);
        assert_eq!(start[0].timeout(), Duration::from_secs(600));
        let user = loaded.hooks.matching(HookEvent::UserPromptSubmit, &[]);
        assert_eq!(user[0].timeout(), Duration::from_secs(30));
        let end = loaded.hooks.matching(HookEvent::SessionEnd, &["other"]);
        assert_eq!(end[0].timeout(), Duration::from_secs(30), "SessionEnd is capped");
    }

    #[test]
    fn one_command_of_two_plugins_runs_twice_with_each_one_s_env() {
        let text = r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "$CLAUDE_PLUGIN_ROOT/x.sh"}]}]}}"#;
        let env = |root: &str| vec![("CLAUDE_PLUGIN_ROOT".to_owned(), root.to_owned())];
        let mut loaded = parse(Path::new("/a/hooks.json"), text).unwrap().with_env(&env("/a"));
        loaded.extend(parse(Path::new("/b/hooks.json"), text).unwrap().with_env(&env("/b")));
        loaded.extend(parse(Path::new("/b/hooks.json"), text).unwrap().with_env(&env("/b")));
        let start = loaded.hooks.matching(HookEvent::SessionStart, &["startup"]);
        let envs: Vec<_> = start.iter().map(|h| h.env.clone()).collect();
        assert_eq!(envs, [env("/a"), env("/b")]);
    }

    #[test]
    fn other_handler_types_and_events_never_fired_are_notes() {
        let dir = std::env::temp_dir().join(format!("aerix-hooks-never-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.json"), dir.join("b.json"));
        std::fs::write(
            &a,
            r#"{"hooks": {
            "PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}],
            "Setup": [{"hooks": [{"type": "command", "command": "s"}]}],
            "SessionStart": [{"hooks": [{"type": "http", "url": "http://x"}, {"type": "command", "command": "s"}]}]
        }}"#,
        )
        .unwrap();
        std::fs::write(
            &b,
            r#"{"hooks": {"Setup": [{"hooks": [{"type": "command", "command": "t"}]}], "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "g"}]}]}}"#,
        )
        .unwrap();
        let loaded = super::join(&[super::read(&a), super::read(&b)]);
        assert_eq!(loaded.hooks.len(), 2);
        assert_eq!(
            loaded.notes,
            [
                format!(
                    "hooks: {}: handlers of type `http` are skipped (aerix runs `command` handlers)",
                    a.display()
                ),
                format!(
                    "hooks: aerix never fires PermissionRequest, Setup (in {}, {}); those hooks are not run",
                    a.display(),
                    b.display()
                ),
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_broken_file_names_what_is_wrong() {
        assert!(
            error("{\"hooks\": {").starts_with("/h/hooks.json: not valid JSON: EOF while parsing"),
            "{}",
            error("{\"hooks\": {")
        );
        assert_eq!(error("[]"), "/h/hooks.json: does not hold a JSON object");
        assert_eq!(error(r#"{"hooks": []}"#), "/h/hooks.json: `hooks` is not an object");
        assert_eq!(
            error(r#"{"hooks": {"SessionStart": {}}}"#),
            "/h/hooks.json: `hooks.SessionStart` is not an array of matcher groups"
        );
        assert_eq!(
            error(r#"{"hooks": {"SessionEnd": [{"matcher": "a("}]}}"#).split(" (").next().unwrap(),
            "/h/hooks.json: `hooks.SessionEnd[0].matcher`: `a(` is not a valid regular expression"
        );
        assert_eq!(
            error(r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command"}]}]}}"#),
            "/h/hooks.json: `hooks.SessionStart[0].hooks[0]` has no `command`"
        );
        assert_eq!(
            error(
                r#"{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "x", "timeout": -1}]}]}}"#
            ),
            "/h/hooks.json: `hooks.UserPromptSubmit[0].hooks[0].timeout` is -1: it must be a positive number of seconds"
        );
        assert_eq!(
            error(r#"{"hooks": {"Stop": [{"hooks": "x"}]}}"#),
            "/h/hooks.json: `hooks.Stop[0].hooks` is not an array"
        );
    }

    #[test]
    fn an_empty_file_or_one_without_hooks_has_none() {
        for text in ["", "  \n", "{}", r#"{"hooks": null, "model": "x"}"#] {
            let loaded = parse(Path::new("/h/hooks.json"), text).unwrap();
            assert!(loaded.hooks.is_empty() && loaded.notes.is_empty() && loaded.files.is_empty());
        }
    }
}
