//! What startup loads besides settings and hooks files: the enabled plugins, the skills (the
//! project's, the user's, the plugins'), and what plugins add to the agent definitions and the
//! hooks. Every problem is a note; nothing here stops a run.

use std::path::Path;

use aerix_config::{Env, LoadedAgents, Settings};
use aerix_skills::plugins::{self, Sources};
use aerix_skills::{SkillDirs, Skills};

pub struct Extensions {
    pub skills: Skills,
    /// The plugins loaded, by name.
    pub plugins: Vec<String>,
    pub notes: Vec<String>,
}

/// Where plugins come from by every settings file, for commands that run none of their hooks
/// (`aerix tune`, `aerix profile`): reading skills and definitions runs nothing.
pub fn every_source(settings: &Settings, env: &Env, root: &Path) -> Sources {
    Sources::standard(env, root, &settings.plugins.enabled, settings.plugins.claude_code)
}

/// Plugins first (their skills, agents and hooks join the others, after them), then skills.
/// `sources`: where plugins come from (the trust step leaves an untrusted project's out).
pub fn load(
    sources: &Sources,
    env: &Env,
    root: &Path,
    cwd: &Path,
    agents: &mut LoadedAgents,
    hooks: &mut aerix_hooks::Loaded,
) -> Extensions {
    let found = plugins::discover(sources);
    let mut notes = found.notes;
    let mut dirs = SkillDirs::standard(env, root, cwd);
    for plugin in &found.plugins {
        dirs.plugin(&plugin.name, &plugin.root);
        aerix_config::load_plugin_agents(agents, &plugin.name, &plugin.agents_dir());
        match aerix_hooks::load_file(&plugin.hooks_file()) {
            Ok(Some(loaded)) => {
                // A hook may write to `CLAUDE_PLUGIN_DATA`, so it exists before one runs.
                if !loaded.hooks.is_empty()
                    && let Some(data) = &plugin.data
                    && let Err(e) = std::fs::create_dir_all(data)
                {
                    notes.push(format!("plugins: {}: {e}", data.display()));
                }
                hooks.extend(loaded.with_env(&plugin.env()));
            }
            Ok(None) => {}
            Err(e) => notes.push(format!("hooks: {e}; its hooks are not run")),
        }
    }
    let loaded = aerix_skills::load(&dirs);
    notes.extend(loaded.notes);
    let plugins = found.plugins.iter().map(|p| p.name.clone()).collect();
    Extensions { skills: loaded.skills, plugins, notes }
}
