//! `aerix acp` driven by the protocol's official client library (the `agent-client-protocol`
//! crate, spawning the real binary): initialize, a session in the project, a prompt whose edit
//! asks permission and streams its diff, a cancelled prompt, and the session loaded again by a
//! second connection with its conversation replayed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, EnvVariable, InitializeRequest, LoadSessionRequest,
    McpServer, McpServerHttp, McpServerStdio, NewSessionRequest, PermissionOptionKind,
    PromptRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    ResourceLink, SelectedPermissionOutcome, SessionId, SessionNotification, SessionUpdate,
    StopReason, TextContent, ToolCallContent, ToolCallStatus, ToolKind,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client, Error};
use serde_json::json;

use crate::{World, call, calls, final_turn, of_type};

/// What the client saw: each update, and each permission asked (answered "allow once").
#[derive(Default)]
pub struct Seen {
    updates: Vec<SessionUpdate>,
    asked: Vec<Asked>,
}

/// A permission request: the tool call it names, its title, the options offered.
#[derive(Debug)]
struct Asked {
    call: String,
    title: String,
    kinds: Vec<PermissionOptionKind>,
}

/// The agent, `aerix acp`, in the world's home.
fn agent(world: &World) -> AcpAgent {
    let mut config = AcpAgentConfig::new(env!("CARGO_BIN_EXE_aerix")).arg("acp");
    let command = world.aerix_command(&[]);
    for (name, value) in command.get_envs() {
        if let Some(value) = value {
            config = config.env(name.to_string_lossy(), value.to_string_lossy());
        }
    }
    AcpAgent::new(config)
}

