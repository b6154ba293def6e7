//! Agent definitions: Markdown files with YAML frontmatter in Claude Code's format, so a user's
//! existing subagents work unchanged. A file that cannot be used is one note naming it and is
//! skipped; the others load.

use std::path::{Path, PathBuf};

use aerix_turn::ALL_TOOLS;
use serde_yaml_ng::{Mapping, Value};

use crate::Env;
use crate::capped::{Capped, read_capped, read_capped_within};
use crate::frontmatter::{NoFrontmatter, split_frontmatter};
use crate::named::{ByName, Named};

/// One agent definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentDefinition {
    pub name: String,
    pub description: String,
    /// aerix tool names, each once, in `ALL_TOOLS` order; `None`: every tool.
    pub tools: Option<Vec<String>>,
    /// The entries of `tools` with a permission pattern (`Bash(git diff:*)`), as written, for
    /// the tools it names only so: its agent may call such a tool only as they allow
    /// (`aerix-permissions` holds it to them).
    pub held: Vec<String>,
    /// A model reference; `None` for `inherit` or no `model` (the caller's member).
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    /// The agent's system prompt: the text after the frontmatter.
    pub body: String,
    pub source: PathBuf,
    /// Where it was found: a profile's overlay path `agents/<origin>/<name>.md` names it.
    pub origin: Origin,
}

/// Where a skill or an agent definition was found: the project's directories, the user's, or a
/// plugin (by its id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Project,
    User,
    Plugin(String),
}

impl Origin {
    /// `project`, `user` or the plugin's id: the source component of an overlay path.
    pub fn as_str(&self) -> &str {
        match self {
            Origin::Project => "project",
            Origin::User => "user",
            Origin::Plugin(id) => id,
        }
    }
}

/// The definitions by name; when several files define a name, the one of the directory first
/// in `AgentDirs` order wins.
pub type AgentDefinitions = ByName<AgentDefinition>;

impl Named for AgentDefinition {
    fn name(&self) -> &str {
        &self.name
    }

    fn body_mut(&mut self) -> &mut String {
        &mut self.body
    }
}

/// What loading found: the definitions, and one line per problem (a skipped file, a tool name
/// without an aerix equivalent) for the caller to print.
#[derive(Clone, Debug, Default)]
pub struct LoadedAgents {
    pub definitions: AgentDefinitions,
    pub notes: Vec<String>,
}

/// The directories definitions are read from, the one that wins a name first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentDirs {
    pub dirs: Vec<PathBuf>,
    /// How many of `dirs`, first, are the project's (the rest are the user's).
    pub project: usize,
}

impl AgentDirs {
    /// From `cwd` up to the repository `root`, each directory's `.aerix/agents` then
    /// `.claude/agents` (the closest directory wins, as in Claude Code; aerix's own over
    /// Claude Code's); then the user's `$XDG_CONFIG_HOME/aerix/agents` and `~/.claude/agents`.
    /// Project definitions win over the user's.
    pub fn standard(env: &Env, root: &Path, cwd: &Path) -> AgentDirs {
        let mut project: Vec<&Path> = cwd.ancestors().take_while(|d| d.starts_with(root)).collect();
        if project.is_empty() {
            project.push(cwd);
        }
        let mut dirs = Vec::new();
        for dir in project {
            dirs.push(dir.join(".aerix/agents"));
            dirs.push(dir.join(".claude/agents"));
        }
        let project = dirs.len();
        dirs.extend(env.config_home().map(|c| c.join("aerix/agents")));
        dirs.extend(env.home.as_ref().map(|h| h.join(".claude/agents")));
        AgentDirs { dirs, project }
    }
}

/// Every `*.md` file under each directory (recursively, in path order); a missing directory
/// holds none.
pub fn load_agents(dirs: &AgentDirs) -> LoadedAgents {
    let mut out = LoadedAgents::default();
    for (index, dir) in dirs.dirs.iter().enumerate() {
        let origin = if index < dirs.project { Origin::Project } else { Origin::User };
        // Only a second file of the same directory is worth a line: a project's definition
        // shadowing a user's one is the point.
        load_dir(&mut out, dir, &origin, Clash::SameDirectory);
    }
    out
}

/// A plugin's `agents/` directory: each definition named `plugin:name`, after the others (a
/// name already loaded is a note, and the first is used).
pub fn load_plugin_agents(out: &mut LoadedAgents, plugin: &str, dir: &Path) {
    load_dir(out, dir, &Origin::Plugin(plugin.to_owned()), Clash::Always);
}

