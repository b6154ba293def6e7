//! Claude Code's formats, for aerix: its view of aerix's tools (names, inputs and results as
//! Claude Code presents its own, for hook payloads and transcripts), the transcript projection
//! of a session (`<id>.claude.jsonl`, for hooks that read `transcript_path`), and reading
//! Claude Code's own transcripts for `aerix import claude`; and its headless output's shapes
//! (`aerix -p --output-format json|stream-json`).

pub mod import;
pub mod stream;
pub mod tools;
pub mod transcript;

use std::path::PathBuf;

pub use tools::{ToolView, check_input, from_claude, tool_name, tool_response, view};
pub use transcript::{
    Projection, project, refresh, subagent_path, subagents_dir, transcript_path, use_id,
    write_projection,
};

#[derive(Debug, thiserror::Error)]
pub enum ClaudeError {
    #[error("{what} {}: {error}", path.display())]
    Io { what: &'static str, path: PathBuf, error: std::io::Error },
    #[error("{} is not a transcript path (`<id>.claude.jsonl`)", .0.display())]
    NotATranscript(PathBuf),
}
