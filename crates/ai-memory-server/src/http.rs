//! The HTTP server: MCP over streamable HTTP at `/mcp`, the hook endpoint at `/hooks/<event>`,
//! `/health`; bearer-token authentication, a Host check and the browser checks (`browser`: no
//! page elsewhere, hooks only as JSON) in front of all of it.

mod browser;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::error::MemoryError;
use crate::hook::HookKind;
use crate::mcp::{MemoryMcp, http_caller};
use crate::service::{Caller, HookEvent, Memory};

/// How often the watcher looks for pages copied into `wiki/` by hand.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);
/// How long after a session ends the profile pass runs: a burst of session ends costs one.
pub const PASS_DELAY: Duration = Duration::from_secs(3);
/// The profile pass also runs this often.
pub const PASS_INTERVAL: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to listen on {0} without a root token: set [server] root_token (or AI_MEMORY_SERVER__ROOT_TOKEN)"
    )]
    OpenWithoutToken(SocketAddr),
    #[error("server: {0}")]
    Io(std::io::Error),
}

// By hand, not `#[from]`: the message holds the cause, so it is not a `source` too (a printed
// chain would say it twice; ARCHITECTURE.md, errors).
impl From<std::io::Error> for ServeError {
    fn from(e: std::io::Error) -> Self {
        ServeError::Io(e)
    }
}

#[derive(Clone)]
struct AppState {
    memory: Arc<Memory>,
    loopback: bool,
}

impl IntoResponse for MemoryError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(serde_json::json!({ "error": self.to_string() }))).into_response()
    }
}

/// The router, for `serve` and for tests that bind their own listener.
pub fn router(memory: Arc<Memory>, loopback: bool) -> Router {
    let mcp = StreamableHttpService::new(
        {
            let memory = memory.clone();
            move || Ok(MemoryMcp::new(memory.clone(), None))
        },
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let state = AppState { memory, loopback };
    Router::new()
        .nest_service("/mcp", mcp)
        .route("/hooks/{event}", post(hook))
        .layer(axum::middleware::from_fn_with_state(state.clone(), authenticate))
        .route("/health", get(|| async { "ok" }))
        .layer(axum::middleware::from_fn_with_state(state.clone(), check_host))
        // Outermost, so a page elsewhere is refused before anything else answers it (a 401 or
        // a 404 would tell it what is here), in every mode.
        .layer(axum::middleware::from_fn(check_site))
        .with_state(state)
}

/// Refuses an address off loopback when no root token is set: every request would then act as
/// the single user, for anyone who can reach the port.
pub fn check_bind(memory: &Memory, addr: SocketAddr) -> Result<(), ServeError> {
    if !addr.ip().is_loopback() && memory.settings.server.root_token.is_empty() {
        return Err(ServeError::OpenWithoutToken(addr));
    }
    Ok(())
}

/// Serves on a listener the binary bound, until the process ends; the watcher imports pages
/// copied into the wiki by hand.
pub async fn serve(
    memory: Arc<Memory>,
    listener: tokio::net::TcpListener,
) -> Result<(), ServeError> {
    let addr = listener.local_addr()?;
    check_bind(&memory, addr)?;
    tokio::spawn(watch(memory.clone()));
    tokio::spawn(profile_passes(memory.clone()));
    tracing::info!(%addr, data = %memory.data_dir().display(), "serving");
    axum::serve(listener, router(memory, addr.ip().is_loopback())).await?;
    Ok(())
}

async fn watch(memory: Arc<Memory>) {
    loop {
        let m = memory.clone();
        match tokio::task::spawn_blocking(move || m.import_changed()).await {
            Ok(Ok((imported, broken))) => {
                for page in imported {
                    tracing::info!(%page, "imported a page copied into the wiki");
                }
                for problem in broken {
                    tracing::warn!(%problem, "a file in the wiki is not a valid page; left alone");
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "watching the wiki"),
            Err(e) => tracing::warn!(error = %e, "watching the wiki"),
        }
        tokio::time::sleep(WATCH_INTERVAL).await;
    }
}

/// The profile's harvest passes: once after startup, `PASS_DELAY` after a session ends (the
/// ends that arrive meanwhile ride along), and every `PASS_INTERVAL`. `serve` and the stdio
/// `ai-memory mcp` both run them (a harness with no session-end event, like Codex, still gets
/// passes); `profile_pass`'s file lock keeps them one at a time across processes.
pub async fn profile_passes(memory: Arc<Memory>) {
    let wanted = memory.pass_wanted.clone();
    tokio::time::sleep(Duration::from_secs(1)).await;
    loop {
        let m = memory.clone();
        match tokio::task::spawn_blocking(move || m.profile_pass(false)).await {
            Ok(Ok(report)) if !report.written.is_empty() || !report.removed.is_empty() => {
                tracing::info!(written = ?report.written, removed = ?report.removed, "profile pass");
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "profile pass"),
            Err(e) => tracing::warn!(error = %e, "profile pass"),
        }
        let _ = tokio::time::timeout(PASS_INTERVAL, wanted.notified()).await;
        tokio::time::sleep(PASS_DELAY).await;
        // Session ends during the delay are covered by the pass about to run.
        let _ = tokio::time::timeout(Duration::ZERO, wanted.notified()).await;
    }
}

/// A loopback server answers only requests addressed to a loopback name: a web page that
/// rebinds its own domain to 127.0.0.1 cannot reach it.
async fn check_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.loopback {
        let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        let name = host.rsplit_once(':').map_or(host, |(n, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) { n } else { host }
        });
        if !matches!(name, "localhost" | "127.0.0.1" | "[::1]") {
            return (StatusCode::FORBIDDEN, "the Host header must name localhost").into_response();
        }
    }
    next.run(request).await
}

