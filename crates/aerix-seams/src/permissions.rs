//! Whether a call may run by the user's permission rules, checked after `PreToolUse` (as
//! Claude Code checks them). The runtime knows no rule, mode or settings file: the binary
//! implements `Permissions` over `aerix-permissions`, and `ALLOW_ALL` lets every call through.

use serde_json::Value;

/// An agent definition's tool patterns (`Bash(git diff:*)`, as written) holding the agent it
/// runs and every piece that agent delegates to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub definition: String,
    pub patterns: Vec<String>,
}

/// A call, as the permission rules see it.
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    pub agent: &'a str,
    /// `None` for the root.
    pub agent_type: Option<&'a str>,
    pub held: &'a [Held],
    pub tool: &'a str,
    pub input: &'a Value,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permission {
    Allow,
    /// Refused: the call's result is `error: <reason>`.
    Deny(String),
    /// The `AskGate` asks the user (`always`: "always for this project" is offered).
    Ask {
        reason: String,
        always: bool,
    },
}

pub trait Permissions: Send + Sync {
    fn check(&self, call: &Asked<'_>) -> Permission;
    /// The user answered "always for this project" to what `check` asked about the call.
    fn remember(&self, call: &Asked<'_>);
}

/// Lets every call through (tests, and runtimes without rules).
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowAll;

impl Permissions for AllowAll {
    fn check(&self, _: &Asked<'_>) -> Permission {
        Permission::Allow
    }

    fn remember(&self, _: &Asked<'_>) {}
}

pub static ALLOW_ALL: AllowAll = AllowAll;
