//! Model references: what `caldrix run --model` and `caldrix pool --load` accept, and how a
//! reference becomes a GGUF file on this machine.
//!
//! A reference is a path to a GGUF file, or a Hugging Face reference resolved through the hub's
//! cache (the layout the Python `huggingface_hub` uses, so both share downloads):
//!
//! - `owner/repo:QUANT` — the repository's GGUF whose name carries that quantization
//!   (`Q4_K_M`, `q8_0`, ...); a split model (`-00001-of-00003.gguf`) is fetched whole;
//! - `owner/repo` — the repository's only GGUF, or its `Q4_K_M` when it has several;
//! - `owner/repo/FILE.gguf` — that file (it may sit in a folder of the repository);
//! - any of these after `hf:` or `hf.co/`, which forces the hub reading even when a local path of
//!   that name exists.
//!
//! Without a prefix, a reference is a path when it starts with `/`, `.` or `~`, when such a file
//! exists, or when it does not have the shape of a hub reference.

mod pick;
mod resolve;

use std::fmt;
use std::path::PathBuf;

pub use resolve::Hub;

/// A parsed model reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelRef {
    Path(PathBuf),
    Hub(HubRef),
}

/// A reference to a file in a Hugging Face model repository (revision `main`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubRef {
    /// `owner/repo`.
    pub repo: String,
    pub file: HubFile,
}

/// Which GGUF of the repository is meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HubFile {
    /// A file named by its path in the repository.
    Name(String),
    /// The GGUF carrying this quantization in its name.
    Quant(String),
    /// The only GGUF, or the `Q4_K_M` one.
    Default,
}

impl fmt::Display for HubRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            HubFile::Name(name) => write!(f, "{}/{name}", self.repo),
            HubFile::Quant(quant) => write!(f, "{}:{quant}", self.repo),
            HubFile::Default => f.write_str(&self.repo),
        }
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelRef::Path(path) => write!(f, "{}", path.display()),
            ModelRef::Hub(hub) => write!(f, "{hub}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("model reference `{reference}`: {why}")]
    BadReference { reference: String, why: String },
    #[error(
        "cannot fetch `{reference}` from {endpoint} ({detail}), and it is not in the cache {}; \
         connect to the network once, or give a path to a GGUF file",
        cache.display()
    )]
    Unreachable { reference: String, endpoint: String, cache: PathBuf, detail: String },
    #[error(
        "`{reference}` is not in the cache {} and downloads are off (HF_HUB_OFFLINE)",
        cache.display()
    )]
    Offline { reference: String, cache: PathBuf },
    #[error("`{reference}`: the hub answered {status} for {url}{hint}")]
    Http { reference: String, url: String, status: u16, hint: &'static str },
    #[error("`{reference}`: {why}; the repository's GGUF files: {}", list(available))]
    NoMatch { reference: String, why: String, available: Vec<String> },
    #[error(
        "`{reference}`: the download of {file} does not match its checksum \
         (expected {expected}, got {actual}); the file was removed, try again"
    )]
    Checksum { reference: String, file: String, expected: String, actual: String },
    #[error("`{reference}`: {what}: {error}")]
    Io { reference: String, what: String, error: std::io::Error },
    #[error("`{reference}`: {detail}")]
    Download { reference: String, detail: String },
}

fn list(files: &[String]) -> String {
    if files.is_empty() { "none".to_owned() } else { files.join(", ") }
}

/// Reads a reference; see the crate documentation for the forms.
pub fn parse(reference: &str) -> Result<ModelRef, HubError> {
    let trimmed = reference.trim();
    let forced = ["hf:", "hf.co/", "huggingface.co/", "https://huggingface.co/"]
        .iter()
        .find_map(|prefix| trimmed.strip_prefix(prefix));
    if let Some(rest) = forced {
        return parse_hub(rest).map(ModelRef::Hub).ok_or_else(|| HubError::BadReference {
            reference: reference.to_owned(),
            why: "a hub reference is owner/repo, owner/repo:QUANT or owner/repo/FILE.gguf"
                .to_owned(),
        });
    }
    let looks_local = trimmed.starts_with(['/', '.', '~']) || PathBuf::from(trimmed).exists();
    match parse_hub(trimmed) {
        Some(hub) if !looks_local => Ok(ModelRef::Hub(hub)),
        _ => Ok(ModelRef::Path(PathBuf::from(trimmed))),
    }
}

fn parse_hub(text: &str) -> Option<HubRef> {
    let (path, quant) = match text.split_once(':') {
        Some((path, quant)) => (path, Some(quant)),
        None => (text, None),
    };
    let mut parts = path.splitn(3, '/');
    let owner = parts.next()?;
    let name = parts.next()?;
    let file = parts.next();
    let word = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if !word(owner) || !word(name) || name.ends_with(".gguf") {
        return None;
    }
    let repo = format!("{owner}/{name}");
    let file = match (file, quant) {
        (Some(_), Some(_)) => return None,
        (Some(file), None) => {
            if !file.ends_with(".gguf") || file.split('/').any(|part| !word(part)) {
                return None;
            }
            HubFile::Name(file.to_owned())
        }
        (None, Some(quant)) if word(quant) => HubFile::Quant(quant.to_owned()),
        (None, Some(_)) => return None,
        (None, None) => HubFile::Default,
    };
    Some(HubRef { repo, file })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(repo: &str, file: HubFile) -> ModelRef {
        ModelRef::Hub(HubRef { repo: repo.to_owned(), file })
    }

    #[test]
    fn hub_forms() {
        let quant = HubFile::Quant("Q4_K_M".into());
        assert_eq!(parse("owner/repo-GGUF:Q4_K_M").unwrap(), hub("owner/repo-GGUF", quant.clone()));
        assert_eq!(parse("hf:owner/repo-GGUF:Q4_K_M").unwrap(), hub("owner/repo-GGUF", quant));
        assert_eq!(parse("hf.co/o/r").unwrap(), hub("o/r", HubFile::Default));
        assert_eq!(
            parse("o/r/sub/m.Q8_0.gguf").unwrap(),
            hub("o/r", HubFile::Name("sub/m.Q8_0.gguf".into()))
        );
    }

    #[test]
    fn path_forms() {
        for text in ["model.gguf", "./o/r", "/models/m.gguf", "~/m.gguf", "models/m.gguf", "a b/c"]
        {
            assert_eq!(parse(text).unwrap(), ModelRef::Path(text.into()), "{text}");
        }
        // An existing file wins over the hub reading (a relative path, as a user types it).
        let owner = format!("hub-parse-test-{}", std::process::id());
        std::fs::create_dir_all(format!("{owner}/repo")).unwrap();
        let text = format!("{owner}/repo");
        let parsed = parse(&text);
        std::fs::remove_dir_all(&owner).unwrap();
        assert_eq!(parsed.unwrap(), ModelRef::Path(text.into()));
    }

    #[test]
    fn bad_hub_references_are_named() {
        for text in ["hf:owner", "hf:o/r:Q4/x", "hf:o/r/file.bin", "hf:o/r/f.gguf:Q4"] {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(text) && error.contains("owner/repo"), "{error}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["o/r:Q4_0", "o/r", "o/r/f.gguf"] {
            assert_eq!(parse(text).unwrap().to_string(), text);
        }
    }
}
