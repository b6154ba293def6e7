//! The MCP tools, over stdio (`ai-memory mcp`) and streamable HTTP (`/mcp`).

use std::sync::Arc;

use ai_memory_index::Principal;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, JsonObject, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};

use crate::args::{self, input_schema};
use crate::error::MemoryError;
use crate::service::{Caller, ContextReq, Forget, Memory, PageRef, Query, WritePage};

/// The MCP server: the service, and the caller a request runs as when the transport does not
/// say (stdio: the process's own identity; HTTP: set per request by the auth layer).
#[derive(Clone)]
pub struct MemoryMcp {
    memory: Arc<Memory>,
    default: Option<Caller>,
    tool_router: ToolRouter<MemoryMcp>,
}

impl std::fmt::Debug for MemoryMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryMcp").field("default", &self.default).finish_non_exhaustive()
    }
}

fn tool_result<T: serde::Serialize>(
    result: Result<T, MemoryError>,
) -> Result<CallToolResult, ErrorData> {
    Ok(match result {
        Ok(value) => {
            let text = serde_json::to_string_pretty(&value).unwrap_or_default();
            CallToolResult::success(vec![ContentBlock::text(text)])
        }
        // A tool error the model can read and act on, not a protocol failure.
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
    })
}

#[tool_router]
impl MemoryMcp {
    /// `default`: the caller of every request when the transport names none (stdio).
    pub fn new(memory: Arc<Memory>, default: Option<Caller>) -> MemoryMcp {
        MemoryMcp { memory, default, tool_router: Self::tool_router() }
    }

    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, MemoryError> {
        if let Some(parts) = ctx.extensions.get::<axum::http::request::Parts>() {
            return parts.extensions.get::<Caller>().cloned().ok_or(MemoryError::Unauthorized);
        }
        self.default.clone().ok_or(MemoryError::Unauthorized)
    }

    /// Reads `tool`'s arguments as `A` (a refusal is a tool error, and nothing runs), then runs
    /// `f` off the async threads as the request's caller.
    async fn run<A, T, F>(
        &self,
        tool: &'static str,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
        f: F,
    ) -> Result<CallToolResult, ErrorData>
    where
        A: schemars::JsonSchema + serde::de::DeserializeOwned + Send + 'static,
        T: serde::Serialize + Send + 'static,
        F: FnOnce(&Memory, &Caller, A) -> Result<T, MemoryError> + Send + 'static,
    {
        let req = match args::parse::<A>(tool, args) {
            Ok(req) => req,
            Err(e) => return tool_result::<T>(Err(e)),
        };
        let caller = match self.caller(&ctx) {
            Ok(c) => c,
            Err(e) => return tool_result::<T>(Err(e)),
        };
        let memory = self.memory.clone();
        let result = tokio::task::spawn_blocking(move || f(&memory, &caller, req))
            .await
            .unwrap_or_else(|e| Err(MemoryError::Invalid(format!("the call failed: {e}"))));
        tool_result(result)
    }

    #[tool(
        description = "Write (create or replace) a memory page: markdown, optionally opening with YAML frontmatter. \
        scope: project (default), global (every project) or profile (your cross-project defaults, under profile/<category>/). \
        A rewrite replaces the whole page.",
        input_schema = input_schema::<WritePage>()
    )]
    async fn memory_write_page(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run("memory_write_page", args, ctx, |m, c, req: WritePage| m.write_page(c, &req)).await
    }

    #[tool(
        description = "Read a memory page: its text (frontmatter included), recent history, its links (with whether each target exists) and backlinks. A digest line's path (profile/...) is read as printed, from your profile.",
        input_schema = input_schema::<PageRef>()
    )]
    async fn memory_read_page(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run("memory_read_page", args, ctx, |m, c, req: PageRef| m.read_page(c, &req)).await
    }

    #[tool(
        description = "A page's neighbourhood: the page, then the pages it links to ([[path]] in its body, related: in its frontmatter) \
        and the pages linking to it, breadth-first, each with its title and summary. \
        depth: links away (default 1, at most 3); max_bytes: budget (default 4000, 500 to 32000); truncated says pages did not fit.",
        input_schema = input_schema::<ContextReq>()
    )]
    async fn memory_context(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run("memory_context", args, ctx, |m, c, req: ContextReq| m.context(c, &req)).await
    }

    #[tool(
        description = "Search memory: pages of this project (hits) and of the global scope, the profile \
        included (global_scope_hits), best first.",
        input_schema = input_schema::<Query>()
    )]
    async fn memory_query(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run("memory_query", args, ctx, |m, c, req: Query| m.query(c, &req)).await
    }

    #[tool(
        description = "Delete a memory page (git keeps its history).",
        input_schema = input_schema::<PageRef>()
    )]
    async fn memory_delete_page(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run("memory_delete_page", args, ctx, |m, c, req: PageRef| {
            m.delete_page(c, &req).map(|commit| serde_json::json!({ "commit": commit }))
        })
        .await
    }

    #[tool(
        description = "Forget a cross-project profile entry (path as the digest names it, profile/<category>/<page>.md): \
        it is removed and recorded, so the profile does not learn it again from the same prompts, only from a later statement.",
        input_schema = input_schema::<Forget>()
    )]
    async fn memory_forget(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run("memory_forget", args, ctx, |m, c, req: Forget| m.forget(c, &req)).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ai-memory", env!("CARGO_PKG_VERSION")))
            .with_instructions(crate::context::PREAMBLE)
    }
}

/// The caller a request with this principal runs as, over HTTP (arguments name the project).
pub fn http_caller(who: Principal) -> Caller {
    Caller { who, workspace: None, project: None }
}
