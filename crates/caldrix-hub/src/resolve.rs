//! From a reference to a local file: the cache first, then the hub.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

use hf_hub::api::Progress;
use hf_hub::api::sync::{ApiBuilder, ApiError};
use hf_hub::{Cache, Repo};
use indicatif::ProgressBar;
use sha2::{Digest, Sha256};

use crate::pick::{gguf_files, pick};
use crate::{HubError, HubRef, ModelRef};

const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Where hub references are looked up and downloaded to.
#[derive(Clone, Debug)]
pub struct Hub {
    cache: PathBuf,
    endpoint: String,
    offline: bool,
}

impl Hub {
    /// The hub as the Python tools see it: cache `HF_HUB_CACHE`, else `HF_HOME/hub`, else
    /// `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`; endpoint `HF_ENDPOINT`;
    /// `HF_HUB_OFFLINE=1` reads the cache only; the token from `HF_TOKEN` or the cache's file.
    pub fn from_env() -> Hub {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let cache = var("HF_HUB_CACHE")
            .or_else(|| var("HF_HOME").map(|home| home.join("hub")))
            .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("huggingface/hub")))
            .or_else(|| var("HOME").map(|h| h.join(".cache/huggingface/hub")))
            .unwrap_or_else(|| std::env::temp_dir().join("huggingface/hub"));
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let offline = std::env::var("HF_HUB_OFFLINE")
            .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
        Hub { cache, endpoint, offline }
    }

    pub fn new(cache: PathBuf, endpoint: String, offline: bool) -> Hub {
        Hub { cache, endpoint: endpoint.trim_end_matches('/').to_owned(), offline }
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache
    }

    /// Parses and resolves a reference.
    pub fn resolve_str(&self, reference: &str) -> Result<PathBuf, HubError> {
        self.resolve(&crate::parse(reference)?)
    }

    /// The local GGUF a reference means, downloading it (with a progress bar on a terminal, log
    /// lines otherwise) when the cache does not hold it. A path is returned as it is: whether it
    /// is a loadable GGUF is the engine's to say.
    pub fn resolve(&self, reference: &ModelRef) -> Result<PathBuf, HubError> {
        match reference {
            ModelRef::Path(path) => Ok(path.clone()),
            ModelRef::Hub(hub) => {
                if let Some(path) = self.cached(hub) {
                    tracing::debug!(reference = %hub, path = %path.display(), "model from the cache");
                    return Ok(path);
                }
                if self.offline {
                    return Err(HubError::Offline {
                        reference: hub.to_string(),
                        cache: self.cache.clone(),
                    });
                }
                self.download(hub)
            }
        }
    }

    /// The cached snapshot of `main`, if it holds every file the reference needs.
    fn cached(&self, hub: &HubRef) -> Option<PathBuf> {
        let repo_dir = self.cache.join(Repo::model(hub.repo.clone()).folder_name());
        let commit = std::fs::read_to_string(repo_dir.join("refs/main")).ok()?;
        let snapshot = repo_dir.join("snapshots").join(commit.trim());
        let mut files = Vec::new();
        list_files(&snapshot, "", &mut files);
        let wanted = pick(&files, &hub.file).ok()?;
        let paths: Vec<PathBuf> = wanted.iter().map(|f| snapshot.join(f)).collect();
        // `exists` follows the symlink: a pointer whose blob is gone is not cached.
        paths.iter().all(|p| p.exists()).then(|| paths.into_iter().next()).flatten()
    }

    fn download(&self, hub: &HubRef) -> Result<PathBuf, HubError> {
        let reference = hub.to_string();
        let api = ApiBuilder::from_cache(Cache::new(self.cache.clone()))
            .with_endpoint(self.endpoint.clone())
            .with_progress(false)
            .with_retries(2)
            .build()
            .map_err(|e| self.api_error(&reference, e))?;
        let repo = api.model(hub.repo.clone());
        let listing: Vec<String> = repo
            .info()
            .map_err(|e| self.api_error(&reference, e))?
            .siblings
            .into_iter()
            .map(|s| s.rfilename)
            .collect();
        let files = pick(&listing, &hub.file).map_err(|why| HubError::NoMatch {
            reference: reference.clone(),
            why,
            available: gguf_files(&listing),
        })?;
        let mut paths = Vec::with_capacity(files.len());
        for file in &files {
            tracing::info!(reference, file, cache = %self.cache.display(), "downloading");
            let path = repo
                .download_with_progress(file, Bar::new())
                .map_err(|e| self.api_error(&reference, e))?;
            verify(&reference, file, &path)?;
            paths.push(path);
        }
        paths.into_iter().next().ok_or_else(|| HubError::Download {
            reference,
            detail: "the hub listed no file to fetch".to_owned(),
        })
    }

    fn api_error(&self, reference: &str, error: ApiError) -> HubError {
        let reference = reference.to_owned();
        match error {
            ApiError::TooManyRetries(inner) => self.api_error(&reference, *inner),
            ApiError::RequestError(request) => match *request {
                ureq::Error::Status(status, response) => {
                    let hint = match status {
                        401 | 403 => " (a gated or private repository: set HF_TOKEN)",
                        404 => " (no such repository or file)",
                        _ => "",
                    };
                    HubError::Http { reference, url: response.get_url().to_owned(), status, hint }
                }
                ureq::Error::Transport(transport) => HubError::Unreachable {
                    reference,
                    endpoint: self.endpoint.clone(),
                    cache: self.cache.clone(),
                    detail: transport.to_string(),
                },
            },
            ApiError::IoError(source) => {
                HubError::Io { reference, what: "writing into the cache".to_owned(), error: source }
            }
            ApiError::LockAcquisition(path) => HubError::Download {
                reference,
                detail: format!("another process is downloading {}", path.display()),
            },
            other => HubError::Download { reference, detail: other.to_string() },
        }
    }
}

