//! The bounds of git work on a profile: each call runs on a thread of its own and is waited for
//! at most `GIT_TIMEOUT` (libgit2 has no deadline of its own), and writers of one repository
//! take its lock file in turn, waiting at most `LOCK_WAIT`.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::ProfileError;

/// Every git call on a profile.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a writer waits for the repository's lock file.
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Runs `work` on its own thread and waits for it at most `timeout`. A call past it is left
/// to finish on its thread (it holds no lock of ours), and the caller gets `Timeout`.
pub(crate) fn bounded<T, E>(
    profile: &str,
    what: &str,
    timeout: Duration,
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, ProfileError>
where
    T: Send + 'static,
    E: Into<ProfileError> + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("aerix-profile-git".into()).spawn(move || {
        let _ = tx.send(work());
    });
    let timed_out =
        || ProfileError::Timeout { profile: profile.to_owned(), what: what.to_owned(), timeout };
    if spawned.is_err() {
        return Err(timed_out());
    }
    match rx.recv_timeout(timeout) {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(timed_out()),
    }
}

/// The repository's write lock, held until dropped.
pub(crate) struct WriteLock {
    _file: File,
}

pub(crate) fn lock(profile: &str, path: &Path, wait: Duration) -> Result<WriteLock, ProfileError> {
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(
        |error| ProfileError::Create { profile: profile.to_owned(), path: path.to_owned(), error },
    )?;
    let start = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(WriteLock { _file: file }),
            Err(TryLockError::WouldBlock) if start.elapsed() < wait => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(ProfileError::Locked {
                    profile: profile.to_owned(),
                    path: PathBuf::from(path),
                    timeout: wait,
                });
            }
            Err(TryLockError::Error(source)) => {
                return Err(ProfileError::Create {
                    profile: profile.to_owned(),
                    path: path.to_owned(),
                    error: source,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_its_bound_is_named() {
        let start = Instant::now();
        let err = bounded("p", "reading main", Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_secs(2));
            Ok::<(), ProfileError>(())
        })
        .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(1));
        assert_eq!(
            err.to_string(),
            "profile p: git (reading main) took longer than 0s; stopped waiting, nothing written"
        );
        assert_eq!(bounded("p", "x", GIT_TIMEOUT, || Ok::<_, ProfileError>(7)).unwrap(), 7);
    }

    #[test]
    fn a_held_lock_is_waited_for_then_named() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("aerix.lock");
        let held = lock("p", &path, LOCK_WAIT).unwrap();
        let err = match lock("p", &path, Duration::from_millis(30)) {
            Err(e) => e,
            Ok(_) => panic!("a second lock while one is held"),
        };
        assert!(err.to_string().contains("another writer held"), "{err}");
        drop(held);
        assert!(lock("p", &path, Duration::from_millis(30)).is_ok());
    }
}
