//! A streamed generation: `/v1/completions` of token ids, or `/v1/chat/completions` of messages
//! when the engine renders the chat template; the request shaped for the engine (its sampling
//! and constraint fields), the event stream read within the bounds, and the final finish and
//! usage.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::error::{RemoteError, excerpt};
use crate::http::{Purpose, about_constraint};
use crate::sse::{Decoder, SseError};
use crate::{ChatMessage, Engine, Remote};

/// One generation.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub prompt: Prompt<'a>,
    pub max_tokens: u32,
    pub sampling: Sampling,
    /// Each token's log-probability and its `n` best alternatives (OpenAI's `logprobs: n`).
    pub logprobs: Option<u8>,
    pub constraint: Constraint<'a>,
}

/// What the engine generates from.
#[derive(Debug, Clone, Copy)]
pub enum Prompt<'a> {
    /// Token ids rendered by the caller (so counts and prefixes are exactly the caller's):
    /// `/v1/completions`.
    Tokens(&'a [u32]),
    /// A conversation the engine renders through its own chat template:
    /// `/v1/chat/completions`. The caller counts it with [`Remote::tokenize_chat`].
    Chat(&'a [ChatMessage]),
}

/// Sampling; `None` leaves the engine's default. Temperature 0 is greedy.
#[derive(Debug, Clone, Default)]
pub struct Sampling {
    pub temperature: f32,
    pub top_p: Option<f32>,
    /// Sent to llama-server, vLLM and SGLang (not a standard OpenAI field).
    pub top_k: Option<u32>,
    pub seed: Option<u64>,
    /// llama-server's `repeat_penalty`, vLLM's and SGLang's `repetition_penalty`.
    pub repeat_penalty: Option<f32>,
}

#[derive(Debug, Clone, Copy)]
pub enum Constraint<'a> {
    None,
    /// A JSON Schema, as JSON text.
    Json(&'a str),
    /// The output is exactly one of the options.
    Choice(&'a [String]),
}

/// What a streamed generation reports before its end.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Nothing has come yet, this long after the request was sent (a prefill, a queue, a 429
    /// waited out): the pool turns it into `Progress`.
    Waiting {
        elapsed: Duration,
    },
    Text(Delta),
}

/// Text the engine sent, with its tokens' log-probabilities when they were asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    pub text: String,
    pub tokens: Vec<TokenLogprob>,
}

/// A generated token as the engine reports it: llama-server gives id and text, vLLM (asked for
/// ids) the id alone; a chat reply also gives the token's bytes (a token may end inside a
/// character, where its text is lossy).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub token: Option<u32>,
    pub text: Option<String>,
    pub bytes: Option<Vec<u8>>,
    pub logprob: f64,
    pub top: Vec<TopLogprob>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TopLogprob {
    pub token: Option<u32>,
    pub text: Option<String>,
    pub bytes: Option<Vec<u8>>,
    pub logprob: f64,
}

/// The end of a generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub finish: Finish,
    /// All the text.
    pub text: String,
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// An end-of-generation token, a stop string, or the constraint complete.
    Stop,
    /// `max_tokens`.
    Length,
    /// Another reason the engine named (cut to the excerpt bound).
    Other(String),
}

/// Counts as the engine reports them; `None` where it reports none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Prompt tokens the engine took from its prefix cache: `usage.prompt_tokens_details
    /// .cached_tokens`, else llama-server's `tokens_cached` or `timings.cache_n`.
    pub cached_tokens: Option<u64>,
}

const COMPLETIONS: &str = "/v1/completions";
const CHAT: &str = "/v1/chat/completions";

