//! One permission rule in Claude Code's syntax, `Tool` or `Tool(specifier)`, parsed: which of
//! aerix's tools it covers and what its specifier matches. Claude Code's tool names are mapped
//! to aerix's by the tool registry (`aerix_turn::tools::resolve`), as agent definitions map
//! them; aerix's own names are accepted too. A rule that cannot be used is an error saying why;
//! the loader makes it a note and skips it, as Claude Code skips an invalid rule with a warning.

use aerix_turn::tools::{Key, TOOLS, Tool, resolve, tool_named};
use regex::Regex;

use crate::command::CommandPattern;
use crate::path::{Anchors, PathPattern};

/// Which list a rule is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Allow,
    Ask,
    Deny,
}

impl Kind {
    pub fn key(self) -> &'static str {
        match self {
            Kind::Allow => "allow",
            Kind::Ask => "ask",
            Kind::Deny => "deny",
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Rule {
    /// As written: what a refusal names.
    pub text: String,
    pub tool: ToolName,
    pub spec: Spec,
}

/// The tools a rule names.
#[derive(Clone, Debug)]
pub(crate) enum ToolName {
    /// A name aerix knows: the aerix tools a bare rule covers, and those its specifier covers.
    Known { bare: Vec<&'static str>, scoped: Vec<&'static str> },
    /// `mcp__server` (every tool of the server) or `mcp__server__tool`, the tool part maybe a
    /// glob.
    Mcp { server: String, tool: Option<Regex> },
    /// A glob over tool names (`*`, `mcp__*`): deny and ask rules only.
    Glob(Regex),
    /// A name aerix has no tool for (Claude Code's `WebFetch`, a tool to come): matches a call
    /// of exactly that name.
    Other(String),
}

#[derive(Clone, Debug)]
pub(crate) enum Spec {
    /// `Tool` or `Tool(*)`: every call.
    Any,
    Command(CommandPattern),
    Path(PathPattern),
    /// `Agent(name)`, `Skill(name)`: the definition's or the skill's name (`*` a wildcard).
    Name(Regex),
    /// `Tool(param:value)` on a deny or ask rule: a top-level input field (Claude Code's
    /// name for it) equal to the value (`*` a wildcard).
    Param {
        name: String,
        value: Regex,
    },
    /// A specifier aerix has nothing to match against (`WebFetch(domain:...)`): no call.
    Nothing,
}

/// The names a rule applies to every tool that reads files by (`Read(./.env)` also covers
/// `glob` and `grep`, as Claude Code applies it), and every tool that edits them (`Edit`).
const READ_RULES: [&str; 2] = ["Read", "read"];
const EDIT_RULES: [&str; 1] = ["Edit"];

fn reads(tool: &&Tool) -> bool {
    matches!(tool.key, Key::Reads { .. })
}

/// A family's tools: the one its name means first (`Edit` is `edit` before `write`: a
/// `Tool(param:value)` rule reads that tool's fields), then the others `keep` takes.
fn family(name: &str, keep: impl Fn(&&Tool) -> bool) -> Vec<&'static str> {
    let first = resolve(name).map(|(t, _)| t).filter(&keep);
    let rest = TOOLS.iter().filter(keep).filter(|t| first.is_none_or(|f| f.name != t.name));
    first.into_iter().chain(rest).map(|t| t.name).collect()
}

/// The aerix tools a rule of `name` with a path covers: a family's, or the one tool a name
/// means when its key is a path; `None` for a name whose rules take no path.
fn path_tools(name: &str) -> Option<Vec<&'static str>> {
    if READ_RULES.contains(&name) {
        return Some(family(name, reads));
    }
    if EDIT_RULES.contains(&name) {
        return Some(family(name, |t| t.edits()));
    }
    match resolve(name)? {
        (tool, false) if reads(&tool) || tool.edits() => Some(vec![tool.name]),
        _ => None,
    }
}

