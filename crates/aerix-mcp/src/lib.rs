//! The MCP client: the servers declared in aerix's settings and Claude Code's files
//! (`config.rs`), started in parallel at startup over stdio or streamable HTTP (`rmcp`, the
//! official SDK), their tools listed and offered as `mcp__<server>__<tool>` when their input
//! schemas fit the turn's constraint (`schema.rs`), each call bounded by `mcp.timeout_secs`,
//! results as text (`result.rs`). A server that fails to start or dies is a state and a note;
//! its calls are errors, never a hang.

pub mod config;
mod result;
pub mod schema;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;

pub use config::{Declared, Spec, Transport, declared};

/// How long a server has to start and list its tools.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// The characters of a tool's description the system segment shows.
const DESCRIPTION_CHARS: usize = 300;
/// The tail of a stdio server's stderr kept for its failure reason.
const STDERR_TAIL: usize = 2_000;
/// How long a failure waits for the rest of a stdio server's stderr (a child holding the pipe
/// open past its exit must not hold up the error).
const STDERR_SETTLE: Duration = Duration::from_secs(1);

/// Where a server stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Ready,
    Failed(String),
    /// Not started: a repository's server in an untrusted project.
    Skipped(String),
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            State::Ready => write!(f, "ready"),
            State::Failed(why) => write!(f, "failed: {why}"),
            State::Skipped(why) => write!(f, "skipped: {why}"),
        }
    }
}

/// One of a server's tools: offered, or left out and why.
#[derive(Clone, Debug)]
pub struct Tool {
    /// The server's name for it.
    pub name: String,
    /// `mcp__<server>__<tool>`.
    pub full: String,
    pub description: String,
    /// The input schema as the turn schema holds it, or why the tool is left out.
    pub schema: Result<Value, String>,
}

type Client = RunningService<RoleClient, ()>;

/// One declared server and what became of it.
pub struct Server {
    pub spec: Spec,
    pub state: State,
    pub tools: Vec<Tool>,
    client: Option<Client>,
    stderr: Stderr,
}

/// A stdio server's stderr tail, and whether its reader has reached the end of the pipe.
#[derive(Clone, Default)]
struct Stderr {
    tail: Arc<Mutex<String>>,
    /// Closed (its sender dropped) once the reader stopped, or when there is no reader.
    open: Option<tokio::sync::watch::Receiver<()>>,
}

impl Stderr {
    /// The tail once the reader has read what the server wrote before it ended: the transport
    /// may see the process's stdout close before the reader task has run, and a crash's reason
    /// is in its last stderr lines. Bounded by `STDERR_SETTLE`.
    async fn settled(&self) -> &Mutex<String> {
        if let Some(open) = &self.open {
            let mut open = open.clone();
            let _ = tokio::time::timeout(STDERR_SETTLE, async {
                while open.changed().await.is_ok() {}
            })
            .await;
        }
        &self.tail
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("spec", &self.spec).field("state", &self.state).finish()
    }
}

/// The run's servers.
#[derive(Debug)]
pub struct Servers {
    pub servers: Vec<Server>,
    timeout: Duration,
}

impl Servers {
    /// No servers.
    pub fn none() -> Servers {
        Servers { servers: Vec::new(), timeout: Duration::from_secs(60) }
    }

    /// Starts every declared server at once (a project's only when `trusted`), each bounded by
    /// `startup`; `lookup` reads the environment for `${VAR}`.
    pub async fn start(
        specs: Vec<Spec>,
        trusted: bool,
        lookup: &(dyn Fn(&str) -> Option<String> + Sync),
        timeout: Duration,
        startup: Duration,
    ) -> Servers {
        let starts = specs.into_iter().map(|spec| async move {
            if spec.project && !trusted {
                let why =
                    "the project is not trusted (run `aerix trust`, or `--trust` for one run)";
                return server(spec, State::Skipped(why.to_owned()), None, Vec::new(), None);
            }
            let (open, reading) = tokio::sync::watch::channel(());
            let stderr = Stderr { tail: Arc::default(), open: Some(reading) };
            let started =
                tokio::time::timeout(startup, connect(&spec, lookup, &stderr.tail, open)).await;
            let started =
                started.unwrap_or_else(|_| Err(format!("no answer within {}s", startup.as_secs())));
            match started {
                Ok((client, tools)) => {
                    server(spec, State::Ready, Some(client), tools, Some(stderr))
                }
                Err(why) => {
                    let why = with_stderr(why, stderr.settled().await);
                    server(spec, State::Failed(why), None, Vec::new(), Some(stderr))
                }
            }
        });
        let servers = futures::future::join_all(starts).await;
        Servers { servers, timeout }
    }

