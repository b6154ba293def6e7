//! Server-sent events: each API's encoder turns the generation's events into its own event
//! sequence; `streamed` sends them as the body, and `collected` waits for the outcome of a
//! request that is not streamed. Both start the generation in a task of its own: when the
//! HTTP client leaves, the body (or the handler) is dropped with the receiver, and the task
//! cancels the generation.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::error::{Api, ApiError, Class};
use crate::pool::{self, Event, Run};
use crate::translate::{Outcome, Spec, Started};

/// A comment line is sent after this long without an event (a long prefill), so proxies and
/// clients do not time the stream out.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    /// The `event:` line (Anthropic and Responses name their events; OpenAI chat does not).
    pub event: Option<&'static str>,
    pub data: String,
}

impl SseEvent {
    pub fn data(data: impl Into<String>) -> SseEvent {
        SseEvent { event: None, data: data.into() }
    }

    pub fn named(event: &'static str, data: &serde_json::Value) -> SseEvent {
        SseEvent { event: Some(event), data: data.to_string() }
    }

    pub fn frame(&self) -> String {
        // JSON text has no raw newline, so one `data:` line holds it.
        match self.event {
            Some(name) => format!("event: {name}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        }
    }
}

/// One API's event sequence.
pub trait Encoder: Send + 'static {
    fn start(&mut self, started: &Started) -> Vec<SseEvent>;
    fn text(&mut self, text: &str) -> Vec<SseEvent>;
    fn finish(&mut self, outcome: &Outcome) -> Vec<SseEvent>;
    /// A failure after the headers went out.
    fn fail(&mut self, error: &ApiError) -> Vec<SseEvent>;
}

fn start(run: Run, spec: Spec) -> UnboundedReceiver<Event> {
    let (tx, rx) = unbounded_channel();
    tokio::spawn(pool::generate(run, spec, tx));
    rx
}

fn lost() -> ApiError {
    ApiError::new(Class::Internal, "the generation ended without an answer (see the log)")
}

/// Runs a request that is not streamed to its outcome.
pub async fn collected(run: Run, spec: Spec) -> Result<(Started, Outcome), ApiError> {
    let mut rx = start(run, spec);
    let mut started = None;
    while let Some(event) = rx.recv().await {
        match event {
            Event::Started(s) => started = Some(s),
            Event::Text(_) => {}
            Event::Finished(outcome) => {
                let started = started.unwrap_or(Started { prompt_tokens: outcome.usage.prompt });
                return Ok((started, outcome));
            }
            Event::Failed(e) => return Err(e),
        }
    }
    Err(lost())
}

/// Runs a streamed request. Errors before the first token's context exists (an unknown model,
/// a prompt over the window) are plain error responses; the headers go out once the context is
/// made.
pub async fn streamed(run: Run, spec: Spec, mut encoder: impl Encoder, api: Api) -> Response {
    let mut rx = start(run, spec);
    let first = match rx.recv().await {
        Some(Event::Started(s)) => encoder.start(&s),
        Some(Event::Failed(e)) => return e.response(api),
        _ => return lost().response(api),
    };
    let state = State { rx: Some(rx), encoder, queued: first };
    let body = futures::stream::unfold(state, next_chunk);
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| lost().response(api))
}

struct State<E> {
    /// `None` once the last event was queued.
    rx: Option<UnboundedReceiver<Event>>,
    encoder: E,
    queued: Vec<SseEvent>,
}

async fn next_chunk<E: Encoder>(mut s: State<E>) -> Option<(Result<Bytes, Infallible>, State<E>)> {
    loop {
        if !s.queued.is_empty() {
            let text: String = s.queued.drain(..).map(|e| e.frame()).collect();
            return Some((Ok(Bytes::from(text)), s));
        }
        let rx = s.rx.as_mut()?;
        match tokio::time::timeout(KEEP_ALIVE, rx.recv()).await {
            Err(_) => return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), s)),
            Ok(Some(Event::Started(_))) => {}
            Ok(Some(Event::Text(t))) => s.queued = s.encoder.text(&t),
            Ok(Some(Event::Finished(o))) => {
                s.queued = s.encoder.finish(&o);
                s.rx = None;
            }
            Ok(Some(Event::Failed(e))) => {
                s.queued = s.encoder.fail(&e);
                s.rx = None;
            }
            Ok(None) => {
                s.queued = s.encoder.fail(&lost());
                s.rx = None;
            }
        }
    }
}

/// A JSON body with the status OK.
pub fn json(value: serde_json::Value) -> Response {
    axum::Json(value).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_sse() {
        assert_eq!(SseEvent::data("[DONE]").frame(), "data: [DONE]\n\n");
        let e = SseEvent::named("ping", &serde_json::json!({"type": "ping"}));
        assert_eq!(e.frame(), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
    }
}
