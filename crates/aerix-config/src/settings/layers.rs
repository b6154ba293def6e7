//! The run's settings as trust allows them. A project's files (`.aerix/settings.toml` and
//! `settings.local.toml`, both inside the repository) may only set what their keys' declared
//! class allows (`declare::Class`): untrusted, the inert keys alone; trusted, every key but the
//! user's own; never a protection's weaker value. Everything else they set is held back, and
//! each held setting is part of what a trust covers.

use std::path::PathBuf;

use super::{Admit, Settings, SettingsPaths, apply_as, read_files};
use crate::ConfigError;

/// One setting a project file sets that did not apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectSetting {
    /// Dotted: `pool.caldrix`, `members.main.model`, `tune.member`.
    pub key: String,
    /// As the file writes it (TOML).
    pub value: String,
    /// The project file that set it (`.aerix/settings.toml` or `settings.local.toml`).
    pub file: PathBuf,
}

/// The settings as trusted and untrusted, the user's alone, and what the project's files set
/// that did not apply.
#[derive(Clone, Debug)]
pub struct Layered {
    trusted: Settings,
    untrusted: Settings,
    user: Settings,
    /// Gated keys of the project's files: they apply once the project is trusted.
    pub gated: Vec<ProjectSetting>,
    /// Keys the project's files may never set (the user's own, a protection's weaker value):
    /// they never apply.
    pub refused: Vec<ProjectSetting>,
}

impl Layered {
    /// The settings once the project is trusted (for what nothing runs from: the survey of what
    /// the project would run, a preview).
    pub fn all(&self) -> &Settings {
        &self.trusted
    }

    /// The user's files' settings alone.
    pub fn user(&self) -> &Settings {
        &self.user
    }

    /// The settings of a trusted project.
    pub fn trusted(self) -> Settings {
        self.trusted
    }

    /// The settings of an untrusted project: its inert keys over the user's.
    pub fn untrusted(self) -> Settings {
        self.untrusted
    }
}

