//! `bash` under bubblewrap (`sandbox.enabled`): `/` read-only, a fresh `/dev`, `/proc` and
//! `/tmp`, the writable roots (the working tree, the directories added) bound read-write over
//! them with each root's `.git` read-only, aerix's read-only roots bound as they are, the
//! network unshared unless `sandbox.network`, and its own PID namespace, so a command's
//! processes all end with it. It holds as root and at a terminal: every capability is dropped
//! (`--cap-drop ALL`: root keeps them all in a sandbox otherwise, and could remount `/`
//! read-write), and the command starts a session of its own (`--new-session`: no controlling
//! terminal, so no `TIOCSTI` into the one aerix runs in). No Unix socket is reachable but those
//! `sandbox.allow_unix_sockets` lists: the directories the caller hides (the pool's,
//! `$XDG_RUNTIME_DIR`) are empty, and every other socket the host shows when the command starts
//! is covered by `/dev/null`. With the setting on and no working `bwrap`, nothing runs: never a
//! silent unsandboxed run.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::Roots;

/// The Debian package that installs `bwrap`.
pub const BWRAP_PACKAGE: &str = "bubblewrap";
/// How long the startup check waits for `bwrap` to make a sandbox and run `true` in it.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Where a socket outside the tables of `/proc/net/unix` lives: one mounted in from another
/// network namespace (a container's `/var/run/docker.sock`) is bound in none of aerix's.
const SOCKET_DIRS: [&str; 2] = ["/run", "/var/run"];
/// How deep, and over how many entries, `SOCKET_DIRS` are searched (a bound on the time each
/// command pays; the sockets of services sit near the top).
const SOCKET_DEPTH: usize = 4;
const SOCKET_ENTRIES: usize = 20_000;

/// `bash`'s sandbox, when `sandbox.enabled` is set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// `sandbox.network`: the command keeps the host's network (abstract Unix sockets, which
    /// live in the network namespace, with it).
    pub network: bool,
    /// Directories shown empty inside (a tmpfs of the sandbox's own over each): the pool
    /// socket's and `$XDG_RUNTIME_DIR`, where a desktop's sockets live. The caller names them:
    /// this crate knows nothing of the pool.
    pub hidden: Vec<PathBuf>,
    /// `sandbox.allow_unix_sockets`: sockets (absolute paths) bound back in, each the socket
    /// file itself; one that does not exist when the command starts is not.
    pub allow_unix_sockets: Vec<PathBuf>,
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

/// `bwrap`'s mounts in order, and for each whether it shows the host's own path there: a later
/// mount covers an earlier one, so what a path shows inside is the last mount above it.
#[derive(Default)]
struct Mounts {
    args: Vec<OsString>,
    shown: Vec<(PathBuf, bool)>,
}

impl Mounts {
    /// `flag SRC DEST` (or `flag DEST` without a source).
    fn mount(&mut self, flag: &str, source: Option<&Path>, dest: &Path, host: bool) {
        self.args.push(flag.into());
        if let Some(source) = source {
            self.args.push(source.into());
        }
        self.args.push(dest.into());
        self.shown.push((dest.to_owned(), host));
    }

    /// The host's own `path` is what the sandbox shows there.
    fn shows_host(&self, path: &Path) -> bool {
        self.shown.iter().rev().find(|(dest, _)| path.starts_with(dest)).is_some_and(|(_, h)| *h)
    }
}

