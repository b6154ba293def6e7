//! Who may talk to whom over the pool's socket. The socket's directory must belong to this
//! user and give no access to anyone else (as ssh-agent and tmux keep theirs): otherwise
//! another local user could create it first and serve a fake pool, whose "model" then drives
//! the victim's tools. Both ends also check the other's uid (`SO_PEERCRED`) on every
//! connection. `docs/protocol.md` ("Who may connect") is the contract.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A socket directory or a peer this user must not trust.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(
        "the pool's socket directory {path} belongs to uid {owner}, not to you (uid {you}): \
         another user may be serving on it; remove it or choose another socket"
    )]
    ForeignDir { path: PathBuf, owner: u32, you: u32 },
    #[error(
        "the pool's socket directory {path} has mode {mode:04o}: other users have access; \
         it must be 0700 (chmod 700 {path})"
    )]
    OpenDir { path: PathBuf, mode: u32 },
    #[error("the pool's socket directory {path} is not a directory")]
    NotADir { path: PathBuf },
    #[error("cannot check or create the pool's socket directory {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error(
        "the process on {path} runs as uid {peer}, not as you (uid {you}): refusing to talk to it"
    )]
    ForeignPeer { path: PathBuf, peer: u32, you: u32 },
    #[error("cannot read the credentials of the process on {path}: {error}")]
    PeerUnknown { path: PathBuf, error: std::io::Error },
}

/// This process's effective uid: whom the socket and its peers must belong to.
pub fn current_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The daemon's side: makes the socket's directory (mode 0700, missing parents too) or checks
/// the one that exists.
pub fn prepare_socket_dir(socket: &Path) -> Result<(), TrustError> {
    let dir = socket_dir(socket);
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|error| TrustError::Io { path: dir.clone(), error })?;
    }
    check_dir(&dir)
}

/// A client's side, before it connects: a missing directory is fine (nothing serves there:
/// connecting fails), one that exists must pass the daemon's check.
pub fn check_socket_dir(socket: &Path) -> Result<(), TrustError> {
    let dir = socket_dir(socket);
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        _ => check_dir(&dir),
    }
}

/// Refuses a peer of another uid.
pub fn check_peer(socket: &Path, peer: std::io::Result<u32>) -> Result<(), TrustError> {
    let you = current_uid();
    match peer {
        Ok(peer) if peer == you => Ok(()),
        Ok(peer) => Err(TrustError::ForeignPeer { path: socket.to_path_buf(), peer, you }),
        Err(error) => Err(TrustError::PeerUnknown { path: socket.to_path_buf(), error }),
    }
}

fn socket_dir(socket: &Path) -> PathBuf {
    match socket.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Owned by this user, no group or other permission bits. A symlink is followed: its target
/// is what is checked (and what the socket would live in).
fn check_dir(dir: &Path) -> Result<(), TrustError> {
    let meta =
        std::fs::metadata(dir).map_err(|error| TrustError::Io { path: dir.into(), error })?;
    if !meta.is_dir() {
        return Err(TrustError::NotADir { path: dir.into() });
    }
    let you = current_uid();
    if meta.uid() != you {
        return Err(TrustError::ForeignDir { path: dir.into(), owner: meta.uid(), you });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(TrustError::OpenDir { path: dir.into(), mode });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_made_private_and_an_open_one_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("a/b/pool.sock");
        check_socket_dir(&socket).unwrap();
        prepare_socket_dir(&socket).unwrap();
        let mode = std::fs::metadata(tmp.path().join("a/b")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(tmp.path().join("a/b"), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        for result in [prepare_socket_dir(&socket), check_socket_dir(&socket)] {
            let err = result.unwrap_err();
            assert!(matches!(err, TrustError::OpenDir { mode: 0o750, .. }), "{err}");
            assert!(err.to_string().contains("a/b has mode 0750"), "{err}");
        }
    }

    #[test]
    fn a_file_in_the_directory_s_place_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), "").unwrap();
        let err = prepare_socket_dir(&tmp.path().join("f/pool.sock")).unwrap_err();
        assert!(matches!(err, TrustError::NotADir { .. }), "{err}");
    }

    #[test]
    fn a_peer_of_another_uid_is_refused() {
        let me = current_uid();
        check_peer(Path::new("/s"), Ok(me)).unwrap();
        let err = check_peer(Path::new("/s"), Ok(me.wrapping_add(1))).unwrap_err();
        assert!(matches!(err, TrustError::ForeignPeer { .. }), "{err}");
    }
}
