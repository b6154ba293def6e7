//! What `aerix-permissions` reads from aerix's own settings files: the permission mode's names
//! and each file's `[permissions]` table, kept per file (the rules of several files add up, and
//! a project's file may only narrow until the project is trusted, so a merged table would lose
//! where each rule came from).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::Deserialize;

use crate::settings::PermissionSettings;

/// A permission mode, as Claude Code names it (`--permission-mode`, `defaultMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum PermissionMode {
    /// Asks before every call no rule allows (headless: lets it through). Claude Code's
    /// `manual` is the same mode.
    #[default]
    Default,
    /// File edits inside the working directories pass without asking.
    AcceptEdits,
    /// Read-only: no edits at all, and no command no rule allows.
    Plan,
    /// Everything but a `deny` rule passes (ask rules still ask).
    BypassPermissions,
    /// Never asks: what no rule allows is denied.
    DontAsk,
}

impl PermissionMode {
    pub const NAMES: [&'static str; 5] =
        ["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"];

    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::Plan => "plan",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::DontAsk => "dontAsk",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PermissionMode {
    type Err = String;

    fn from_str(name: &str) -> Result<PermissionMode, String> {
        Ok(match name {
            "default" | "manual" => PermissionMode::Default,
            "acceptEdits" => PermissionMode::AcceptEdits,
            "plan" => PermissionMode::Plan,
            "bypassPermissions" => PermissionMode::BypassPermissions,
            "dontAsk" => PermissionMode::DontAsk,
            "auto" => {
                return Err("`auto` (Claude Code's classifier mode) is not a mode aerix has; \
                            use one of default, acceptEdits, plan, bypassPermissions, dontAsk"
                    .to_owned());
            }
            other => {
                return Err(format!(
                    "`{other}` is not a permission mode: use one of {}",
                    PermissionMode::NAMES.join(", ")
                ));
            }
        })
    }
}

impl TryFrom<String> for PermissionMode {
    type Error = String;

    fn try_from(name: String) -> Result<PermissionMode, String> {
        name.parse()
    }
}

/// Which settings file a table came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingsScope {
    /// `$XDG_CONFIG_HOME/aerix/settings.toml`: always the user's own.
    User,
    /// `<root>/.aerix/settings.toml`.
    Project,
    /// `<root>/.aerix/settings.local.toml`.
    Local,
}

/// One file's `[permissions]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct FilePermissions {
    pub path: PathBuf,
    pub scope: SettingsScope,
    pub table: PermissionSettings,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_by_claude_code_s_names() {
        for name in PermissionMode::NAMES {
            assert_eq!(name.parse::<PermissionMode>().map(PermissionMode::as_str), Ok(name));
        }
        assert_eq!("manual".parse(), Ok(PermissionMode::Default));
        assert!("auto".parse::<PermissionMode>().unwrap_err().contains("not a mode aerix has"));
        assert!("yolo".parse::<PermissionMode>().unwrap_err().contains("one of default,"));
    }
}