/// The aerix tools a bare rule of `name` covers; `None` for a name aerix has no tool for.
fn bare_tools(name: &str) -> Option<Vec<&'static str>> {
    if EDIT_RULES.contains(&name) {
        return Some(family(name, |t| t.edits()));
    }
    match resolve(name)? {
        // A helper's rule (`BashOutput`) is not a rule for every command.
        (_, true) => Some(Vec::new()),
        (tool, false) => Some(vec![tool.name]),
    }
}

impl Rule {
    pub(crate) fn parse(text: &str, kind: Kind, anchors: &Anchors) -> Result<Rule, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err("the rule is empty".to_owned());
        }
        let (name, specifier) = match trimmed.find('(') {
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err("malformed Tool(content) rule: rules take the form Tool or \
                                Tool(content) and must end at the closing `)`; parentheses \
                                inside the content are literal"
                        .to_owned());
                };
                (trimmed[..open].trim(), Some(inner))
            }
            None if trimmed.contains(')') => {
                return Err("a `)` with no `(` before it".to_owned());
            }
            None => (trimmed, None),
        };
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*'))
        {
            return Err(format!("`{name}` is not a tool name"));
        }
        let tool = tool_name(name, kind)?;
        let spec = match specifier {
            None | Some("*") => Spec::Any,
            Some("") => return Err("the content in parentheses is empty".to_owned()),
            Some(spec) => specifier_of(name, &tool, spec, kind, anchors)?,
        };
        Ok(Rule { text: trimmed.to_owned(), tool, spec })
    }

    /// An agent definition's pattern, as an allow rule holding its agent; one that cannot be
    /// parsed still holds the tool it names (and allows nothing), so a typo never widens it.
    pub(crate) fn held(text: &str, anchors: &Anchors) -> Rule {
        Rule::parse(text, Kind::Allow, anchors).unwrap_or_else(|_| {
            let name = text.split('(').next().unwrap_or(text).trim();
            let tool = tool_name(name, Kind::Deny).unwrap_or_else(|_| ToolName::Other(name.into()));
            Rule { text: text.trim().to_owned(), tool, spec: Spec::Nothing }
        })
    }

    /// Whether the rule covers calls of the aerix tool `tool` (`claude`: its Claude Code name,
    /// which tool-name globs also match).
    pub(crate) fn covers(&self, tool: &str) -> bool {
        match &self.tool {
            ToolName::Known { bare, scoped } => match self.spec {
                Spec::Any => bare.contains(&tool),
                _ => scoped.contains(&tool),
            },
            ToolName::Mcp { server, tool: part } => {
                let Some(rest) = tool.strip_prefix("mcp__").and_then(|r| r.strip_prefix(server))
                else {
                    return false;
                };
                match (rest.strip_prefix("__"), part) {
                    (Some(name), Some(glob)) => glob.is_match(name),
                    (Some(_), None) => true,
                    (None, _) => false,
                }
            }
            ToolName::Glob(glob) => {
                glob.is_match(tool)
                    || aerix_claude::tools::claude_name(tool).is_some_and(|c| glob.is_match(c))
            }
            ToolName::Other(name) => name == tool,
        }
    }
}

fn tool_name(name: &str, kind: Kind) -> Result<ToolName, String> {
    if let Some(rest) = name.strip_prefix("mcp__") {
        let (server, tool) = match rest.split_once("__") {
            Some((server, tool)) => (server, Some(tool)),
            None => (rest, None),
        };
        if server.is_empty() || server.contains('*') {
            // Deny and ask rules may glob any name; an allow rule names its server.
            return match kind {
                Kind::Allow => Err("an allow rule's MCP server is named, not a glob: only the \
                                    tool after `mcp__<server>__` may hold `*`"
                    .to_owned()),
                _ => Ok(ToolName::Glob(name_glob(name)?)),
            };
        }
        let tool = match tool {
            None | Some("*") => None,
            Some(tool) => Some(name_glob(tool)?),
        };
        return Ok(ToolName::Mcp { server: server.to_owned(), tool });
    }
    if name.contains('*') {
        return match kind {
            Kind::Allow => Err("an allow rule's tool name may hold `*` only after \
                                `mcp__<server>__`: this one would approve tools it does not name"
                .to_owned()),
            _ => Ok(ToolName::Glob(name_glob(name)?)),
        };
    }
    match bare_tools(name) {
        Some(bare) => {
            let scoped = path_tools(name).unwrap_or_else(|| bare.clone());
            Ok(ToolName::Known { bare, scoped })
        }
        None => Ok(ToolName::Other(name.to_owned())),
    }
}

