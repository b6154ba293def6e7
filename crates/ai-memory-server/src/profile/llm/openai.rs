//! The OpenAI-compatible endpoint (`POST <endpoint>/chat/completions` with a `json_schema`
//! response format: llama.cpp's server, vLLM, Ollama, OpenAI), under the rules `caldrix-remote`
//! keeps for the same kind of endpoint, since the endpoint is as untrusted as any remote:
//!
//! - **No redirect is followed**: a 3xx is an error naming its status (the key would otherwise
//!   be sent on, or the request land somewhere the settings do not name).
//! - **Bounded replies**: a reply is read up to [`REPLY_BYTES`] (after decompression) and
//!   refused past it; an error's body is read up to [`ERROR_BODY_BYTES`] and quoted as one line
//!   of at most [`MESSAGE_CHARS`] characters, control characters escaped. Every call is within
//!   `[llm] timeout_secs`, from connecting to the reply's last byte.
//! - **The key is secret**: [`ApiKey`] prints `<redacted>`; every body, header and transport
//!   message the endpoint sends back is scrubbed of the key before it goes anywhere (an error, a
//!   log line), in case the endpoint echoes the request; a 401/403's body is not read at all; an
//!   endpoint URL with credentials in it is refused.
//!
//! ureq rather than `caldrix-remote`: that client is plain `http://` only and reads its key from
//! a named environment variable, while this endpoint may be OpenAI's own (https) with the key in
//! `[llm] api_key`; and the profile pass is synchronous, on a blocking thread.

use std::io::Read;
use std::time::Duration;

use serde_json::{Value, json};

use super::{LlmError, Provider};

/// The largest reply read: a classify answer for a batch is a few KiB.
pub const REPLY_BYTES: usize = 1 << 20;
/// How much of an error's body is read (the rest is dropped with the connection).
pub const ERROR_BODY_BYTES: usize = 64 << 10;
/// The longest excerpt of the endpoint's text put in an error, in characters.
pub const MESSAGE_CHARS: usize = 300;

/// The endpoint's API key, kept out of every `Debug` and scrubbed from whatever comes back.
#[derive(Clone, Default)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: &str) -> ApiKey {
        ApiKey(key.to_owned())
    }

    /// `text` with every occurrence of the key replaced by `<redacted>`.
    fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() { text.to_owned() } else { text.replace(&self.0, "<redacted>") }
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() { "ApiKey(none)" } else { "ApiKey(<redacted>)" })
    }
}

/// An OpenAI-compatible endpoint.
pub struct OpenAiProvider {
    url: String,
    model: String,
    key: ApiKey,
    agent: ureq::Agent,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// A client for `endpoint` (a base URL, `/chat/completions` is added); sends nothing.
    pub fn new(
        endpoint: &str,
        model: &str,
        key: &str,
        timeout: Duration,
    ) -> Result<OpenAiProvider, LlmError> {
        let base = check_endpoint(endpoint)?;
        let agent = ureq::AgentBuilder::new()
            .timeout(timeout)
            // A 3xx comes back as the response, which `structured` refuses.
            .redirects(0)
            .build();
        Ok(OpenAiProvider {
            url: format!("{base}/chat/completions"),
            model: model.to_owned(),
            key: ApiKey::new(key),
            agent,
        })
    }

    /// The error a status of 400 or more means, its body read within its bound.
    fn status_error(&self, status: u16, response: ureq::Response) -> LlmError {
        let url = self.url.clone();
        if status == 401 || status == 403 {
            // The body of a refusal is most likely to quote the credential: not read.
            return LlmError::Unauthorized { url, status };
        }
        let mut body = Vec::new();
        // What was read before a failure stays in `body`, which is all an error needs.
        let _ = response.into_reader().take(ERROR_BODY_BYTES as u64).read_to_end(&mut body);
        let text = self.key.scrub(&String::from_utf8_lossy(&body));
        LlmError::Status { url, status, message: message_of(&text) }
    }

    fn transport(&self, error: &ureq::Transport) -> LlmError {
        let mut reason = error.kind().to_string();
        if let Some(message) = error.message() {
            reason = format!("{reason}: {message}");
        }
        // The innermost cause (`Connection refused`, a DNS failure, ...).
        let mut cause = std::error::Error::source(error);
        let mut innermost = None;
        while let Some(c) = cause {
            innermost = Some(c);
            cause = c.source();
        }
        if let Some(c) = innermost {
            reason = format!("{reason}: {c}");
        }
        LlmError::Http { url: self.url.clone(), reason: excerpt(&self.key.scrub(&reason)) }
    }
}