/// Runs `body` on a client connected to a fresh `aerix acp`.
pub async fn connected<T: Send + 'static>(
    world: &World,
    seen: Arc<Mutex<Seen>>,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<T, Error> + Send,
) -> Result<T, Error> {
    let (updates, asked) = (seen.clone(), seen);
    Client
        .v1()
        .name("aerix-test")
        .on_receive_notification(
            async move |n: SessionNotification, _: ConnectionTo<Agent>| {
                updates.lock().unwrap().updates.push(n.update);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |r: RequestPermissionRequest,
                        responder: Responder<RequestPermissionResponse>,
                        _: ConnectionTo<Agent>| {
                let kinds: Vec<PermissionOptionKind> = r.options.iter().map(|o| o.kind).collect();
                let title = r.tool_call.fields.title.clone().unwrap_or_default();
                let call = r.tool_call.tool_call_id.0.to_string();
                asked.lock().unwrap().asked.push(Asked { call, title, kinds });
                let once = r.options.iter().find(|o| o.kind == PermissionOptionKind::AllowOnce);
                let outcome = match once {
                    Some(o) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                        o.option_id.clone(),
                    )),
                    None => RequestPermissionOutcome::Cancelled,
                };
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(agent(world), body)
        .await
}

fn text(update: &SessionUpdate) -> Option<(&'static str, &str)> {
    match update {
        SessionUpdate::AgentMessageChunk(c) => match &c.content {
            ContentBlock::Text(t) => Some(("agent", t.text.as_str())),
            _ => None,
        },
        SessionUpdate::UserMessageChunk(c) => match &c.content {
            ContentBlock::Text(t) => Some(("user", t.text.as_str())),
            _ => None,
        },
        _ => None,
    }
}

fn prompt(id: &SessionId, text: &str) -> PromptRequest {
    PromptRequest::new(id.clone(), vec![ContentBlock::Text(TextContent::new(text))])
}

#[test]
fn acp_runs_a_session_whose_edit_asks_streams_its_diff_cancels_and_loads_again() {
    let replies = vec![
        "answer".to_owned(),
        calls(
            "Fix.",
            vec![call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"}))],
        ),
        final_turn("Done.", "add now adds"),
        "answer".to_owned(),
        calls("Wait.", vec![call("bash", json!({"command": "touch ../long.started; sleep 30"}))]),
    ];
    let world = World::scripted("acp", &replies, true);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let repo = world.repo.clone();
    let started = world.home.join("long.started");
    let (id, first, second) = runtime
        .block_on(connected(&world, seen.clone(), async move |cx: ConnectionTo<Agent>| {
            let init =
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1)).block_task().await?;
            assert!(init.agent_capabilities.load_session);
            assert_eq!(init.agent_info.map(|i| i.name).as_deref(), Some("aerix"));
            let id = cx.send_request(NewSessionRequest::new(repo)).block_task().await?.session_id;
            let first = cx.send_request(prompt(&id, "Fix add.")).block_task().await?.stop_reason;
            // The second prompt's command runs until `session/cancel`.
            let second = cx.send_request(prompt(&id, "Then wait."));
            let deadline = Instant::now() + Duration::from_secs(60);
            while !started.is_file() {
                assert!(Instant::now() < deadline, "the command never started");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            cx.send_notification(CancelNotification::new(id.clone()))?;
            let second = second.block_task().await?.stop_reason;
            Ok((id, first, second))
        }))
        .unwrap();
    assert_eq!((first, second), (StopReason::EndTurn, StopReason::Cancelled));

    let Seen { updates, asked } = std::mem::take(&mut *seen.lock().unwrap());
    // The edit asked (no rule allows it), offering "always" for the project, and ran once
    // allowed; the command asked too.
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].title.starts_with("edit"), "{asked:?}");
    assert!(asked[0].kinds.contains(&PermissionOptionKind::AllowAlways), "{asked:?}");
    assert!(asked[1].title.starts_with("bash"), "{asked:?}");
    assert!(std::fs::read_to_string(world.repo.join("calc.sh")).unwrap().contains("$1 + $2"));
    // The edit as a tool call, then its update: completed, with the diff.
    let edit = updates.iter().find_map(|u| match u {
        SessionUpdate::ToolCall(c) if c.kind == ToolKind::Edit => Some(c.tool_call_id.clone()),
        _ => None,
    });
    let edit = edit.unwrap_or_else(|| panic!("no edit call: {updates:?}"));
    // The question names that call: the client shows it on the call's own card.
    assert_eq!(asked[0].call, &*edit.0, "{asked:?}");
    let done = updates.iter().find_map(|u| match u {
        SessionUpdate::ToolCallUpdate(u) if u.tool_call_id == edit => Some(&u.fields),
        _ => None,
    });
    let done = done.unwrap_or_else(|| panic!("no update of the edit: {updates:?}"));
    assert_eq!(done.status, Some(ToolCallStatus::Completed));
    let diff = done.content.iter().flatten().find_map(|c| match c {
        ToolCallContent::Diff(d) => Some(d),
        _ => None,
    });
    let diff = diff.unwrap_or_else(|| panic!("no diff: {done:?}"));
    assert!(diff.path.ends_with("calc.sh"), "{diff:?}");
    // The whole file, before and after.
    let before = "add() { echo $(($1 - $2)); }\n";
    let after = "add() { echo $(($1 + $2)); }\n";
    assert_eq!((diff.old_text.as_deref(), diff.new_text.as_str()), (Some(before), after));
    // The answer streamed as the agent's message.
    let said: Vec<(&str, &str)> = updates.iter().filter_map(text).collect();
    assert!(said.contains(&("agent", "add now adds")), "{said:?}");
    assert!(!said.iter().any(|(who, _)| *who == "user"), "a live prompt is the client's own");

    // The session log: two requests, each with its end.
    let events = world.events();
    let ends: Vec<&str> =
        of_type(&events, "session.end").iter().map(|e| e["outcome"].as_str().unwrap()).collect();
    assert_eq!(ends, ["done", "cancelled"]);
    assert_eq!(world.log_path().file_stem().unwrap().to_string_lossy(), &*id.0);

    // A second connection loads it: the conversation comes back before the answer.
    let repo = world.repo.clone();
    runtime
        .block_on(connected(&world, seen.clone(), async move |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1)).block_task().await?;
            cx.send_request(LoadSessionRequest::new(id, repo)).block_task().await?;
            Ok(())
        }))
        .unwrap();
    let replayed = std::mem::take(&mut seen.lock().unwrap().updates);
    let said: Vec<(&str, &str)> = replayed.iter().filter_map(text).collect();
    assert_eq!(said.first(), Some(&("user", "Fix add.")), "{said:?}");
    assert!(said.contains(&("agent", "add now adds")), "{said:?}");
    assert!(said.contains(&("user", "Then wait.")), "{said:?}");
}

