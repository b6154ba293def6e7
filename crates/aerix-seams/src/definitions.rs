//! The agent definitions an `agent` call's `definition` names. The runtime reads no files: the
//! binary hands it a set (Claude Code's format, read by `aerix-config`) through `Definitions`,
//! and `NO_DEFINITIONS` knows none.

/// One agent definition, as delegation uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    pub name: String,
    /// The aerix tools it may call (`None`: all of them).
    pub tools: Option<Vec<String>>,
    /// Its tool patterns (`Bash(git diff:*)`) for the tools it names only so: its agent is
    /// held to them (`Permissions`), and so is every piece that agent delegates to.
    pub held: Vec<String>,
    /// A member to run on; one the pool does not have (or Claude Code's `inherit`, `sonnet`,
    /// ...) leaves the caller's.
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    /// The Markdown body: the implementer's instructions, before its brief.
    pub body: String,
}

/// Finds definitions by name.
pub trait Definitions: Send + Sync {
    fn get(&self, name: &str) -> Option<Definition>;
    /// Every name, for the turn schema's enum.
    fn names(&self) -> Vec<String>;
}

/// Knows no definition.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoDefinitions;

impl Definitions for NoDefinitions {
    fn get(&self, _: &str) -> Option<Definition> {
        None
    }

    fn names(&self) -> Vec<String> {
        Vec::new()
    }
}

/// For a `Runtime` whose caller has no definitions.
pub static NO_DEFINITIONS: NoDefinitions = NoDefinitions;
