//! Instruction files: `AGENTS.md` and `CLAUDE.md` of every directory from the repository root
//! down to the working directory, outermost first.

use std::path::{Path, PathBuf};

use crate::ConfigError;

/// The names read in each directory, in this order.
pub const INSTRUCTION_NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstructionFile {
    pub path: PathBuf,
    pub text: String,
}

/// The repository root holding `dir` (the nearest ancestor with a `.git` entry), else `dir`.
pub fn project_root(dir: &Path) -> PathBuf {
    dir.ancestors().find(|d| d.join(".git").exists()).unwrap_or(dir).to_owned()
}

/// The instruction files from `root` down to `cwd` (`cwd` must be inside `root`; when it is
/// not, only `cwd` is read).
pub fn instruction_files(root: &Path, cwd: &Path) -> Result<Vec<InstructionFile>, ConfigError> {
    let mut dirs: Vec<&Path> = cwd.ancestors().take_while(|d| d.starts_with(root)).collect();
    if dirs.is_empty() {
        dirs.push(cwd);
    }
    dirs.reverse();
    let mut files = Vec::new();
    for dir in dirs {
        for name in INSTRUCTION_NAMES {
            let path = dir.join(name);
            match std::fs::read_to_string(&path) {
                Ok(text) => files.push(InstructionFile { path, text }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {}
                Err(source) => return Err(ConfigError::Read { path, source }),
            }
        }
    }
    Ok(files)
}