impl Remote {
    /// Streams one generation, calling `on_event` with each [`Event`]; the final finish and
    /// usage are the result. Dropping the future closes the connection: the engine stops.
    pub async fn complete(
        &self,
        request: &Request<'_>,
        on_event: &mut (dyn FnMut(Event) + Send),
    ) -> Result<Finished, RemoteError> {
        let path = match request.prompt {
            Prompt::Tokens(_) => COMPLETIONS,
            Prompt::Chat(_) => CHAT,
        };
        let url = self.url(path);
        let body = self.completion_body(request, &url)?;
        let started = Instant::now();
        let mut response = self
            .send(Method::POST, path, Some(&body), Purpose::Generate, &mut |elapsed| {
                on_event(Event::Waiting { elapsed })
            })
            .await?;
        let limits = self.options.limits;
        let mut decoder = Decoder::new(limits.line_bytes, limits.event_bytes, limits.events);
        let mut stream = Stream::default();
        let mut received = 0usize;
        loop {
            let chunk = if stream.text.is_empty() {
                let waiting = &mut |elapsed| on_event(Event::Waiting { elapsed });
                self.wait_for(&url, response.chunk(), started, waiting).await?
            } else {
                self.wait_for(&url, response.chunk(), started, &mut |_| {}).await?
            };
            // A transport failure after the head is the stream cut, whatever its cause.
            let Ok(chunk) = chunk else { return stream.end(&url) };
            let Some(chunk) = chunk else { break };
            received += chunk.len();
            if received > limits.reply_bytes {
                let bound = crate::Bound::Reply(limits.reply_bytes);
                return Err(RemoteError::TooLarge { url, bound });
            }
            let events = decoder.feed(&chunk).map_err(|e| sse_error(&url, e))?;
            for data in events {
                if stream.event(&url, &data, on_event)? {
                    return stream.end(&url);
                }
            }
        }
        for data in decoder.end().map_err(|e| sse_error(&url, e))? {
            if stream.event(&url, &data, on_event)? {
                break;
            }
        }
        stream.end(&url)
    }

    /// The request's JSON, with this engine's field names (`url`: the endpoint, for errors).
    fn completion_body(&self, request: &Request<'_>, url: &str) -> Result<Value, RemoteError> {
        let engine = &self.engine;
        let generic = *engine == Engine::Generic;
        let s = &request.sampling;
        let mut body = json!({
            "model": self.model,
            "max_tokens": request.max_tokens,
            "stream": true,
            "stream_options": {"include_usage": true},
            "temperature": s.temperature,
        });
        let unsupported =
            |what: &str| RemoteError::Unsupported { url: url.to_owned(), what: what.to_owned() };
        let map = body.as_object_mut().ok_or_else(|| unsupported("a request body"))?;
        match request.prompt {
            Prompt::Tokens(tokens) => put(map, "prompt", Some(json!(tokens))),
            Prompt::Chat(messages) => put(map, "messages", Some(crate::chat::messages(messages))),
        }
        put(map, "top_p", s.top_p.map(Value::from));
        put(map, "seed", s.seed.map(Value::from));
        if !generic {
            put(map, "top_k", s.top_k.map(Value::from));
            let penalty = if *engine == Engine::LlamaServer {
                "repeat_penalty"
            } else {
                "repetition_penalty"
            };
            put(map, penalty, s.repeat_penalty.map(Value::from));
        }
        if let Some(n) = request.logprobs {
            match request.prompt {
                Prompt::Tokens(_) => put(map, "logprobs", Some(n.into())),
                Prompt::Chat(_) => {
                    put(map, "logprobs", Some(true.into()));
                    put(map, "top_logprobs", Some(n.into()));
                }
            }
            if matches!(engine, Engine::Vllm { .. }) {
                // The tokens as ids ("token_id:N"): what the pool's counts and logprobs need.
                map.insert("return_tokens_as_token_ids".into(), true.into());
            }
        }
        if *engine == Engine::LlamaServer {
            map.insert("cache_prompt".into(), true.into());
        }
        match request.constraint {
            Constraint::None => {}
            Constraint::Json(text) => {
                let schema: Value =
                    serde_json::from_str(text).map_err(|e| RemoteError::BadConstraint {
                        url: url.to_owned(),
                        message: format!("the schema is not JSON: {e}"),
                    })?;
                match engine {
                    Engine::LlamaServer => put(map, "json_schema", Some(schema)),
                    Engine::Vllm { version } if old_vllm(version.as_deref()) => {
                        put(map, "guided_json", Some(schema));
                    }
                    Engine::Vllm { .. } => {
                        put(map, "structured_outputs", Some(json!({"json": schema})))
                    }
                    _ => put(
                        map,
                        "response_format",
                        Some(json!({"type": "json_schema",
                                    "json_schema": {"name": "constraint", "schema": schema}})),
                    ),
                }
            }
            Constraint::Choice(options) => {
                if options.is_empty() {
                    return Err(RemoteError::BadConstraint {
                        url: url.to_owned(),
                        message: "a choice of no options".to_owned(),
                    });
                }
                match engine {
                    Engine::LlamaServer => put(map, "grammar", Some(gbnf_choice(options).into())),
                    Engine::Vllm { version } if old_vllm(version.as_deref()) => {
                        put(map, "guided_choice", Some(json!(options)));
                    }
                    Engine::Vllm { .. } => {
                        put(map, "structured_outputs", Some(json!({"choice": options})));
                    }
                    Engine::Sglang => put(map, "regex", Some(regex_choice(options).into())),
                    Engine::Generic => {
                        return Err(unsupported(
                            "a choice constraint: the engine is not known to offer one",
                        ));
                    }
                }
            }
        }
        Ok(body)
    }
}

fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_owned(), value);
    }
}

/// vLLM before 0.11 takes `guided_*` fields; later ones `structured_outputs` (the old fields
/// were removed in 0.12). An unknown version is taken as a new one.
fn old_vllm(version: Option<&str>) -> bool {
    let Some(version) = version else { return false };
    let mut parts = version.split(['.', '+', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) < (0, 11)
}

/// A GBNF grammar matching exactly one of the options.
fn gbnf_choice(options: &[String]) -> String {
    let alternatives: Vec<String> = options
        .iter()
        .map(|option| {
            let mut lit = String::from("\"");
            for c in option.chars() {
                match c {
                    '"' => lit.push_str("\\\""),
                    '\\' => lit.push_str("\\\\"),
                    '\n' => lit.push_str("\\n"),
                    '\r' => lit.push_str("\\r"),
                    '\t' => lit.push_str("\\t"),
                    c if c.is_control() => lit.push_str(&format!("\\x{:02X}", c as u32)),
                    c => lit.push(c),
                }
            }
            lit.push('"');
            lit
        })
        .collect();
    format!("root ::= {}", alternatives.join(" | "))
}

/// A regular expression matching exactly one of the options.
fn regex_choice(options: &[String]) -> String {
    let alternatives: Vec<String> = options
        .iter()
        .map(|option| {
            let mut out = String::new();
            for c in option.chars() {
                if "\\.^$|?*+()[]{}/".contains(c) {
                    out.push('\\');
                }
                out.push(c);
            }
            out
        })
        .collect();
    format!("({})", alternatives.join("|"))
}

fn sse_error(url: &str, error: SseError) -> RemoteError {
    match error {
        SseError::TooLarge(bound) => RemoteError::TooLarge { url: url.to_owned(), bound },
        SseError::NotUtf8(excerpt) => {
            RemoteError::Malformed { url: url.to_owned(), what: "an event (not UTF-8)", excerpt }
        }
    }
}

/// What the events said so far.
#[derive(Default)]
struct Stream {
    text: String,
    events: usize,
    finish: Option<Finish>,
    usage: Usage,
}

impl Stream {
    /// One event's data; true at `[DONE]`.
    fn event(
        &mut self,
        url: &str,
        data: &str,
        on_event: &mut (dyn FnMut(Event) + Send),
    ) -> Result<bool, RemoteError> {
        self.events += 1;
        if data.trim() == "[DONE]" {
            return Ok(true);
        }
        let malformed =
            |what| RemoteError::Malformed { url: url.to_owned(), what, excerpt: excerpt(data) };
        let value: Value = serde_json::from_str(data).map_err(|_| malformed("an event"))?;
        if let Some(error) = value.get("error") {
            let message = excerpt(error["message"].as_str().or(error.as_str()).unwrap_or(data));
            if about_constraint(&message) {
                return Err(RemoteError::BadConstraint { url: url.to_owned(), message });
            }
            let status = error["code"].as_u64().and_then(|c| u16::try_from(c).ok()).unwrap_or(500);
            return Err(RemoteError::Server { url: url.to_owned(), status, message });
        }
        let choices = value.get("choices").and_then(Value::as_array);
        if let Some(choice) = choices.and_then(|c| c.first()) {
            // A completion's `text`, a chat chunk's `delta.content` (null in its first chunk).
            let text = match (&choice["text"], &choice["delta"]["content"]) {
                (Value::Null, Value::Null) => "",
                (Value::Null, t) | (t, _) => {
                    t.as_str().ok_or_else(|| malformed("an event's text"))?
                }
            };
            let tokens =
                logprobs(&choice["logprobs"]).ok_or_else(|| malformed("an event's logprobs"))?;
            if !text.is_empty() || !tokens.is_empty() {
                self.text.push_str(text);
                on_event(Event::Text(Delta { text: text.to_owned(), tokens }));
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish = Some(match reason {
                    "stop" => Finish::Stop,
                    "length" => Finish::Length,
                    other => Finish::Other(excerpt(other)),
                });
            }
        } else if value.get("choices").is_none() && value.get("usage").is_none() {
            return Err(malformed("an event with neither choices nor usage"));
        }
        let count = |v: &Value| v.as_u64();
        let usage = &value["usage"];
        if usage.is_object() {
            self.usage.prompt_tokens = count(&usage["prompt_tokens"]).or(self.usage.prompt_tokens);
            self.usage.completion_tokens =
                count(&usage["completion_tokens"]).or(self.usage.completion_tokens);
        }
        let cached = count(&usage["prompt_tokens_details"]["cached_tokens"])
            .or_else(|| count(&value["tokens_cached"]))
            .or_else(|| count(&value["timings"]["cache_n"]));
        self.usage.cached_tokens = cached.or(self.usage.cached_tokens);
        Ok(false)
    }

    /// The stream ended (`[DONE]`, its body's end, or a transport failure).
    fn end(self, url: &str) -> Result<Finished, RemoteError> {
        match self.finish {
            Some(finish) => Ok(Finished { finish, text: self.text, usage: self.usage }),
            None => Err(RemoteError::StreamCut { url: url.to_owned(), events: self.events }),
        }
    }
}

/// A choice's `logprobs` in either shape: llama-server's `{"content": [{id, token, logprob,
/// top_logprobs}]}` or OpenAI's legacy `{tokens, token_logprobs, top_logprobs}` (vLLM). `None`
/// when present but in neither.
fn logprobs(value: &Value) -> Option<Vec<TokenLogprob>> {
    if value.is_null() {
        return Some(Vec::new());
    }
    if let Some(content) = value["content"].as_array() {
        return content
            .iter()
            .map(|t| {
                let top = match &t["top_logprobs"] {
                    Value::Null => Some(Vec::new()),
                    v => v
                        .as_array()?
                        .iter()
                        .map(|a| {
                            let (token, text) = content_token(a);
                            let logprob = a["logprob"].as_f64()?;
                            Some(TopLogprob { token, text, bytes: bytes(&a["bytes"]), logprob })
                        })
                        .collect(),
                }?;
                let (token, text) = content_token(t);
                let logprob = t["logprob"].as_f64()?;
                Some(TokenLogprob { token, text, bytes: bytes(&t["bytes"]), logprob, top })
            })
            .collect();
    }
    let tokens = value["tokens"].as_array()?;
    let lps = value["token_logprobs"].as_array()?;
    let tops = value["top_logprobs"].as_array();
    tokens
        .iter()
        .zip(lps)
        .enumerate()
        .map(|(i, (token, lp))| {
            let (token, text) = named(token.as_str()?);
            let top = match tops.and_then(|t| t.get(i)) {
                None | Some(Value::Null) => Vec::new(),
                Some(top) => top
                    .as_object()?
                    .iter()
                    .map(|(name, lp)| {
                        let (token, text) = named(name);
                        Some(TopLogprob { token, text, bytes: None, logprob: lp.as_f64()? })
                    })
                    .collect::<Option<_>>()?,
            };
            // The first token of some engines' streams has a null logprob: taken as 0.
            let logprob = lp.as_f64().unwrap_or(0.0);
            Some(TokenLogprob { token, text, bytes: None, logprob, top })
        })
        .collect()
}

/// A `content` entry's token: llama-server's `id` and `token` text, else vLLM's `token`, which
/// is `token_id:N` when ids were asked for.
fn content_token(entry: &Value) -> (Option<u32>, Option<String>) {
    let text = entry["token"].as_str();
    match entry["id"].as_u64().and_then(|id| u32::try_from(id).ok()) {
        Some(id) => (Some(id), text.map(str::to_owned)),
        None => text.map(named).unwrap_or((None, None)),
    }
}

/// A token's `bytes` (a list of byte values); `None` when absent or not that.
fn bytes(v: &Value) -> Option<Vec<u8>> {
    v.as_array()?.iter().map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok())).collect()
}

