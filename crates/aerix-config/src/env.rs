//! The base directories of the XDG layout, read once from the environment so that tests can
//! give their own.

use std::path::PathBuf;

#[derive(Clone, Debug, Default)]
pub struct Env {
    pub home: Option<PathBuf>,
    pub config_home: Option<PathBuf>,
    pub data_home: Option<PathBuf>,
    pub state_home: Option<PathBuf>,
    pub runtime_dir: Option<PathBuf>,
}

impl Env {
    pub fn from_process() -> Env {
        let var = |name: &str| {
            std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from).filter(|p| {
                // The XDG spec ignores relative paths.
                p.is_absolute()
            })
        };
        Env {
            home: var("HOME"),
            config_home: var("XDG_CONFIG_HOME"),
            data_home: var("XDG_DATA_HOME"),
            state_home: var("XDG_STATE_HOME"),
            runtime_dir: var("XDG_RUNTIME_DIR"),
        }
    }

    /// An environment with only a home directory and a runtime directory, for tests.
    pub fn for_tests(home: &str) -> Env {
        Env {
            home: Some(PathBuf::from(home)),
            runtime_dir: Some(PathBuf::from("/run/user/test")),
            ..Env::default()
        }
    }

    fn under_home(&self, explicit: &Option<PathBuf>, default: &str) -> Option<PathBuf> {
        explicit.clone().or_else(|| self.home.as_ref().map(|h| h.join(default)))
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub fn config_home(&self) -> Option<PathBuf> {
        self.under_home(&self.config_home, ".config")
    }

    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    pub fn data_home(&self) -> Option<PathBuf> {
        self.under_home(&self.data_home, ".local/share")
    }

    /// `$XDG_STATE_HOME`, else `~/.local/state`.
    pub fn state_home(&self) -> Option<PathBuf> {
        self.under_home(&self.state_home, ".local/state")
    }

    /// The socket `caldrix pool` uses by default: `$XDG_RUNTIME_DIR/caldrix/pool.sock`, else
    /// `/tmp/caldrix-<uid>/pool.sock` (the same rule as caldrix's).
    pub fn default_socket(&self) -> PathBuf {
        caldrix_proto::default_socket(self.runtime_dir.as_deref())
    }
}
