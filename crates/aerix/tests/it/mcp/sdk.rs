//! Servers written with the official Python MCP SDK (FastMCP; `sdk_server.py`), from the
//! virtual environment `scripts/setup --tests` makes: over stdio and over streamable HTTP, a
//! scripted member calling a tool whose SDK-made input schema constrains its arguments.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{request, results};
use crate::{World, call, of_type, stderr, stdout};

const SERVER: &str = include_str!("sdk_server.py");

/// The SDK's Python, checked to import FastMCP: without it the test fails, naming the fix.
fn python() -> PathBuf {
    let python = test_models::mcp_sdk_python();
    let ok = Command::new(&python)
        .args(["-c", "import mcp.server.fastmcp"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} cannot import the MCP SDK: run scripts/setup --tests (it installs it)",
        python.display()
    );
    python
}

/// The server script and its call log in the world's home.
pub fn script(world: &World) -> (PathBuf, PathBuf) {
    let dir = world.home.join("mcp");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("sdk_server.py");
    std::fs::write(&script, SERVER).unwrap();
    (script, dir.join("paints.log"))
}

/// The calls the server received, as it logged their arguments.
pub fn received(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn an_sdk_stdio_servers_constrained_tool_is_called() {
    // In the schema's order of properties, which the constraint keeps.
    let args = json!({"wall": "hall", "color": "green", "coats": 2, "finish": "gloss"});
    let mut replies = request(vec![call("mcp__paints__paint", args.clone())], "painted");
    // The second request's: a color outside the SDK's `Literal`.
    let wrong = json!({"wall": "hall", "color": "purple"});
    replies.extend(request(vec![call("mcp__paints__paint", wrong)], "painted"));
    let world = World::scripted("mcp-sdk-stdio", &replies, true);
    let (script, log) = script(&world);
    let model = world.script("replies", &replies, true);
    let server = format!(
        "[mcp.servers.paints]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\nenv = {{ MCP_LOG = {:?} }}\n",
        python().display().to_string(),
        script.display().to_string(),
        log.display().to_string(),
    );
    world.write_settings(&model, &server);

    let out = world.aerix(&["-p", "Paint the hall."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "painted");
    let events = world.events();
    let tools = of_type(&events, "agent.spawn")[0]["tools"].clone();
    assert!(tools.as_array().unwrap().contains(&json!("mcp__paints__paint")), "{tools}");
    assert_eq!(
        results(&world, "mcp__paints__paint"),
        [("painted the hall green, 2 coat(s), gloss finish".to_owned(), false)]
    );
    assert_eq!(received(&log), [args]);

    // Purple is no turn the schema allows (the pool serves the scripted replies in order
    // across runs), so the server never sees it.
    let out = world.aerix(&["-p", "Paint it purple."]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("does not satisfy"), "{}", stderr(&out));
    assert_eq!(received(&log).len(), 1, "the server saw no second call");
}

/// The SDK's server on a loopback port; killed when dropped, even by a failed assertion.
pub struct HttpServer {
    child: Child,
    pub port: u16,
}

impl HttpServer {
    pub fn start(script: &Path, log: &Path) -> HttpServer {
        // A port the system had free a moment ago.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(python())
            .args([script.display().to_string(), "http".to_owned(), port.to_string()])
            .env("MCP_LOG", log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut server = HttpServer { child, port };
        server.wait_until_it_answers();
        server
    }

    /// Until an HTTP request to `/mcp` gets a status line (uvicorn listens once its app started).
    fn wait_until_it_answers(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("the SDK's HTTP server exited ({status}) before answering: {err}");
            }
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let get = format!("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n", self.port);
                let mut reply = [0u8; 12];
                if stream.write_all(get.as_bytes()).is_ok()
                    && stream.read_exact(&mut reply).is_ok()
                    && reply.starts_with(b"HTTP/1.1 ")
                {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "the SDK's HTTP server did not answer in 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_sdk_streamable_http_servers_constrained_tool_is_called() {
    let args = json!({"wall": "porch", "color": "red", "coats": 3, "finish": null});
    let replies = request(vec![call("mcp__paints__paint", args.clone())], "painted");
    let world = World::scripted("mcp-sdk-http", &replies, true);
    let (script, log) = script(&world);
    let server = HttpServer::start(&script, &log);
    let model = world.script("replies", &replies, true);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    world.write_settings(&model, &format!("[mcp.servers.paints]\nurl = {url:?}\n"));

    let list = world.aerix(&["mcp", "list"]);
    let text = stdout(&list);
    assert!(text.contains("paints (http") && text.contains("ready"), "{text}");
    assert!(text.contains("mcp__paints__paint"), "{text}");

    let out = world.aerix(&["-p", "Paint the porch."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "painted");
    assert_eq!(
        results(&world, "mcp__paints__paint"),
        [("painted the porch red, 3 coat(s), no finish".to_owned(), false)]
    );
    assert_eq!(received(&log), [args]);
}
