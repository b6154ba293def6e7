//! What startup loads besides settings and hooks files: the enabled plugins, the skills (the
//! project's, the user's, the plugins'), and what plugins add to the agent definitions and the
//! hooks. Every problem is a note; nothing here stops a run.

use std::path::Path;

use aerix_config::{Env, LoadedAgents, Settings};
use aerix_skills::plugins::{self, Plugin, Sources};
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

/// The enabled plugins, each with its hooks file as read, once: the trust step hashes these
/// hooks and the session loads the same reads.
#[derive(Clone, Debug, Default)]
pub struct Found {
    pub plugins: Vec<(Plugin, aerix_hooks::FileRead)>,
    pub notes: Vec<String>,
}

impl Found {
    /// The plugins `sources` enable; a hooks file `known` holds already is not read again.
    pub fn read(sources: &Sources, known: Option<&Found>) -> Found {
        let found = plugins::discover(sources);
        let plugins = found
            .plugins
            .into_iter()
            .map(|plugin| {
                let file = plugin.hooks_file();
                let read = known
                    .and_then(|k| k.plugins.iter().find(|(_, read)| read.path == file))
                    .map_or_else(|| aerix_hooks::read(&file), |(_, read)| read.clone());
                (plugin, read)
            })
            .collect();
        Found { plugins, notes: found.notes }
    }
}

/// Plugins first (their skills, agents and hooks join the others, after them), then skills.
/// `found`: the plugins (the trust step leaves an untrusted project's out).
pub fn load(
    found: &Found,
    env: &Env,
    root: &Path,
    cwd: &Path,
    agents: &mut LoadedAgents,
    hooks: &mut aerix_hooks::Loaded,
) -> Extensions {
    let mut notes = found.notes.clone();
    let mut dirs = SkillDirs::standard(env, root, cwd);
    for (plugin, read) in &found.plugins {
        dirs.plugin(&plugin.name, &plugin.root);
        aerix_config::load_plugin_agents(agents, &plugin.name, &plugin.agents_dir());
        match &read.loaded {
            Ok(Some(loaded)) => {
                // A hook may write to `CLAUDE_PLUGIN_DATA`, so it exists before one runs.
                if !loaded.hooks.is_empty()
                    && let Some(data) = &plugin.data
                    && let Err(e) = std::fs::create_dir_all(data)
                {
                    notes.push(format!("plugins: {}: {e}", data.display()));
                }
                hooks.extend(loaded.clone().with_env(&plugin.env()));
            }
            Ok(None) => {}
            Err(note) => notes.push(note.clone()),
        }
    }
    let loaded = aerix_skills::load(&dirs);
    notes.extend(loaded.notes);
    let plugins = found.plugins.iter().map(|(p, _)| p.name.clone()).collect();
    Extensions { skills: loaded.skills, plugins, notes }
}
