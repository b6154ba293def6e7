//! Which engine is there, whether it serves the model, and whether it can tokenize.

use reqwest::Method;
use serde_json::{Value, json};

use crate::error::{RemoteError, excerpt};
use crate::{ChatMessage, Remote};

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
    /// The engine renders a conversation with its own template and tokenizes it
    /// ([`Remote::tokenize_chat`]): what a member without a template of its own needs.
    pub tokenize_chat: bool,
    /// The model's chat template and special tokens, where the engine says them
    /// (llama-server's `/props`).
    pub template: Option<TemplateSource>,
    /// The vocabulary's size and the window of one request, where the model's entry in
    /// `/v1/models` says them (llama-server's `meta`: `n_vocab`, `n_ctx`; vLLM's
    /// `max_model_len`).
    pub vocab_size: Option<usize>,
    pub window: Option<u32>,
}

/// A chat template as the engine serves it: the Jinja source and the texts of the BOS and EOS
/// tokens it refers to. Untrusted text: the caller compiles it in a sandboxed renderer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateSource {
    pub source: String,
    pub bos_token: String,
    pub eos_token: String,
}

/// The longest chat template taken from an engine (real ones are a few KiB; Qwen's tool-use
/// template is about 10).
pub const MAX_TEMPLATE_BYTES: usize = 256 << 10;

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
        let entry = models["data"]
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["id"].as_str() == Some(self.model.as_str())))
            .cloned()
            .unwrap_or(Value::Null);
        let number = |v: &Value| v.as_u64().filter(|&n| n > 0);
        let vocab_size = number(&entry["meta"]["n_vocab"]).and_then(|n| usize::try_from(n).ok());
        let window = number(&entry["meta"]["n_ctx"])
            .or_else(|| number(&entry["max_model_len"]))
            .and_then(|n| u32::try_from(n).ok());
        let (engine, props) = self.which().await?;
        self.engine = engine;
        let template = props.as_ref().and_then(template_of);
        let tokens = match self.tokenize("a", false).await {
            Ok(tokens) => Some(tokens),
            Err(e @ (RemoteError::Unreachable { .. } | RemoteError::Unauthorized { .. })) => {
                return Err(e);
            }
            Err(_) => None,
        };
        let detokenize = match &tokens {
            Some(tokens) => self.detokenize(tokens).await.is_ok(),
            None => false,
        };
        let conversation = [ChatMessage::new("user", "a")];
        let tokenize_chat = tokens.is_some()
            && self.tokenize_chat(&conversation, true).await.is_ok_and(|t| !t.is_empty());
        Ok(Probe {
            engine: self.engine.clone(),
            models: listed,
            tokenize: tokens.is_some(),
            detokenize,
            tokenize_chat,
            template,
            vocab_size,
            window,
        })
    }

    /// The text of token ids, from the engine's own vocabulary (`/detokenize`).
    pub async fn detokenize(&self, tokens: &[u32]) -> Result<String, RemoteError> {
        let body = match self.engine {
            Engine::LlamaServer => json!({"tokens": tokens}),
            _ => json!({"model": self.model, "tokens": tokens}),
        };
        let reply = self.json(Method::POST, "/detokenize", Some(&body)).await?;
        let text = reply.get("content").or_else(|| reply.get("prompt")).and_then(Value::as_str);
        text.map(str::to_owned).ok_or_else(|| RemoteError::Malformed {
            url: self.url("/detokenize"),
            what: "a detokenized text",
            excerpt: excerpt(&reply.to_string()),
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
        token_list(&reply).ok_or_else(|| RemoteError::Malformed {
            url: self.url("/tokenize"),
            what: "a token list",
            excerpt: excerpt(&reply.to_string()),
        })
    }

    /// The engine, and llama-server's `/props` when it is that.
    async fn which(&self) -> Result<(Engine, Option<Value>), RemoteError> {
        let get = |path: &'static str| self.json(Method::GET, path, None);
        if let Ok(props) = get("/props").await
            && (props.get("default_generation_settings").is_some()
                || props.get("build_info").is_some())
        {
            return Ok((Engine::LlamaServer, Some(props)));
        }
        if get("/get_model_info").await.is_ok_and(|v| v.is_object()) {
            return Ok((Engine::Sglang, None));
        }
        if let Ok(version) = get("/version").await
            && let Some(version) = version.get("version")
        {
            return Ok((Engine::Vllm { version: version.as_str().map(str::to_owned) }, None));
        }
        Ok((Engine::Generic, None))
    }
}

/// llama-server's template and special tokens; none when it says no template, or one past
/// [`MAX_TEMPLATE_BYTES`].
fn template_of(props: &Value) -> Option<TemplateSource> {
    let text = |key: &str| props[key].as_str().map(str::to_owned);
    let source =
        text("chat_template").filter(|t| !t.is_empty() && t.len() <= MAX_TEMPLATE_BYTES)?;
    Some(TemplateSource {
        source,
        bos_token: text("bos_token").unwrap_or_default(),
        eos_token: text("eos_token").unwrap_or_default(),
    })
}

/// A `/tokenize` reply's `tokens`: ids, each within `u32`.
pub(crate) fn token_list(reply: &Value) -> Option<Vec<u32>> {
    reply["tokens"]
        .as_array()?
        .iter()
        .map(|id| id.as_u64().and_then(|id| u32::try_from(id).ok()))
        .collect()
}

fn listed(models: &Value) -> Option<Vec<String>> {
    models["data"].as_array()?.iter().map(|m| m["id"].as_str().map(str::to_owned)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_template_is_taken_within_its_bound() {
        let props = json!({"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
                           "bos_token": "<s>", "eos_token": "</s>", "build_info": "b1"});
        let t = template_of(&props).unwrap();
        assert_eq!((t.bos_token.as_str(), t.eos_token.as_str()), ("<s>", "</s>"));
        assert!(template_of(&json!({"chat_template": ""})).is_none(), "an empty one is none");
        assert!(template_of(&json!({"build_info": "b1"})).is_none());
        let huge = "x".repeat(MAX_TEMPLATE_BYTES + 1);
        assert!(template_of(&json!({"chat_template": huge})).is_none(), "past the bound");
        let t = template_of(&json!({"chat_template": "{{ messages }}"})).unwrap();
        assert_eq!((t.bos_token.as_str(), t.eos_token.as_str()), ("", ""), "no tokens said");
    }
}
