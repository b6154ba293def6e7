//! Settings: `config.toml` in the data directory, overridden by `AI_MEMORY_<SECTION>__<KEY>`
//! environment variables; and the per-project `.ai-memory.toml` marker.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::name::{NameError, ProjectName, WorkspaceName};

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read {}: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("environment variable {var}: {message}")]
    Env { var: String, message: String },
    #[error("{}: {error}", path.display())]
    Name { path: PathBuf, error: NameError },
}

/// The server's settings, every key with its default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub server: Server,
    pub capture: Capture,
    pub session_start: SessionStart,
    pub profile: Profile,
    pub llm: Llm,
    pub embedding: Embedding,
}

#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    /// Where `ai-memory serve` listens, and where hook clients reach it.
    pub bind: String,
    /// The root token; a bind off loopback refuses to start without one.
    pub root_token: String,
}

/// By hand, as `Llm`'s: the token is never printed.
impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Server { bind, root_token } = self;
        let token = if root_token.is_empty() { "" } else { "<redacted>" };
        f.debug_struct("Server").field("bind", bind).field("root_token", &token).finish()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Capture {
    /// Whether prompt-submit hooks record the user's prompt.
    pub prompts: bool,
    /// The most bytes of one prompt kept (the rest is cut).
    pub max_prompt_bytes: usize,
    /// Days a captured prompt is kept; older ones are deleted by the next profile pass (which
    /// has read them long before). 0 keeps them for good.
    pub retention_days: u32,
    /// Whether a session's end leaves a handoff for the next session start of its project
    /// (and tool-use hooks record the files it changed). Off: none is written, none shown.
    pub handoffs: bool,
}

impl Capture {
    /// The capture time before which prompts are deleted, at `now` (unix seconds); `None` when
    /// prompts are kept for good.
    pub fn retention_cutoff(&self, now: i64) -> Option<i64> {
        (self.retention_days > 0).then(|| now - i64::from(self.retention_days) * 86_400)
    }
}

/// `[embedding]`: retrieval by meaning beside the full-text search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Embedding {
    /// Whether queries use embeddings when a model is found (false: full-text search only).
    pub enabled: bool,
    /// A sentence-encoder GGUF; empty: `models/all-MiniLM-L6-v2.gguf` in the data directory
    /// (what `ai-memory models fetch` installs).
    pub model: String,
    /// llama.cpp's threads for embedding; 0: every core.
    pub threads: u32,
}

impl Default for Embedding {
    fn default() -> Self {
        Embedding { enabled: true, model: String::new(), threads: 0 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionStart {
    /// Characters of context a session start injects at most (Claude Code saves more than
    /// 10,000 to a file and shows the model a preview).
    pub max_chars: usize,
}

/// `[profile]`: the cross-project profile. Raw values as written; the accessors clamp them and
/// resolve `auto`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Profile {
    /// `auto` (on for a single operator, off with database users), `true` or `false`.
    pub enabled: Toggle,
    /// `auto`, `global`, `workspace`, `user` or `off`.
    pub share: Share,
    /// Distinct projects a choice needs before it joins the profile on its own.
    pub min_projects: usize,
    pub inject_on_session_start: bool,
    /// Digest budget in UTF-8 bytes (clamped 1,500..12,000).
    pub digest_max_bytes: usize,
    /// Digest budget for a project with no memory of its own (clamped 2,000..20,000).
    pub baseline_max_bytes: usize,
    /// Most lines `profile apply` writes into a rules file.
    pub apply_max_lines: usize,
    /// Classify and merge with the `[llm]` provider, when one is configured.
    pub llm: bool,
}

/// `auto`, or a boolean (`true`/`false`, also accepted as strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toggle {
    Auto,
    On,
    Off,
}

impl Serialize for Toggle {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Toggle::Auto => s.serialize_str("auto"),
            Toggle::On => s.serialize_bool(true),
            Toggle::Off => s.serialize_bool(false),
        }
    }
}

