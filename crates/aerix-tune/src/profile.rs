//! `aerix-tune`'s store and guards over the profile store (`aerix-profile`).

use crate::{Artifacts, Committed, Guard, Store, TuneError};

/// The profile repository as `aerix-tune` sees it: `aerix-profile`'s store, whose writes take
/// the repository's lock and move the branch by compare-and-swap.
pub struct ProfileStore {
    pub profile: aerix_profile::Profile,
    /// The commits' author name (`aerix tune`, `aerix profile sync`).
    pub author: &'static str,
}

fn store_err(e: aerix_profile::ProfileError) -> TuneError {
    TuneError::Store(e.to_string())
}

impl Store for ProfileStore {
    fn head(&self, branch: &str) -> Result<Option<String>, TuneError> {
        self.profile.head(branch).map_err(store_err)
    }

    fn read(&self, commit: &str, path: &str) -> Result<Option<String>, TuneError> {
        self.profile.read(commit, path).map_err(store_err)
    }

    fn history(&self, branch: &str, path: &str) -> Result<Vec<String>, TuneError> {
        if self.head(branch)?.is_none() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for commit in self.profile.history(branch, Some(path), HISTORY).map_err(store_err)? {
            if let Some(text) = self.read(&commit.id, path)? {
                out.push(text);
            }
        }
        Ok(out)
    }

    fn commit(
        &self,
        branch: &str,
        parent: &str,
        files: &[(String, String)],
        message: &str,
    ) -> Result<Committed, TuneError> {
        let moved = "the branch moved";
        let written = self.profile.write(branch, message, self.author, |head| {
            if head.commit.as_deref() != Some(parent) {
                return Err(aerix_profile::ProfileError::Refused {
                    profile: self.profile.name().to_owned(),
                    reason: moved.to_owned(),
                });
            }
            Ok(files
                .iter()
                .map(|(path, text)| aerix_profile::Change::Put {
                    path: path.clone(),
                    bytes: text.as_bytes().to_vec(),
                })
                .collect())
        });
        match written {
            Ok(aerix_profile::Written::Committed(id)) => Ok(Committed::Done(id)),
            Ok(aerix_profile::Written::Unchanged(head)) => {
                Ok(Committed::Done(head.unwrap_or_else(|| parent.to_owned())))
            }
            Err(aerix_profile::ProfileError::Refused { reason, .. }) if reason == moved => {
                Ok(Committed::Moved(self.head(branch)?.unwrap_or_default()))
            }
            Err(e) => Err(store_err(e)),
        }
    }
}

/// Commits of `main` looked at for a built-in's old upstream text (one per release).
const HISTORY: usize = 1_000;

/// The profile store's guards: the shape (placeholders, the verdict words, routing's words),
/// then the size against the embedded text (a built-in) or the source (an overlay).
pub struct Guards;

impl Guard for Guards {
    fn check(&self, path: &str, text: &str, source: &str) -> Result<(), String> {
        let (embedded, overlay) =
            if Artifacts::is_overlay(path) { (None, Some(source)) } else { (Some(source), None) };
        aerix_profile::guards::check(path, text, embedded, overlay).map_err(|e| e.to_string())
    }
}
