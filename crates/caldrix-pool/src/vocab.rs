//! What renders a member's contexts and counts their tokens: a local model's vocabulary and
//! chat template (a loaded member, or a remote member's `tokenizer`), or a remote engine's
//! own: its template as it serves it (llama-server's `/props`), compiled by the pool, and its
//! `/tokenize`. Either way the counts are exact, never estimated.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use caldrix_engine::{ChatTemplate, GenerationPrompt, Message, Model, Special, Token};
use caldrix_proto::ErrorKind;
use caldrix_remote::{Remote, RemoteError};

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
    pub template: ChatTemplate,
    pub remote: Remote,
    pub runtime: tokio::runtime::Handle,
    /// The BOS token the model puts before a prompt, when it wants one.
    pub bos: Option<Token>,
    pub vocab_size: usize,
    /// `URL#MODEL`, for `members` and errors.
    pub reference: String,
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

    pub(crate) fn render(
        &self,
        messages: &[Message],
        prompt: GenerationPrompt,
    ) -> Result<String, PoolError> {
        match self {
            Vocab::Local(model) => model.render(messages, prompt).map_err(crate::context::engine),
            // Mapped as a local template's errors are (a refusal is the request's).
            Vocab::Remote(r) => r.template.render(messages, prompt).map_err(|e| {
                let e = crate::engine_error(e.into());
                PoolError::new(
                    e.kind,
                    format!("the chat template {} serves: {}", r.reference, e.message),
                )
            }),
        }
    }

    /// Tokens of a rendered prompt: special markers parsed, the BOS prepended when the model
    /// wants one and the template did not write it (as `Model::tokenize_prompt`).
    pub(crate) fn tokenize_prompt(&self, rendered: &str) -> Result<Vec<Token>, PoolError> {
        match self {
            Vocab::Local(model) => Ok(model.tokenize_prompt(rendered)),
            Vocab::Remote(r) => {
                let mut tokens = r.tokenize(rendered)?;
                if let Some(bos) = r.bos
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
        let vocab = self.vocab_size;
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
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
