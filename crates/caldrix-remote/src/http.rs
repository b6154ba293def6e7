//! Requests: the API key, 429s waited out within the deadline, a status that is not 2xx turned
//! into the error it means, and bodies read within their bound.

use std::time::{Duration, Instant};

use reqwest::{Method, Response, StatusCode};
use serde_json::Value;

use crate::Remote;
use crate::error::{Bound, RemoteError, excerpt};

/// How much of an error's body is read (the rest is dropped with the connection).
const ERROR_BODY_BYTES: usize = 64 << 10;
/// The backoff of a 429 without `Retry-After`: doubling from the first, up to the last.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(8);

/// What a request is for: what a 404 or a 400 from it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// `/v1/models`, `/props`, `/version`, `/tokenize`: a 404 is a missing endpoint.
    Endpoint,
    /// A generation naming the model: a 404 is the model, a 400 about the grammar or schema
    /// is the constraint.
    Generate,
}

impl Remote {
    /// Sends the request, waiting out 429s (calling `waiting` meanwhile, as while the head is
    /// awaited); a 2xx response, or the error its status means.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        purpose: Purpose,
        waiting: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<Response, RemoteError> {
        let url = self.url(path);
        let started = Instant::now();
        let mut backoff = BACKOFF_FIRST;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut request = self.client.request(method.clone(), &url);
            if let Some(key) = &self.key {
                request = request.bearer_auth(&key.0);
            }
            if let Some(body) = body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.to_string());
            }
            let response = match self.wait_for(&url, request.send(), started, waiting).await? {
                Ok(response) => response,
                // A pooled connection the server closed as the request went out reads as
                // "connection closed before message completed" (seen on llama-server under
                // load, inside the idle timeout). An endpoint's request has no effect to
                // repeat: it is sent once more on a new connection. A generation is not.
                Err(e) if purpose == Purpose::Endpoint && attempts == 1 && !e.is_timeout() => {
                    continue;
                }
                Err(e) => return Err(transport(&url, &e)),
            };
            let status = response.status();
            if status == StatusCode::TOO_MANY_REQUESTS {
                let wait = retry_after(&response).unwrap_or(backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
                drop(response);
                if started.elapsed() + wait > self.options.retry_deadline {
                    return Err(RemoteError::RateLimited {
                        url,
                        attempts,
                        waited: started.elapsed(),
                    });
                }
                let sleep = tokio::time::sleep(wait);
                self.wait_for(&url, sleep, started, waiting).await?;
                continue;
            }
            if status.is_success() {
                return Ok(response);
            }
            return Err(self.status_error(&url, response, purpose).await);
        }
    }

    /// A GET or POST whose JSON reply is read whole, within the request timeout.
    pub(crate) async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, RemoteError> {
        let url = self.url(path);
        let work = async {
            let mut response =
                self.send(method, path, body, Purpose::Endpoint, &mut |_| {}).await?;
            let bytes = read_bounded(&url, &mut response, self.options.limits.reply_bytes).await?;
            serde_json::from_slice(&bytes).map_err(|_| RemoteError::Malformed {
                url: url.clone(),
                what: "a JSON reply",
                excerpt: excerpt(&String::from_utf8_lossy(&bytes)),
            })
        };
        let timeout = self.options.request_timeout;
        tokio::time::timeout(timeout, work).await.unwrap_or_else(|_| {
            Err(RemoteError::Unreachable {
                url: url.clone(),
                reason: format!("no whole answer within {} s", timeout.as_secs()),
            })
        })
    }

    /// Awaits `work`, calling `waiting` every waiting interval, within the idle timeout.
    pub(crate) async fn wait_for<T>(
        &self,
        url: &str,
        work: impl Future<Output = T>,
        started: Instant,
        waiting: &mut (dyn FnMut(Duration) + Send),
    ) -> Result<T, RemoteError> {
        let idle = tokio::time::sleep(self.options.idle_timeout);
        tokio::pin!(work, idle);
        loop {
            tokio::select! {
                done = &mut work => return Ok(done),
                () = &mut idle => {
                    return Err(RemoteError::Stalled {
                        url: url.to_owned(),
                        idle: self.options.idle_timeout,
                    });
                }
                () = tokio::time::sleep(self.options.waiting_interval) => waiting(started.elapsed()),
            }
        }
    }

    async fn status_error(
        &self,
        url: &str,
        mut response: Response,
        purpose: Purpose,
    ) -> RemoteError {
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Ok(Ok(Some(chunk))) =
            tokio::time::timeout(Duration::from_secs(5), response.chunk()).await
        {
            body.extend_from_slice(&chunk);
            if body.len() >= ERROR_BODY_BYTES {
                break;
            }
        }
        let message = message_of(&body);
        let url = url.to_owned();
        match status {
            401 | 403 => RemoteError::Unauthorized { url, status, key_env: self.key_env.clone() },
            404 if purpose == Purpose::Generate => {
                RemoteError::ModelNotFound { url, model: self.model.clone(), listed: Vec::new() }
            }
            404 => RemoteError::NotFound { url, message },
            400 | 422 if purpose == Purpose::Generate && about_constraint(&message) => {
                RemoteError::BadConstraint { url, message }
            }
            400..=499 => RemoteError::BadRequest { url, status, message },
            500..=599 => RemoteError::Server { url, status, message },
            _ => RemoteError::Status { url, status, message },
        }
    }
}

