//! `aerix acp`: the Agent Client Protocol over stdio (Zed's; Neovim's and Emacs's clients speak
//! it), the session's third front end. `session/new` opens a session in the client's directory
//! (`session/load` resumes a logged one and replays its conversation first), `session/prompt`
//! is a request whose events stream as `session/update`s, a question is
//! `session/request_permission`, and `session/cancel` cancels the request. Nothing is printed
//! on stdout but the protocol; notes go to stderr.
//!
//! The protocol's connection runs its handlers one at a time, so a prompt's turn runs in a
//! task of its own (it waits on the client's answers, and a cancel must reach it meanwhile).

mod updates;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use aerix_config::Env;
use aerix_session::{Event, Outcome};
use aerix_tools::Cancel;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, Implementation, InitializeRequest,
    InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer,
    NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind, PromptRequest,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, SessionId,
    SessionNotification, SessionUpdate, StopReason, ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::v1::{ConnectionTo, Responder, schema};
use agent_client_protocol::{Agent, Client, Error, Stdio};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::exit::Exit;
use crate::session::{self, Ask, Asked, Launch, Op, Opened, Out, Reply};
use crate::startup::Front;
use updates::Updates;

/// What a session needs of the process: its environment, and `--model`.
#[derive(Clone)]
pub struct Serving {
    pub env: Env,
    pub model: Option<String>,
    pub started: std::time::Instant,
}

/// An open session of the connection.
struct Open {
    ops: UnboundedSender<Op>,
    /// Held by the running prompt (one at a time).
    turn: tokio::sync::Mutex<Turn>,
    /// The running prompt's flag (`session/cancel`).
    cancel: Mutex<Cancel>,
}

struct Turn {
    outs: UnboundedReceiver<Out>,
    updates: Updates,
}

/// What every handler of the connection shares.
struct Served {
    serving: Serving,
    /// The runtime the sessions' startups run on.
    handle: tokio::runtime::Handle,
    sessions: Mutex<HashMap<String, Arc<Open>>>,
}