    /// One note per server that is not ready, and per tool left out.
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.servers {
            let name = &s.spec.name;
            // A skipped server has the trust survey's note.
            if matches!(s.state, State::Failed(_)) {
                out.push(format!("mcp: server `{name}` ({}) {}", s.spec.source.display(), s.state));
            }
            for t in &s.tools {
                if let Err(why) = &t.schema {
                    out.push(format!("mcp: tool `{}` left out: {why}", t.full));
                }
            }
        }
        out
    }

    /// Ends every server (a stdio server's process is killed if it does not stop).
    pub async fn shutdown(&mut self) {
        let closes = self.servers.iter_mut().filter_map(|s| s.client.as_mut()).map(|c| async {
            let _ = c.close_with_timeout(Duration::from_secs(3)).await;
        });
        futures::future::join_all(closes).await;
        for s in &mut self.servers {
            s.client = None;
        }
    }

    /// Takes the tools `hidden` names (by `mcp__<server>__<tool>`) out of every listing and
    /// the turn schema: a deny rule's whole tool.
    pub fn hide(&mut self, hidden: impl Fn(&str) -> bool) {
        for server in &mut self.servers {
            server.tools.retain(|t| !hidden(&t.full));
        }
    }

    fn offered(&self) -> impl Iterator<Item = (&Server, &Tool)> {
        self.servers
            .iter()
            .filter(|s| s.state == State::Ready)
            .flat_map(|s| s.tools.iter().filter(|t| t.schema.is_ok()).map(move |t| (s, t)))
    }

    /// Runs one call to its end (or `mcp.timeout_secs`): the result's text, or the error's.
    pub async fn call(&self, tool: &str, input: &Value) -> Result<String, String> {
        let Some((server, found)) = self.offered().find(|(_, t)| t.full == tool) else {
            return Err(format!("no MCP tool named `{tool}` is running"));
        };
        let name = &server.spec.name;
        let Some(client) = &server.client else {
            return Err(format!("the MCP server `{name}` is not running"));
        };
        if client.is_closed() {
            return Err(with_stderr(
                format!("the MCP server `{name}` has stopped"),
                server.stderr.settled().await,
            ));
        }
        let arguments = input.as_object().cloned().unwrap_or_default();
        let params = CallToolRequestParams::new(found.name.clone()).with_arguments(arguments);
        match tokio::time::timeout(self.timeout, client.call_tool(params)).await {
            Err(_) => Err(format!(
                "the MCP server `{name}` did not answer within {}s (mcp.timeout_secs)",
                self.timeout.as_secs()
            )),
            Ok(Err(e)) => {
                let why = format!("the MCP server `{name}` failed the call: {e}");
                // Only a server that is gone has more to say on stderr; a live one's call
                // failure does not wait for a pipe that stays open.
                let tail = if client.is_closed() || matches!(e, rmcp::ServiceError::TransportClosed)
                {
                    server.stderr.settled().await
                } else {
                    &server.stderr.tail
                };
                Err(with_stderr(why, tail))
            }
            Ok(Ok(reply)) => result::text(&reply),
        }
    }
}

fn server(
    spec: Spec,
    state: State,
    client: Option<Client>,
    tools: Vec<Tool>,
    stderr: Option<Stderr>,
) -> Server {
    Server { spec, state, tools, client, stderr: stderr.unwrap_or_default() }
}

