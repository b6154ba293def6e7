//! Which engine is there, whether it serves the model, and whether it can tokenize.

use reqwest::Method;
use serde_json::{Value, json};

use crate::Remote;
use crate::error::{RemoteError, excerpt};

/// The engine behind the URL, as far as its own endpoints tell.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Engine {
    /// llama.cpp's `llama-server`: `GET /props` answers.
    LlamaServer,
    /// SGLang: `GET /get_model_info` answers.
    Sglang,
    /// vLLM: `GET /version` answers `{"version"}`; the version decides its constraint fields.
    Vllm { version: Option<String> },
    /// Anything else OpenAI-compatible: only the standard fields are sent.
    Generic,
}

/// What [`Remote::probe`] found.
#[derive(Debug, Clone)]
pub struct Probe {
    pub engine: Engine,
    /// The ids `/v1/models` lists (the model is among them).
    pub models: Vec<String>,
    /// The engine tokenizes through `/tokenize` (the pool's token counts need it, or a local
    /// tokenizer of the same model).
    pub tokenize: bool,
    pub detokenize: bool,
}

impl Remote {
    /// Asks the engine what it is: its models (the client's must be listed), its kind, and
    /// whether `/tokenize` and `/detokenize` work. Later requests are shaped for that engine.
    pub async fn probe(&mut self) -> Result<Probe, RemoteError> {
        let models = match self.json(Method::GET, "/v1/models", None).await {
            Err(RemoteError::NotFound { url, .. }) => {
                return Err(RemoteError::Unsupported {
                    url,
                    what: "no /v1/models here: not an OpenAI-compatible engine".to_owned(),
                });
            }
            reply => reply?,
        };
        let listed = listed(&models).ok_or_else(|| RemoteError::Malformed {
            url: self.url("/v1/models"),
            what: "a model list",
            excerpt: excerpt(&models.to_string()),
        })?;
        if !listed.contains(&self.model) {
            return Err(RemoteError::ModelNotFound {
                url: self.url("/v1/models"),
                model: self.model.clone(),
                listed,
            });
        }
        self.engine = self.which().await?;
        let tokens = match self.tokenize("a", false).await {
            Ok(tokens) => Some(tokens),
            Err(e @ (RemoteError::Unreachable { .. } | RemoteError::Unauthorized { .. })) => {
                return Err(e);
            }
            Err(_) => None,
        };
        let detokenize = match &tokens {
            Some(tokens) => self.detokenize_works(tokens).await,
            None => false,
        };
        Ok(Probe {
            engine: self.engine.clone(),
            models: listed,
            tokenize: tokens.is_some(),
            detokenize,
        })
    }

    /// The text's token ids, from the engine's own tokenizer. `add_special`: the BOS (and
    /// whatever else the model adds) is prepended; special markers in the text are always
    /// parsed as the model's control tokens, as in a rendered chat prompt.
    pub async fn tokenize(&self, text: &str, add_special: bool) -> Result<Vec<u32>, RemoteError> {
        let body = match self.engine {
            Engine::LlamaServer => {
                json!({"content": text, "add_special": add_special, "parse_special": true})
            }
            _ => json!({"model": self.model, "prompt": text, "add_special_tokens": add_special}),
        };
        let reply = self.json(Method::POST, "/tokenize", Some(&body)).await?;
        let tokens = reply["tokens"].as_array().and_then(|ids| {
            ids.iter().map(|id| id.as_u64().and_then(|id| u32::try_from(id).ok())).collect()
        });
        tokens.ok_or_else(|| RemoteError::Malformed {
            url: self.url("/tokenize"),
            what: "a token list",
            excerpt: excerpt(&reply.to_string()),
        })
    }

    async fn which(&self) -> Result<Engine, RemoteError> {
        let get = |path: &'static str| self.json(Method::GET, path, None);
        if let Ok(props) = get("/props").await
            && (props.get("default_generation_settings").is_some()
                || props.get("build_info").is_some())
        {
            return Ok(Engine::LlamaServer);
        }
        if get("/get_model_info").await.is_ok_and(|v| v.is_object()) {
            return Ok(Engine::Sglang);
        }
        if let Ok(version) = get("/version").await
            && let Some(version) = version.get("version")
        {
            return Ok(Engine::Vllm { version: version.as_str().map(str::to_owned) });
        }
        Ok(Engine::Generic)
    }

    async fn detokenize_works(&self, tokens: &[u32]) -> bool {
        let body = match self.engine {
            Engine::LlamaServer => json!({"tokens": tokens}),
            _ => json!({"model": self.model, "tokens": tokens}),
        };
        self.json(Method::POST, "/detokenize", Some(&body)).await.is_ok_and(|reply| {
            reply.get("content").or_else(|| reply.get("prompt")).is_some_and(Value::is_string)
        })
    }
}

fn listed(models: &Value) -> Option<Vec<String>> {
    models["data"].as_array()?.iter().map(|m| m["id"].as_str().map(str::to_owned)).collect()
}