impl Served {
    fn session(&self, id: &SessionId) -> Option<Arc<Open>> {
        lock(&self.sessions).get(&*id.0).cloned()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves the protocol on stdin and stdout until the client closes stdin; then every session
/// ends as Ctrl-D ends the screen's.
pub async fn serve(serving: Serving) -> anyhow::Result<Exit> {
    let handle = tokio::runtime::Handle::current();
    let served = Arc::new(Served { serving, handle, sessions: Mutex::default() });
    let (s_new, s_load, s_prompt, s_cancel) =
        (served.clone(), served.clone(), served.clone(), served.clone());
    let connection = Agent
        .v1()
        .name("aerix")
        .on_receive_request(
            async move |_: InitializeRequest,
                        responder: Responder<InitializeResponse>,
                        _: ConnectionTo<Client>| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(
                            AgentCapabilities::new()
                                .load_session(true)
                                .mcp_capabilities(McpCapabilities::new().http(true)),
                        )
                        .agent_info(Implementation::new("aerix", env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let served = s_new.clone();
                cx.spawn(async move {
                    let opened = open(&served, request.cwd, None, request.mcp_servers).await;
                    let answer = opened.map(|(id, _)| NewSessionResponse::new(SessionId::new(id)));
                    responder.respond_with_result(answer)
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let served = s_load.clone();
                let task_cx = cx.clone();
                cx.spawn(async move {
                    let id = request.session_id.0.to_string();
                    let opened = open(&served, request.cwd, Some(id), request.mcp_servers).await;
                    let answer = opened.map(|(id, earlier)| {
                        // The conversation so far, before the answer (the client shows it).
                        let sid = SessionId::new(id.clone());
                        let mut replay = Updates::new(&id, &[]);
                        for event in &earlier {
                            for update in replay.of(event, true) {
                                let _ = notify(&task_cx, &sid, update);
                            }
                        }
                        LoadSessionResponse::new()
                    });
                    responder.respond_with_result(answer)
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest,
                        responder: Responder<PromptResponse>,
                        cx: ConnectionTo<Client>| {
                let open = s_prompt.session(&request.session_id);
                let task_cx = cx.clone();
                cx.spawn(async move {
                    let answer = match open {
                        Some(open) => prompt(&task_cx, &open, request).await,
                        None => Err(schema::Error::session_not_found(request.session_id).into()),
                    };
                    responder.respond_with_result(answer)
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelNotification, _: ConnectionTo<Client>| {
                if let Some(open) = s_cancel.session(&cancel.session_id) {
                    lock(&open.cancel).cancel();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await;
    // The client has gone: each session ends (its running request, if any, cancelled first).
    let open: Vec<Arc<Open>> = lock(&served.sessions).drain().map(|(_, open)| open).collect();
    for open in open {
        lock(&open.cancel).cancel();
        let _ = open.ops.send(Op::Close { hurry: Cancel::default() });
        let mut turn = open.turn.lock().await;
        while let Some(out) = turn.outs.recv().await {
            if let Out::Closed = out {
                break;
            }
        }
    }
    connection.map_err(|e| anyhow::anyhow!("the ACP connection: {e}"))?;
    Ok(Exit::Done)
}

fn notify(cx: &ConnectionTo<Client>, id: &SessionId, update: SessionUpdate) -> Result<(), Error> {
    cx.send_notification(SessionNotification::new(id.clone(), update))
}

/// The startup's front end: a note is a line on stderr; no one answers the trust question
/// (an untrusted project's parts are skipped, as `aerix -p` skips them).
#[derive(Default)]
struct Lines {
    /// A resumed session's events.
    earlier: Vec<Event>,
}

impl Front for Lines {
    fn note(&mut self, note: &str) {
        eprintln!("{note}");
    }

    async fn step<T>(&mut self, step: impl std::future::Future<Output = T>) -> Option<T> {
        Some(step.await)
    }

    async fn trust(&mut self, _: &Path, _: &[String], _: bool) -> Option<bool> {
        Some(false)
    }

    fn session(&mut self, _: &str, earlier: Option<&[Event]>, _: &Path) {
        self.earlier = earlier.unwrap_or_default().to_vec();
    }
}

/// The client's MCP servers (`mcpServers`) as aerix declares them: the user's own (their
/// editor's), so no project trust holds them back. One aerix cannot reach (an SSE server, a
/// name tool names cannot carry) is a note, and the session opens without it.
fn servers(declared: Vec<McpServer>) -> Vec<aerix_mcp::Spec> {
    let source = PathBuf::from("the ACP client's session/new");
    let mut specs = Vec::new();
    for server in declared {
        let (name, transport) = match server {
            McpServer::Stdio(s) => {
                let command = s.command.display().to_string();
                let env = s.env.into_iter().map(|v| (v.name, v.value)).collect();
                (s.name, aerix_mcp::Transport::Stdio { command, args: s.args, env })
            }
            McpServer::Http(s) => {
                let headers = s.headers.into_iter().map(|h| (h.name, h.value)).collect();
                (s.name, aerix_mcp::Transport::Http { url: s.url, headers })
            }
            McpServer::Sse(s) => {
                eprintln!(
                    "mcp: server `{}` of {}: SSE is not supported (stdio and http are); not started",
                    s.name,
                    source.display()
                );
                continue;
            }
            _ => {
                eprintln!(
                    "mcp: a server of {} has a transport aerix does not know; not started",
                    source.display()
                );
                continue;
            }
        };
        if !aerix_mcp::config::valid_name(&name) {
            eprintln!(
                "mcp: server `{name}` of {}: a name has letters, digits, `-` and `_`, no `__`",
                source.display()
            );
            continue;
        }
        specs.push(aerix_mcp::Spec { name, source: source.clone(), project: false, transport });
    }
    specs
}

/// A session opened in `cwd` (resuming `resume`, with the client's MCP servers `mcp`) and kept
/// in `served`: its id and a resumed one's events.
async fn open(
    served: &Served,
    cwd: PathBuf,
    resume: Option<String>,
    mcp: Vec<McpServer>,
) -> Result<(String, Vec<Event>), Error> {
    let mcp = servers(mcp);
    let serving = served.serving.clone();
    // On the runtime's workers: the startup's hooks block the thread they run on.
    let opened = served.handle.spawn(async move {
        let (outs_tx, outs) = unbounded_channel();
        let cwd = cwd.canonicalize().map_err(|e| format!("{}: {e}", cwd.display()))?;
        let (layered, trust) =
            crate::project(&serving.env, &cwd, false).map_err(|e| format!("{e:#}"))?;
        let settings = crate::finish(trust.settings(layered), serving.model.clone());
        let asked = Asked {
            cwd,
            max_turns: None,
            resume,
            continue_latest: false,
            profile: None,
            profile_refresh: false,
            permission_mode: None,
            started: serving.started,
        };
        let launch = Launch {
            asked,
            // The client answers `session/request_permission`.
            front: aerix_permissions::Front::Screen,
            prompt: None,
            cancelled_exit: Arc::new(|| Exit::Cancelled),
            mcp,
        };
        let mut front = Lines::default();
        let cancel = Cancel::default();
        let opened =
            session::open(settings, &serving.env, &trust, launch, &mut front, outs_tx, &cancel)
                .await
                .map_err(|e| format!("{e:#}"))?;
        let session = match opened {
            Opened::Open(session) => session,
            Opened::Ended { error, outcome, .. } => {
                return Err(error.map_or_else(
                    || format!("the startup ended {}", outcome.as_str()),
                    |e| format!("{e:#}"),
                ));
            }
        };
        let id = session.id().to_owned();
        let (ops, ops_rx) = unbounded_channel();
        tokio::spawn(session.run(ops_rx));
        let updates = Updates::new(&id, &front.earlier);
        let open = Open {
            ops,
            turn: tokio::sync::Mutex::new(Turn { outs, updates }),
            cancel: Mutex::new(Cancel::default()),
        };
        Ok::<_, String>((id, Arc::new(open), front.earlier))
    });
    match opened.await {
        Ok(Ok((id, open, earlier))) => {
            lock(&served.sessions).insert(id.clone(), open);
            Ok((id, earlier))
        }
        Ok(Err(e)) => Err(Error::internal_error().data(e)),
        Err(e) => Err(Error::internal_error().data(format!("the session's startup: {e}"))),
    }
}

/// A resource the user mentioned (a file `@`-named in the editor), as the prompt's text: a
/// local file as `@` and its path (the agent reads it with its tools, within its roots), any
/// other resource as a Markdown link.
fn mention(uri: &str, name: &str) -> String {
    let url = url::Url::parse(uri).ok().filter(|u| u.scheme() == "file");
    match url.and_then(|u| u.to_file_path().ok()) {
        Some(path) => format!("@{}", path.display()),
        None => format!("[{name}]({uri})"),
    }
}

/// One prompt: the request, its events as updates, its questions as permission requests.
async fn prompt(
    cx: &ConnectionTo<Client>,
    open: &Open,
    request: PromptRequest,
) -> Result<PromptResponse, Error> {
    let text: Vec<String> = request
        .prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            ContentBlock::ResourceLink(link) => Some(mention(&link.uri, &link.name)),
            _ => None,
        })
        .collect();
    let text = text.join("\n");
    if text.trim().is_empty() {
        return Err(Error::invalid_params().data("the prompt has no text"));
    }
    let mut turn = open.turn.lock().await;
    let cancel = Cancel::default();
    *lock(&open.cancel) = cancel.clone();
    open.ops
        .send(Op::Prompt { text, cancel })
        .map_err(|_| Error::internal_error().data("the session has ended"))?;
    let sid = request.session_id;
    let Turn { outs, updates } = &mut *turn;
    while let Some(out) = outs.recv().await {
        match out {
            Out::Event(event) => {
                for update in updates.of(&event, false) {
                    notify(cx, &sid, update)?;
                }
            }
            Out::Note(note) => eprintln!("{note}"),
            Out::Ask(ask, reply) => {
                let answer = permission(cx, &sid, ask).await?;
                let _ = reply.send(answer);
            }
            Out::Ended(ended) => {
                return match ended.outcome {
                    Outcome::Done => Ok(PromptResponse::new(StopReason::EndTurn)),
                    Outcome::Budget => Ok(PromptResponse::new(StopReason::MaxTurnRequests)),
                    Outcome::Cancelled => Ok(PromptResponse::new(StopReason::Cancelled)),
                    Outcome::Killed => Ok(PromptResponse::new(StopReason::Refusal)),
                    Outcome::Failed => {
                        let why = ended.error.or(ended.reason).unwrap_or_default();
                        Err(Error::internal_error().data(format!("the request failed: {why}")))
                    }
                };
            }
            Out::Live { .. } | Out::Rewound(_) => {}
            Out::Closed => break,
        }
    }
    Err(Error::internal_error().data("the session has ended"))
}

/// A question as `session/request_permission`; a cancelled or refused one is a refusal.
async fn permission(cx: &ConnectionTo<Client>, sid: &SessionId, ask: Ask) -> Result<Reply, Error> {
    let (id, title, input, plan, always) = match ask {
        Ask::Plan { agent, text } => {
            (format!("{agent}.plan"), format!("Follow this plan?\n{text}"), None, true, false)
        }
        // The call's own id, as its `tool_call` update has it: the client shows the
        // question on that call.
        Ask::Call { agent, call, tool, input, reason, always, .. } => {
            let id = aerix_claude::use_id(&agent, &call);
            (id, format!("{tool}: {reason}"), Some(input), false, always)
        }
    };
    let mut fields = ToolCallUpdateFields::new().title(title);
    if let Some(input) = input {
        fields = fields.raw_input(input);
    }
    let mut options = vec![PermissionOption::new("once", "Allow", PermissionOptionKind::AllowOnce)];
    if always {
        let name = "Always allow in this project";
        options.push(PermissionOption::new("always", name, PermissionOptionKind::AllowAlways));
    }
    options.push(PermissionOption::new("reject", "Refuse", PermissionOptionKind::RejectOnce));
    let asked =
        RequestPermissionRequest::new(sid.clone(), ToolCallUpdate::new(id, fields), options);
    let answer = cx.send_request(asked).block_task().await?;
    Ok(match answer.outcome {
        RequestPermissionOutcome::Selected(chosen) => match (&*chosen.option_id.0, plan) {
            ("once" | "always", true) => Reply::Accept,
            ("once", false) => Reply::Once,
            ("always", false) => Reply::Always,
            _ => Reply::Deny,
        },
        _ => Reply::Deny,
    })
}

#[cfg(test)]
mod tests {
    use super::mention;

    #[test]
    fn the_clients_stdio_and_http_servers_are_declared_and_the_rest_left_out() {
        use agent_client_protocol::v1::schema::{
            EnvVariable, McpServer, McpServerHttp, McpServerSse, McpServerStdio,
        };
        let stdio = McpServerStdio::new("memory", "/usr/bin/ai-memory")
            .args(vec!["mcp".into()])
            .env(vec![EnvVariable::new("K", "v")]);
        let declared = vec![
            McpServer::Stdio(stdio),
            McpServer::Http(McpServerHttp::new("docs", "http://127.0.0.1:9/mcp")),
            McpServer::Sse(McpServerSse::new("events", "http://127.0.0.1:9/sse")),
            McpServer::Http(McpServerHttp::new("my server", "http://127.0.0.1:9/mcp")),
        ];
        let specs = super::servers(declared);
        let named: Vec<(&str, String, bool)> =
            specs.iter().map(|s| (s.name.as_str(), s.transport.consent(), s.project)).collect();
        assert_eq!(
            named,
            [
                ("memory", "/usr/bin/ai-memory mcp (K=v)".to_owned(), false),
                ("docs", "http://127.0.0.1:9/mcp".to_owned(), false),
            ]
        );
    }

    #[test]
    fn a_mentioned_file_is_its_path_and_another_resource_a_link() {
        assert_eq!(mention("file:///w/src/main.rs", "main.rs"), "@/w/src/main.rs");
        assert_eq!(mention("file://localhost/w/a%20b.rs", "a b.rs"), "@/w/a b.rs");
        assert_eq!(mention("file:///w/100%.rs", "x"), "@/w/100%.rs", "a bad escape is kept");
        assert_eq!(mention("https://x.test/doc", "doc"), "[doc](https://x.test/doc)");
    }
}
