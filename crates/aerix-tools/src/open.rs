//! Opening a file the tools read or change: only a regular file. A FIFO's open waits for a
//! writer and a device's read never ends, so the kind is checked before the open; the open
//! itself neither follows a link nor blocks, and the open file is checked again, so a file
//! swapped in between can neither hang the call nor lead it elsewhere.

use std::fs::{File, FileType, Metadata, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use nix::libc;

use crate::ToolError;

const FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

/// `a FIFO`, `a socket`, ... for a refusal.
pub(crate) fn kind(file_type: FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn not_regular(shown: &str, file_type: FileType) -> ToolError {
    ToolError::new(format!(
        "refused: {shown} is {}: only regular files are read or changed",
        kind(file_type)
    ))
}

/// A regular file at `path` (resolved: no link in it), opened to read, and its metadata.
pub(crate) fn regular(path: &Path, shown: &str) -> Result<(File, Metadata), ToolError> {
    open_regular(path, shown, false)
}

/// A regular file at `path`, opened to read and write (`edit`).
pub(crate) fn regular_rw(path: &Path, shown: &str) -> Result<(File, Metadata), ToolError> {
    open_regular(path, shown, true)
}

/// Its kind checked before the open (a FIFO is never opened to wait on), then again on the file.
fn open_regular(path: &Path, shown: &str, write: bool) -> Result<(File, Metadata), ToolError> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| ToolError::new(format!("cannot read {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(not_regular(shown, meta.file_type()));
    }
    let verb = if write { "open" } else { "read" };
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(FLAGS)
        .open(path)
        .map_err(|e| ToolError::new(format!("cannot {verb} {shown}: {e}")))?;
    checked(file, shown)
}

/// `path` opened to be replaced (created when missing), emptied only once it is known to be a
/// regular file; and whether it existed.
pub(crate) fn replace(path: &Path, shown: &str) -> Result<(File, bool), ToolError> {
    let existed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::new(format!("{shown} is a directory")));
        }
        Ok(meta) if !meta.is_file() => return Err(not_regular(shown, meta.file_type())),
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(ToolError::new(format!("cannot write {shown}: {e}"))),
    };
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(FLAGS)
        .open(path)
        .map_err(|e| ToolError::new(format!("cannot write {shown}: {e}")))?;
    let (file, _) = checked(file, shown)?;
    file.set_len(0).map_err(|e| ToolError::new(format!("cannot write {shown}: {e}")))?;
    Ok((file, existed))
}

/// The open file's own kind: what the path held when it was opened.
fn checked(file: File, shown: &str) -> Result<(File, Metadata), ToolError> {
    let meta = file.metadata().map_err(|e| ToolError::new(format!("cannot read {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(not_regular(shown, meta.file_type()));
    }
    Ok((file, meta))
}
