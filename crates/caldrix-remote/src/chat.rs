//! A conversation the engine renders through its own chat template (engines that serve no
//! template the caller could render: vLLM), and the engine's tokens of it, so the caller's
//! counts are still the engine's own.

use reqwest::Method;
use serde_json::{Value, json};

use crate::error::{RemoteError, excerpt};
use crate::{Engine, Remote};

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }
}

/// The messages as the OpenAI API takes them.
pub(crate) fn messages(messages: &[ChatMessage]) -> Value {
    messages.iter().map(|m| json!({"role": m.role, "content": m.content})).collect()
}

impl Remote {
    /// The token ids of `messages` rendered by the engine's own chat template, exactly as the
    /// engine's chat endpoint tokenizes them; `add_generation_prompt` appends the header of the
    /// assistant's turn (what a generation starts from). llama-server: `/apply-template`, then
    /// `/tokenize` with the model's specials added (as its chat endpoint does); vLLM: `/tokenize`
    /// of the messages (its chat endpoint's specials: none added, the template writes them).
    pub async fn tokenize_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<Vec<u32>, RemoteError> {
        if self.engine == Engine::LlamaServer {
            let body = json!({
                "messages": self::messages(messages),
                "add_generation_prompt": add_generation_prompt,
            });
            let reply = self.json(Method::POST, "/apply-template", Some(&body)).await?;
            let prompt = reply["prompt"].as_str().ok_or_else(|| RemoteError::Malformed {
                url: self.url("/apply-template"),
                what: "a rendered prompt",
                excerpt: excerpt(&reply.to_string()),
            })?;
            return self.tokenize(prompt, true).await;
        }
        let body = json!({
            "model": self.model,
            "messages": self::messages(messages),
            "add_generation_prompt": add_generation_prompt,
            "add_special_tokens": false,
        });
        let reply = self.json(Method::POST, "/tokenize", Some(&body)).await?;
        crate::probe::token_list(&reply).ok_or_else(|| RemoteError::Malformed {
            url: self.url("/tokenize"),
            what: "a token list",
            excerpt: excerpt(&reply.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_keep_their_roles_and_text() {
        let sent =
            messages(&[ChatMessage::new("system", "Be \"brief\"."), ChatMessage::new("user", "")]);
        assert_eq!(
            sent,
            json!([{"role": "system", "content": "Be \"brief\"."}, {"role": "user", "content": ""}])
        );
    }
}
