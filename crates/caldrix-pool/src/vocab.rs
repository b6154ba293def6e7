//! What renders a member's contexts and counts their tokens: a local model's vocabulary and
//! chat template (a loaded member, or a remote member's `tokenizer`), or a remote engine's
//! own: its template as it serves it (llama-server's `/props`), compiled by the pool, and its
//! `/tokenize`; or, where the pool has no template, the engine renders the conversation
//! itself and counts it (vLLM's `/tokenize` of messages). Either way the counts are exact,
//! never estimated.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use caldrix_engine::{ChatTemplate, GenerationPrompt, Message, Model, Special, Token};
use caldrix_proto::{ErrorKind, Segment};
use caldrix_remote::{ChatMessage, Remote, RemoteError};

use crate::PoolError;

/// The longest a pool thread waits for the engine's tokenizer: within the daemon's bound on a
/// control request (30 s), so a stalled engine gets a named error rather than a timeout.
const REMOTE_WAIT: Duration = Duration::from_secs(25);

#[derive(Debug, Clone)]
pub(crate) enum Vocab {
    Local(Arc<Model>),
    Remote(Arc<RemoteVocab>),
}

/// A remote engine's tokenizer. Its calls run on the member's runtime (where the member's
/// client lives); a pool thread waits for them. Never call it from that runtime.
pub(crate) struct RemoteVocab {
    pub render: RemoteRender,
    pub remote: Remote,
    pub runtime: tokio::runtime::Handle,
    /// The vocabulary's size, where the engine says it: token ids it sends are checked
    /// against it.
    pub vocab_size: Option<usize>,
    /// `URL#MODEL`, for `members` and errors.
    pub reference: String,
}

pub(crate) enum RemoteRender {
    /// The template the engine serves, compiled and rendered by the pool.
    Pool {
        template: Box<ChatTemplate>,
        /// The BOS token the model puts before a prompt, when it wants one.
        bos: Option<Token>,
    },
    /// The engine renders with its own template.
    Engine {
        /// Its template refuses two messages of one role in a row but takes them as one
        /// (Gemma's alternation): such runs are sent joined, as a local template joins them.
        joins_runs: bool,
    },
}

impl std::fmt::Debug for RemoteVocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteVocab").field("reference", &self.reference).finish_non_exhaustive()
    }
}

impl Vocab {
    /// The local model, for what only it can do fast (the incremental count of an append).
    pub(crate) fn local(&self) -> Option<&Model> {
        match self {
            Vocab::Local(model) => Some(model),
            Vocab::Remote(_) => None,
        }
    }

    /// The remote member whose engine renders its contexts (chat requests), if this is one.
    pub(crate) fn engine_renders(&self) -> Option<&RemoteVocab> {
        match self {
            Vocab::Remote(r) if matches!(r.render, RemoteRender::Engine { .. }) => Some(r),
            _ => None,
        }
    }

    /// The conversation a generation sends, for a member whose engine renders it.
    pub(crate) fn chat(&self, segments: &[Segment]) -> Option<Vec<ChatMessage>> {
        let r = self.engine_renders()?;
        let messages: Vec<Message> =
            segments.iter().map(|s| Message::new(s.role.as_str(), s.text.as_str())).collect();
        Some(r.chat_messages(&messages))
    }

    /// The largest token id plus one, where it is known.
    pub(crate) fn vocab_size(&self) -> Option<usize> {
        match self {
            Vocab::Local(model) => Some(model.vocab_size()),
            Vocab::Remote(r) => r.vocab_size,
        }
    }

    /// Whether the template renders tools itself (see `tools.rs`).
    pub(crate) fn takes_tools(&self) -> bool {
        match self {
            Vocab::Local(model) => model.chat_template().is_ok_and(|t| t.takes_tools()),
            Vocab::Remote(r) => match &r.render {
                RemoteRender::Pool { template, .. } => template.takes_tools(),
                RemoteRender::Engine { .. } => false,
            },
        }
    }

    /// `messages` through the chat template; `tools` as templates read them, for one that
    /// takes them (others get none: the messages describe them).
    pub(crate) fn render(
        &self,
        messages: &[Message],
        tools: &[serde_json::Value],
        prompt: GenerationPrompt,
    ) -> Result<String, PoolError> {
        let tools = if self.takes_tools() { tools } else { &[] };
        match self {
            Vocab::Local(model) => model
                .chat_template()
                .and_then(|t| Ok(t.render_with_tools(messages, tools, prompt)?))
                .map_err(crate::context::engine),
            // Mapped as a local template's errors are (a refusal is the request's).
            Vocab::Remote(r) => match &r.render {
                RemoteRender::Pool { template, .. } => {
                    template.render_with_tools(messages, tools, prompt).map_err(|e| {
                        let e = crate::engine_error(e.into());
                        PoolError::new(
                            e.kind,
                            format!("the chat template {} serves: {}", r.reference, e.message),
                        )
                    })
                }
                RemoteRender::Engine { .. } => Err(PoolError::new(
                    ErrorKind::Internal,
                    format!("{} renders its own contexts: the pool has no template", r.reference),
                )),
            },
        }
    }

