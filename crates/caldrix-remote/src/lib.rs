//! A client for one remote engine that speaks the OpenAI-compatible HTTP API (llama.cpp's
//! `llama-server`, vLLM, SGLang): the layer a pool member on such an engine is built on. It
//! probes the engine ([`Remote::probe`]), tokenizes through the engine's own `/tokenize`
//! ([`Remote::tokenize`]) and streams `/v1/completions` whose prompt is a list of token ids
//! ([`Remote::complete`]), so the caller renders the chat template itself and its token counts
//! and prefixes are exactly the engine's; or, for an engine whose template the caller cannot
//! render (vLLM serves none), streams `/v1/chat/completions` of messages and counts them with
//! the engine's own chat tokenization ([`Remote::tokenize_chat`]). `docs/remote.md` has what it sends to each engine.
//!
//! **Transport.** reqwest without a TLS feature: plain `http://` only (an engine on loopback, or
//! behind the team's own TLS-terminating proxy on a trusted network). `https://` is refused by
//! name: reqwest's TLS features would bring a second crypto provider or several crates the
//! workspace does not hold yet. No proxy from the environment is used and no redirect is
//! followed (a 3xx is an error).
//!
//! **The API key** is read once from the environment variable the settings name; it is sent as
//! `Authorization: Bearer`, and appears in no error, no log and no `Debug` output.
//!
//! **Bounds** (everything from the remote is untrusted; each is a field of [`Limits`], and a
//! reply past one is [`RemoteError::TooLarge`] naming it):
//!
//! | bound | default | what |
//! |---|---|---|
//! | `line_bytes` | 256 KiB | one line of the event stream |
//! | `event_bytes` | 1 MiB | one event's data |
//! | `events` | 262,144 | events in one streamed reply |
//! | `reply_bytes` | 64 MiB | a whole reply's body, streamed or not |
//!
//! Time bounds are [`Options`]: connecting (10 s), a non-streamed request (60 s), the silence
//! allowed between two chunks of a stream (600 s, the pool's own wait between frames, then
//! [`RemoteError::Stalled`]), and the total time spent waiting out 429s (60 s, then
//! [`RemoteError::RateLimited`]). Error bodies are read up to 64 KiB and quoted up to
//! [`MESSAGE_CHARS`] characters.
//!
//! **Cancel** = drop the future of [`Remote::complete`]: the connection is closed, which every
//! engine takes as the end of that generation.

mod chat;
mod complete;
mod error;
mod http;
mod probe;
mod sse;

use std::time::Duration;

pub use chat::ChatMessage;
pub use complete::{
    Constraint, Delta, Event, Finish, Finished, Prompt, Request, Sampling, TokenLogprob,
    TopLogprob, Usage,
};
pub use error::{Bound, MESSAGE_CHARS, RemoteError};
pub use probe::{Engine, MAX_TEMPLATE_BYTES, Probe, TemplateSource};

/// Which engine, and how to reach it: what a pool setting names.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `http://host:port`, with or without a path prefix (`/v1` is added by the client, so a
    /// base ending in `/v1` has it taken off).
    pub base_url: String,
    /// The model name the engine serves (`/v1/models`' `id`).
    pub model: String,
    /// The NAME of the environment variable holding the API key, if the engine wants one.
    pub api_key_env: Option<String>,
}

/// Time bounds and the pace of [`Event::Waiting`].
#[derive(Debug, Clone)]
pub struct Options {
    pub connect_timeout: Duration,
    /// A request that is not a stream (models, props, tokenize), from sending to its last byte.
    pub request_timeout: Duration,
    /// The longest silence between two chunks of a streamed reply (and before its head).
    pub idle_timeout: Duration,
    /// How often [`Event::Waiting`] is sent while nothing has come yet.
    pub waiting_interval: Duration,
    /// The total time 429s are waited out (their `Retry-After`, else a doubling backoff).
    pub retry_deadline: Duration,
    pub limits: Limits,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(600),
            waiting_interval: Duration::from_secs(1),
            retry_deadline: Duration::from_secs(60),
            limits: Limits::default(),
        }
    }
}

/// The size bounds of the crate docs' table.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub line_bytes: usize,
    pub event_bytes: usize,
    pub events: usize,
    pub reply_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            line_bytes: 256 << 10,
            event_bytes: 1 << 20,
            events: 262_144,
            reply_bytes: 64 << 20,
        }
    }
}