/// Which definitions that lose their name to an earlier one get a note.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clash {
    SameDirectory,
    Always,
}

/// One directory's definitions, after those `out` holds (which keep their names).
fn load_dir(out: &mut LoadedAgents, dir: &Path, origin: &Origin, clash: Clash) {
    let mut files = Vec::new();
    if let Err(e) = markdown_files(dir, &mut files) {
        out.notes.push(format!("agents: {}: {e}; its definitions are skipped", dir.display()));
        return;
    }
    files.sort();
    for path in files {
        // A project's or a plugin's definition is read only inside its directory (a link out
        // is skipped with a note); the user's own may link where they like.
        let read = match origin {
            Origin::User => read_capped(&path),
            Origin::Project | Origin::Plugin(_) => read_capped_within(&path, dir),
        };
        let parsed = match read {
            Ok(Capped::Text(text)) => parse_agent(&path, &text),
            Ok(Capped::Missing) => continue,
            Ok(Capped::Skipped(why)) => Err(why),
            Err(e) => Err(e.to_string()),
        };
        let (mut definition, notes) = match parsed {
            Ok(parsed) => parsed,
            Err(why) => {
                out.notes.push(format!("agents: {}: {why}; skipped", path.display()));
                continue;
            }
        };
        out.notes.extend(notes);
        if let Origin::Plugin(plugin) = origin {
            definition.name = format!("{plugin}:{}", definition.name);
        }
        definition.origin = origin.clone();
        if let Err((definition, winner)) = out.definitions.add(definition)
            && (clash == Clash::Always || winner.source.starts_with(dir))
        {
            out.notes.push(format!(
                "agents: {}: defines `{}` again; {} is used",
                path.display(),
                definition.name,
                winner.source.display()
            ));
        }
    }
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        // `metadata` follows symlinks: a linked directory or file counts as its target.
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if meta.is_dir() {
            markdown_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// One definition file: the definition and its notes, or why the file cannot be used.
pub fn parse_agent(path: &Path, text: &str) -> Result<(AgentDefinition, Vec<String>), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (yaml, body) = split_frontmatter(text).map_err(|none| match none {
        NoFrontmatter::Missing => {
            "no YAML frontmatter (the file must start with a `---` line)".to_owned()
        }
        NoFrontmatter::Unclosed => "the frontmatter has no closing `---` line".to_owned(),
    })?;
    let value: Value =
        serde_yaml_ng::from_str(yaml).map_err(|e| format!("the frontmatter is not YAML: {e}"))?;
    let Value::Mapping(map) = value else {
        return Err("the frontmatter is not a mapping of keys".to_owned());
    };
    let mut notes = Vec::new();
    let mut note = |what: String| notes.push(format!("agents: {}: {what}", path.display()));
    let name = required_string(&map, "name")?;
    let description = required_string(&map, "description")?;
    let (granted, held) = match tool_list(&map, "tools")? {
        Some(names) => {
            let (tools, held) = mapped(&names, &mut note);
            (Some(tools), held)
        }
        None => (None, Vec::new()),
    };
    // A pattern here takes its whole tool away: narrower than the pattern, never wider.
    let denied = tool_list(&map, "disallowedTools")?.map(|names| mapped(&names, &mut note).0);
    let tools = match (granted, denied) {
        (granted, None) => granted,
        (granted, Some(denied)) => {
            let all = || ALL_TOOLS.iter().map(|t| t.to_string()).collect();
            Some(granted.unwrap_or_else(all).into_iter().filter(|t| !denied.contains(t)).collect())
        }
    };
    let model = match map.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) if m == "inherit" => None,
        Some(Value::String(m)) if !m.trim().is_empty() => Some(m.trim().to_owned()),
        Some(_) => return Err("key `model` is not a model name or `inherit`".to_owned()),
    };
    let max_turns = match map.get("maxTurns") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) if n > 0 => Some(n),
            _ => return Err(format!("key `maxTurns` is {n}, not a whole number above 0")),
        },
        Some(_) => return Err("key `maxTurns` is not a whole number above 0".to_owned()),
    };
    if map.contains_key("hooks") {
        note("its `hooks` are not run (agent-scoped hooks are not supported)".to_owned());
    }
    let definition = AgentDefinition {
        name,
        description,
        tools,
        held,
        model,
        max_turns,
        body: body.to_owned(),
        source: path.to_owned(),
        // The loader that found the file says where; a bare parse counts as the user's.
        origin: Origin::User,
    };
    Ok((definition, notes))
}