/// Refuses a request a browser sent from a page that is not on a loopback origin
/// (`browser::check_site`).
async fn check_site(request: Request, next: Next) -> Response {
    match browser::check_site(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::warn!(path = %request.uri().path(), %refusal, "refused a browser's request");
            refusal.into_response()
        }
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ").map(str::trim)
}

async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let token = bearer(request.headers()).map(str::to_owned);
    let memory = state.memory.clone();
    let who = tokio::task::spawn_blocking(move || memory.authenticate(token.as_deref())).await;
    match who {
        Ok(Ok(Some(who))) => {
            request.extensions_mut().insert(http_caller(who));
            next.run(request).await
        }
        Ok(Ok(None)) => MemoryError::Unauthorized.into_response(),
        Ok(Err(e)) => e.into_response(),
        Err(e) => MemoryError::Invalid(e.to_string()).into_response(),
    }
}

async fn hook(
    State(state): State<AppState>,
    Path(event): Path<String>,
    axum::Extension(caller): axum::Extension<Caller>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    // Before the body is read: a page can send `text/plain` anywhere without asking, JSON not.
    if let Err(refusal) = browser::check_json(&headers) {
        return refusal.into_response();
    }
    hook_event(state, event, caller, body).await.into_response()
}

async fn hook_event(
    state: AppState,
    event: String,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, MemoryError> {
    let kind = HookKind::parse(&event)
        .ok_or_else(|| MemoryError::NotFound(format!("no hook event `{event}`")))?;
    // Read here rather than by axum's `Json`: its refusal is plain text with serde's position,
    // and an unknown key (a misspelt `prompt`) must be refused by name, not dropped.
    let body: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
        MemoryError::Invalid(format!(
            "the hook event is not valid: {}",
            crate::args::strip_position(&e)
        ))
    })?;
    if !body.is_object() {
        return Err(MemoryError::Invalid(format!(
            "the hook event must be a JSON object, not {}",
            crate::hook::json_kind(&body)
        )));
    }
    let body: HookEvent = serde_json::from_value(body).map_err(|e| {
        MemoryError::Invalid(format!(
            "the hook event is not valid: {}",
            crate::args::strip_position(&e)
        ))
    })?;
    let memory = state.memory.clone();
    tokio::task::spawn_blocking(move || crate::run_hook(&memory, caller.who, kind, &body))
        .await
        .map_err(|e| MemoryError::Invalid(e.to_string()))?
        .map(Json)
}
