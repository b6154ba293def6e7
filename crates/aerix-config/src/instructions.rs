//! Instruction files: `AGENTS.md` and `CLAUDE.md` of every directory from the repository root
//! down to the working directory, outermost first.

use std::path::{Path, PathBuf};

use crate::ConfigError;
use crate::capped::{Capped, read_capped_within};

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

/// The instruction files read, and a note for each one skipped (over `MAX_FILE_BYTES`, not a
/// regular file, not UTF-8, a link out of the repository).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instructions {
    pub files: Vec<InstructionFile>,
    pub notes: Vec<String>,
}

/// The instruction files from `root` down to `cwd` (`cwd` must be inside `root`; when it is
/// not, only `cwd` is read).
pub fn instruction_files(root: &Path, cwd: &Path) -> Result<Instructions, ConfigError> {
    let mut dirs: Vec<&Path> = cwd.ancestors().take_while(|d| d.starts_with(root)).collect();
    let mut within = root;
    if dirs.is_empty() {
        dirs.push(cwd);
        within = cwd;
    }
    dirs.reverse();
    let mut out = Instructions::default();
    for dir in dirs {
        for name in INSTRUCTION_NAMES {
            let path = dir.join(name);
            match read_capped_within(&path, within) {
                Ok(Capped::Text(text)) => out.files.push(InstructionFile { path, text }),
                Ok(Capped::Missing) => {}
                Ok(Capped::Skipped(why)) => {
                    out.notes.push(format!("instructions: {}: {why}; skipped", path.display()));
                }
                Err(error) => return Err(ConfigError::Read { path, error }),
            }
        }
    }
    Ok(out)
}
