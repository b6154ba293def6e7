//! One call against the rules, in Claude Code's order: deny, then ask, then allow, then the
//! mode. A `Bash` call is its simple commands and the files it redirects output to: a deny or
//! ask rule matches when any of them matches, an allow rule set allows the call only when it
//! allows every one. A path is checked as written and as it resolves on disk: a deny or ask
//! rule matching either catches it, an allow rule must match both.
//!
//! What is known only when the command runs fails closed: a deny or ask rule that may match a
//! command whose word is not plain (`${X:-touch} x`), a write whose target is not
//! (`>> $PWD/calc.sh`), or a line that cannot be parsed, is a [`Doubt`], which the front turns
//! into a refusal headless and a question on the screen; an allow rule never covers a command
//! whose command word is not plain.

use std::path::{Path, PathBuf};

use aerix_turn::tools::{Key, Target, tool_named};
use serde_json::Value;

use crate::command::{self, View, is_assignment};
use crate::path::{normalize, resolved};
use crate::rule::{Rule, Spec, ToolName};
use crate::shell::{self, Parsed, Simple, Unparsed, Word};
/// The most rules one "always" answer keeps (Claude Code's figure for a compound command).
pub(crate) const MAX_ALWAYS: usize = 5;

/// The directories calls may work in without asking: the working directory, the project root
/// and `additionalDirectories`.
#[derive(Clone, Debug)]
pub(crate) struct Dirs {
    pub cwd: PathBuf,
    pub list: Vec<PathBuf>,
}

impl Dirs {
    /// `path` (absolute, normalized) lies at or under one of them.
    pub(crate) fn holds(&self, path: &Path) -> bool {
        self.list.iter().any(|dir| path.starts_with(dir))
    }
}

/// A call, taken apart for the rules.
pub(crate) struct CallView<'a> {
    pub tool: &'a str,
    /// What the rules judge it by (the registry's; `None`: not an aerix tool, an MCP one).
    pub key: Option<Key>,
    input: &'a Value,
    cwd: &'a Path,
    /// The path a file tool works on, as written (normalized) and as it resolves.
    paths: Vec<PathBuf>,
    /// `bash`: its commands and writes.
    bash: Option<Bash>,
}

struct Bash {
    line: String,
    parsed: Parsed,
}

