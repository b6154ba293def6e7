//! The OpenAI- and Anthropic-compatible HTTP front of a caldrix pool (issue 47): every request
//! is a generation on the pool's members through one protocol-v2 connection of its own, so it
//! shares their queue, their prefix store and `max_connections` with every other client.
//!
//! Endpoints: `GET /v1/models`, `POST /v1/chat/completions`, `POST /v1/completions`,
//! `POST /v1/responses`, `POST /v1/messages` (and `/v1/messages/count_tokens`), the status
//! page `GET /` and `GET /health`. What becomes of each request field is `fields::FIELDS`.
//!
//! The binary binds the listener (a library binds no socket) and runs `serve` beside the pool.

pub mod anthropic;
pub mod error;
pub mod fields;
mod holdback;
pub mod openai;
mod pool;
pub mod responses;
mod sse;
mod status;
pub mod translate;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use caldrix_proto::FrameFormat;

use error::{Api, ApiError, Class};
use pool::{PoolAddr, Run};
use translate::{Spec, now_secs};

/// The default bound on a request body.
pub const MAX_BODY_BYTES: usize = 8 << 20;
/// The default bound on a request's messages (or input items).
pub const MAX_MESSAGES: usize = 4096;

/// How the front reaches the pool and what it admits.
#[derive(Clone)]
pub struct HttpConfig {
    /// The pool's Unix socket.
    pub socket: PathBuf,
    pub frames: FrameFormat,
    /// When set, every request but `/health` needs `Authorization: Bearer KEY` or
    /// `x-api-key: KEY`.
    pub api_key: Option<String>,
    pub max_body_bytes: usize,
    pub max_messages: usize,
    /// A `max_tokens` past the window is cut to fit instead of refused (off: refused, the
    /// issue's rule; agents that always ask for more than a small window holds need it on).
    pub clamp_max_tokens: bool,
}

impl HttpConfig {
    pub fn new(socket: PathBuf, frames: FrameFormat) -> HttpConfig {
        HttpConfig {
            socket,
            frames,
            api_key: None,
            max_body_bytes: MAX_BODY_BYTES,
            max_messages: MAX_MESSAGES,
            clamp_max_tokens: false,
        }
    }
}

// By hand: the key is in no `Debug` output.
impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("socket", &self.socket)
            .field("frames", &self.frames)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_messages", &self.max_messages)
            .field("clamp_max_tokens", &self.clamp_max_tokens)
            .finish()
    }
}

struct Shared {
    config: HttpConfig,
    pool: PoolAddr,
    /// Only loopback names in `Host` (the listener is on loopback): a web page that rebinds
    /// its own domain to 127.0.0.1 cannot reach the front.
    loopback: bool,
    started: u64,
}

type AppState = Arc<Shared>;

/// Serves on a listener the binary bound until `shutdown` resolves (then lets the open
/// requests finish).
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: HttpConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!(%addr, socket = %config.socket.display(), "serving the HTTP front");
    let app = app(config, addr.ip().is_loopback());
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// The router, for tests that bind their own listener on loopback.
pub fn router(config: HttpConfig) -> Router {
    app(config, true)
}

fn app(config: HttpConfig, loopback: bool) -> Router {
    let pool = PoolAddr { socket: config.socket.clone(), frames: config.frames };
    let state = Arc::new(Shared { config, pool, loopback, started: now_secs() });
    Router::new()
        .route("/", get(status::page))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/responses", post(responses_handler))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), authenticate))
        .route("/health", get(|| async { "ok" }))
        .layer(axum::middleware::from_fn_with_state(state.clone(), check_origin))
        .layer(axum::middleware::from_fn(log_request))
        .with_state(state)
}

/// The API a request speaks, for its errors: Anthropic's paths, or any request carrying
/// `anthropic-version`.
fn api_of(path: &str, headers: &HeaderMap) -> Api {
    if path.starts_with("/v1/messages") || headers.contains_key("anthropic-version") {
        Api::Anthropic
    } else {
        Api::OpenAi
    }
}

/// One line per request at `info` (`CALDRIX_LOG=info`): what a user pointing an agent at the
/// pool looks at first. The time is until the head of the reply (a stream's first byte).
async fn log_request(request: Request, next: Next) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let ms = started.elapsed().as_millis();
    tracing::info!(%method, %path, status = response.status().as_u16(), ms, "http");
    response
}

/// Equal in time independent of where they differ.
fn same_key(given: &[u8], key: &[u8]) -> bool {
    let mut diff = given.len() ^ key.len();
    for (i, k) in key.iter().enumerate() {
        diff |= usize::from(given.get(i).copied().unwrap_or(0) ^ k);
    }
    diff == 0
}