impl<'de> Deserialize<'de> for Toggle {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Toggle, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bool(true) => Ok(Toggle::On),
            Raw::Bool(false) => Ok(Toggle::Off),
            Raw::Text(t) => match t.as_str() {
                "auto" => Ok(Toggle::Auto),
                "true" => Ok(Toggle::On),
                "false" => Ok(Toggle::Off),
                other => {
                    Err(serde::de::Error::custom(format!("`{other}`: use auto, true or false")))
                }
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Share {
    Auto,
    Global,
    Workspace,
    User,
    Off,
}

/// Where a profile lives, once `auto` is resolved for a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareMode {
    Global,
    Workspace,
    User,
}

pub const DIGEST_BYTES: (usize, usize) = (1_500, 12_000);
pub const BASELINE_BYTES: (usize, usize) = (2_000, 20_000);

impl Default for Profile {
    fn default() -> Self {
        Profile {
            enabled: Toggle::Auto,
            share: Share::Auto,
            min_projects: 2,
            inject_on_session_start: true,
            digest_max_bytes: 3_000,
            baseline_max_bytes: 6_000,
            apply_max_lines: 40,
            llm: true,
        }
    }
}

impl Profile {
    /// Where the profile lives on a deployment with (`multi_user`) or without database
    /// users; `None`: no profile. A multi-user server keeps `auto` off whatever `share` says.
    pub fn mode(&self, multi_user: bool) -> Option<ShareMode> {
        let on = match self.enabled {
            Toggle::On => true,
            Toggle::Off => false,
            Toggle::Auto => !multi_user,
        };
        if !on {
            return None;
        }
        match self.share {
            Share::Off => None,
            Share::Global => Some(ShareMode::Global),
            Share::Workspace => Some(ShareMode::Workspace),
            // One operator: a private profile is the global one.
            Share::User if !multi_user => Some(ShareMode::Global),
            Share::User => Some(ShareMode::User),
            Share::Auto if multi_user => Some(ShareMode::User),
            Share::Auto => Some(ShareMode::Global),
        }
    }

    pub fn digest_budget(&self) -> usize {
        self.digest_max_bytes.clamp(DIGEST_BYTES.0, DIGEST_BYTES.1)
    }

    pub fn baseline_budget(&self) -> usize {
        self.baseline_max_bytes.clamp(BASELINE_BYTES.0, BASELINE_BYTES.1)
    }

    /// At least one project: zero would admit every sentence.
    pub fn min_projects(&self) -> usize {
        self.min_projects.max(1)
    }
}

/// `[llm]`: the model provider for the optional LLM steps (the profile's classify and merge).
/// Its `Debug` hides the API key.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Llm {
    /// `none` (default), `pool` (a caldrix pool) or `openai` (an OpenAI-compatible endpoint).
    pub provider: String,
    /// The pool's socket (`pool`); empty: caldrix's default socket.
    pub socket: String,
    /// The pool member's alias (`pool`) or the model name (`openai`).
    pub model: String,
    /// The endpoint's base URL (`openai`), e.g. `http://127.0.0.1:8080/v1`.
    pub endpoint: String,
    /// The endpoint's API key (`openai`), sent as a bearer token; `config show` hides it.
    pub api_key: String,
    /// Seconds one call may take before the pass falls back to zero-LLM.
    pub timeout_secs: u64,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Llm { provider, socket, model, endpoint, api_key, timeout_secs } = self;
        let key = if api_key.is_empty() { "" } else { "<redacted>" };
        f.debug_struct("Llm")
            .field("provider", provider)
            .field("socket", socket)
            .field("model", model)
            .field("endpoint", endpoint)
            .field("api_key", &key)
            .field("timeout_secs", timeout_secs)
            .finish()
    }
}

impl Default for Llm {
    fn default() -> Self {
        Llm {
            provider: "none".into(),
            socket: String::new(),
            model: String::new(),
            endpoint: String::new(),
            api_key: String::new(),
            timeout_secs: 60,
        }
    }
}

impl Default for Server {
    fn default() -> Self {
        Server { bind: "127.0.0.1:7434".into(), root_token: String::new() }
    }
}

impl Default for Capture {
    fn default() -> Self {
        Capture { prompts: true, max_prompt_bytes: 8 * 1024, retention_days: 0, handoffs: true }
    }
}

impl Default for SessionStart {
    fn default() -> Self {
        SessionStart { max_chars: 10_000 }
    }
}

pub const ENV_PREFIX: &str = "AI_MEMORY_";