fn required_string(map: &Mapping, key: &str) -> Result<String, String> {
    match map.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
        None | Some(Value::Null) => Err(format!("key `{key}` is missing")),
        Some(Value::String(_)) => Err(format!("key `{key}` is empty")),
        Some(_) => Err(format!("key `{key}` is not a string")),
    }
}

/// A comma-separated string or a list of strings (both are Claude Code's).
fn tool_list(map: &Mapping, key: &str) -> Result<Option<Vec<String>>, String> {
    let split = |s: &str| -> Vec<String> {
        s.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect()
    };
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(split(s))),
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.trim().to_owned()),
                _ => Err(format!("key `{key}` holds an item that is not a tool name")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(format!("key `{key}` is neither a list nor a comma-separated string")),
    }
}

/// Claude Code's (or aerix's own) tool names as aerix tools, each once, in `ALL_TOOLS` order
/// (then the MCP tools named, `mcp__<server>__<tool>`, which the run offers if a server has
/// them), and the entries with a pattern (`Bash(git diff:*)`) for the tools no bare entry grants whole.
fn mapped(names: &[String], note: &mut impl FnMut(String)) -> (Vec<String>, Vec<String>) {
    let mut found = Vec::new();
    let mut whole = Vec::new();
    let mut patterns = Vec::new();
    let mut mcp: Vec<String> = Vec::new();
    for name in names {
        // An MCP server's tool, by its full name: kept as named (no pattern; none other known).
        if name.starts_with("mcp__") && !name.contains('(') {
            if !mcp.contains(name) {
                mcp.push(name.clone());
            }
            continue;
        }
        let (base, pattern) = match name.split_once('(') {
            Some((base, rest)) if rest.ends_with(')') => (base.trim(), true),
            _ => (name.as_str(), false),
        };
        // aerix's name or Claude Code's (a helper, `BashOutput`, is its tool: `bash`), from the
        // registry; `None`: no equivalent (`WebFetch`, ...: `docs/configuration.md` says why).
        let tool = aerix_turn::tools::resolve(base).map(|(tool, _)| tool.name);
        match tool {
            Some(tool) => {
                if pattern {
                    patterns.push((tool, name.clone()));
                } else {
                    whole.push(tool);
                }
                if !found.contains(&tool) {
                    found.push(tool);
                }
            }
            None => note(format!("tool `{name}` has no aerix equivalent and is left out")),
        }
    }
    let held = patterns.into_iter().filter(|(t, _)| !whole.contains(t)).map(|(_, p)| p).collect();
    let tools = ALL_TOOLS.iter().filter(|t| found.contains(t)).map(|t| t.to_string());
    (tools.chain(mcp).collect(), held)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn a_projects_definition_linked_out_of_its_directory_is_skipped_with_a_note() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo/.claude/agents");
        std::fs::create_dir_all(&dir).unwrap();
        let outside = tmp.path().join("secret.md");
        std::fs::write(&outside, "---\nname: leak\ndescription: d\n---\nsecret\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("leak.md")).unwrap();
        let mut out = LoadedAgents::default();
        load_dir(&mut out, &dir, &Origin::Project, Clash::SameDirectory);
        assert!(out.definitions.get("leak").is_none());
        assert_eq!(out.notes.len(), 1, "{:?}", out.notes);
        assert!(out.notes[0].contains("a link to") && out.notes[0].ends_with("; skipped"));
        // The user's own definition may link out.
        let mut out = LoadedAgents::default();
        load_dir(&mut out, &dir, &Origin::User, Clash::SameDirectory);
        assert!(out.definitions.get("leak").is_some(), "{:?}", out.notes);
    }

    fn check(text: &str) -> Result<(AgentDefinition, Vec<String>), String> {
        parse_agent(Path::new("/p/a.md"), text)
    }

    #[test]
    fn claude_code_frontmatter_becomes_a_definition() {
        let (d, notes) = check(
            "---\nname: reviewer\ndescription: Reviews a diff.\ntools: Read, Grep, Glob, Bash\n\
             model: sonnet\nmaxTurns: 7\ncolor: blue\n---\n\nYou review code.\n",
        )
        .unwrap();
        assert_eq!((d.name.as_str(), d.description.as_str()), ("reviewer", "Reviews a diff."));
        assert_eq!(d.tools.unwrap(), ["read", "bash", "glob", "grep"]);
        assert_eq!((d.model.as_deref(), d.max_turns), (Some("sonnet"), Some(7)));
        assert_eq!(d.body, "You review code.\n");
        assert!(notes.is_empty(), "unknown keys are ignored: {notes:?}");
    }

    #[test]
    fn tools_map_to_aerix_names_and_unknown_ones_are_notes() {
        let (d, notes) = check(
            "---\nname: x\ndescription: y\ntools:\n  - MultiEdit\n  - Edit\n  - LS\n  - WebFetch\n  \
             - Bash(git diff:*)\n  - Task\n  - TodoWrite\n  - repo_map\nmodel: inherit\n---\nbody",
        )
        .unwrap();
        assert_eq!(d.tools.unwrap(), ["edit", "bash", "glob", "repo_map", "plan", "agent"]);
        assert_eq!(d.model, None, "inherit is the caller's member");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("`WebFetch` has no aerix equivalent"), "{notes:?}");
        // The pattern holds the agent to it: kept for `aerix-permissions`, not widened.
        assert_eq!(d.held, ["Bash(git diff:*)"]);
    }

    #[test]
    fn a_pattern_holds_only_a_tool_no_bare_entry_grants_whole() {
        let (d, notes) = check(
            "---\nname: x\ndescription: y\ntools: Bash(git diff:*), Bash(git log:*), Read, \
             Edit(src/**), Edit\ndisallowedTools: Bash(rm:*)\n---\n",
        )
        .unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(d.held, ["Bash(git diff:*)", "Bash(git log:*)"], "Edit is granted whole");
        // A pattern in `disallowedTools` takes the whole tool away.
        assert_eq!(d.tools.unwrap(), ["read", "edit"]);
    }

    #[test]
    fn no_tools_is_every_tool_and_disallowed_tools_are_taken_out() {
        let (d, _) = check("---\nname: x\ndescription: y\n---\n").unwrap();
        assert_eq!((d.tools, d.body.as_str()), (None, ""));
        let (d, _) =
            check("---\nname: x\ndescription: y\ndisallowedTools: Write, Edit\n---\n").unwrap();
        let expected: Vec<&str> =
            ALL_TOOLS.iter().copied().filter(|t| !["write", "edit"].contains(t)).collect();
        assert_eq!(d.tools.unwrap(), expected);
    }

    #[test]
    fn a_plugin_s_definitions_are_namespaced_after_the_others() {
        let tmp = std::env::temp_dir().join(format!("aerix-plugin-agents-{}", std::process::id()));
        let dir = tmp.join("agents");
        std::fs::create_dir_all(&dir).unwrap();
        let def = |name: &str| format!("---\nname: {name}\ndescription: d\n---\nbody\n");
        std::fs::write(dir.join("a.md"), def("explorer")).unwrap();
        std::fs::write(dir.join("b.md"), def("explorer")).unwrap();
        std::fs::write(dir.join("c.md"), "no frontmatter").unwrap();
        let mut loaded = LoadedAgents::default();
        load_plugin_agents(&mut loaded, "dev", &dir);
        load_plugin_agents(&mut loaded, "dev", &tmp.join("missing"));
        std::fs::remove_dir_all(&tmp).unwrap();
        let names: Vec<&str> = loaded.definitions.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["dev:explorer"]);
        assert_eq!(loaded.notes.len(), 2, "{:?}", loaded.notes);
        assert!(
            loaded.notes[0].contains("b.md: defines `dev:explorer` again"),
            "{:?}",
            loaded.notes
        );
        assert!(loaded.notes[1].contains("c.md: no YAML frontmatter"), "{:?}", loaded.notes);
    }

    #[test]
    fn a_bad_file_says_what_is_wrong() {
        for (text, why) in [
            ("name: x\n", "no YAML frontmatter"),
            ("---\nname: x\ndescription: y\n", "no closing `---`"),
            ("---\nname: [x\n---\n", "not YAML"),
            ("---\n- a\n---\n", "not a mapping"),
            ("---\ndescription: y\n---\n", "key `name` is missing"),
            ("---\nname: x\n---\n", "key `description` is missing"),
            ("---\nname: 3\ndescription: y\n---\n", "key `name` is not a string"),
            ("---\nname: x\ndescription: y\nmaxTurns: 0\n---\n", "`maxTurns` is 0"),
            ("---\nname: x\ndescription: y\nmaxTurns: many\n---\n", "`maxTurns` is not"),
            ("---\nname: x\ndescription: y\ntools: 3\n---\n", "key `tools` is neither"),
            ("---\nname: x\ndescription: y\nmodel: [a]\n---\n", "key `model`"),
        ] {
            let err = check(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }
}