    /// Tokens of a rendered prompt: special markers parsed, the BOS prepended when the model
    /// wants one and the template did not write it (as `Model::tokenize_prompt`).
    pub(crate) fn tokenize_prompt(&self, rendered: &str) -> Result<Vec<Token>, PoolError> {
        match self {
            Vocab::Local(model) => Ok(model.tokenize_prompt(rendered)),
            Vocab::Remote(r) => {
                let mut tokens = r.tokenize(rendered)?;
                if let RemoteRender::Pool { bos: Some(bos), .. } = r.render
                    && tokens.first() != Some(&bos)
                {
                    tokens.insert(0, bos);
                }
                Ok(tokens)
            }
        }
    }

    /// The file `members` names: the GGUF, or the engine's `URL#MODEL`.
    pub(crate) fn file(&self) -> String {
        match self {
            Vocab::Local(model) => model.path().display().to_string(),
            Vocab::Remote(r) => r.reference.clone(),
        }
    }

    pub(crate) fn architecture(&self) -> String {
        match self {
            Vocab::Local(model) => model.architecture().to_owned(),
            Vocab::Remote(_) => "remote".to_owned(),
        }
    }
}

impl RemoteVocab {
    /// The engine's tokens of `text`, special markers parsed, nothing added.
    fn tokenize(&self, text: &str) -> Result<Vec<Token>, PoolError> {
        let (remote, text) = (self.remote.clone(), text.to_owned());
        let ids = self.wait(async move { remote.tokenize(&text, false).await })?;
        self.checked(ids)
    }

    /// The engine's tokens of `messages` rendered by its own template (`add`: with the header
    /// of the assistant's turn), exactly as its chat endpoint tokenizes them.
    pub(crate) fn chat_tokens(
        &self,
        messages: &[Message],
        prompt: GenerationPrompt,
    ) -> Result<Vec<Token>, PoolError> {
        let (remote, messages) = (self.remote.clone(), self.chat_messages(messages));
        let add = prompt == GenerationPrompt::Add;
        let ids = self.wait(async move { remote.tokenize_chat(&messages, add).await })?;
        self.checked(ids)
    }

    /// The messages as the engine is sent them: runs of one role joined where its template
    /// needs that.
    pub(crate) fn chat_messages(&self, messages: &[Message]) -> Vec<ChatMessage> {
        let joined;
        let messages = match self.render {
            RemoteRender::Engine { joins_runs: true } => {
                joined = caldrix_engine::join_runs(messages);
                &joined[..]
            }
            _ => messages,
        };
        messages.iter().map(|m| ChatMessage::new(m.role.as_str(), m.content.as_str())).collect()
    }

    fn checked(&self, ids: Vec<u32>) -> Result<Vec<Token>, PoolError> {
        if let Some(vocab) = self.vocab_size
            && let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab)
        {
            return Err(PoolError::new(
                ErrorKind::Engine,
                format!(
                    "{} tokenized to id {bad}, outside its vocabulary of {vocab}",
                    self.reference
                ),
            ));
        }
        Ok(ids.into_iter().map(Token).collect())
    }

    /// Runs `work` on the member's runtime and waits for it.
    fn wait<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, RemoteError>> + Send + 'static,
    ) -> Result<T, PoolError> {
        let (tx, rx) = mpsc::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(work.await);
        });
        match rx.recv_timeout(REMOTE_WAIT) {
            Ok(reply) => reply.map_err(|e| {
                PoolError::new(ErrorKind::Engine, format!("tokenizing on {}: {e}", self.reference))
            }),
            Err(_) => Err(PoolError::new(
                ErrorKind::Engine,
                format!("{} did not tokenize within {} s", self.reference, REMOTE_WAIT.as_secs()),
            )),
        }
    }
}

/// Plain-text token count of `text` for a finished remote generation: the local tokenizer's,
/// else the engine's (on the member's runtime: async, never [`RemoteVocab::wait`]).
pub(crate) async fn count_text(vocab: &Vocab, remote: &Remote, text: &str) -> Option<usize> {
    match vocab {
        Vocab::Local(model) => Some(model.tokenize(text, Special::Plain).len()),
        Vocab::Remote(_) => remote.tokenize(text, false).await.ok().map(|ids| ids.len()),
    }
}