/// vLLM's `token_id:N` (with `return_tokens_as_token_ids`), else the token's text.
fn named(name: &str) -> (Option<u32>, Option<String>) {
    match name.strip_prefix("token_id:").and_then(|n| n.parse().ok()) {
        Some(id) => (Some(id), None),
        None => (None, Some(name.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generation_can_run_on_a_spawned_task() {
        fn send<T: Send>(_: T) {}
        let endpoint = crate::Endpoint {
            base_url: "http://127.0.0.1:9".into(),
            model: "m".into(),
            api_key_env: None,
        };
        let remote = Remote::new(&endpoint, crate::Options::default()).unwrap();
        let request = Request {
            prompt: Prompt::Tokens(&[1]),
            max_tokens: 1,
            sampling: Sampling::default(),
            logprobs: None,
            constraint: Constraint::None,
        };
        send(remote.complete(&request, &mut |_| {}));
    }

    #[test]
    fn choice_grammars_escape_the_options() {
        let options = ["a\"b".to_owned(), "c\\d\n".to_owned()];
        assert_eq!(gbnf_choice(&options), r#"root ::= "a\"b" | "c\\d\n""#);
        assert_eq!(regex_choice(&["a.b".to_owned(), "(c)".to_owned()]), r"(a\.b|\(c\))");
    }

    #[test]
    fn vllm_versions_pick_their_fields() {
        assert!(old_vllm(Some("0.10.1.1")));
        assert!(!old_vllm(Some("0.11.0")));
        assert!(!old_vllm(Some("1.0.0+cu128")));
        assert!(!old_vllm(None));
    }

    #[test]
    fn both_logprob_shapes_parse() {
        let llama = json!({"content": [{"id": 7, "token": "hi", "logprob": -0.5,
            "top_logprobs": [{"id": 7, "token": "hi", "logprob": -0.5}]}]});
        let got = logprobs(&llama).unwrap();
        assert_eq!(
            (got[0].token, got[0].text.as_deref(), got[0].top.len()),
            (Some(7), Some("hi"), 1)
        );
        let vllm = json!({"tokens": ["token_id:9"], "token_logprobs": [-1.0],
            "top_logprobs": [{"token_id:9": -1.0, "token_id:3": -2.0}]});
        let got = logprobs(&vllm).unwrap();
        assert_eq!((got[0].token, got[0].logprob, got[0].top.len()), (Some(9), -1.0, 2));
        assert!(logprobs(&json!({"nonsense": 1})).is_none());
    }
}
