//! The `wiki/` mirror: files that follow the branch, and the pages people copy into it.
//!
//! The mirror is brought to the branch from the commit it last followed (recorded in
//! `wiki.git/ai-memory-mirror`), so a process killed between a commit and its file leaves
//! nothing behind: the next write or the next start writes it. A file that is neither what
//! git had at the recorded commit nor what it has now was edited by hand, and is left for
//! `import_changed`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::{BRANCH, CleanPage, Location, StoreError, Stored, Wiki, WikiChange};

/// A branch lock older than this was left by a killed writer: a live one holds it only while
/// it writes 41 bytes and renames them.
const STALE_LOCK: Duration = Duration::from_secs(2);

/// Where the mirror's commit is recorded (inside the bare repository, which git leaves alone).
const MIRROR_TIP: &str = "ai-memory-mirror";

/// Whether `clear_stale_lock` waits for a young lock to go or grow stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    UntilStale,
    No,
}

impl Wiki {
    /// Pages copied into (or edited in) `wiki/` by hand since the last call: each one that
    /// parses and differs from the branch is committed and returned; one that does not parse
    /// is returned as an error naming the file and left alone.
    pub fn import_changed(
        &self,
        author: &str,
    ) -> Result<Vec<Result<Stored, StoreError>>, StoreError> {
        let mut files = Vec::new();
        walk(&self.mirror, &mut files);
        let mut changed = Vec::new();
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            for (file, stamp) in files {
                if seen.get(&file) != Some(&stamp) {
                    seen.insert(file.clone(), stamp);
                    changed.push(file);
                }
            }
        }
        let mut out = Vec::new();
        for file in changed {
            let Ok(rel) = file.strip_prefix(&self.mirror) else { continue };
            let Some(rel) = rel.to_str().map(|s| s.replace('\\', "/")) else { continue };
            let Some(location) = Location::from_git_path(&rel) else { continue };
            let bytes = match std::fs::read(&file) {
                Ok(b) => b,
                Err(source) => {
                    out.push(Err(StoreError::Io { path: file, error: source }));
                    continue;
                }
            };
            if self.git.read(BRANCH, &rel)?.as_deref() == Some(&bytes[..]) {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            let page = match CleanPage::new(ai_memory_core::sanitize(&text)) {
                Ok(page) => page,
                Err(source) => {
                    out.push(Err(StoreError::Page { path: rel, error: source }));
                    continue;
                }
            };
            self.write(&location, &page, author)?;
            // The file becomes what was committed: a secret in it is redacted on disk too.
            self.mirror_put(&rel, page.text().as_bytes())?;
            out.push(Ok(Stored {
                location,
                text: page.text().to_owned(),
                page: page.page().clone(),
            }));
        }
        Ok(out)
    }

    /// Brings the mirror's files to the branch's tip. The caller holds `writes`.
    pub(crate) fn sync_mirror(&self) -> Result<(), StoreError> {
        let record = self.git.path().join(MIRROR_TIP);
        // No record: a mirror from before one was kept (its hand edits cannot be told from stale
        // files, so it is taken as it is). An empty record: the mirror of the empty wiki.
        let recorded = std::fs::read_to_string(&record).ok().map(|s| s.trim().to_owned());
        let tip = self.head()?;
        if recorded.is_some() && recorded.as_deref() == Some(tip.as_deref().unwrap_or("")) {
            return Ok(());
        }
        if let (Some(from), Some(tip)) = (&recorded, &tip) {
            let from = Some(from.as_str()).filter(|f| !f.is_empty());
            for change in self.changes(from, tip)?.unwrap_or_default() {
                let WikiChange::Page(at) = change else { continue };
                let rel = at.git_path();
                let new = self.git.read_at(tip, &rel)?;
                let current = std::fs::read(self.mirror.join(&rel)).ok();
                if current == new {
                    continue;
                }
                let old = match from {
                    Some(from) => self.git.read_at(from, &rel)?,
                    None => None,
                };
                if current != old {
                    continue; // edited by hand: `import_changed` takes it
                }
                match new {
                    Some(bytes) => self.mirror_put(&rel, &bytes)?,
                    None => self.mirror_remove(&rel)?,
                }
            }
        }
        let tmp = record.with_extension(format!("tmp{}", std::process::id()));
        let io = |error| StoreError::Io { path: record.clone(), error };
        std::fs::write(&tmp, format!("{}\n", tip.unwrap_or_default())).map_err(io)?;
        std::fs::rename(&tmp, &record).map_err(io)?;
        Ok(())
    }

    /// Removes the branch's lock file when a killed writer left it; whether it did.
    pub(crate) fn clear_stale_lock(&self, wait: Wait) -> bool {
        let lock = self.git.path().join(format!("refs/heads/{BRANCH}.lock"));
        loop {
            let Ok(meta) = std::fs::metadata(&lock) else { return false };
            let age = meta.modified().ok().and_then(|m| m.elapsed().ok()).unwrap_or_default();
            if age >= STALE_LOCK {
                tracing::warn!(lock = %lock.display(), "removing a branch lock a killed writer left");
                return std::fs::remove_file(&lock).is_ok();
            }
            if wait == Wait::No {
                return false;
            }
            // A live writer's lock is gone within milliseconds: look again soon.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn mirror_put(&self, rel: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let file = self.mirror.join(rel);
        let io = |error| StoreError::Io { path: file.clone(), error };
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = file.with_extension(format!("md.tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, &file).map_err(io)?;
        // What we wrote is not a hand edit.
        if let Ok(meta) = std::fs::metadata(&file)
            && let Ok(modified) = meta.modified()
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.insert(file.clone(), (modified, meta.len()));
        }
        Ok(())
    }

    fn mirror_remove(&self, rel: &str) -> Result<(), StoreError> {
        let file = self.mirror.join(rel);
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(StoreError::Io { path: file, error }),
        }
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).remove(&file);
        Ok(())
    }
}

/// Markdown files under `dir`, with their modification time and length.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, (SystemTime, u64))>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "md")
            && let Ok(modified) = meta.modified()
        {
            out.push((path, (modified, meta.len())));
        }
    }
}