impl Settings {
    /// `config.toml` of `data_dir` (absent: the defaults), then the environment's overrides.
    pub fn load(data_dir: &Path, env: &[(String, String)]) -> Result<Settings, SettingsError> {
        let path = data_dir.join("config.toml");
        let mut table = match std::fs::read_to_string(&path) {
            Ok(text) => text.parse::<toml::Table>().map_err(|e| SettingsError::Invalid {
                path: path.clone(),
                message: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => toml::Table::new(),
            Err(error) => return Err(SettingsError::Read { path, error }),
        };
        for (var, value) in env {
            let Some(rest) = var.strip_prefix(ENV_PREFIX) else { continue };
            let Some((section, key)) = rest.split_once("__") else { continue };
            let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
            let entry = table
                .entry(section.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let toml::Value::Table(section_table) = entry else {
                return Err(SettingsError::Env {
                    var: var.clone(),
                    message: format!("`{section}` is not a section"),
                });
            };
            section_table.insert(key, env_value(value));
        }
        toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| SettingsError::Invalid {
            path,
            message: format!("{} (environment overrides included)", e.message()),
        })
    }

    /// The effective settings as TOML (`ai-memory config show`); the root token is hidden.
    pub fn show(&self) -> String {
        let mut shown = self.clone();
        if !shown.server.root_token.is_empty() {
            shown.server.root_token = "(set)".into();
        }
        if !shown.llm.api_key.is_empty() {
            shown.llm.api_key = "(set)".into();
        }
        toml::to_string(&shown).unwrap_or_default()
    }
}

/// An environment value as TOML would read it (`true`, `42`), else as a string.
fn env_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

/// A project's `.ai-memory.toml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    pub workspace: Option<String>,
    pub project: Option<String>,
    #[serde(default)]
    pub profile: MarkerProfile,
    /// Where the marker was found.
    #[serde(skip)]
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkerProfile {
    pub contribute: Option<bool>,
    pub consume: Option<bool>,
}

pub const MARKER_FILE: &str = ".ai-memory.toml";

impl Marker {
    pub fn read(dir: &Path) -> Result<Option<Marker>, SettingsError> {
        let path = dir.join(MARKER_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(SettingsError::Read { path, error }),
        };
        let invalid = |message: String| SettingsError::Invalid { path: path.clone(), message };
        let mut table: toml::Table =
            toml::from_str(&text).map_err(|e| invalid(e.message().into()))?;
        // The marker is shared with other tools (a `[briefing]` table, say): a table that is
        // not ai-memory's is theirs and left alone; an unknown plain key is still a typo.
        table.retain(|key, value| key == "profile" || !value.is_table());
        let mut marker: Marker = Marker::deserialize(toml::Value::Table(table))
            .map_err(|e| invalid(e.message().into()))?;
        marker.dir = dir.to_owned();
        Ok(Some(marker))
    }
}

/// Which workspace and project a directory belongs to, and its profile opt-outs.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub workspace: WorkspaceName,
    pub project: ProjectName,
    /// The repository root (nearest directory holding `.git`), else the directory itself.
    pub root: PathBuf,
    /// The nearest marker's `[profile]` values (a key it leaves out is `true`); `None` only when
    /// no marker was found.
    pub contribute: Option<bool>,
    pub consume: Option<bool>,
}

impl Identity {
    /// The nearest marker from `dir` up names the workspace and project; a marker setting only
    /// `[profile]` keys is a boundary (names above it do not apply). Otherwise the project is
    /// the repository root's directory name, in the default workspace.
    pub fn of(dir: &Path) -> Result<Identity, SettingsError> {
        let root = dir.ancestors().find(|d| d.join(".git").exists()).unwrap_or(dir).to_owned();
        let mut nearest: Option<Marker> = None;
        let mut named: Option<Marker> = None;
        for d in dir.ancestors() {
            if let Some(marker) = Marker::read(d)? {
                let names = marker.workspace.is_some() || marker.project.is_some();
                if nearest.is_none() {
                    nearest = Some(marker.clone());
                }
                if names {
                    named = Some(marker);
                }
                // The nearest marker decides: with names it is the identity, without it is a
                // boundary.
                break;
            }
        }
        let path_of = |m: &Marker| m.dir.join(MARKER_FILE);
        let workspace = match named.as_ref().and_then(|m| m.workspace.as_deref().map(|w| (m, w))) {
            Some((m, w)) => WorkspaceName::new(w)
                .map_err(|error| SettingsError::Name { path: path_of(m), error })?,
            None => WorkspaceName::default_workspace(),
        };
        let project = match named.as_ref().and_then(|m| m.project.as_deref().map(|p| (m, p))) {
            Some((m, p)) => ProjectName::new(p)
                .map_err(|error| SettingsError::Name { path: path_of(m), error })?,
            None => {
                let name = root.file_name().and_then(|n| n.to_str()).unwrap_or("root");
                ProjectName::from_dir_name(name)
                    .map_err(|error| SettingsError::Name { path: root.clone(), error })?
            }
        };
        // A found marker always says both: a key it does not set is on, so removing
        // `contribute = false` turns contribution back on. No marker says nothing.
        let (contribute, consume) = nearest.map_or((None, None), |m| {
            (Some(m.profile.contribute.unwrap_or(true)), Some(m.profile.consume.unwrap_or(true)))
        });
        Ok(Identity { workspace, project, root, contribute, consume })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Removed when dropped.
    fn temp(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("aim-settings-{name}-")).tempdir().unwrap()
    }

