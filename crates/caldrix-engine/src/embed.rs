//! Sentence embeddings from an encoder model (a BERT-family GGUF with a pooling type): one
//! text a call, one pooled vector. (Packing several texts into one batch was measured slower
//! on 2 cores: an encoder attends over the whole batch, 38 ms a 128-token text in a batch of
//! 16 against 22 ms alone.)

use std::num::NonZeroU32;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;

use crate::error::EngineError;
use crate::model::{Model, Token, backend, default_threads};

/// Flags of an embedding context.
#[derive(Debug, Clone)]
pub struct EmbedParams {
    /// CPU threads; `None` is every available core.
    pub threads: Option<u32>,
    /// Tokens one text may have, its special tokens included: longer token lists are cut, as
    /// the model's own tokenizer truncates. Also the context's size.
    pub max_tokens: u32,
}

impl Default for EmbedParams {
    fn default() -> Self {
        EmbedParams { threads: None, max_tokens: 256 }
    }
}

/// An embedding context on a loaded model.
pub struct Embedder<'m> {
    model: &'m Model,
    ctx: LlamaContext<'m>,
    dimension: usize,
    params: EmbedParams,
}

impl std::fmt::Debug for Embedder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("dimension", &self.dimension).finish_non_exhaustive()
    }
}

impl Model {
    /// Opens an embedding context: the model must pool its outputs into one vector a text
    /// (`<arch>.pooling_type` in its GGUF).
    pub fn embedder(&self, params: &EmbedParams) -> Result<Embedder<'_>, EngineError> {
        let trained = self.trained_context();
        if params.max_tokens < 3 || params.max_tokens > trained {
            return Err(EngineError::BadParams(format!(
                "an embedded text holds 3 to {trained} tokens, not {}",
                params.max_tokens
            )));
        }
        let threads = params.threads.unwrap_or_else(default_threads).max(1) as i32;
        let n_ctx = NonZeroU32::new(params.max_tokens)
            .ok_or_else(|| EngineError::BadParams("an embedding context of 0 tokens".into()))?;
        let ctx_params = LlamaContextParams::default()
            .with_n_ctx(Some(n_ctx))
            .with_n_batch(params.max_tokens)
            // An encoder sees a whole text at once: the micro-batch is the batch.
            .with_n_ubatch(params.max_tokens)
            .with_n_seq_max(1)
            .with_n_threads(threads)
            .with_n_threads_batch(threads)
            .with_embeddings(true);
        let ctx = self
            .inner
            .new_context(backend(), ctx_params)
            .map_err(|_| EngineError::ContextCreate { n_ctx: params.max_tokens })?;
        let dimension = usize::try_from(self.inner.n_embd_out()).unwrap_or(0);
        if dimension == 0 {
            return Err(EngineError::BadParams(format!(
                "{} gives no embedding vector",
                self.path().display()
            )));
        }
        Ok(Embedder { model: self, ctx, dimension, params: params.clone() })
    }
}

impl Embedder<'_> {
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The most tokens one text keeps.
    pub fn max_tokens(&self) -> usize {
        self.params.max_tokens as usize
    }

    /// A text's tokens with the model's special tokens (`[CLS] … [SEP]`), cut to
    /// `max_tokens` with the closing token kept.
    pub fn tokens(&self, text: &str) -> Vec<Token> {
        let mut tokens: Vec<Token> = self
            .model
            .inner
            .vocab()
            .tokenize(text.as_bytes(), true, false)
            .into_iter()
            .map(|t| Token(t.0 as u32))
            .collect();
        let max = self.max_tokens();
        if tokens.len() > max {
            let last = tokens[tokens.len() - 1];
            tokens.truncate(max - 1);
            tokens.push(last);
        }
        tokens
    }

    /// The tokens of `text` without special tokens, for a caller that cuts a long text into
    /// windows of its own.
    pub fn plain_tokens(&self, text: &str) -> Vec<Token> {
        self.model.tokenize(text, crate::Special::Plain)
    }

    /// Wraps a window of plain tokens in the model's special tokens, as `tokens` does.
    pub fn wrap(&self, window: &[Token]) -> Vec<Token> {
        let vocab = self.model.inner.vocab();
        let mut out = Vec::with_capacity(window.len() + 2);
        let bos = vocab.bos();
        if bos.0 >= 0 {
            out.push(Token(bos.0 as u32));
        }
        let keep = self.max_tokens().saturating_sub(2);
        out.extend_from_slice(&window[..window.len().min(keep)]);
        let sep = vocab.sep();
        if sep.0 >= 0 {
            out.push(Token(sep.0 as u32));
        }
        out
    }

    /// The pooled vector of one token list (cut to `max_tokens`).
    pub fn embed(&mut self, tokens: &[Token]) -> Result<Vec<f32>, EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let tokens: Vec<_> = tokens.iter().take(self.max_tokens()).map(|t| t.llama()).collect();
        let mut batch = LlamaBatch::new(tokens.len(), 1);
        batch.add_sequence(&tokens, 0, true).map_err(|e| EngineError::Decode(e.to_string()))?;
        self.ctx.clear_kv_cache();
        self.ctx.decode(&mut batch).map_err(|e| EngineError::Decode(e.to_string()))?;
        let v = self
            .ctx
            .embeddings_seq_ith(0)
            .map_err(|e| EngineError::Decode(format!("no pooled embedding: {e}")))?;
        Ok(v.to_vec())
    }
}
