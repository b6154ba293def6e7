//! The tool registry: every tool aerix offers, each once, with what every part of aerix knows of
//! it. A tool's entry is its name, who runs a call (`Run`), what the permission rules judge a
//! call by (`Key`), its Claude Code twin (the name and input fields hooks, rules and agent
//! definitions know it by) and the other Claude Code names that mean it; its input schema is
//! `Tool::input_schema`. The rest of aerix reads this table instead of keeping its own list:
//! the turn schema and the system segment (`ALL_TOOLS`), the Claude Code view (`aerix-claude`),
//! agent definitions' tool lists (`aerix-config`), the permission rules (`aerix-permissions`)
//! and the dispatch of a call (aerix-agent's `runtime/calls.rs`). A tool added here is offered,
//! viewed, judged and run everywhere, or fails to compile where a `match` on `Run` misses it.

use serde_json::Value;

/// One tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tool {
    /// The name the model calls it by.
    pub name: &'static str,
    pub run: Run,
    pub key: Key,
    /// Its Claude Code twin, when it has one: hooks see a call under the twin's name and
    /// fields, rules and definitions may name it so.
    pub twin: Option<Twin>,
    /// Other Claude Code names for it (`MultiEdit` for `edit`, `Task` for `agent`): a
    /// definition's tool list and a rule may name it by them.
    pub also: &'static [&'static str],
    /// Claude Code's helper tools that come with it (`BashOutput` with `bash`): a definition
    /// that lists one gets the tool, a rule that names one covers no call.
    pub helpers: &'static [&'static str],
}

/// Who runs a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    /// `aerix-tools` (`aerix_tools::run`), on the agent's tree, jobs and file set.
    Machine,
    /// The agent's plan (`read`, `write`; the root's first write through the plan gate).
    Plan,
    /// The agent's context (compaction's `context` tool).
    Context,
    /// A skill's text.
    Skill,
    /// A piece of delegation, run with the turn's other `agent` calls after its other calls.
    Agent,
}

/// What the permission rules judge a call by (the tool's rule content, `Tool(...)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// Its name alone: a rule takes no content, and no mode asks about it.
    Name,
    /// The name its `field` holds (`Agent(Explore)`, `Skill(deploy)`); `absent` is the name a
    /// call without the field runs. No mode asks about it (what it runs is judged in turn).
    /// `file`: the field the runtime fills, before the rules, with the file the named thing
    /// hands the model (a skill's), which the `Read` rules judge as they judge `read`.
    Names { field: &'static str, absent: &'static str, file: Option<&'static str> },
    /// The command line in `field` (`Bash(npm test:*)`).
    Command { field: &'static str },
    /// A path it reads (`Read(./.env)`), from `field`.
    Reads { field: &'static str, target: Target },
    /// A path it changes (`Edit(src/**)`), from `field`.
    Edits { field: &'static str },
}

impl Key {
    /// Whether a `Read` deny rule keeps its calls off the rule's paths: it changes files, or it
    /// hands the model a file.
    pub fn guarded_by_reads(self) -> bool {
        matches!(self, Key::Edits { .. } | Key::Names { file: Some(_), .. })
    }
}

/// How a reading tool's path is found from its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The field itself; a call without it reads nothing the rules can name.
    Path,
    /// The field, else the working directory.
    PathOrCwd,
    /// The field (else the working directory) joined with the literal prefix of the glob in
    /// `pattern`: the directory the search starts in.
    Under { pattern: &'static str },
}

/// A Claude Code twin: its name and input fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Twin {
    pub name: &'static str,
    /// aerix's field and Claude Code's, and how a value is carried between them, in the order
    /// Claude Code's form lists them.
    pub fields: &'static [Field],
    /// Claude Code's fields that only describe (`description`): dropped from a hook's
    /// `updatedInput`, and a rule may name them.
    pub descriptive: &'static [&'static str],
}

/// One input field of a twin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub aerix: &'static str,
    pub claude: &'static str,
    pub carried: Carried,
}

/// How a field's value is carried to Claude Code's form and back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carried {
    AsIs,
    /// A path: absolute in Claude Code's form (its tools require it).
    Path,
    /// Seconds in aerix's form, milliseconds in Claude Code's.
    Seconds,
}