    #[test]
    fn file_then_environment() {
        let tmp = temp("env");
        let dir = tmp.path();
        std::fs::write(dir.join("config.toml"), "[server]\nbind = \"127.0.0.1:9000\"\n").unwrap();
        let env = vec![
            ("AI_MEMORY_CAPTURE__MAX_PROMPT_BYTES".to_owned(), "100".to_owned()),
            ("AI_MEMORY_SERVER__ROOT_TOKEN".to_owned(), "abc".to_owned()),
            ("OTHER".to_owned(), "x".to_owned()),
        ];
        let s = Settings::load(dir, &env).unwrap();
        assert_eq!(s.server.bind, "127.0.0.1:9000");
        assert_eq!(s.capture.max_prompt_bytes, 100);
        assert_eq!(s.server.root_token, "abc");
        assert!(s.show().contains("root_token = \"(set)\""));
        assert!(!s.show().contains("abc"));
    }

    #[test]
    fn debug_of_the_settings_hides_the_llm_key_and_the_root_token() {
        let key = "sk-settings-debug-7f3a9c";
        let token = "root-token-debug-41c2";
        let settings = Settings {
            llm: Llm { provider: "openai".into(), api_key: key.into(), ..Llm::default() },
            server: Server { root_token: token.into(), ..Server::default() },
            ..Settings::default()
        };
        for shown in [format!("{:?}", settings.llm), format!("{settings:?}"), settings.show()] {
            assert!(!shown.contains(key), "{shown}");
            assert!(!shown.contains(token), "{shown}");
        }
        assert!(format!("{:?}", settings.llm).contains("api_key: \"<redacted>\""));
    }

    #[test]
    fn profile_keys_clamp_and_resolve_auto() {
        let tmp = temp("profile");
        let dir = tmp.path();
        std::fs::write(
            dir.join("config.toml"),
            "[profile]\nenabled = \"auto\"\ndigest_max_bytes = 100\nbaseline_max_bytes = 99999\n",
        )
        .unwrap();
        let p = Settings::load(dir, &[]).unwrap().profile;
        assert_eq!((p.digest_budget(), p.baseline_budget()), (1_500, 20_000));
        assert_eq!(p.mode(false), Some(ShareMode::Global));
        assert_eq!(p.mode(true), None, "a multi-user server keeps auto off");
        let env = [
            ("AI_MEMORY_PROFILE__ENABLED".to_owned(), "true".to_owned()),
            ("AI_MEMORY_PROFILE__SHARE".to_owned(), "workspace".to_owned()),
            ("AI_MEMORY_PROFILE__DIGEST_MAX_BYTES".to_owned(), "20000".to_owned()),
        ];
        let p = Settings::load(dir, &env).unwrap().profile;
        assert_eq!(p.digest_budget(), 12_000);
        assert_eq!(p.mode(true), Some(ShareMode::Workspace));
        let user = Profile { share: Share::User, enabled: Toggle::On, ..Profile::default() };
        assert_eq!(user.mode(false), Some(ShareMode::Global), "one operator: user is global");
        assert_eq!(user.mode(true), Some(ShareMode::User));
        let auto_on = Profile { enabled: Toggle::On, ..Profile::default() };
        assert_eq!(auto_on.mode(true), Some(ShareMode::User));
        let off = Profile { share: Share::Off, ..Profile::default() };
        assert_eq!(off.mode(false), None);
        assert_eq!(Profile { min_projects: 0, ..Profile::default() }.min_projects(), 1);
        std::fs::write(dir.join("config.toml"), "[profile]\nenabled = \"maybe\"\n").unwrap();
        let err = Settings::load(dir, &[]).unwrap_err().to_string();
        assert!(err.contains("use auto, true or false"), "{err}");
        std::fs::write(dir.join("config.toml"), "[profile]\nenabled = false\n").unwrap();
        let s = Settings::load(dir, &[]).unwrap();
        assert_eq!(s.profile.enabled, Toggle::Off);
        assert!(s.show().contains("enabled = false"), "{}", s.show());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let tmp = temp("bad");
        let dir = tmp.path();
        std::fs::write(dir.join("config.toml"), "[server]\nbnd = \"x\"\n").unwrap();
        let err = Settings::load(dir, &[]).unwrap_err().to_string();
        assert!(err.contains("config.toml") && err.contains("bnd"), "{err}");
        std::fs::write(dir.join("config.toml"), "").unwrap();
        let env = [("AI_MEMORY_CAPTURE__PROMPTS".to_owned(), "maybe".to_owned())];
        let err = Settings::load(dir, &env).unwrap_err().to_string();
        assert!(err.contains("prompts") || err.contains("bool"), "{err}");
    }

