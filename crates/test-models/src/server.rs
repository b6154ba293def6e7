//! The batching peer, for benchmarks: llama.cpp's own server, `llama-server`, started on a free
//! port of the loopback interface and asked for `/completion`s of token ids, streamed, so that the
//! first token's time is seen. Blocking: run one request per thread to have several at once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How `llama-server` is started.
#[derive(Clone, Debug)]
pub struct ServerConfig<'a> {
    pub binary: &'a Path,
    pub model: &'a Path,
    pub threads: u32,
    /// Generations decoded together (`-np`): the window is `slots × window` cells, one unified
    /// cache (`-kvu`) shared by the slots, with `--cache-reuse 256`.
    pub slots: u32,
    pub window: u32,
}

/// One `/completion` request.
#[derive(Clone, Debug)]
pub struct Completion<'a> {
    pub prompt: &'a [u32],
    pub n_predict: u32,
    /// A JSON schema the server turns into its grammar (`json_schema`).
    pub json_schema: Option<&'a Value>,
}

/// What the server did for one completion.
#[derive(Clone, Debug)]
pub struct ServerReply {
    pub text: String,
    /// Prompt rows it computed (`timings.prompt_n`), and those it kept (`timings.cache_n`).
    pub recomputed: u64,
    pub cached: u64,
    pub generated: u64,
    /// From `started` (given by the caller) to the first streamed token.
    pub ttft_ms: f64,
    /// From `started` to the last frame.
    pub done_ms: f64,
}

pub struct Server {
    child: Child,
    port: u16,
    /// For a server tied to this process: the pipe whose end (this process's exit, or the
    /// server's drop) makes the wrapper kill it.
    tie: Option<ChildStdin>,
}

/// Runs the server (`$0 "$@"`) and kills it when its standard input ends: a server kept in a
/// `static` (one per test binary) is never dropped, and must still not outlive the tests.
const TIED: &str = r#"exec 3<&0
"$0" "$@" </dev/null 3<&- & pid=$!
(read -r _ <&3; kill $pid 2>/dev/null) &
wait $pid"#;

impl Server {
    /// Starts the server (a cold one: its cache is empty) and waits until `/health` answers.
    pub fn start(config: &ServerConfig<'_>) -> std::io::Result<Server> {
        Server::spawn(config, false)
    }

    /// As [`Server::start`], but the server is killed when this process exits even if the
    /// `Server` is never dropped (one kept in a `static`, shared by a test binary's tests).
    pub fn start_tied(config: &ServerConfig<'_>) -> std::io::Result<Server> {
        Server::spawn(config, true)
    }