impl Provider for OpenAiProvider {
    fn structured(
        &self,
        system: &str,
        user: &str,
        schema: &Value,
        max_tokens: u32,
    ) -> Result<Value, LlmError> {
        let body = json!({
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "strict": true, "schema": schema},
            },
        });
        let mut request = self.agent.post(&self.url).set("Content-Type", "application/json");
        if !self.key.0.is_empty() {
            request = request.set("Authorization", &format!("Bearer {}", self.key.0));
        }
        let response = match request.send_string(&body.to_string()) {
            Ok(response) => response,
            Err(ureq::Error::Status(status, response)) => {
                return Err(self.status_error(status, response));
            }
            Err(ureq::Error::Transport(t)) => return Err(self.transport(&t)),
        };
        let status = response.status();
        if (300..400).contains(&status) {
            let location = response.header("location").unwrap_or("nowhere");
            return Err(LlmError::Redirect {
                url: self.url.clone(),
                status,
                location: excerpt(&self.key.scrub(location)),
            });
        }
        let mut bytes = Vec::new();
        response.into_reader().take(REPLY_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(
            |e| LlmError::Http {
                url: self.url.clone(),
                reason: excerpt(&self.key.scrub(&e.to_string())),
            },
        )?;
        if bytes.len() > REPLY_BYTES {
            return Err(LlmError::TooLarge { url: self.url.clone(), cap: REPLY_BYTES });
        }
        // Scrubbed before it is parsed: nothing of the reply can carry the key further.
        let reply = self.key.scrub(&String::from_utf8_lossy(&bytes));
        let reply: Value = serde_json::from_str(&reply).map_err(|e| answer(&e))?;
        let choice = &reply["choices"][0];
        if choice["finish_reason"] == "length" {
            return Err(LlmError::Cut);
        }
        let content = choice["message"]["content"].as_str().ok_or_else(|| {
            LlmError::Answer(format!("no message content in {}", excerpt(&reply.to_string())))
        })?;
        serde_json::from_str(content).map_err(|e| answer(&e))
    }
}

/// An answer that does not fit, its reason as an excerpt (serde quotes the offending value).
pub(super) fn answer(reason: &dyn std::fmt::Display) -> LlmError {
    LlmError::Answer(excerpt(&reason.to_string()))
}

/// The base URL without a trailing `/`; refused when it is not http(s), carries credentials
/// (which would then be in every error) or a query.
fn check_endpoint(endpoint: &str) -> Result<&str, LlmError> {
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .ok_or_else(|| LlmError::EndpointUrl {
            url: excerpt(endpoint),
            reason: "it must start with http:// or https://",
        })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(LlmError::EndpointUrl {
            url: "<a URL with credentials>".to_owned(),
            reason: "the key belongs in [llm] api_key, not in the URL",
        });
    }
    if authority.is_empty() {
        return Err(LlmError::EndpointUrl { url: excerpt(endpoint), reason: "it names no host" });
    }
    if rest.contains(['?', '#']) {
        return Err(LlmError::EndpointUrl {
            url: excerpt(endpoint),
            reason: "it may not have a query or a fragment",
        });
    }
    Ok(endpoint.trim_end_matches('/'))
}

/// The endpoint's own message in an error body: `{"error": {"message"}}` (OpenAI,
/// llama-server), `{"message"}` (vLLM), `{"detail"}` (FastAPI), `{"error": "..."}`, else the text.
fn message_of(text: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(text) else { return excerpt(text) };
    let found = [&value["error"]["message"], &value["message"], &value["detail"], &value["error"]]
        .into_iter()
        .find_map(Value::as_str);
    excerpt(found.unwrap_or(text))
}

/// `text` as one line of at most [`MESSAGE_CHARS`] characters (then `...`), control characters
/// escaped (`\n`, `\u{1b}`) so a body cannot forge lines or terminal sequences in a log.
pub(super) fn excerpt(text: &str) -> String {
    let text = text.trim();
    let mut out = String::new();
    let mut count = 0;
    for c in text.chars() {
        let piece: String =
            if c.is_control() { c.escape_default().collect() } else { c.to_string() };
        count += piece.chars().count();
        if count > MESSAGE_CHARS {
            out.push_str("...");
            return out;
        }
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests;