    #[test]
    fn capture_retention_days_gives_a_cutoff_and_zero_keeps_prompts() {
        let dir = temp("retention");
        std::fs::write(dir.path().join("config.toml"), "[capture]\nretention_days = 2\n").unwrap();
        let s = Settings::load(dir.path(), &[]).unwrap();
        assert_eq!(s.capture.retention_cutoff(1_000_000), Some(1_000_000 - 2 * 86_400));
        assert_eq!(Capture::default().retention_cutoff(1_000_000), None);
        std::fs::write(dir.path().join("config.toml"), "[capture]\nretention_days = -1\n").unwrap();
        let err = Settings::load(dir.path(), &[]).unwrap_err().to_string();
        assert!(err.contains("retention_days") || err.contains("-1"), "{err}");
    }

    #[test]
    fn a_marker_tolerates_other_tables_but_not_unknown_keys() {
        let dir = temp("tables");
        std::fs::write(
            dir.path().join(MARKER_FILE),
            "project = \"shop\"\n[briefing]\nx = 1\n[profile]\nconsume = false\n",
        )
        .unwrap();
        let id = Identity::of(dir.path()).unwrap();
        assert_eq!(id.project.as_str(), "shop");
        assert_eq!(id.consume, Some(false));
        std::fs::write(dir.path().join(MARKER_FILE), "projct = \"shop\"\n").unwrap();
        let err = Identity::of(dir.path()).unwrap_err().to_string();
        assert!(err.contains("projct"), "{err}");
        std::fs::write(dir.path().join(MARKER_FILE), "[profile]\nconsum = false\n").unwrap();
        let err = Identity::of(dir.path()).unwrap_err().to_string();
        assert!(err.contains("consum"), "{err}");
    }

    #[test]
    fn identity_from_repository_or_marker() {
        let tmp = temp("ident");
        let dir = tmp.path();
        let repo = dir.join("My App");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        let id = Identity::of(&repo.join("src/deep")).unwrap();
        assert_eq!((id.workspace.as_str(), id.project.as_str()), ("default", "My-App"));
        assert_eq!(id.root, repo);
        assert_eq!((id.contribute, id.consume), (None, None), "no marker says nothing");

        std::fs::write(repo.join(MARKER_FILE), "workspace = \"work\"\nproject = \"app\"\n")
            .unwrap();
        let id = Identity::of(&repo.join("src/deep")).unwrap();
        assert_eq!((id.workspace.as_str(), id.project.as_str()), ("work", "app"));
        assert_eq!((id.contribute, id.consume), (Some(true), Some(true)), "a marker says both");

        // A nearer marker with only [profile] keys is a boundary.
        std::fs::write(repo.join("src").join(MARKER_FILE), "[profile]\nconsume = false\n").unwrap();
        let id = Identity::of(&repo.join("src/deep")).unwrap();
        assert_eq!((id.workspace.as_str(), id.project.as_str()), ("default", "My-App"));
        assert_eq!((id.contribute, id.consume), (Some(true), Some(false)));

        std::fs::write(repo.join("src").join(MARKER_FILE), "project = \"../x\"\n").unwrap();
        let err = Identity::of(&repo.join("src/deep")).unwrap_err().to_string();
        assert!(err.contains(".ai-memory.toml") && err.contains("not a valid name"), "{err}");
    }
}