/// The secret, kept out of every `Debug` and `Display`.
#[derive(Clone)]
struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// A client for one model on one remote engine. Cheap to clone (the connection pool is shared).
#[derive(Debug, Clone)]
pub struct Remote {
    base: String,
    model: String,
    key: Option<ApiKey>,
    key_env: Option<String>,
    engine: Engine,
    options: Options,
    client: reqwest::Client,
}

impl Remote {
    /// A client for `endpoint`, speaking to it as a generic OpenAI-compatible engine until
    /// [`Remote::probe`] has said which it is. Reads the API key now; sends nothing.
    pub fn new(endpoint: &Endpoint, options: Options) -> Result<Remote, RemoteError> {
        let base = check_url(&endpoint.base_url)?;
        let key = match &endpoint.api_key_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.is_empty() => Some(ApiKey(key)),
                _ => return Err(RemoteError::MissingKey { var: var.clone() }),
            },
        };
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            // Under the servers' own keep-alive (llama-server's and uvicorn's are 5 s): a pooled
            // connection the server is closing is not reused ("connection closed before message
            // completed", seen once on a counting request after a pause).
            .pool_idle_timeout(std::time::Duration::from_secs(2))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| RemoteError::BadUrl { url: base.clone(), reason: e.to_string() })?;
        Ok(Remote {
            base,
            model: endpoint.model.clone(),
            key,
            key_env: endpoint.api_key_env.clone(),
            engine: Engine::Generic,
            options,
            client,
        })
    }

    /// The engine this client speaks to (after [`Remote::probe`]: the one it found).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL as normalised (no trailing `/` or `/v1`).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// The base URL without a trailing `/` or `/v1`; refused when it is not plain `http://` or
/// carries credentials (which would then be in every error).
fn check_url(url: &str) -> Result<String, RemoteError> {
    let bad = |reason: &str| RemoteError::BadUrl { url: url.to_owned(), reason: reason.to_owned() };
    let rest = if let Some(rest) = url.strip_prefix("http://") {
        rest
    } else if url.starts_with("https://") {
        return Err(bad(
            "https is not supported by this build (plain http only; see docs/remote.md)",
        ));
    } else {
        return Err(bad("it must start with http://"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(RemoteError::BadUrl {
            url: "<a URL with credentials>".to_owned(),
            reason: "credentials belong in the API key's environment variable, not the URL"
                .to_owned(),
        });
    }
    if authority.is_empty() {
        return Err(bad("it names no host"));
    }
    if rest.contains(['?', '#']) {
        return Err(bad("it may not have a query or a fragment"));
    }
    let mut base = url.trim_end_matches('/');
    base = base.strip_suffix("/v1").unwrap_or(base);
    reqwest::Url::parse(base).map_err(|e| bad(&e.to_string()))?;
    Ok(base.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised_or_refused() {
        assert_eq!(check_url("http://127.0.0.1:8080/v1/").unwrap(), "http://127.0.0.1:8080");
        assert_eq!(check_url("http://h/prefix").unwrap(), "http://h/prefix");
        let e = check_url("https://h").unwrap_err().to_string();
        assert!(e.contains("https is not supported"), "{e}");
        let e = check_url("http://user:hunter2@h").unwrap_err().to_string();
        assert!(!e.contains("hunter2") && e.contains("credentials"), "{e}");
        assert!(check_url("ftp://h").is_err());
    }

    #[test]
    fn the_key_is_read_from_its_variable_and_never_shown() {
        // A variable name nothing sets.
        let endpoint = Endpoint {
            base_url: "http://127.0.0.1:9".into(),
            model: "m".into(),
            api_key_env: Some("CALDRIX_REMOTE_UNIT_TEST_KEY_UNSET".into()),
        };
        let e = Remote::new(&endpoint, Options::default()).unwrap_err();
        assert!(
            matches!(e, RemoteError::MissingKey { ref var } if var == "CALDRIX_REMOTE_UNIT_TEST_KEY_UNSET")
        );
        let remote = Remote {
            key: Some(ApiKey("sk-secret".into())),
            ..Remote::new(&Endpoint { api_key_env: None, ..endpoint }, Options::default()).unwrap()
        };
        assert!(!format!("{remote:?}").contains("sk-secret"));
    }
}