const fn field(aerix: &'static str, claude: &'static str) -> Field {
    Field { aerix, claude, carried: Carried::AsIs }
}

const fn path(aerix: &'static str, claude: &'static str) -> Field {
    Field { aerix, claude, carried: Carried::Path }
}

const fn twin(name: &'static str, fields: &'static [Field]) -> Option<Twin> {
    Some(Twin { name, fields, descriptive: &[] })
}

const fn tool(name: &'static str, run: Run, key: Key, twin: Option<Twin>) -> Tool {
    Tool { name, run, key, twin, also: &[], helpers: &[] }
}

/// Every tool, in the order the system segment lists them and a definition's tool list is
/// given back.
pub const TOOLS: [Tool; 11] = [
    tool(
        "read",
        Run::Machine,
        Key::Reads { field: "path", target: Target::Path },
        twin(
            "Read",
            &[path("path", "file_path"), field("offset", "offset"), field("limit", "limit")],
        ),
    ),
    tool(
        "write",
        Run::Machine,
        Key::Edits { field: "path" },
        twin("Write", &[path("path", "file_path"), field("content", "content")]),
    ),
    Tool {
        also: &["MultiEdit"],
        ..tool(
            "edit",
            Run::Machine,
            Key::Edits { field: "path" },
            twin(
                "Edit",
                &[
                    path("path", "file_path"),
                    field("old", "old_string"),
                    field("new", "new_string"),
                    field("replace_all", "replace_all"),
                ],
            ),
        )
    },
    Tool {
        helpers: &["BashOutput", "KillShell", "KillBash"],
        ..tool(
            "bash",
            Run::Machine,
            Key::Command { field: "command" },
            Some(Twin {
                name: "Bash",
                fields: &[
                    field("command", "command"),
                    Field { aerix: "timeout_secs", claude: "timeout", carried: Carried::Seconds },
                    field("background", "run_in_background"),
                ],
                descriptive: &["description"],
            }),
        )
    },
    Tool {
        also: &["LS"],
        ..tool(
            "glob",
            Run::Machine,
            Key::Reads { field: "path", target: Target::Under { pattern: "pattern" } },
            twin("Glob", &[field("pattern", "pattern"), path("path", "path")]),
        )
    },
    tool(
        "grep",
        Run::Machine,
        Key::Reads { field: "path", target: Target::PathOrCwd },
        twin(
            "Grep",
            &[
                field("pattern", "pattern"),
                path("path", "path"),
                field("glob", "glob"),
                field("max_matches", "head_limit"),
            ],
        ),
    ),
    tool("repo_map", Run::Machine, Key::Name, None),
    Tool {
        also: &["TodoWrite"],
        helpers: &["TodoRead"],
        ..tool("plan", Run::Plan, Key::Name, None)
    },
    tool("context", Run::Context, Key::Name, None),
    Tool {
        also: &["Task", "Agent"],
        ..tool(
            "agent",
            Run::Agent,
            Key::Names { field: "definition", absent: "implementer", file: None },
            None,
        )
    },
    Tool {
        also: &["Skill", "SlashCommand"],
        ..tool(
            "skill",
            Run::Skill,
            Key::Names { field: "name", absent: "", file: Some("file") },
            None,
        )
    },
];

/// Every tool's name, in `TOOLS` order.
pub const ALL_TOOLS: [&str; TOOLS.len()] = {
    let mut names = [""; TOOLS.len()];
    let mut i = 0;
    while i < TOOLS.len() {
        names[i] = TOOLS[i].name;
        i += 1;
    }
    names
};