/// Files under `dir`, as paths relative to the snapshot root.
fn list_files(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        // Snapshot entries are symlinks to blobs; `metadata` follows them.
        match std::fs::metadata(entry.path()) {
            Ok(m) if m.is_dir() => list_files(&entry.path(), &relative, out),
            Ok(_) => out.push(relative),
            Err(_) => {}
        }
    }
}

/// The hub names a large file's blob by its SHA-256 (the LFS object id): check the bytes we
/// wrote, and remove a download that does not match so the next attempt starts clean.
fn verify(reference: &str, file: &str, pointer: &Path) -> Result<(), HubError> {
    let blob = std::fs::canonicalize(pointer).unwrap_or_else(|_| pointer.to_owned());
    let Some(expected) = blob.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Ok(());
    };
    if expected.len() != 64 || !expected.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(()); // a small git file: its etag is a git hash, not the content's SHA-256
    }
    let io = |what: &str, source| HubError::Io {
        reference: reference.to_owned(),
        what: format!("{what} {}", blob.display()),
        error: source,
    };
    let mut input = std::fs::File::open(&blob).map_err(|e| io("reading", e))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = input.read(&mut buffer).map_err(|e| io("reading", e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    let actual: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if actual.eq_ignore_ascii_case(&expected) {
        return Ok(());
    }
    let _ = std::fs::remove_file(pointer);
    let _ = std::fs::remove_file(&blob);
    Err(HubError::Checksum {
        reference: reference.to_owned(),
        file: file.to_owned(),
        expected,
        actual,
    })
}

/// A progress bar on a terminal; elsewhere (a daemon's log) a line at every tenth.
enum Bar {
    Terminal(ProgressBar),
    Log { file: String, total: usize, done: usize, logged_tenths: usize },
}

impl Bar {
    fn new() -> Bar {
        if std::io::stderr().is_terminal() {
            Bar::Terminal(ProgressBar::new(0))
        } else {
            Bar::Log { file: String::new(), total: 0, done: 0, logged_tenths: 0 }
        }
    }
}

impl Progress for Bar {
    fn init(&mut self, size: usize, filename: &str) {
        match self {
            Bar::Terminal(bar) => Progress::init(bar, size, filename),
            Bar::Log { file, total, done, logged_tenths } => {
                *file = filename.to_owned();
                *total = size;
                *done = 0;
                *logged_tenths = 0;
            }
        }
    }

    fn update(&mut self, size: usize) {
        match self {
            Bar::Terminal(bar) => Progress::update(bar, size),
            Bar::Log { file, total, done, logged_tenths } => {
                *done += size;
                let tenths = (*done * 10).checked_div(*total).unwrap_or(10).min(10);
                if tenths > *logged_tenths {
                    *logged_tenths = tenths;
                    tracing::info!(file = %file, bytes = *done, of = *total, "downloaded {}%", tenths * 10);
                }
            }
        }
    }

    fn finish(&mut self) {
        if let Bar::Terminal(bar) = self {
            Progress::finish(bar);
        }
    }
}
