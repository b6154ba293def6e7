use std::path::PathBuf;

use crate::gguf::GgufError;
use crate::template::TemplateError;

/// Everything the engine can refuse or fail at, each with what a user needs to fix it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error("model file {path} does not exist")]
    ModelNotFound { path: PathBuf },
    #[error("{path} is not a usable GGUF model: {error}")]
    BadGguf { path: PathBuf, error: GgufError },
    #[error(
        "{path} is truncated: its tensors need at least {needed} bytes but the file has {actual}"
    )]
    Truncated { path: PathBuf, needed: u64, actual: u64 },
    #[error(
        "{path} has architecture `{architecture}`, which this build of llama.cpp does not support"
    )]
    UnsupportedArchitecture { path: PathBuf, architecture: String },
    #[error(
        "llama.cpp could not load {path} (architecture `{architecture}`); the file may be damaged"
    )]
    LoadFailed { path: PathBuf, architecture: String },
    /// Layers asked for that no usable device can take (boxed: its figures are many).
    #[error(transparent)]
    Place(Box<crate::device::PlaceError>),
    #[error("a context window of {requested} tokens is larger than the model's {trained}")]
    ContextTooLarge { requested: u32, trained: u32 },
    #[error("invalid serving flag: {0}")]
    BadParams(String),
    #[error("llama.cpp could not create a context of {n_ctx} tokens (out of memory?)")]
    ContextCreate { n_ctx: u32 },
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error("the prompt has {prompt} tokens but the context window holds {window}")]
    PromptTooLong { prompt: usize, window: u32 },
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("invalid JSON schema: {0}")]
    BadSchema(String),
    #[error("a OneOf constraint needs at least one option")]
    EmptyOneOf,
    #[error(
        "a OneOf constraint has {count} options, more than the limit of {}",
        crate::limits::MAX_ONE_OF_OPTIONS
    )]
    TooManyOptions { count: usize },
    /// A sampling or log-probability value out of its range.
    #[error("{0}")]
    BadSampling(String),
    #[error("OneOf option {option:?} {problem}")]
    BadOption { option: String, problem: String },
    #[error("constraint failed during decoding: {0}")]
    Constraint(String),
    #[error("llama.cpp decode failed: {0}")]
    Decode(String),
    #[error("snapshot: {0}")]
    Snapshot(String),
    #[error("no free KV cell: every cell of the context holds a row of some sequence")]
    CellsFull,
    #[error("cancelled")]
    Cancelled,
    #[error("the scripted reply {reply:?} does not satisfy the request's constraint: {why}")]
    ScriptRefused { reply: String, why: String },
    #[error("the script has no reply left ({0} were replayed)")]
    ScriptExhausted(usize),
}

impl From<crate::device::PlaceError> for EngineError {
    fn from(e: crate::device::PlaceError) -> Self {
        EngineError::Place(Box::new(e))
    }
}