/// Reads the files once and applies them as [`super::load`] does: as an untrusted project's, as
/// a trusted one's, and the user's alone.
pub fn load_layered(paths: &SettingsPaths, env: &crate::Env) -> Result<Layered, ConfigError> {
    // Each file is read once: what the trust step hashes (the gated keys) is what a trusted
    // run then applies.
    let texts = read_files(paths)?;
    let (trusted, held) = apply_as(&texts, env, Admit::Trusted)?;
    let (untrusted, withheld) = apply_as(&texts, env, Admit::Untrusted)?;
    let (user, _) =
        apply_as(&texts[..texts.iter().take_while(|t| t.is_user()).count()], env, Admit::Trusted)?;
    Ok(Layered { trusted, untrusted, user, gated: withheld.withheld, refused: held.refused })
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

    fn keys(settings: &[ProjectSetting]) -> Vec<(&str, &str, bool)> {
        settings
            .iter()
            .map(|g| (g.key.as_str(), g.value.as_str(), g.file.ends_with("local.toml")))
            .collect()
    }

    #[test]
    fn a_projects_program_and_endpoint_are_gated_and_its_inert_settings_apply() {
        let (_dir, layered) = layered(
            USER,
            "max_turns = 7\n[pool]\ncaldrix = \"./evil\"\n[verify]\ncommands = [\"./x\", \"make t\"]\n[members.main]\nmodel = \"openai:http://127.0.0.1:9/v1#m\"\ntokenizer = \"t.gguf\"\n",
            "[members.main]\napi_key_env = \"AWS_SECRET\"\n",
        );
        assert_eq!(
            keys(&layered.gated),
            [
                ("members.main.model", "\"openai:http://127.0.0.1:9/v1#m\"", false),
                ("members.main.tokenizer", "\"t.gguf\"", false),
                ("pool.caldrix", "\"./evil\"", false),
                ("verify.commands", "[\"./x\", \"make t\"]", false),
                ("members.main.api_key_env", "\"AWS_SECRET\"", true),
            ]
        );
        assert!(layered.refused.is_empty(), "{:?}", layered.refused);
        let untrusted = layered.clone().untrusted();
        assert_eq!(untrusted.pool.caldrix, PathBuf::from("caldrix"));
        assert!(
            untrusted.verify.commands.is_empty(),
            "a project's check commands run once trusted"
        );
        assert_eq!(untrusted.main.model, "openai:http://10.0.0.1:8080/v1#mine");
        assert_eq!(untrusted.main.tokenizer, None);
        assert_eq!(untrusted.main.api_key_env.as_deref(), Some("MY_KEY"));
        assert_eq!(untrusted.max_turns, 7, "an inert setting applies untrusted");
        let trusted = layered.trusted();
        assert_eq!(trusted.pool.caldrix, PathBuf::from("./evil"));
        assert_eq!(trusted.verify.commands, ["./x", "make t"]);
        assert_eq!(trusted.main.api_key_env.as_deref(), Some("AWS_SECRET"));
    }

    #[test]
    fn a_local_or_hub_model_of_the_project_is_inert() {
        for model in ["/models/x.gguf", "m.gguf", "owner/repo:Q4_K_M", "hf:owner/repo"] {
            let (_dir, layered) =
                layered("", &format!("[members.main]\nmodel = \"{model}\"\nctx = 512\n"), "");
            assert!(layered.gated.is_empty(), "{model}: {:?}", layered.gated);
            let untrusted = layered.untrusted();
            assert_eq!((untrusted.main.model.as_str(), untrusted.main.ctx), (model, Some(512)));
        }
    }

    #[test]
    fn a_projects_scripted_member_and_pool_wait_for_trust() {
        // The attack: a scripted member of the repository's own replies, through a pool the
        // repository's socket path makes aerix start.
        let project = "[members.main]\nmodel = \"script:.aerix/r.json@.aerix/m.gguf\"\n\
                       [members.decision]\nmodel = \"replay:r.json@m.gguf\"\n\
                       [pool]\nsocket = \".aerix-run/pool.sock\"\n\
                       [tune]\nmember = \"novel-scheme:x\"\n[tune.flags]\nctx = 64\n";
        let (_dir, layered) = layered("", project, "");
        let gated: Vec<&str> = layered.gated.iter().map(|g| g.key.as_str()).collect();
        assert_eq!(
            gated,
            ["members.decision.model", "members.main.model", "pool.socket", "tune.member"]
        );
        let untrusted = layered.clone().untrusted();
        assert_eq!(untrusted.main.model, crate::DEFAULT_MODEL);
        assert_eq!(untrusted.decision, None);
        assert_eq!(untrusted.pool.socket, PathBuf::from("/run/user/test/caldrix/pool.sock"));
        assert_eq!(untrusted.tune.member, None);
        let trusted = layered.trusted();
        assert_eq!(trusted.main.model, "script:.aerix/r.json@.aerix/m.gguf");
        assert_eq!(trusted.pool.socket, PathBuf::from(".aerix-run/pool.sock"));
    }

    #[test]
    fn a_project_never_weakens_the_users_protections_trusted_or_not() {
        let user = "[sandbox]\nenabled = true\n";
        let project = "[sandbox]\nenabled = false\nnetwork = true\n[hooks]\nclaude_settings = false\n\
                       [plugins]\nclaude_code = false\n";
        let (_dir, weakened) = layered(user, project, "[sandbox]\nenabled = false\n");
        assert_eq!(
            keys(&weakened.refused),
            [
                ("hooks.claude_settings", "false", false),
                ("plugins.claude_code", "false", false),
                ("sandbox.enabled", "false", false),
                ("sandbox.network", "true", false),
                ("sandbox.enabled", "false", true),
            ]
        );
        assert!(weakened.gated.is_empty(), "{:?}", weakened.gated);
        for settings in [weakened.clone().untrusted(), weakened.trusted()] {
            assert!(settings.sandbox.enabled && !settings.sandbox.network);
            assert!(settings.hooks.claude_settings && settings.plugins.claude_code);
        }
        // The stricter value applies from a project, untrusted too.
        let (_dir, stricter) = layered("", "[sandbox]\nenabled = true\nnetwork = false\n", "");
        assert!(stricter.refused.is_empty() && stricter.gated.is_empty());
        assert!(stricter.untrusted().sandbox.enabled);
    }

    #[test]
    fn the_users_own_file_sets_every_key() {
        let user = "[sandbox]\nenabled = false\n[hooks]\nclaude_settings = false\n\
                    [members.main]\nmodel = \"script:r.json@m.gguf\"\n";
        let (_dir, own) = layered(user, "", "");
        assert!(own.refused.is_empty() && own.gated.is_empty());
        let untrusted = own.untrusted();
        assert!(!untrusted.hooks.claude_settings);
        assert_eq!(untrusted.main.model, "script:r.json@m.gguf");
    }
}
