//! What a run of aerix is configured by: settings files, the instruction files of the
//! repository, and the directories of the XDG base-directory layout.
//!
//! Agent definitions (`agents`) are read here too, a plugin's among them. Skills and plugins are
//! `aerix-skills`'s, hook files `aerix-hooks`'s.

mod agents;
mod capped;
mod env;
mod frontmatter;
mod instructions;
mod named;
mod permissions;
mod settings;

use std::path::PathBuf;

pub use agents::{
    AgentDefinition, AgentDefinitions, AgentDirs, LoadedAgents, Origin, load_agents,
    load_plugin_agents, parse_agent,
};
pub use capped::{Capped, MAX_FILE_BYTES, read_capped, read_capped_within};
pub use env::Env;
pub use frontmatter::{NoFrontmatter, split_frontmatter};
pub use instructions::{InstructionFile, Instructions, instruction_files, project_root};
pub use named::{ByName, Named};
pub use permissions::{FilePermissions, PermissionMode, SettingsScope};
pub use settings::{
    ContextSettings, DEFAULT_MODEL, DEFAULT_TOOL_CAP, Delegation, EditFormat, HookSettings,
    LOCAL_ATTEMPTS, Layered, MAX_ATTEMPTS, McpServer, McpServers, McpSettings, Member,
    PermissionSettings, PluginSettings, PoolSettings, ProjectSetting, SandboxSettings, Settings,
    SettingsPaths, TuneSettings, VerifySettings, defaults, load, load_layered, valid_profile_name,
};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
    /// A settings file that does not parse or holds a bad value.
    #[error("{}{}: {}{message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default(),
        key.as_ref().map(|k| format!("key `{k}`: ")).unwrap_or_default())]
    Invalid { path: PathBuf, line: Option<usize>, key: Option<String>, message: String },
}
