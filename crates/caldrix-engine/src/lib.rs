//! One loaded GGUF model on llama.cpp: tokenizer, chat template, batched prefill, decode,
//! constrained sampling (JSON schema, OneOf), log-probabilities, and KV row snapshots.
//!
//! The only crate of the workspace that touches llama.cpp.

mod constraint;
pub mod device;
mod draft;
mod embed;
mod error;
mod generate;
pub mod gguf;
pub mod limits;
mod model;
mod replay;
mod running;
mod sampling;
mod session;
mod template;

pub use constraint::{Constraint, check_schema};
pub use embed::{EmbedParams, Embedder};
pub use error::EngineError;
pub use generate::{GenerateParams, Generation, OneOfScores, StopReason, Timings, TokenLogprob};
pub use model::{
    DEFAULT_WINDOW, Model, ModelParams, SCRATCH_SEQUENCES, SessionParams, Special, Token,
    default_threads,
};
pub use replay::SCRIPTED_OTHER_OPTION_LOGPROB;
pub use running::Running;
pub use sampling::{RepeatPenalty, Sampling};
pub use session::{Event, Seq, Session, Snapshot};
pub use template::{
    ChatTemplate, GenerationPrompt, Message, MessageToolCall, TemplateError, join_runs,
};