#[test]
fn acp_starts_the_clients_mcp_servers_and_its_tools_are_called() {
    let paint = json!({"wall": "hall", "color": "green", "coats": 1, "finish": null});
    let replies = vec![
        "answer".to_owned(),
        calls("Echo.", vec![call("mcp__editor__echo", json!({"text": "from the editor"}))]),
        calls("Paint.", vec![call("mcp__paints__paint", paint.clone())]),
        final_turn("Done.", "echoed"),
    ];
    let world = World::scripted("acp-mcp", &replies, true);
    let server = crate::mcp::peer(&world, "editor");
    // And one over streamable HTTP (the Python SDK's).
    let (paints, painted) = crate::mcp::sdk::script(&world);
    let http = crate::mcp::sdk::HttpServer::start(&paints, &painted);
    let url = format!("http://127.0.0.1:{}/mcp", http.port);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let repo = world.repo.clone();
    let repo_path = repo.display().to_string();
    let (script, log, pid) = (server.script.clone(), server.log.clone(), server.pid.clone());
    let stop = runtime
        .block_on(connected(&world, seen.clone(), async move |cx: ConnectionTo<Agent>| {
            let init =
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1)).block_task().await?;
            assert!(init.agent_capabilities.mcp_capabilities.http);
            // The editor's server, as a client declares it in `session/new`.
            let editor = McpServerStdio::new("editor", "python3")
                .args(vec![script.display().to_string()])
                .env(vec![
                    EnvVariable::new("MCP_LOG", log.display().to_string()),
                    EnvVariable::new("MCP_PID", pid.display().to_string()),
                ]);
            let paints = McpServer::Http(McpServerHttp::new("paints", url));
            let servers = vec![McpServer::Stdio(editor), paints];
            let new = NewSessionRequest::new(repo).mcp_servers(servers);
            let id = cx.send_request(new).block_task().await?.session_id;
            // A file the user mentioned comes as a resource link.
            let link = ResourceLink::new("calc.sh", format!("file://{}/calc.sh", repo_path));
            let blocks = vec![
                ContentBlock::Text(TextContent::new("Echo it.")),
                ContentBlock::ResourceLink(link),
            ];
            let stop = cx.send_request(PromptRequest::new(id, blocks)).block_task().await?;
            let stop = stop.stop_reason;
            Ok(stop)
        }))
        .unwrap();
    assert_eq!(stop, StopReason::EndTurn);
    // The server got the call, asked about first (no rule allows an MCP tool).
    let calls = server.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["tool"], "echo");
    assert_eq!(calls[0]["arguments"]["text"], "from the editor");
    let Seen { updates, asked } = std::mem::take(&mut *seen.lock().unwrap());
    assert!(asked.iter().any(|a| a.title.contains("mcp__editor__echo")), "{asked:?}");
    let said: Vec<(&str, &str)> = updates.iter().filter_map(text).collect();
    assert!(said.contains(&("agent", "echoed")), "{said:?}");
    // The prompt holds the mentioned file's path.
    let events = world.events();
    let start = &of_type(&events, "session.start")[0];
    assert_eq!(start["prompt"], format!("Echo it.\n@{}/calc.sh", world.repo.display()));
    // Its result is the tool's, in the log.
    let results = crate::mcp::results(&world, "mcp__editor__echo");
    assert_eq!(results, [("echo: from the editor".to_owned(), false)]);
    // The HTTP server got its call too.
    assert_eq!(crate::mcp::sdk::received(&painted), [paint]);
    // The session ended with the connection, and the server with it.
    let deadline = Instant::now() + Duration::from_secs(15);
    while server.alive() {
        assert!(Instant::now() < deadline, "the editor's server outlived the session");
        std::thread::sleep(Duration::from_millis(50));
    }
}