    fn spawn(config: &ServerConfig<'_>, tied: bool) -> std::io::Result<Server> {
        // A port the system has just handed out and taken back: free unless another process
        // takes it in the instant before the server binds it.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut command = if tied {
            let mut sh = Command::new("sh");
            sh.args(["-c", TIED]).arg(config.binary).stdin(Stdio::piped());
            sh
        } else {
            Command::new(config.binary)
        };
        let mut child = command
            .arg("-m")
            .arg(config.model)
            .args(["-np", &config.slots.to_string(), "-kvu", "--cache-reuse", "256"])
            .args(["-c", &(config.slots * config.window).to_string()])
            .args(["-t", &config.threads.to_string(), "-tb", &config.threads.to_string()])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let tie = child.stdin.take();
        let mut server = Server { child, port, tie };
        let started = Instant::now();
        loop {
            if let Some(status) = server.child.try_wait()? {
                return Err(std::io::Error::other(format!("llama-server exited: {status}")));
            }
            if let Ok((200, _)) = server.get("/health") {
                return Ok(server);
            }
            if started.elapsed() > Duration::from_secs(120) {
                return Err(std::io::Error::other("llama-server did not answer /health in 120 s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `http://127.0.0.1:PORT`, for an HTTP client of the server's own.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `llama-server --version`'s line naming the build.
    pub fn version(binary: &Path) -> std::io::Result<String> {
        let out = Command::new(binary).arg("--version").output()?;
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        Ok(text.lines().find(|l| l.starts_with("version")).unwrap_or("").trim().to_owned())
    }

    /// One completion, greedy, reusing the server's cached prompt rows (`cache_prompt`).
    pub fn complete(
        &self,
        request: &Completion<'_>,
        started: Instant,
    ) -> std::io::Result<ServerReply> {
        let mut body = json!({
            "prompt": request.prompt,
            "n_predict": request.n_predict,
            "cache_prompt": true,
            "stream": true,
            "temperature": 0.0,
            "top_k": 1,
        });
        if let Some(schema) = request.json_schema {
            body["json_schema"] = schema.clone();
        }
        let mut stream = self.connect()?;
        let body = body.to_string();
        write!(
            stream,
            "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        let mut reader = BufReader::new(stream);
        let (status, chunked) = head(&mut reader)?;
        let mut events = Events { reader, chunked, pending: Vec::new(), done: false };
        if status != 200 {
            let text = events.rest()?;
            return Err(std::io::Error::other(format!("llama-server answered {status}: {text}")));
        }
        let (mut text, mut first, mut last) = (String::new(), None, None);
        while let Some(event) = events.next()? {
            if event["stop"] == true {
                last = Some(event);
                break;
            }
            first.get_or_insert_with(|| started.elapsed());
            text.push_str(event["content"].as_str().unwrap_or_default());
        }
        let done = started.elapsed();
        let last = last.ok_or_else(|| std::io::Error::other("llama-server sent no last frame"))?;
        text.push_str(last["content"].as_str().unwrap_or_default());
        let timings = &last["timings"];
        let count = |v: &Value| v.as_u64().ok_or_else(|| std::io::Error::other(format!("{last}")));
        Ok(ServerReply {
            text,
            recomputed: count(&timings["prompt_n"])?,
            cached: timings["cache_n"].as_u64().unwrap_or(0),
            generated: count(&timings["predicted_n"])?,
            ttft_ms: first.unwrap_or(done).as_secs_f64() * 1e3,
            done_ms: done.as_secs_f64() * 1e3,
        })
    }

    fn connect(&self) -> std::io::Result<TcpStream> {
        let stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(300)))?;
        Ok(stream)
    }

    fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        let mut stream = self.connect()?;
        write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
        let mut reader = BufReader::new(stream);
        let (status, chunked) = head(&mut reader)?;
        let text = Events { reader, chunked, pending: Vec::new(), done: false }.rest()?;
        Ok((status, text))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A tied server's wrapper kills it when the pipe closes (killing the wrapper would not).
        if self.tie.take().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The status and whether the body is chunked; the reader is left at the body.
fn head(reader: &mut BufReader<TcpStream>) -> std::io::Result<(u16, bool)> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("an HTTP status line {line:?}")))?;
    let mut chunked = false;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        if line.trim().is_empty() {
            return Ok((status, chunked));
        }
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
}

/// A response body: its bytes (chunked or not), and the server-sent events in it.
struct Events {
    reader: BufReader<TcpStream>,
    chunked: bool,
    pending: Vec<u8>,
    done: bool,
}

impl Events {
    /// More of the body into `pending`; false at its end.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.done {
            return Ok(false);
        }
        if !self.chunked {
            let mut buf = [0u8; 4096];
            let n = self.reader.read(&mut buf)?;
            self.pending.extend_from_slice(&buf[..n]);
            self.done = n == 0;
            return Ok(n > 0);
        }
        let mut size = String::new();
        self.reader.read_line(&mut size)?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
            .map_err(|_| std::io::Error::other(format!("a chunk size {size:?}")))?;
        let mut chunk = vec![0u8; size + 2];
        self.reader.read_exact(&mut chunk)?;
        chunk.truncate(size);
        self.pending.extend_from_slice(&chunk);
        self.done = size == 0;
        Ok(size > 0)
    }

    /// The next `data:` event's JSON.
    fn next(&mut self) -> std::io::Result<Option<Value>> {
        loop {
            if let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.pending.drain(..end + 2).collect();
                let event = String::from_utf8_lossy(&event);
                let Some(data) = event.trim().strip_prefix("data:") else { continue };
                return serde_json::from_str(data.trim())
                    .map(Some)
                    .map_err(|e| std::io::Error::other(format!("an event {data:?}: {e}")));
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    fn rest(mut self) -> std::io::Result<String> {
        while self.fill()? {}
        Ok(String::from_utf8_lossy(&self.pending).into_owned())
    }
}
