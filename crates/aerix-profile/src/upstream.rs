//! `upstream.json`: each tuned artifact's path → the SHA-256 (hex) of the upstream text it was
//! tuned from; an overlay's upstream text itself is kept beside it as `upstream/<path>`.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

pub const UPSTREAM_FILE: &str = "upstream.json";
/// `upstream/<path>`: an overlay's upstream text.
pub const UPSTREAM_DIR: &str = "upstream/";

/// The recorded upstream hashes of a branch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Upstream {
    pub hashes: BTreeMap<String, String>,
}

/// SHA-256 of `text`, lower-case hex.
pub fn sha256_hex(text: &[u8]) -> String {
    Sha256::digest(text).iter().map(|b| format!("{b:02x}")).collect()
}

impl Upstream {
    /// Parses `upstream.json`: one object of path → 64 hex digits.
    pub fn parse(text: &str) -> Result<Upstream, String> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let serde_json::Value::Object(map) = value else {
            return Err("it is not a JSON object".to_owned());
        };
        let mut hashes = BTreeMap::new();
        for (path, hash) in map {
            let Some(hash) = hash.as_str() else {
                return Err(format!("`{path}` maps to {hash}, not a SHA-256 hex string"));
            };
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("`{path}` maps to `{hash}`, not a SHA-256 hex string"));
            }
            hashes.insert(path, hash.to_ascii_lowercase());
        }
        Ok(Upstream { hashes })
    }

    /// The file's text: keys in order, one per line, ending in a newline.
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

    pub fn get(&self, path: &str) -> Option<&str> {
        self.hashes.get(path).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_is_not_a_hash_map() {
        let mut up = Upstream::default();
        up.hashes.insert("system.md".into(), sha256_hex(b"x"));
        assert_eq!(Upstream::parse(&up.render()).unwrap(), up);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(Upstream::parse("[]").unwrap_err().contains("not a JSON object"));
        assert!(Upstream::parse(r#"{"a": 1}"#).unwrap_err().contains("`a`"));
        assert!(Upstream::parse(r#"{"a": "zz"}"#).unwrap_err().contains("SHA-256"));
        assert!(Upstream::parse("{").is_err());
    }
}