fn given_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim))
}

async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(key) = &state.config.api_key {
        let ok =
            given_key(request.headers()).is_some_and(|g| same_key(g.as_bytes(), key.as_bytes()));
        if !ok {
            let api = api_of(request.uri().path(), request.headers());
            let e = ApiError::new(
                Class::Auth,
                "a valid API key is required: `Authorization: Bearer KEY` or `x-api-key: KEY`",
            )
            .with_code("invalid_api_key");
            return e.response(api);
        }
    }
    next.run(request).await
}

/// Refuses a browser's request from a page elsewhere (its `Origin` not loopback, or
/// `Sec-Fetch-Site: cross-site`) and, on loopback, a `Host` that is not a loopback name.
/// Clients that are not browsers send neither header.
async fn check_origin(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let api = api_of(request.uri().path(), headers);
    let refuse = |m: String| ApiError::new(Class::Forbidden, m).response(api);
    for origin in headers.get_all(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !loopback_origin(origin) {
            return refuse(format!("refused: a request from the web page at {origin:?}"));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && site.eq_ignore_ascii_case("cross-site")
    {
        return refuse("refused: a cross-site request from a web page".into());
    }
    if state.loopback {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if !host.is_empty() && !loopback_host(host) {
            return refuse(format!("refused: the Host {host:?} is not a loopback name"));
        }
    }
    next.run(request).await
}

fn loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

fn loopback_origin(origin: &str) -> bool {
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(loopback_host)
}

async fn not_found(method: Method, request: Request) -> Response {
    let api = api_of(request.uri().path(), request.headers());
    ApiError::new(Class::NotFound, format!("no endpoint {method} {}", request.uri().path()))
        .response(api)
}

/// The body, bounded, as a JSON object; over the bound a 413 naming it.
async fn body(
    state: &Shared,
    request: Request,
) -> Result<serde_json::Map<String, serde_json::Value>, ApiError> {
    let limit = state.config.max_body_bytes;
    let too_large = |size: String| {
        ApiError::new(
            Class::TooLarge,
            format!("the request body is {size}, over the limit of {limit} bytes"),
        )
        .with_code("request_too_large")
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared
        && n > limit as u64
    {
        return Err(too_large(format!("{n} bytes")));
    }
    let bytes = axum::body::to_bytes(request.into_body(), limit)
        .await
        .map_err(|_| too_large("larger".into()))?;
    translate::object(&bytes)
}

impl Shared {
    fn run(&self, max_tokens_key: &'static str) -> Run {
        Run {
            pool: self.pool.clone(),
            clamp_max_tokens: self.config.clamp_max_tokens,
            max_tokens_key,
        }
    }
}

async fn chat(State(state): State<AppState>, request: Request) -> Response {
    let parsed = match body(&state, request).await {
        Ok(b) => openai::chat_spec(&b, state.config.max_messages),
        Err(e) => Err(e),
    };
    let (spec, shape) = match parsed {
        Ok(p) => p,
        Err(e) => return e.response(Api::OpenAi),
    };
    let (model, created) = (spec.model.clone(), now_secs());
    let run = state.run("max_tokens");
    if spec.stream {
        let encoder = openai::ChatStream::chat(&model, created, shape);
        return sse::streamed(run, spec, encoder, Api::OpenAi).await;
    }
    match sse::collected(run, spec).await {
        Ok((_, outcome)) => sse::json(openai::chat_response(&model, created, &outcome, shape)),
        Err(e) => e.response(Api::OpenAi),
    }
}

async fn completions(State(state): State<AppState>, request: Request) -> Response {
    let parsed = match body(&state, request).await {
        Ok(b) => openai::completion_spec(&b),
        Err(e) => Err(e),
    };
    let (spec, shape) = match parsed {
        Ok(p) => p,
        Err(e) => return e.response(Api::OpenAi),
    };
    let (model, created) = (spec.model.clone(), now_secs());
    let run = state.run("max_tokens");
    if spec.stream {
        let encoder = openai::ChatStream::completion(&model, created, shape);
        return sse::streamed(run, spec, encoder, Api::OpenAi).await;
    }
    match sse::collected(run, spec).await {
        Ok((_, outcome)) => {
            sse::json(openai::completion_response(&model, created, &outcome, shape))
        }
        Err(e) => e.response(Api::OpenAi),
    }
}

async fn responses_handler(State(state): State<AppState>, request: Request) -> Response {
    let parsed = match body(&state, request).await {
        Ok(b) => responses::spec(&b, state.config.max_messages),
        Err(e) => Err(e),
    };
    let (spec, echo) = match parsed {
        Ok(p) => p,
        Err(e) => return e.response(Api::OpenAi),
    };
    let run = state.run("max_output_tokens");
    if spec.stream {
        let encoder = responses::Stream::new(&spec.model, now_secs(), echo);
        return sse::streamed(run, spec, encoder, Api::OpenAi).await;
    }
    let (model, created) = (spec.model.clone(), now_secs());
    match sse::collected(run, spec).await {
        Ok((_, outcome)) => {
            let id = translate::new_id("resp_");
            sse::json(responses::response(&id, &model, created, &echo, Some(&outcome)))
        }
        Err(e) => e.response(Api::OpenAi),
    }
}

async fn messages(State(state): State<AppState>, request: Request) -> Response {
    let parsed = match body(&state, request).await {
        Ok(b) => anthropic::spec(&b, state.config.max_messages, true),
        Err(e) => Err(e),
    };
    let spec = match parsed {
        Ok(p) => p,
        Err(e) => return e.response(Api::Anthropic),
    };
    let model = spec.model.clone();
    let run = state.run("max_tokens");
    if spec.stream {
        return sse::streamed(run, spec, anthropic::Stream::new(&model), Api::Anthropic).await;
    }
    match sse::collected(run, spec).await {
        Ok((_, outcome)) => sse::json(anthropic::response(&model, &outcome)),
        Err(e) => e.response(Api::Anthropic),
    }
}

async fn count_tokens(State(state): State<AppState>, request: Request) -> Response {
    let parsed: Result<Spec, ApiError> = match body(&state, request).await {
        Ok(b) => anthropic::spec(&b, state.config.max_messages, false),
        Err(e) => Err(e),
    };
    let counted = match parsed {
        Ok(spec) => pool::count(&state.pool, &spec).await,
        Err(e) => Err(e),
    };
    match counted {
        Ok(n) => sse::json(serde_json::json!({ "input_tokens": n })),
        Err(e) => e.response(Api::Anthropic),
    }
}

async fn models(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let api = api_of("/v1/models", &headers);
    match pool::members(&state.pool).await {
        Ok(members) => sse::json(status::models_list(&members, state.started, api)),
        Err(e) => e.response(api),
    }
}

async fn model(
    State(state): State<AppState>,
    axum::extract::Path(id): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    let api = api_of("/v1/models", &headers);
    let found = match pool::members(&state.pool).await {
        Ok(members) => {
            pool::resolve(&members, &id).map(|m| status::model_entry(m, state.started, api))
        }
        Err(e) => Err(e),
    };
    match found {
        Ok(entry) => sse::json(entry),
        Err(e) => e.response(api),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.response(Api::OpenAi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_whole() {
        assert!(same_key(b"secret", b"secret"));
        assert!(!same_key(b"secreT", b"secret"));
        assert!(!same_key(b"secret2", b"secret"));
        assert!(!same_key(b"", b"secret"));
    }

    #[test]
    fn keys_come_from_either_header() {
        let mut h = HeaderMap::new();
        assert_eq!(given_key(&h), None);
        h.insert("x-api-key", "k1".parse().unwrap());
        assert_eq!(given_key(&h), Some("k1"));
        h.insert(header::AUTHORIZATION, "Bearer k2".parse().unwrap());
        assert_eq!(given_key(&h), Some("k2"));
    }

    #[test]
    fn loopback_names_only() {
        for ok in ["localhost", "localhost:8080", "127.0.0.1:1", "[::1]:99"] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in ["evil.com", "evil.com:80", "127.0.0.1.evil.com", "localhost:x"] {
            assert!(!loopback_host(bad), "{bad}");
        }
        assert!(loopback_origin("http://localhost:3000"));
        assert!(!loopback_origin("https://example.com"));
        assert!(!loopback_origin("null"));
    }

    #[test]
    fn the_api_of_a_request() {
        let mut h = HeaderMap::new();
        assert_eq!(api_of("/v1/messages", &h), Api::Anthropic);
        assert_eq!(api_of("/v1/models", &h), Api::OpenAi);
        h.insert("anthropic-version", "2023-06-01".parse().unwrap());
        assert_eq!(api_of("/v1/models", &h), Api::Anthropic);
    }

    #[test]
    fn the_key_is_not_in_debug_output() {
        let mut c = HttpConfig::new("/run/pool.sock".into(), FrameFormat::Cbor);
        c.api_key = Some("hunter2".into());
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
