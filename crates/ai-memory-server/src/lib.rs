//! The memory server as a library: the service every entry point shares, the MCP tools, the
//! HTTP server, the harness hook payloads, and the session-start context.

mod args;
mod context;
mod error;
pub mod hook;
pub mod http;
mod mcp;
pub mod profile;
mod service;

pub use context::{PREAMBLE, session_context};
pub use error::MemoryError;
pub use mcp::MemoryMcp;
pub use service::{
    Caller, HookEvent, MAX_EVENT_FILES, Memory, PageRef, Query, ReadOut, STACK_TAGS, WritePage,
    Written,
};

use ai_memory_index::Principal;
use hook::HookKind;

/// Runs a hook event; the JSON answer of the hook endpoint (`context` for a session start).
pub fn run_hook(
    memory: &Memory,
    who: Principal,
    kind: HookKind,
    event: &HookEvent,
) -> Result<serde_json::Value, MemoryError> {
    Ok(match kind {
        HookKind::SessionStart => {
            serde_json::json!({ "context": memory.session_start(who, event)? })
        }
        HookKind::PromptSubmit => {
            serde_json::json!({ "captured": memory.prompt_submit(who, event)? })
        }
        HookKind::SessionEnd => serde_json::json!({ "ended": memory.session_end(who, event)? }),
    })
}