impl<'a> CallView<'a> {
    pub(crate) fn new(tool: &'a str, input: &'a Value, cwd: &'a Path) -> CallView<'a> {
        let text = |key: &str| input.get(key).and_then(Value::as_str);
        let or_cwd = |key: &str| text(key).map_or_else(|| cwd.to_owned(), PathBuf::from);
        let key = tool_named(tool).map(|t| t.key);
        let target = match key {
            Some(Key::Edits { field } | Key::Reads { field, target: Target::Path }) => {
                text(field).map(PathBuf::from)
            }
            Some(Key::Reads { field, target: Target::PathOrCwd }) => Some(or_cwd(field)),
            Some(Key::Reads { field, target: Target::Under { pattern } }) => {
                Some(or_cwd(field).join(literal_prefix(text(pattern).unwrap_or(""))))
            }
            // The file the runtime added, that the call hands the model (a skill's).
            Some(Key::Names { file: Some(field), .. }) => text(field).map(PathBuf::from),
            _ => None,
        };
        let paths = target.map(|p| candidates(&p, cwd)).unwrap_or_default();
        let bash = match key {
            Some(Key::Command { field }) => {
                let line = text(field).unwrap_or_default().to_owned();
                let parsed = shell::parse(&line);
                Some(Bash { line, parsed })
            }
            _ => None,
        };
        CallView { tool, key, input, cwd, paths, bash }
    }

    /// A deny or ask rule's view: does `rule` catch any part of the call?
    pub(crate) fn caught_by(&self, rule: &Rule) -> bool {
        if let Some(bash) = &self.bash {
            // Redirected output is a file write, which the path rules of edits see.
            let writes_rule = rule.covers("write") || reads_paths(rule);
            let writes = &bash.parsed.writes;
            let caught = match &rule.spec {
                // A rule for every edit (`Edit`) sees every file a line writes.
                Spec::Any => rule.covers("write") && !writes.is_empty(),
                Spec::Path(pattern) => {
                    writes.iter().any(|w| self.write_paths(w).iter().any(|p| pattern.matches(p)))
                }
                _ => false,
            };
            if writes_rule && caught {
                return true;
            }
            if !rule.covers("bash") {
                return false;
            }
            return match &rule.spec {
                Spec::Any => true,
                Spec::Command(pattern) => {
                    pattern.matches(bash.line.trim())
                        || bash.parsed.commands.iter().any(|c| {
                            command::forms(c, View::Restrict).iter().any(|form| {
                                command::texts(form, View::Restrict)
                                    .iter()
                                    .any(|t| pattern.matches(t))
                            })
                        })
                }
                Spec::Param { .. } => self.param_matches(rule),
                _ => false,
            };
        }
        // A Read deny rule keeps edits off its paths too.
        let reads = self.key.is_some_and(Key::guarded_by_reads) && !self.paths.is_empty();
        let covered = rule.covers(self.tool) || (reads && reads_paths(rule));
        covered && self.spec_matches(rule, true)
    }

    /// A deny or ask rule's view of what a `bash` call leaves unknown until it runs: the first
    /// part `rule` may catch though it cannot be shown to (checked after `caught_by`).
    pub(crate) fn doubt(&self, rule: &Rule) -> Option<Doubt> {
        let bash = self.bash.as_ref()?;
        let path_rule = (rule.covers("write") || reads_paths(rule))
            && matches!(rule.spec, Spec::Path(_) | Spec::Any);
        let command_rule = rule.covers("bash") && matches!(rule.spec, Spec::Command(_));
        if path_rule && let Some(target) = bash.parsed.writes.iter().find(|w| !w.plain) {
            return Some(Doubt::Write { target: target.raw.clone() });
        }
        if rule.covers("bash")
            && let Spec::Command(pattern) = &rule.spec
        {
            for simple in &bash.parsed.commands {
                for form in command::forms(simple, View::Restrict) {
                    if let Some(at) = unknown_word(form, pattern) {
                        let which = match at {
                            _ if simple.runs.is_some() => Unknown::Script,
                            0 => Unknown::CommandWord,
                            _ => Unknown::Word,
                        };
                        let word = form[at].raw.clone();
                        return Some(Doubt::Command { shown: simple.shown(), word, which });
                    }
                }
            }
        }
        match &bash.parsed.unparsed {
            Some(why) if path_rule || command_rule => Some(Doubt::Unparsed(why.clone())),
            _ => None,
        }
    }

    /// An allow rule's view of a call that is not `bash`: does it allow the whole call?
    pub(crate) fn allowed_by(&self, rule: &Rule) -> bool {
        rule.covers(self.tool) && self.spec_matches(rule, false)
    }

    fn spec_matches(&self, rule: &Rule, restrict: bool) -> bool {
        match &rule.spec {
            Spec::Any => true,
            Spec::Path(pattern) if restrict => self.paths.iter().any(|p| pattern.matches(p)),
            Spec::Path(pattern) => {
                !self.paths.is_empty() && self.paths.iter().all(|p| pattern.matches(p))
            }
            Spec::Name(name) => match self.key {
                // An `agent` call without a definition runs aerix's implementer.
                Some(Key::Names { field, absent, .. }) => {
                    name.is_match(self.input.get(field).and_then(Value::as_str).unwrap_or(absent))
                }
                _ => false,
            },
            Spec::Param { .. } => self.param_matches(rule),
            Spec::Command(_) | Spec::Nothing => false,
        }
    }

    fn param_matches(&self, rule: &Rule) -> bool {
        let Spec::Param { name, value } = &rule.spec else { return false };
        let view = aerix_claude::tools::view(self.tool, self.input, self.cwd);
        match view.input.get(name) {
            Some(Value::String(s)) => value.is_match(s),
            Some(v @ (Value::Bool(_) | Value::Number(_))) => value.is_match(&v.to_string()),
            _ => false,
        }
    }

    /// What about a `bash` call the allow rules leave to the mode: its commands no rule
    /// allows and the writes no rule allows. `None` when the line cannot be followed (only a
    /// rule for every command allows it) or the call is not `bash`.
    pub(crate) fn unallowed_parts(&self, allow: &[&Rule]) -> Option<Vec<Part>> {
        let bash = self.bash.as_ref()?;
        if allow.iter().any(|r| r.covers("bash") && matches!(r.spec, Spec::Any)) {
            let writes = self.unallowed_writes(bash, allow);
            return Some(writes);
        }
        if bash.parsed.unparsed.is_some() {
            return None;
        }
        let mut parts: Vec<Part> = Vec::new();
        for simple in &bash.parsed.commands {
            if !command_allowed(simple, allow) {
                parts.push(Part::Command(simple.clone()));
            }
        }
        parts.extend(self.unallowed_writes(bash, allow));
        Some(parts)
    }

    fn unallowed_writes(&self, bash: &Bash, allow: &[&Rule]) -> Vec<Part> {
        let mut parts = Vec::new();
        for word in &bash.parsed.writes {
            let paths = self.write_paths(word);
            let allowed = !paths.is_empty()
                && allow.iter().any(|r| {
                    r.covers("write")
                        && match &r.spec {
                            Spec::Any => true,
                            Spec::Path(pattern) => paths.iter().all(|p| pattern.matches(p)),
                            _ => false,
                        }
                });
            if !allowed {
                parts.push(Part::Write(word.clone(), paths));
            }
        }
        parts
    }

    /// A redirection target's paths; none when its word is not plain (a `~`, a glob, a
    /// variable: where it writes is not known before it runs).
    fn write_paths(&self, word: &Word) -> Vec<PathBuf> {
        if !word.plain {
            return Vec::new();
        }
        candidates(Path::new(&word.value), self.cwd)
    }

    /// Whether the file tool's path lies inside `dirs` (as written and as resolved).
    pub(crate) fn inside(&self, dirs: &Dirs) -> bool {
        !self.paths.is_empty() && self.paths.iter().all(|p| dirs.holds(p))
    }

    /// The path the call works on, as written, normalized.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.paths.first().map(PathBuf::as_path)
    }

