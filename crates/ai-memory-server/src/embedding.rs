//! Retrieval by meaning in the service: the encoder, loaded on first use when a model is
//! found (never by a hook that only records), and the pages' embeddings kept up by a
//! background thread of a long-running server (never on a write's path: a write only wakes
//! it). Without a model, every query is the full-text search it always was.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use ai_memory_embed::Encoder;
use ai_memory_index::{Near, embedding_hash};

use crate::error::MemoryError;
use crate::service::Memory;

/// Pages read from the index at a time by the embedder.
const EMBED_BATCH: usize = 16;
/// How long the background embedder sleeps when nothing wakes it: it catches pages an
/// import or another process wrote.
const IDLE_WAKE: Duration = Duration::from_secs(60);

/// The encoder, or why there is none.
pub(crate) enum Loaded {
    Ready(Encoder),
    /// No model file, or `[embedding] enabled = false`: full-text search only.
    Off(String),
}

/// Wakes the background embedder.
#[derive(Default)]
pub(crate) struct Wake {
    pending: Mutex<bool>,
    cv: Condvar,
}

impl Wake {
    pub(crate) fn poke(&self) {
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }

    fn wait(&self, timeout: Duration) {
        let guard = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let (mut guard, _) = self
            .cv
            .wait_timeout_while(guard, timeout, |pending| !*pending)
            .unwrap_or_else(|p| p.into_inner());
        *guard = false;
    }
}

/// What `ai-memory models` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EmbeddingStatus {
    /// The model file looked for.
    pub model: PathBuf,
    /// Why queries do not use it; `None`: they do.
    pub reason: Option<String>,
    pub pages: usize,
    pub embedded: usize,
}

impl Memory {
    /// The model file `[embedding] model` names, else the default in the data directory.
    pub fn embedding_model_path(&self) -> PathBuf {
        let configured = &self.settings.embedding.model;
        let models = self.data_dir().join("models");
        ai_memory_embed::model_path(
            &models,
            (!configured.is_empty()).then(|| std::path::Path::new(configured.as_str())),
        )
    }

    pub(crate) fn encoder(&self) -> Option<&Encoder> {
        let loaded = self.embedding.get_or_init(|| {
            let path = self.embedding_model_path();
            if !self.settings.embedding.enabled {
                return Loaded::Off("[embedding] enabled = false".into());
            }
            if !path.is_file() {
                return Loaded::Off(format!(
                    "no model at {} (`ai-memory models fetch` installs it)",
                    path.display()
                ));
            }
            let threads = (self.settings.embedding.threads > 0).then_some(self.settings.embedding.threads);
            match Encoder::load(&path, threads) {
                Ok(e) => {
                    tracing::debug!(model = %path.display(), "retrieval by meaning on");
                    Loaded::Ready(e)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the embedding model does not load: full-text search only");
                    Loaded::Off(e.to_string())
                }
            }
        });
        match loaded {
            Loaded::Ready(e) => Some(e),
            Loaded::Off(_) => None,
        }
    }

    /// A query's embedding, when retrieval by meaning is on, started now and waited for when
    /// the fusion asks (the words are searched meanwhile); a failure is logged and the query
    /// falls back to full-text search.
    pub(crate) fn query_vector(&self, text: &str) -> Option<Near<'static>> {
        let pending = self.encoder()?.query_later(text);
        Some(Near::later(move || match pending.wait() {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(error = %e, "a query could not be embedded: full-text search only");
                None
            }
        }))
    }

    /// Embeds pages whose embedding is missing or stale, at most `max` (all with `None`);
    /// returns how many were brought up to date. Nothing happens without a model.
    pub fn embed_pending(&self, max: Option<usize>) -> Result<usize, MemoryError> {
        let Some(encoder) = self.encoder() else { return Ok(0) };
        let mut done = 0;
        loop {
            let room = max.map_or(EMBED_BATCH, |m| m.saturating_sub(done).min(EMBED_BATCH));
            if room == 0 {
                break;
            }
            let pending = self.index().pages_to_embed(room)?;
            if pending.is_empty() {
                break;
            }
            for page in &pending {
                let hash = embedding_hash(encoder.model_id(), &page.text);
                if !self.index().reuse_embedding(page, &hash)? {
                    let vectors = encoder
                        .page(&page.text)
                        .map_err(|e| MemoryError::Invalid(format!("embedding a page: {e}")))?;
                    self.index().store_embedding(page, &hash, &vectors)?;
                }
                done += 1;
            }
        }
        if done > 0 {
            self.index().prune_embeddings()?;
        }
        Ok(done)
    }

    /// Where retrieval by meaning stands.
    pub fn embedding_status(&self) -> Result<EmbeddingStatus, MemoryError> {
        let model = self.embedding_model_path();
        let _ = self.encoder();
        let reason = match self.embedding.get() {
            Some(Loaded::Off(why)) => Some(why.clone()),
            _ => None,
        };
        let state = self.index().embedding_state()?;
        Ok(EmbeddingStatus { model, reason, pages: state.pages, embedded: state.embedded })
    }

    /// Wakes the background embedder (a write happened).
    pub(crate) fn embedding_changed(&self) {
        self.embed_wake.poke();
    }
}

/// Starts the background embedder of a long-running server: it embeds what is pending, then
/// sleeps until a write wakes it (or a minute passes), and stops when the service is dropped.
/// Does nothing without a model.
pub fn start_background(memory: &Arc<Memory>) {
    if memory.encoder().is_none() {
        return;
    }
    let weak: Weak<Memory> = Arc::downgrade(memory);
    let spawned = std::thread::Builder::new().name("ai-memory-embedder".into()).spawn(move || {
        loop {
            let Some(memory) = weak.upgrade() else { return };
            match memory.embed_pending(Some(EMBED_BATCH)) {
                // More may be pending: go on without sleeping, but let go of the service
                // between batches.
                Ok(n) if n == EMBED_BATCH => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "embedding pages failed; retried later"),
            }
            let wake = Arc::clone(&memory.embed_wake);
            drop(memory);
            wake.wait(IDLE_WAKE);
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the background embedder");
    }
}
