//! `upstream.json` as tune reads it: `aerix-profile`'s [`Upstream`] (one parser and one
//! renderer for the store and for tune), read from a branch's commit through the [`Store`]
//! trait. A path it does not list is its own upstream (a file a model base inherited from
//! `main`, never tuned).

use aerix_profile::Upstream;

use crate::{Store, TuneError};

pub const UPSTREAM_JSON: &str = aerix_profile::UPSTREAM_FILE;

/// A branch's `upstream.json`.
pub type Upstreams = Upstream;

/// The file at `commit` of `branch` (a missing file lists nothing).
pub fn read(store: &dyn Store, branch: &str, commit: &str) -> Result<Upstreams, TuneError> {
    let Some(text) = store.read(commit, UPSTREAM_JSON)? else {
        return Ok(Upstream::default());
    };
    Upstream::parse(&text)
        .map_err(|message| TuneError::UpstreamJson { branch: branch.to_owned(), message })
}

/// The hash `path`'s text was tuned from: the recorded one, else its own text's.
pub fn of(upstreams: &Upstreams, path: &str, text: &str) -> String {
    upstreams.get(path).map_or_else(|| sha256_hex(text), str::to_owned)
}

pub fn sha256_hex(text: &str) -> String {
    aerix_profile::sha256_hex(text.as_bytes())
}