/// The body read whole, refused past `limit` bytes.
pub(crate) async fn read_bounded(
    url: &str,
    response: &mut Response,
    limit: usize,
) -> Result<Vec<u8>, RemoteError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport(url, &e))? {
        if body.len() + chunk.len() > limit {
            return Err(RemoteError::TooLarge { url: url.to_owned(), bound: Bound::Reply(limit) });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A transport failure, by its innermost cause (`Connection refused`, a DNS failure, ...).
pub(crate) fn transport(url: &str, error: &reqwest::Error) -> RemoteError {
    let mut cause: &dyn std::error::Error = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    let reason = if error.is_timeout() {
        "the connection timed out".to_owned()
    } else {
        excerpt(&cause.to_string())
    };
    RemoteError::Unreachable { url: url.to_owned(), reason }
}

/// `Retry-After` in seconds (the HTTP-date form is rare from engines and taken as absent).
fn retry_after(response: &Response) -> Option<Duration> {
    let value = response.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

/// The engine's own message in an error body: `{"error": {"message"}}` (OpenAI, llama-server),
/// `{"message"}` (vLLM), `{"detail"}` (FastAPI), `{"error": "..."}`, else the text itself.
fn message_of(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_str::<Value>(&text) else { return excerpt(&text) };
    let found = [&value["error"]["message"], &value["message"], &value["detail"], &value["error"]]
        .into_iter()
        .find_map(|v| v.as_str().map(str::to_owned));
    excerpt(&found.unwrap_or_else(|| text.into_owned()))
}

/// Whether a 400's message is about the constraint rather than the rest of the request.
pub(crate) fn about_constraint(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["grammar", "schema", "guided", "structured", "regex", "choice", "response_format"]
        .iter()
        .any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_taken_from_each_engines_shape() {
        assert_eq!(message_of(br#"{"error":{"code":400,"message":"bad grammar"}}"#), "bad grammar");
        assert_eq!(message_of(br#"{"object":"error","message":"no model"}"#), "no model");
        assert_eq!(message_of(br#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(message_of(b"plain\ntext"), "plain text");
    }

    #[test]
    fn a_constraint_refusal_is_told_from_other_400s() {
        assert!(about_constraint("failed to parse JSON schema: unknown keyword"));
        assert!(about_constraint("Failed to initialize the grammar"));
        assert!(!about_constraint("max_tokens must be at least 1"));
    }
}