/// A name glob: `*` any run of characters, the whole name.
fn name_glob(glob: &str) -> Result<Regex, String> {
    let escaped: Vec<String> = glob.split('*').map(regex::escape).collect();
    Regex::new(&format!("(?s)^{}$", escaped.join(".*"))).map_err(|e| e.to_string())
}

fn specifier_of(
    name: &str,
    tool: &ToolName,
    spec: &str,
    kind: Kind,
    anchors: &Anchors,
) -> Result<Spec, String> {
    let ToolName::Known { bare, scoped } = tool else {
        return match tool {
            ToolName::Other(_) => Ok(Spec::Nothing),
            _ => Err(format!("`{name}` takes no content in parentheses")),
        };
    };
    // `Tool(param:value)`: deny and ask rules only; an allow rule keeps the tool's own syntax.
    if kind != Kind::Allow
        && let Some((param, value)) = spec.split_once(':')
        && let Some(tool) = bare.first().and_then(|t| tool_named(t))
        && let Some(twin) = tool.twin
    {
        let param = param.trim();
        if tool.primary_claude_field() == Some(param) {
            return Err(format!(
                "`{param}` is the tool's primary field, which a compound input gets past: \
                 write `{name}(...)` with the tool's own pattern instead"
            ));
        }
        let mut fields =
            twin.fields.iter().map(|f| f.claude).chain(twin.descriptive.iter().copied());
        if fields.any(|f| f == param) {
            return Ok(Spec::Param { name: param.to_owned(), value: name_glob(value.trim())? });
        }
    }
    if path_tools(name).is_some() {
        let floating = kind != Kind::Allow;
        return PathPattern::parse(spec, anchors, floating).map(Spec::Path);
    }
    match scoped.first().and_then(|t| tool_named(t)) {
        Some(Tool { key: Key::Command { .. }, .. }) => {
            CommandPattern::parse(spec).map(Spec::Command)
        }
        Some(Tool { key: Key::Names { .. }, .. }) => name_glob(spec).map(Spec::Name),
        Some(other) => {
            Err(format!("`{name}` ({} in aerix) takes no content in parentheses", other.name))
        }
        None => Ok(Spec::Nothing),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn anchors() -> Anchors {
        Anchors { source: PathBuf::from("/p"), cwd: PathBuf::from("/p"), home: None }
    }

    fn parse(text: &str, kind: Kind) -> Result<Rule, String> {
        Rule::parse(text, kind, &anchors())
    }

    #[test]
    fn claude_code_s_names_cover_aerix_s_tools() {
        let covers = |text: &str, tool: &str| parse(text, Kind::Deny).unwrap().covers(tool);
        assert!(covers("Bash", "bash") && covers("Bash(*)", "bash") && !covers("Bash", "read"));
        assert!(covers("Edit", "write") && covers("Edit", "edit"));
        assert!(covers("Edit(src/**)", "write") && covers("Write(src/**)", "write"));
        assert!(!covers("Write", "edit") && covers("MultiEdit", "edit"));
        // Read rules reach the tools that read files; a bare Read only `read`.
        assert!(covers("Read(./.env)", "grep") && covers("Read(./.env)", "glob"));
        assert!(!covers("Read", "grep"));
        assert!(covers("Task", "agent") && covers("Agent(Explore)", "agent"));
        assert!(covers("bash(git diff:*)", "bash"), "aerix's own names too");
        assert!(!covers("KillShell", "bash"), "a helper's rule is not every command's");
        assert!(covers("WebFetch", "WebFetch") && !covers("WebFetch", "bash"));
    }

    #[test]
    fn mcp_names_are_matched_as_claude_code_matches_them() {
        let covers = |text: &str, kind, tool: &str| parse(text, kind).unwrap().covers(tool);
        let navigate = "mcp__puppeteer__puppeteer_navigate";
        for rule in ["mcp__puppeteer", "mcp__puppeteer__*", navigate] {
            assert!(covers(rule, Kind::Allow, navigate), "{rule}");
            assert!(!covers(rule, Kind::Allow, "mcp__github__get_issue"), "{rule}");
        }
        assert!(!covers(navigate, Kind::Allow, "mcp__puppeteer__click"));
        assert!(!covers("mcp__puppeteer", Kind::Allow, "mcp__puppeteer2__x"));
        assert!(covers("mcp__github__get_*", Kind::Allow, "mcp__github__get_issue"));
        assert!(!covers("mcp__github__get_*", Kind::Allow, "mcp__github__create_issue"));
        // Deny and ask rules glob any name; allow rules only a named server's tools.
        assert!(covers("mcp__*", Kind::Deny, navigate) && !covers("mcp__*", Kind::Deny, "bash"));
        assert!(covers("*", Kind::Deny, "bash") && covers("B*", Kind::Ask, "bash"));
        for unanchored in ["*", "B*", "mcp__*"] {
            assert!(parse(unanchored, Kind::Allow).is_err(), "{unanchored}");
        }
    }

    #[test]
    fn a_malformed_rule_says_what_is_wrong() {
        for (text, why) in [
            ("", "empty"),
            ("Bash(rm -rf /)*", "must end at the closing"),
            ("Bash(git diff", "must end at the closing"),
            ("Bash)", "no `(`"),
            ("Bash()", "empty"),
            ("Ba sh", "not a tool name"),
            ("Read(!x)", "negation"),
            ("TodoWrite(x)", "takes no content"),
            ("mcp__github(x)", "takes no content"),
            ("Bash(:*)", "needs a command"),
        ] {
            let e = parse(text, Kind::Deny).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        // Parentheses inside the content are literal.
        assert!(parse("Bash(echo (x))", Kind::Allow).is_ok());
    }

    #[test]
    fn deny_and_ask_rules_match_a_parameter_and_never_the_primary_field() {
        let rule = parse("Bash(run_in_background:true)", Kind::Deny).unwrap();
        assert!(matches!(&rule.spec, Spec::Param { name, .. } if name == "run_in_background"));
        let e = parse("Bash(command:rm *)", Kind::Deny).unwrap_err();
        assert!(e.contains("primary field"), "{e}");
        // An allow rule keeps the tool's own syntax: `npm:*` is a legacy prefix there and in
        // a deny rule (npm is no parameter of Bash).
        assert!(matches!(parse("Bash(npm:*)", Kind::Allow).unwrap().spec, Spec::Command(_)));
        assert!(matches!(parse("Bash(npm:*)", Kind::Deny).unwrap().spec, Spec::Command(_)));
        assert!(matches!(
            parse("Bash(run_in_background:true)", Kind::Allow).unwrap().spec,
            Spec::Command(_)
        ));
    }

    #[test]
    fn a_parameter_is_one_of_the_named_tool_s_claude_code_fields() {
        let param = |text: &str| match parse(text, Kind::Deny).map(|r| r.spec) {
            Ok(Spec::Param { name, .. }) => Some(name),
            _ => None,
        };
        // `Edit` covers `edit` and `write`: its parameters are `edit`'s, the tool it names.
        assert_eq!(param("Edit(old_string:TODO*)").as_deref(), Some("old_string"));
        assert!(matches!(parse("Edit(content:x)", Kind::Deny).unwrap().spec, Spec::Path(_)));
        assert_eq!(param("Write(content:x)").as_deref(), Some("content"));
        // Descriptive fields count; the key's field is each tool's primary one.
        assert_eq!(param("Bash(description:*deploy*)").as_deref(), Some("description"));
        assert_eq!(param("Grep(pattern:secret)").as_deref(), Some("pattern"));
        for text in ["Grep(path:/etc)", "Read(file_path:/etc)", "Glob(path:/)"] {
            let e = parse(text, Kind::Deny).unwrap_err();
            assert!(e.contains("primary field"), "{text}: {e}");
        }
    }
}
