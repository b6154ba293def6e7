use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tempfile::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_ai-memory");

/// A fresh directory under the system's temp directory, removed with its contents when dropped
/// (also when the test fails). Derefs to its path.
pub struct Scratch {
    path: PathBuf,
    _dir: TempDir,
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.path.as_os_str()
    }
}

pub fn temp(name: &str) -> Scratch {
    let dir = tempfile::Builder::new().prefix(&format!("aim-it-{name}-")).tempdir().unwrap();
    Scratch { path: dir.path().to_owned(), _dir: dir }
}

/// A directory that looks like a repository checkout named `name` (the project's name).
pub fn repo(name: &str) -> Scratch {
    let dir = tempfile::Builder::new().prefix("aim-it-repos-").tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::create_dir_all(path.join(".git")).unwrap();
    Scratch { path, _dir: dir }
}

/// `ai-memory` with a clean environment: its own HOME and XDG directories under `home`.
pub fn command(data: &Path, home: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--data-dir").arg(data);
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("AI_MEMORY_LOG", "warn");
    c
}

pub fn run(mut c: Command, stdin: Option<&str>) -> Output {
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A running `ai-memory serve` on a free loopback port.
pub struct Server {
    child: Child,
    pub addr: String,
    pub data: PathBuf,
    // The directories are removed after `Drop` has stopped the child.
    pub home: Scratch,
    data_dir: Option<Scratch>,
}

impl Server {
    pub fn start(name: &str, env: &[(&str, &str)]) -> Server {
        let data = temp(&format!("{name}-data"));
        let mut server = Server::start_in(&data, env);
        server.data_dir = Some(data);
        server
    }

    /// Kills the server with SIGKILL, as a crash would, and waits for it to be gone.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Stops the server and hands its data directory over (to start another on it).
    pub fn stop(mut self) -> Scratch {
        self.data_dir.take().expect("a server started by `start` owns its data directory")
    }

    /// A server on a data directory the caller keeps.
    pub fn start_in(data: &Path, env: &[(&str, &str)]) -> Server {
        let home = temp("home");
        let mut c = command(data, &home);
        c.args(["serve", "--bind", "127.0.0.1:0"]);
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("ai-memory listening on ")
            .unwrap_or_else(|| panic!("{line}"))
            .to_owned();
        Server { child, addr, data: data.to_owned(), home, data_dir: None }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A CLI command on this server's data directory, pointed at this server.
    pub fn cli(&self) -> Command {
        let mut c = command(&self.data, &self.home);
        c.env("AI_MEMORY_SERVER__BIND", &self.addr);
        c
    }

    pub async fn client(
        &self,
        token: Option<&str>,
    ) -> Result<RunningService<RoleClient, ()>, String> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url("/mcp"));
        if let Some(t) = token {
            config = config.auth_header(t);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        ().serve(transport).await.map_err(|e| e.to_string())
    }

    /// The branch's commit in the wiki (to check that a refused call committed nothing).
    pub fn head(&self) -> String {
        let o = Command::new("git")
            .arg("--git-dir")
            .arg(self.data.join("wiki.git"))
            .args(["rev-parse", "--verify", "-q", "main"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_owned()
    }

    /// Files on the wiki's branch.
    pub fn files(&self) -> Vec<String> {
        git(&self.data, &["ls-tree", "-r", "--name-only", "main"])
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `git` on a data directory's wiki; its stdout (empty when it fails).
pub fn git(data: &Path, args: &[&str]) -> String {
    let o = Command::new("git").arg("--git-dir").arg(data.join("wiki.git")).args(args).output();
    String::from_utf8_lossy(&o.unwrap().stdout).into_owned()
}

/// Calls a tool; returns whether it is an error, and its text.
pub async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> (bool, String) {
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
    let result = client.call_tool(params).await.unwrap();
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect::<Vec<_>>()
        .join("\n");
    (result.is_error == Some(true), text)
}

/// Calls a tool that must succeed; returns its JSON.
pub async fn ok(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Value {
    let (err, text) = call(client, tool, args.clone()).await;
    assert!(!err, "{tool} {args}: {text}");
    serde_json::from_str(&text).unwrap()
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// POSTs to the hook endpoint; the status and JSON body.
pub fn post_hook(server: &Server, event: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req =
        ureq::post(&server.url(&format!("/hooks/{event}"))).set("Content-Type", "application/json");
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let resp = match req.send_string(&body.to_string()) {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{e}"),
    };
    let status = resp.status();
    (status, serde_json::from_str(&resp.into_string().unwrap()).unwrap_or(Value::Null))
}