impl Sandbox {
    /// Network as `network` says, nothing hidden beyond `/tmp`, no socket allowed.
    pub fn new(network: bool) -> Sandbox {
        Sandbox { network, ..Sandbox::default() }
    }

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
    /// bound after the fresh `/tmp`, so a tree under `/tmp` (every test's) stays itself, and a
    /// hidden directory above a root is emptied before the root comes back over it.
    pub fn args(&self, roots: &Roots, cwd: &Path) -> Vec<OsString> {
        let mut m = Mounts::default();
        m.mount("--ro-bind", Some(Path::new("/")), Path::new("/"), true);
        m.mount("--dev", None, Path::new("/dev"), false);
        m.mount("--proc", None, Path::new("/proc"), false);
        m.mount("--tmpfs", None, Path::new("/tmp"), false);
        let all_roots: Vec<&PathBuf> = roots.writable().iter().chain(roots.read_only()).collect();
        let hidden: Vec<PathBuf> = self
            .hidden
            .iter()
            .filter_map(|dir| std::fs::canonicalize(dir).ok())
            .filter(|dir| dir.is_dir() && dir.parent().is_some())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        // One holding a root is emptied first (the root is bound back over it); the others after
        // the roots, so one inside a root stays empty too.
        let (above, beside): (Vec<&PathBuf>, Vec<&PathBuf>) =
            hidden.iter().partition(|dir| all_roots.iter().any(|root| root.starts_with(dir)));
        for dir in above {
            if m.shows_host(dir) {
                m.mount("--tmpfs", None, dir, false);
            }
        }
        for root in roots.writable() {
            // A root that does not exist yet has nothing to bind (bwrap would refuse it).
            if root.exists() {
                m.mount("--bind", Some(root), root, true);
            }
        }
        for root in roots.read_only() {
            m.mount("--ro-bind-try", Some(root), root, true);
        }
        for dir in beside {
            if m.shows_host(dir) {
                m.mount("--tmpfs", None, dir, false);
            }
        }
        // `.git` read-only: a hook or a `core.fsmonitor` planted there would run outside the
        // sandbox at the next git command, the user's or aerix's.
        for root in roots.writable() {
            let git = root.join(".git");
            if std::fs::symlink_metadata(&git).is_ok() && m.shows_host(&git) {
                m.mount("--ro-bind", Some(&git), &git, true);
            }
        }
        let allowed: BTreeSet<PathBuf> =
            self.allow_unix_sockets.iter().filter_map(|s| std::fs::canonicalize(s).ok()).collect();
        let dev_null = Path::new("/dev/null");
        for socket in host_sockets(|dir| m.shows_host(dir)) {
            // Covered by a file that is no socket: a connect is refused.
            if !allowed.contains(&socket) && m.shows_host(&socket) {
                m.mount("--ro-bind", Some(dev_null), &socket, false);
            }
        }
        for socket in &self.allow_unix_sockets {
            let is_socket = std::fs::metadata(socket).is_ok_and(|m| m.file_type().is_socket());
            if socket.is_absolute() && is_socket {
                m.mount("--bind", Some(socket), socket, true);
            }
        }
        let mut args = m.args;
        if !self.network {
            // Abstract sockets live in the network namespace: gone with it.
            args.push("--unshare-net".into());
        }
        for flag in ["--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL"] {
            args.push(flag.into());
        }
        args.extend(["--chdir".into(), cwd.into(), "--".into()]);
        args
    }
}

/// The Unix sockets the host shows now (canonical paths of socket files): those bound in
/// aerix's network namespace, and those under `SOCKET_DIRS` (skipping what `shown` says the
/// sandbox hides anyway).
fn host_sockets(shown: impl Fn(&Path) -> bool) -> BTreeSet<PathBuf> {
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let mut candidates: Vec<PathBuf> = table.lines().skip(1).filter_map(table_path).collect();
    let mut budget = SOCKET_ENTRIES;
    let dirs: BTreeSet<PathBuf> =
        SOCKET_DIRS.iter().filter_map(|d| std::fs::canonicalize(d).ok()).collect();
    for dir in dirs {
        walk(&dir, SOCKET_DEPTH, &mut budget, &shown, &mut candidates);
    }
    candidates
        .into_iter()
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()))
        .collect()
}

/// A `/proc/net/unix` line's path (`Num RefCount Protocol Flags Type St Inode Path`): only an
/// absolute one (an abstract name starts with `@`, an unbound socket has none).
fn table_path(line: &str) -> Option<PathBuf> {
    let mut rest = line.trim_start();
    for _ in 0..7 {
        let end = rest.find(char::is_whitespace)?;
        rest = rest[end..].trim_start();
    }
    rest.starts_with('/').then(|| PathBuf::from(rest))
}

/// The socket files under `dir`, `depth` levels down at most, links not followed.
fn walk(
    dir: &Path,
    depth: usize,
    budget: &mut usize,
    shown: &impl Fn(&Path) -> bool,
    out: &mut Vec<PathBuf>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        if kind.is_socket() {
            out.push(path);
        } else if kind.is_dir() && depth > 1 && shown(&path) {
            walk(&path, depth - 1, budget, shown, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_line_gives_its_path_and_an_abstract_or_unbound_one_none() {
        let line = "0000000000000000: 00000002 00000000 00010000 0001 01 12345 /run/a b.sock";
        assert_eq!(table_path(line), Some(PathBuf::from("/run/a b.sock")));
        let line = "0000000000000000: 00000002 00000000 00010000 0001 01  1234 @/tmp/.X11-unix/X0";
        assert_eq!(table_path(line), None);
        assert_eq!(table_path("0000000000000000: 00000003 00000000 00000000 0001 03 99"), None);
    }

    #[test]
    fn the_last_mount_above_a_path_says_what_it_shows() {
        let mut m = Mounts::default();
        m.mount("--ro-bind", Some(Path::new("/")), Path::new("/"), true);
        m.mount("--tmpfs", None, Path::new("/tmp"), false);
        m.mount("--bind", Some(Path::new("/tmp/tree")), Path::new("/tmp/tree"), true);
        assert!(m.shows_host(Path::new("/etc/passwd")));
        assert!(!m.shows_host(Path::new("/tmp/other")));
        assert!(m.shows_host(Path::new("/tmp/tree/a")));
        assert!(!m.shows_host(Path::new("/tmp/treehouse")));
    }
}