/// `why`, and the server's last stderr lines when it wrote any.
fn with_stderr(why: String, stderr: &Mutex<String>) -> String {
    let tail = stderr.lock().map(|s| s.trim().to_owned()).unwrap_or_default();
    if tail.is_empty() { why } else { format!("{why} (its stderr: {tail})") }
}

/// Connects, initializes and lists the tools.
async fn connect(
    spec: &Spec,
    lookup: &(dyn Fn(&str) -> Option<String> + Sync),
    stderr: &Arc<Mutex<String>>,
    // Dropped when the stderr reader stops (at once when there is none).
    open: tokio::sync::watch::Sender<()>,
) -> Result<(Client, Vec<Tool>), String> {
    let expand = |s: &String| config::expand(s, lookup);
    let client = match &spec.transport {
        Transport::Stdio { command, args, env } => {
            let mut cmd = tokio::process::Command::new(expand(command)?);
            // Should the run end before the server is closed, its process goes with it.
            cmd.kill_on_drop(true);
            for arg in args {
                cmd.arg(expand(arg)?);
            }
            for (key, value) in env {
                cmd.env(key, expand(value)?);
            }
            let (transport, err) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot run `{command}`: {e}"))?;
            if let Some(mut err) = err {
                let keep = Arc::clone(stderr);
                tokio::spawn(async move {
                    let _open = open;
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = err.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        if let Ok(mut tail) = keep.lock() {
                            tail.push_str(&String::from_utf8_lossy(&buf[..n]));
                            if tail.len() > STDERR_TAIL {
                                let mut cut = tail.len() - STDERR_TAIL;
                                while !tail.is_char_boundary(cut) {
                                    cut += 1;
                                }
                                tail.drain(..cut);
                            }
                        }
                    }
                });
            }
            ().serve(transport).await.map_err(|e| format!("initialize failed: {e}"))?
        }
        Transport::Http { url, headers } => {
            let mut map = std::collections::HashMap::new();
            for (key, value) in headers {
                let name = http::HeaderName::try_from(key.as_str())
                    .map_err(|e| format!("header `{key}`: {e}"))?;
                let value = http::HeaderValue::try_from(expand(value)?)
                    .map_err(|e| format!("header `{key}`'s value: {e}"))?;
                map.insert(name, value);
            }
            let config =
                StreamableHttpClientTransportConfig::with_uri(expand(url)?).custom_headers(map);
            let transport = StreamableHttpClientTransport::from_config(config);
            ().serve(transport).await.map_err(|e| format!("initialize failed: {e}"))?
        }
    };
    let listed = client.list_all_tools().await.map_err(|e| format!("tools/list failed: {e}"))?;
    let mut tools = Vec::new();
    let mut seen = BTreeMap::new();
    for tool in listed {
        let name = tool.name.to_string();
        let full = format!("mcp__{}__{name}", spec.name);
        let schema = if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            Err("its name has characters other than letters, digits, `-` and `_`".to_owned())
        } else if seen.insert(name.clone(), ()).is_some() {
            Err("the server lists it twice".to_owned())
        } else {
            schema::fit(&tool.input_schema)
        };
        let description: String = tool
            .description
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(DESCRIPTION_CHARS)
            .collect();
        tools.push(Tool { name, full, description, schema });
    }
    Ok((client, tools))
}

impl Servers {
    /// The tools offered to the root and implementers, in order.
    pub fn names(&self) -> Vec<String> {
        self.offered().map(|(_, t)| t.full.clone()).collect()
    }

    /// A tool's input schema as the turn schema holds it.
    pub fn input_schema(&self, tool: &str) -> Option<Value> {
        self.offered().find(|(_, t)| t.full == tool).and_then(|(_, t)| t.schema.clone().ok())
    }

    /// The system segment's lines about the tools; `None` without tools.
    pub fn listing(&self) -> Option<String> {
        let mut out = String::from("# MCP tools\n");
        let mut any = false;
        for (_, t) in self.offered() {
            any = true;
            let fields = t.schema.as_ref().map(aerix_turn::schemas::describe).unwrap_or_default();
            out.push_str(&format!("\n{}: {}\ninput: {fields}\n", t.full, t.description));
        }
        any.then_some(out)
    }
}
