//! The settings a project's files may set only once the project is trusted: the ones that run a
//! program (`pool.caldrix`, `verify.commands`) or send the user's data and keys off the machine (a remote
//! member's endpoint and the variable its key is read from). The rest of a project's settings
//! (a local model, a socket path, context settings) apply untrusted.

use std::path::PathBuf;

use super::{Member, Settings, SettingsPaths, load};
use crate::ConfigError;

/// One setting a project file sets that trust gates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectSetting {
    /// Dotted: `pool.caldrix`, `members.main.model`, `tune.member`.
    pub key: String,
    /// As the effective settings hold it.
    pub value: String,
    /// The project file that set it (`.aerix/settings.toml` or `settings.local.toml`).
    pub file: PathBuf,
}

/// The effective settings, the user's alone, and what the project's files set that trust gates.
#[derive(Clone, Debug)]
pub struct Layered {
    settings: Settings,
    user: Settings,
    pub gated: Vec<ProjectSetting>,
}

impl Layered {
    /// Every file's settings (before trust is known: for what nothing runs from).
    pub fn all(&self) -> &Settings {
        &self.settings
    }

    /// The user's files' settings alone.
    pub fn user(&self) -> &Settings {
        &self.user
    }

    /// Every file's settings, the project's gated ones included.
    pub fn trusted(self) -> Settings {
        self.settings
    }

    /// The gated settings as the user's files (or the defaults) have them; everything else as
    /// every file has it.
    pub fn untrusted(self) -> Settings {
        let Layered { mut settings, user, .. } = self;
        settings.pool.caldrix = user.pool.caldrix;
        settings.verify.commands = user.verify.commands;
        // A project's MCP servers run programs: only the user's run untrusted.
        settings.mcp.servers = user.mcp.servers;
        withhold(&mut settings.main, &user.main);
        match (&mut settings.decision, &user.decision) {
            (Some(project), Some(user)) => withhold(project, user),
            (Some(project), None) if project.is_remote() || project.api_key_env.is_some() => {
                settings.decision = None;
            }
            _ => {}
        }
        if settings.tune.member.as_ref().is_some_and(Member::is_remote) {
            settings.tune.member = user.tune.member;
        }
        settings
    }
}

/// A remote endpoint or a key variable a project set is replaced by the user's.
fn withhold(project: &mut Member, user: &Member) {
    if project.is_remote() && project.model != user.model {
        project.model = user.model.clone();
        project.tokenizer = user.tokenizer.clone();
        project.render = user.render;
    }
    if project.api_key_env != user.api_key_env {
        project.api_key_env = user.api_key_env.clone();
    }
}

/// The gated settings of `settings`, by key, as text.
fn gated(settings: &Settings) -> Vec<(String, String)> {
    let mut out = vec![
        ("pool.caldrix".to_owned(), settings.pool.caldrix.display().to_string()),
        ("verify.commands".to_owned(), settings.verify.commands.join("; ")),
    ];
    let mut member = |role: &str, member: Option<&Member>| {
        let model = member.filter(|m| m.is_remote()).map(|m| m.model.clone()).unwrap_or_default();
        out.push((format!("{role}.model"), model));
        let key = member.and_then(|m| m.api_key_env.clone()).unwrap_or_default();
        out.push((format!("{role}.api_key_env"), key));
    };
    member("members.main", Some(&settings.main));
    member("members.decision", settings.decision.as_ref());
    member("tune.member", settings.tune.member.as_ref());
    out
}

/// Reads the files as [`load`] does, and once more without the project's, to tell what the
/// project's files set among the gated settings (and which file set each).
pub fn load_layered(paths: &SettingsPaths, env: &crate::Env) -> Result<Layered, ConfigError> {
    let settings = load(paths, env)?;
    let only = |project: bool| SettingsPaths {
        user: paths.user.clone(),
        project: paths.project.clone().filter(|_| project),
        local: None,
    };
    let user = load(&only(false), env)?;
    let with_project = load(&only(true), env)?;
    let (of_user, of_project, of_all) = (gated(&user), gated(&with_project), gated(&settings));
    let mut out = Vec::new();
    for ((key, user_value), ((_, project_value), (_, value))) in
        of_user.into_iter().zip(of_project.into_iter().zip(of_all))
    {
        let file = if project_value != user_value {
            paths.project.clone()
        } else if value != project_value {
            paths.local.clone()
        } else {
            None
        };
        if let Some(file) = file
            && !value.is_empty()
        {
            out.push(ProjectSetting { key, value, file });
        }
    }
    Ok(Layered { settings, user, gated: out })
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = "[members.main]\nmodel = \"openai:http://10.0.0.1:8080/v1#mine\"\napi_key_env = \"MY_KEY\"\n";

    fn layered(user_text: &str, project: &str, local: &str) -> (tempfile::TempDir, Layered) {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.toml");
        std::fs::write(&user, user_text).unwrap();
        std::fs::write(dir.path().join("project.toml"), project).unwrap();
        std::fs::write(dir.path().join("local.toml"), local).unwrap();
        let paths = SettingsPaths {
            user: Some(user),
            project: Some(dir.path().join("project.toml")),
            local: Some(dir.path().join("local.toml")),
        };
        let layered = load_layered(&paths, &crate::Env::for_tests("/home/u")).unwrap();
        (dir, layered)
    }

    #[test]
    fn a_projects_program_and_endpoint_are_gated_and_its_other_settings_apply() {
        let (_dir, layered) = layered(
            USER,
            "max_turns = 7\n[pool]\ncaldrix = \"./evil\"\n[verify]\ncommands = [\"./x\", \"make t\"]\n[members.main]\nmodel = \"openai:http://127.0.0.1:9/v1#m\"\ntokenizer = \"t.gguf\"\n",
            "[members.main]\napi_key_env = \"AWS_SECRET\"\n",
        );
        let keys: Vec<(&str, &str, bool)> = layered
            .gated
            .iter()
            .map(|g| (g.key.as_str(), g.value.as_str(), g.file.ends_with("local.toml")))
            .collect();
        assert_eq!(
            keys,
            [
                ("pool.caldrix", "./evil", false),
                ("verify.commands", "./x; make t", false),
                ("members.main.model", "openai:http://127.0.0.1:9/v1#m", false),
                ("members.main.api_key_env", "AWS_SECRET", true),
            ]
        );
        let untrusted = layered.clone().untrusted();
        assert_eq!(untrusted.pool.caldrix, PathBuf::from("caldrix"));
        assert!(
            untrusted.verify.commands.is_empty(),
            "a project's check commands run once trusted"
        );
        assert_eq!(untrusted.main.model, "openai:http://10.0.0.1:8080/v1#mine");
        assert_eq!(untrusted.main.tokenizer, None);
        assert_eq!(untrusted.main.api_key_env.as_deref(), Some("MY_KEY"));
        assert_eq!(untrusted.max_turns, 7, "a setting that runs nothing applies untrusted");
        let trusted = layered.trusted();
        assert_eq!(trusted.pool.caldrix, PathBuf::from("./evil"));
        assert_eq!(trusted.verify.commands, ["./x", "make t"]);
        assert_eq!(trusted.main.api_key_env.as_deref(), Some("AWS_SECRET"));
    }

    #[test]
    fn a_local_model_of_the_project_is_not_gated() {
        let (_dir, layered) = layered("", "[members.main]\nmodel = \"/models/x.gguf\"\n", "");
        assert!(layered.gated.is_empty(), "{:?}", layered.gated);
        assert_eq!(layered.untrusted().main.model, "/models/x.gguf");
    }
}