/// The tool of that name.
pub fn tool_named(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The tool a name means, aerix's own or Claude Code's ([`from_claude`]), and whether the name
/// is one of its helpers: how agent definitions' tool lists and permission rules read a name.
pub fn resolve(name: &str) -> Option<(&'static Tool, bool)> {
    tool_named(name).map(|t| (t, false)).or_else(|| from_claude(name))
}

/// The tool a Claude Code name means (its twin's name, or one of its other names), and whether
/// the name is one of its helpers; `None` for a name aerix has no tool for (`WebFetch`,
/// `WebSearch`, `NotebookEdit`: a note where a definition lists one, never a failure).
pub fn from_claude(name: &str) -> Option<(&'static Tool, bool)> {
    TOOLS.iter().find_map(|t| {
        let twin = t.twin.is_some_and(|twin| twin.name == name);
        if twin || t.also.contains(&name) {
            Some((t, false))
        } else {
            t.helpers.contains(&name).then_some((t, true))
        }
    })
}

impl Tool {
    /// The input schema the turn schema holds for its calls.
    pub fn input_schema(&self) -> Value {
        let schema = match self.run {
            Run::Machine => aerix_tools::input_schema(self.name),
            _ => crate::schemas::runtime_input_schema(self.name),
        };
        // Every entry has one: a test of this module checks it.
        schema.unwrap_or(Value::Null)
    }

    /// Whether its calls change files.
    pub fn edits(&self) -> bool {
        matches!(self.key, Key::Edits { .. })
    }

    /// The input field its key reads (`command`, `path`, `definition`); `None` for `Key::Name`.
    pub fn key_field(&self) -> Option<&'static str> {
        match self.key {
            Key::Name => None,
            Key::Names { field, .. }
            | Key::Command { field }
            | Key::Reads { field, .. }
            | Key::Edits { field } => Some(field),
        }
    }

    /// Claude Code's name for the field its key reads: a `Tool(param:value)` rule may not name
    /// it (a compound input would get past such a rule).
    pub fn primary_claude_field(&self) -> Option<&'static str> {
        let key = self.key_field()?;
        self.twin?.fields.iter().find(|f| f.aerix == key).map(|f| f.claude)
    }
}

#[cfg(test)]
mod tests {
    use super::{Run, TOOLS, from_claude, tool_named};

    #[test]
    fn every_tool_has_an_input_schema_and_a_run_of_its_own() {
        for tool in TOOLS {
            assert!(tool.input_schema().is_object(), "{}", tool.name);
            assert_eq!(tool_named(tool.name), Some(&tool));
            let machine = aerix_tools::input_schema(tool.name).is_some();
            assert_eq!(machine, tool.run == Run::Machine, "{}", tool.name);
        }
    }

    #[test]
    fn a_twin_s_fields_and_every_key_s_field_are_in_the_tool_s_schema() {
        for tool in TOOLS {
            let properties = |schema: &serde_json::Value, field: &str| {
                let branches = schema.get("anyOf").and_then(|b| b.as_array()).cloned();
                let branches = branches.unwrap_or_else(|| vec![schema.clone()]);
                branches.iter().any(|b| b["properties"].get(field).is_some())
            };
            let schema = tool.input_schema();
            if let Some(key) = tool.key_field() {
                assert!(properties(&schema, key), "{}: {key}", tool.name);
            }
            let Some(twin) = tool.twin else { continue };
            for field in twin.fields {
                assert!(properties(&schema, field.aerix), "{}: {}", tool.name, field.aerix);
            }
            assert!(tool.primary_claude_field().is_some(), "{}", tool.name);
        }
    }

    #[test]
    fn claude_code_names_mean_one_tool_each() {
        let mut names: Vec<&str> = Vec::new();
        for tool in TOOLS {
            let twin = tool.twin.map(|t| t.name);
            for name in twin.iter().chain(tool.also).chain(tool.helpers) {
                assert!(!names.contains(name), "{name} twice");
                assert!(from_claude(name).is_some_and(|(t, _)| t.name == tool.name));
                names.push(name);
            }
        }
        assert_eq!(
            from_claude("BashOutput").map(|(t, helper)| (t.name, helper)),
            Some(("bash", true))
        );
        assert_eq!(
            from_claude("MultiEdit").map(|(t, helper)| (t.name, helper)),
            Some(("edit", false))
        );
        assert!(from_claude("WebFetch").is_none() && from_claude("read").is_none());
    }

    #[test]
    fn a_verifier_s_tools_change_no_file_and_the_reserved_names_are_no_tool() {
        for name in crate::VERIFIER_TOOLS {
            let tool = tool_named(name).unwrap();
            assert!(tool.run == Run::Machine && !tool.edits(), "{name}");
        }
        for name in crate::RESERVED_TOOLS {
            assert!(tool_named(name).is_none() && from_claude(name).is_none(), "{name}");
        }
    }
}
