//! `upstream.json`: each tuned artifact's path → the SHA-256 of the upstream text it was tuned
//! from. A path it does not list is its own upstream (a file a model base inherited from
//! `main`, never tuned).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::{Store, TuneError};

pub const UPSTREAM_JSON: &str = "upstream.json";

/// A branch's `upstream.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Upstreams {
    pub hashes: BTreeMap<String, String>,
}

impl Upstreams {
    /// The file at `commit` of `branch` (a missing file lists nothing).
    pub fn read(store: &dyn Store, branch: &str, commit: &str) -> Result<Upstreams, TuneError> {
        let Some(text) = store.read(commit, UPSTREAM_JSON)? else {
            return Ok(Upstreams::default());
        };
        let bad = |message: String| TuneError::UpstreamJson { branch: branch.to_owned(), message };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let map = value.as_object().ok_or_else(|| bad("not a JSON object".into()))?;
        let mut hashes = BTreeMap::new();
        for (path, hash) in map {
            let hash = hash
                .as_str()
                .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| bad(format!("`{path}` is not a SHA-256 hex string")))?;
            hashes.insert(path.clone(), hash.to_ascii_lowercase());
        }
        Ok(Upstreams { hashes })
    }

    /// The file's text: sorted keys, two-space indent, a final newline.
    pub fn render(&self) -> String {
        let map: serde_json::Map<String, serde_json::Value> = self
            .hashes
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        let mut text = serde_json::to_string_pretty(&serde_json::Value::Object(map))
            .unwrap_or_else(|_| "{}".to_owned());
        text.push('\n');
        text
    }

    /// The hash `path`'s text was tuned from: the recorded one, else its own text's.
    pub fn of(&self, path: &str, text: &str) -> String {
        self.hashes.get(path).cloned().unwrap_or_else(|| sha256_hex(text))
    }
}

pub fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
