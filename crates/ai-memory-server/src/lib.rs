//! The memory server as a library: the service every entry point shares, the MCP tools, the
//! HTTP server, the harness hook payloads, and the session-start context.

mod args;
mod context;
pub mod embedding;
mod error;
pub mod handoff;
pub mod hook;
pub mod http;
mod mcp;
pub mod profile;
mod service;
pub mod transfer;

pub use context::{PREAMBLE, session_context};
pub use error::MemoryError;
pub use mcp::MemoryMcp;
pub use service::{
    CONTEXT_BYTES, CONTEXT_DEPTH, Caller, ContextOut, ContextPage, ContextReq, Forget, HookEvent,
    MAX_CONTEXT_BYTES, MAX_CONTEXT_DEPTH, MAX_EVENT_FILES, MIN_CONTEXT_BYTES, Memory, PageLinks,
    PageRef, Query, ReadOut, STACK_TAGS, WritePage, Written,
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
            let captured = memory.prompt_submit(who, event)?;
            // Kimi Code adds a prompt hook's output to the context on every prompt: the
            // session-start context goes with the first prompt only.
            match event.harness.as_str() {
                hook::KIMI_CODE => match memory.first_prompt_context(who, event)? {
                    Some(context) => {
                        serde_json::json!({ "captured": captured, "context": context })
                    }
                    None => serde_json::json!({ "captured": captured }),
                },
                _ => serde_json::json!({ "captured": captured }),
            }
        }
        HookKind::SessionEnd => serde_json::json!({ "ended": memory.session_end(who, event)? }),
        HookKind::ToolUse => serde_json::json!({ "recorded": memory.tool_use(who, event)? }),
    })
}
