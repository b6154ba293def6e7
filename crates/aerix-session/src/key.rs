//! The project key: the directory a project's sessions (and, later, its profile) are kept under.

use std::path::Path;

use sha2::{Digest, Sha256};

/// A key stable per repository: `<name>-<hash>`, where `name` is the repository directory's
/// name (lower-cased, anything but `[a-z0-9._-]` made `-`) and `hash` the first 12 hex digits
/// of the SHA-256 of the repository's identity: its `origin` URL, normalized (scheme, user and
/// a trailing `.git` dropped, host lower-cased), so every clone of one repository shares the
/// key; else the canonical path of its top directory. Outside a repository the working
/// directory stands for the repository.
pub fn project_key(root: &Path) -> String {
    let canonical = root.canonicalize().unwrap_or_else(|_| root.to_owned());
    let identity = gitstore::Repo::at(&canonical)
        .origin_url()
        .map(|url| normalize_url(&url))
        .unwrap_or_else(|| canonical.display().to_string());
    let digest = Sha256::digest(identity.as_bytes());
    let hash: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let name: String = canonical
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_else(|| "root".to_owned())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' })
        .collect();
    let name = name.trim_start_matches('.');
    format!("{}-{hash}", if name.is_empty() { "project" } else { name })
}

/// `https://user@GitHub.com/o/r.git`, `git@github.com:o/r` → `github.com/o/r`.
fn normalize_url(url: &str) -> String {
    let url = url.trim();
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let rest = rest.rsplit_once('@').map(|(_, r)| r).unwrap_or(rest);
    let rest = rest.trim_end_matches('/').trim_end_matches(".git");
    // scp-like `host:path`
    let (host, path) = match rest.split_once(['/', ':']) {
        Some((host, path)) => (host, path.trim_start_matches('/')),
        None => (rest, ""),
    };
    format!("{}/{path}", host.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_of_one_remote_normalize_alike() {
        let forms = [
            "https://github.com/o/r.git",
            "https://user@GitHub.com/o/r",
            "git@github.com:o/r.git",
            "ssh://git@github.com/o/r/",
        ];
        for form in forms {
            assert_eq!(normalize_url(form), "github.com/o/r", "{form}");
        }
    }
}
