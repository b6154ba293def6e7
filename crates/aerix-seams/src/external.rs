//! Tools from outside aerix (MCP servers' tools, `mcp__<server>__<tool>`). The runtime starts
//! nothing: the binary hands it a set (`aerix-mcp`) through `ExternalTools`, and
//! `NO_EXTERNAL_TOOLS` has none. A tool is offered only with an input schema the turn's
//! constraint takes, so its calls' arguments are constrained as a built-in tool's are.

use serde_json::Value;

/// A set of tools the runtime calls by name.
pub trait ExternalTools: Send + Sync {
    /// The tools offered to the root and implementers, in order.
    fn names(&self) -> Vec<String>;
    /// A tool's input schema as the turn schema holds it.
    fn input_schema(&self, tool: &str) -> Option<Value>;
    /// The system segment's lines about the tools; `None` without tools.
    fn listing(&self) -> Option<String>;
    /// Runs one call to its end (or its timeout): the result's text, or the error's.
    fn call(&self, tool: &str, input: &Value) -> Result<String, String>;
}

/// No external tools.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoExternalTools;

impl ExternalTools for NoExternalTools {
    fn names(&self) -> Vec<String> {
        Vec::new()
    }

    fn input_schema(&self, _: &str) -> Option<Value> {
        None
    }

    fn listing(&self) -> Option<String> {
        None
    }

    fn call(&self, tool: &str, _: &Value) -> Result<String, String> {
        Err(format!("no tool named `{tool}`: no MCP server is running"))
    }
}

/// For a `Runtime` whose caller has no external tools.
pub static NO_EXTERNAL_TOOLS: NoExternalTools = NoExternalTools;
