//! Tools from outside aerix (MCP servers' tools, `mcp__<server>__<tool>`). The runtime starts
//! nothing: the binary hands it a set (`aerix-mcp`) through `ExternalTools`, and
//! `NO_EXTERNAL_TOOLS` has none. A tool is offered only with an input schema the turn's
//! constraint takes, so its calls' arguments are constrained as a built-in tool's are.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

/// A call's result, later: the text, or the error's.
pub type Called<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

/// A set of tools the runtime calls by name.
pub trait ExternalTools: Send + Sync {
    /// The tools offered to the root and implementers, in order.
    fn names(&self) -> Vec<String>;
    /// A tool's input schema as the turn schema holds it.
    fn input_schema(&self, tool: &str) -> Option<Value>;
    /// The system segment's lines about the tools; `None` without tools.
    fn listing(&self) -> Option<String>;
    /// Runs one call to its end (or its timeout): the result's text, or the error's. Async:
    /// the servers' clients are, and the agent's task waits without holding a thread.
    fn call<'a>(&'a self, tool: &'a str, input: &'a Value) -> Called<'a>;
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

    fn call<'a>(&'a self, tool: &'a str, _: &'a Value) -> Called<'a> {
        let error = format!("no tool named `{tool}`: no MCP server is running");
        Box::pin(async move { Err(error) })
    }
}

/// For a `Runtime` whose caller has no external tools.
pub static NO_EXTERNAL_TOOLS: NoExternalTools = NoExternalTools;