    pub(crate) fn is_bash(&self) -> bool {
        self.bash.is_some()
    }

    /// Why a `bash` call's line cannot be followed to its end, when it cannot.
    pub(crate) fn unparsed(&self) -> Option<&Unparsed> {
        self.bash.as_ref()?.parsed.unparsed.as_ref()
    }
}

/// What of a `bash` call no rule allows.
#[derive(Clone, Debug)]
pub(crate) enum Part {
    Command(Simple),
    /// A redirection's target and its paths (none when not plain).
    Write(Word, Vec<PathBuf>),
}

impl Part {
    /// What `acceptEdits` lets through: a file command or a write inside the directories.
    pub(crate) fn is_edit_inside(&self, dirs: &Dirs) -> bool {
        let inside = |paths: &[PathBuf]| {
            !paths.is_empty()
                && paths.iter().all(|p| dirs.holds(p) && !dirs.list.iter().any(|d| d == p))
        };
        match self {
            Part::Command(simple) => command::file_command_paths(simple).is_some_and(|args| {
                args.iter().all(|a| inside(&candidates(Path::new(a), &dirs.cwd)))
            }),
            Part::Write(_, paths) => inside(paths),
        }
    }

    pub(crate) fn is_write(&self) -> bool {
        matches!(self, Part::Write(..))
    }

    /// The rule an "always" answer keeps for it (`None`: none can name it exactly).
    pub(crate) fn always_rule(&self) -> Option<String> {
        match self {
            // No rule can allow a command whose command word is known only when it runs.
            Part::Command(simple) if !runs_known(&simple.words) => None,
            Part::Command(simple) => {
                Some(format!("Bash({})", escape_command(&command::quoted_text(&simple.words))))
            }
            Part::Write(_, paths) => paths.first().map(|p| format!("Edit(/{})", escape_glob(p))),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Part::Command(simple) => simple.shown(),
            Part::Write(word, _) => format!("a write to {}", word.raw),
        }
    }
}

fn command_allowed(simple: &Simple, allow: &[&Rule]) -> bool {
    let forms = command::forms(simple, View::Allow);
    allow.iter().any(|r| {
        r.covers("bash")
            && match &r.spec {
                Spec::Any => true,
                Spec::Command(pattern) => forms.iter().any(|form| {
                    runs_known(form)
                        && command::texts(form, View::Allow).iter().any(|t| pattern.matches(t))
                }),
                _ => false,
            }
    })
}

/// Whether a form's command word (past its assignments) is plain: a pattern can only allow a
/// command it can see.
fn runs_known(form: &[Word]) -> bool {
    form.iter().find(|w| !is_assignment(w)).is_none_or(|w| w.plain)
}

