//! The record: `{"version": 1, "roots": {"<root>": {"hash", "trusted_at", "items"}}}`, written
//! whole to a temporary file and renamed over, mode `0600`. A record that cannot be read is an
//! error naming its file, and is never overwritten: a broken file stays for the user to see.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Inventory, Standing};

/// At most this many bytes are read: a record of thousands of roots is far below it.
const MAX_BYTES: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("the trust record {}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("no data directory for the trust record: set HOME or XDG_DATA_HOME")]
    NoDataDir,
    #[error(
        "the trust record {} is not readable ({message}); fix or remove it (nothing is trusted \
         until then)",
        path.display()
    )]
    Invalid { path: PathBuf, message: String },
}

/// One trusted root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// [`Inventory::hash`] when it was trusted.
    pub hash: String,
    /// RFC 3339, UTC.
    pub trusted_at: String,
    /// What it would run then, one line each (shown by `aerix trust --list`).
    pub items: Vec<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    roots: BTreeMap<String, Entry>,
}

/// The user's trusted roots.
#[derive(Debug)]
pub struct Record {
    path: PathBuf,
    file: File,
}

impl Record {
    /// `<data>/aerix/trust.json` (`data`: the XDG data directory).
    pub fn standard_path(data: &Path) -> PathBuf {
        data.join("aerix/trust.json")
    }

    /// The record at `path`; a missing file is an empty record.
    pub fn open(path: &Path) -> Result<Record, TrustError> {
        let io = |error| TrustError::Io { path: path.to_owned(), error };
        let invalid = |message: String| TrustError::Invalid { path: path.to_owned(), message };
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Record {
                    path: path.to_owned(),
                    file: File { version: 1, ..File::default() },
                });
            }
            Err(e) => return Err(io(e)),
        };
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_BYTES + 1), &mut text)
            .map_err(|e| invalid(e.to_string()))?;
        if text.len() as u64 > MAX_BYTES {
            return Err(invalid(format!("over {MAX_BYTES} bytes")));
        }
        let file: File = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if file.version != 1 {
            return Err(invalid(format!("version {} is not 1", file.version)));
        }
        Ok(Record { path: path.to_owned(), file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where `inventory`'s root stands against what it would run now.
    pub fn standing(&self, inventory: &Inventory) -> Standing {
        if inventory.is_empty() {
            return Standing::Nothing;
        }
        match self.file.roots.get(&key(inventory.root())) {
            None => Standing::Untrusted,
            Some(entry) if entry.hash == inventory.hash() => Standing::Trusted,
            Some(entry) => Standing::Changed { since: entry.trusted_at.clone() },
        }
    }

    /// Trusts the root with what it would run now (replacing an earlier trust of it).
    pub fn trust(&mut self, inventory: &Inventory) {
        let entry = Entry {
            hash: inventory.hash(),
            trusted_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            items: inventory.items().iter().map(ToString::to_string).collect(),
        };
        self.file.roots.insert(key(inventory.root()), entry);
    }

    /// Forgets the root; `false` when it was not trusted.
    pub fn revoke(&mut self, root: &Path) -> bool {
        self.file.roots.remove(&key(root)).is_some()
    }

    /// Every trusted root, sorted.
    pub fn roots(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.file.roots.iter().map(|(root, entry)| (root.as_str(), entry))
    }

    /// Writes the record: a temporary file beside it, then a rename.
    pub fn save(&self) -> Result<(), TrustError> {
        let io = |error| TrustError::Io { path: self.path.clone(), error };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = self.path.with_extension(format!("json.{}.tmp", std::process::id()));
        let text =
            serde_json::to_string_pretty(&self.file).map_err(|e| io(std::io::Error::other(e)))?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        out.write_all(text.as_bytes()).and_then(|()| out.sync_all()).map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }
}

fn key(root: &Path) -> String {
    root.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kind;

    fn inventory(command: &str) -> Inventory {
        let mut inv = Inventory::new(Path::new("/repo"));
        inv.add(Kind::Hook, Path::new("/repo/.claude/settings.json"), command);
        inv
    }

    #[test]
    fn a_trust_is_kept_until_what_would_run_changes_or_it_is_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let path = Record::standard_path(dir.path());
        let mut record = Record::open(&path).unwrap();
        assert_eq!(record.standing(&inventory("SessionStart: touch x")), Standing::Untrusted);
        assert_eq!(record.standing(&Inventory::new(Path::new("/repo"))), Standing::Nothing);
        record.trust(&inventory("SessionStart: touch x"));
        record.save().unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);

        let mut record = Record::open(&path).unwrap();
        assert_eq!(record.standing(&inventory("SessionStart: touch x")), Standing::Trusted);
        assert!(matches!(
            record.standing(&inventory("SessionStart: touch y")),
            Standing::Changed { .. }
        ));
        assert!(record.revoke(Path::new("/repo")));
        assert!(!record.revoke(Path::new("/repo")));
        record.save().unwrap();
        let record = Record::open(&path).unwrap();
        assert_eq!(record.standing(&inventory("SessionStart: touch x")), Standing::Untrusted);
    }

    #[test]
    fn a_broken_record_is_an_error_naming_it_and_is_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trust.json");
        std::fs::write(&path, "{\"version\": 1, \"roots\": {\"/r\": 3}}").unwrap();
        let error = Record::open(&path).unwrap_err().to_string();
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains("fix or remove it"), "{error}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"version\": 1, \"roots\": {\"/r\": 3}}"
        );
        std::fs::write(&path, "{\"version\": 2, \"roots\": {}}").unwrap();
        assert!(Record::open(&path).unwrap_err().to_string().contains("version 2"));
    }
}
