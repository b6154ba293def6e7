//! `bash` under bubblewrap (`sandbox.enabled`): `/` read-only, a fresh `/dev`, `/proc` and
//! `/tmp`, the writable roots (the working tree, the directories added) bound read-write over
//! them, aerix's read-only roots bound as they are, the network unshared unless
//! `sandbox.network`, and its own PID namespace, so a command's processes all end with it.
//! With the setting on and no working `bwrap`, nothing runs: never a silent unsandboxed run.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::Roots;

/// The Debian package that installs `bwrap`.
pub const BWRAP_PACKAGE: &str = "bubblewrap";
/// How long the startup check waits for `bwrap` to make a sandbox and run `true` in it.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// `bash`'s sandbox, when `sandbox.enabled` is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    /// `sandbox.network`: the command keeps the host's network.
    pub network: bool,
}

/// Why the sandbox cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "sandbox.enabled is set but bwrap is not installed: install Debian's {BWRAP_PACKAGE} \
         (apt-get install {BWRAP_PACKAGE}), or set sandbox.enabled = false"
    )]
    Missing,
    #[error("sandbox.enabled is set but bwrap cannot make a sandbox here: {0}")]
    Broken(String),
}

impl Sandbox {
    /// `bwrap` on the `PATH`.
    pub fn bwrap() -> Result<PathBuf, SandboxError> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join("bwrap"))
            .find(|file| {
                std::fs::metadata(file)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .ok_or(SandboxError::Missing)
    }

    /// The startup check: `bwrap` is installed and makes this sandbox here (a container
    /// without the privileges or user namespaces it needs fails now, by name, not at the first
    /// command).
    pub fn check(&self, roots: &Roots) -> Result<(), SandboxError> {
        let bwrap = Sandbox::bwrap()?;
        let tree = roots.tree().to_owned();
        let mut probe = Command::new(&bwrap);
        probe.args(self.args(roots, &tree)).arg("true");
        probe.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = probe.spawn().map_err(|e| SandboxError::Broken(e.to_string()))?;
        let start = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    let mut stderr = String::new();
                    if let Some(mut pipe) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                    }
                    let why = stderr.trim();
                    return Err(SandboxError::Broken(if why.is_empty() {
                        format!("bwrap exited with {status}")
                    } else {
                        why.to_owned()
                    }));
                }
                Ok(None) if start.elapsed() < PROBE_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SandboxError::Broken(format!(
                        "bwrap did not run `true` within {} s",
                        PROBE_TIMEOUT.as_secs()
                    )));
                }
                Err(e) => return Err(SandboxError::Broken(e.to_string())),
            }
        }
    }

    /// `bwrap`'s arguments up to the command. Later mounts go over earlier ones: the roots are
    /// bound after the fresh `/tmp`, so a tree under `/tmp` (every test's) stays itself.
    pub fn args(&self, roots: &Roots, cwd: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut push =
            |parts: &[&std::ffi::OsStr]| args.extend(parts.iter().map(|p| p.to_os_string()));
        push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
        push(&["--dev".as_ref(), "/dev".as_ref()]);
        push(&["--proc".as_ref(), "/proc".as_ref()]);
        push(&["--tmpfs".as_ref(), "/tmp".as_ref()]);
        for root in roots.writable() {
            // A root that does not exist yet has nothing to bind (bwrap would refuse it).
            if root.exists() {
                push(&["--bind".as_ref(), root.as_os_str(), root.as_os_str()]);
            }
        }
        for root in roots.read_only() {
            push(&["--ro-bind-try".as_ref(), root.as_os_str(), root.as_os_str()]);
        }
        if !self.network {
            push(&["--unshare-net".as_ref()]);
        }
        push(&["--unshare-pid".as_ref(), "--die-with-parent".as_ref()]);
        push(&["--chdir".as_ref(), cwd.as_os_str(), "--".as_ref()]);
        args
    }
}