/// Where the first word of `form` that is known only when it runs is, when `pattern` may
/// match what the form turns out to be: it matches the words before it alone (the word may
/// expand to nothing), or some command starting with them and the word's literal start. A
/// form that starts with an assignment is left to the form without it.
fn unknown_word(form: &[Word], pattern: &command::CommandPattern) -> Option<usize> {
    if form.first().is_none_or(is_assignment) {
        return None;
    }
    let at = form.iter().position(|w| !w.plain)?;
    let known: Vec<&str> = form[..at].iter().map(|w| w.value.as_str()).collect();
    let known = known.join(" ");
    let word = &form[at];
    let head = if known.is_empty() { word.head.clone() } else { format!("{known} {}", word.head) };
    let may = pattern.may_match_from(&head)
        || (word.head.is_empty() && !known.is_empty() && pattern.matches(&known));
    may.then_some(at)
}

/// Which part of a command is known only when it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unknown {
    CommandWord,
    /// An argument (the command word is plain).
    Word,
    /// The script a shell or `eval` runs (`sh -c "$X"`, `curl ... | sh`).
    Script,
}

/// What a deny or ask rule may catch in a `bash` call though it cannot be shown to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Doubt {
    /// A command with a word known only when it runs.
    Command { shown: String, word: String, which: Unknown },
    /// A write whose target is known only when it runs.
    Write { target: String },
    /// A line that cannot be followed to its end.
    Unparsed(Unparsed),
}

impl Doubt {
    /// Why, naming the rule; `verb`: what the rule does (`denies`, `asks about`).
    pub(crate) fn explain(&self, rule: &str, verb: &str) -> String {
        match self {
            Doubt::Command { shown, word, which: Unknown::Script } => format!(
                "`{shown}` runs a script that may be what permission rule {rule} {verb}: \
                 {word} is known only when it runs"
            ),
            Doubt::Command { shown, word, which } => {
                let which = if *which == Unknown::CommandWord { "command word" } else { "word" };
                format!(
                    "`{shown}` may run what permission rule {rule} {verb}: its {which} `{word}` \
                     is known only when it runs"
                )
            }
            Doubt::Write { target } => format!(
                "the write to `{target}` may be to a file permission rule {rule} {verb}: where \
                 it points is known only when it runs"
            ),
            Doubt::Unparsed(why) => format!(
                "the command may run what permission rule {rule} {verb}, and it cannot be \
                 followed to its end: {why}"
            ),
        }
    }
}

/// Whether an allow set lets every command of a held agent's `bash` call through (an agent
/// definition's patterns): the line must be followed to its end.
pub(crate) fn held_allows(view: &CallView<'_>, rules: &[Rule]) -> bool {
    let covering: Vec<&Rule> = rules.iter().filter(|r| r.covers(view.tool)).collect();
    match &view.bash {
        Some(bash) => {
            if covering.iter().any(|r| matches!(r.spec, Spec::Any)) {
                return true;
            }
            bash.parsed.unparsed.is_none()
                && !bash.parsed.commands.is_empty()
                && bash.parsed.commands.iter().all(|c| command_allowed(c, &covering))
        }
        None => covering.iter().any(|r| view.allowed_by(r)),
    }
}

/// A rule that reads paths (`Read(...)` with a path), whose deny also keeps edits off them.
fn reads_paths(rule: &Rule) -> bool {
    matches!(&rule.tool, ToolName::Known { scoped, .. } if scoped.contains(&"read"))
        && matches!(rule.spec, Spec::Path(_))
}

/// `path` against `cwd`, as written and as it resolves (one entry when they agree).
fn candidates(path: &Path, cwd: &Path) -> Vec<PathBuf> {
    let written = normalize(path, cwd);
    let real = resolved(&written);
    if real == written { vec![written] } else { vec![written, real] }
}

/// A glob pattern's leading components without a glob character (`../x/*.rs` → `../x`).
fn literal_prefix(pattern: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for part in pattern.split('/') {
        if part.contains(['*', '?', '[', '{']) {
            break;
        }
        out.push(part);
    }
    out
}

/// A command as an exact `Bash(...)` specifier: `\` and `*` escaped.
fn escape_command(text: &str) -> String {
    text.replace('\\', "\\\\").replace('*', "\\*")
}

/// An absolute path as a gitignore-style pattern naming only itself.
pub(crate) fn escape_glob(path: &Path) -> String {
    let mut out = String::new();
    for c in path.display().to_string().chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
