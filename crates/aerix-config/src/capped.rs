//! Reading a text file aerix loads whole into a prompt (an agent definition, an instruction
//! file; skills use the same cap): a regular file of at most `MAX_FILE_BYTES`. Anything else is
//! a reason the caller puts in a note, and the file is skipped, never read whole.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::libc;

/// The most a skill, an agent definition or an instruction file may hold.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// What reading found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Capped {
    Text(String),
    /// No such file (or a directory of that name): nothing to read, nothing to say.
    Missing,
    /// Why the file is skipped (`300000 bytes, over the 256 KiB limit`).
    Skipped(String),
}

/// [`read_capped`] of a file that must lie inside `root` once its links are resolved: a link
/// out of it (a repository's `CLAUDE.md -> ~/.ssh/id_rsa`) is skipped with its reason, never
/// read. A link inside (`CLAUDE.md -> AGENTS.md`) is followed.
pub fn read_capped_within(path: &Path, root: &Path) -> std::io::Result<Capped> {
    let resolved = match path.canonicalize() {
        Ok(resolved) => resolved,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Capped::Missing),
        Err(e) => return Err(e),
    };
    let root = root.canonicalize().unwrap_or_else(|_| root.to_owned());
    if !resolved.starts_with(&root) {
        return Ok(Capped::Skipped(format!(
            "a link to {}, outside {}",
            resolved.display(),
            root.display()
        )));
    }
    read_capped(&resolved)
}

/// `path`'s text (a link is followed: `CLAUDE.md -> AGENTS.md` is common). A FIFO or a device
/// is skipped by kind before it is opened, since a FIFO's open and a device's read may never
/// end; the open does not block, and the open file is checked again.
pub fn read_capped(path: &Path) -> std::io::Result<Capped> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Capped::Missing),
        Err(e) => return Err(e),
    };
    if meta.is_dir() {
        return Ok(Capped::Missing);
    }
    if !meta.is_file() {
        return Ok(Capped::Skipped("not a regular file".to_owned()));
    }
    let too_big = |size: u64| {
        Capped::Skipped(format!("{size} bytes, over the {} KiB limit", MAX_FILE_BYTES >> 10))
    };
    if meta.len() > MAX_FILE_BYTES {
        return Ok(too_big(meta.len()));
    }
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(Capped::Skipped("not a regular file".to_owned()));
    }
    let mut bytes = Vec::new();
    // It may have grown since: never past the cap.
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Ok(too_big(bytes.len() as u64));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Capped::Text(text)),
        Err(_) => Ok(Capped::Skipped("not UTF-8 text".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_out_of_the_root_is_skipped_and_one_inside_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("repo"), dir.path().join("secret"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(&outside, "key\n").unwrap();
        std::fs::write(root.join("AGENTS.md"), "rules\n").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("CLAUDE.md")).unwrap();
        std::os::unix::fs::symlink("AGENTS.md", root.join("README.md")).unwrap();
        let Capped::Skipped(why) = read_capped_within(&root.join("CLAUDE.md"), &root).unwrap()
        else {
            panic!("a link out was read");
        };
        assert!(why.starts_with("a link to ") && why.contains("outside"), "{why}");
        assert_eq!(
            read_capped_within(&root.join("README.md"), &root).unwrap(),
            Capped::Text("rules\n".to_owned())
        );
        assert_eq!(read_capped_within(&root.join("none.md"), &root).unwrap(), Capped::Missing);
    }
}
