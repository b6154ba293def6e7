//! A scripted HTTP/1.1 server on loopback: each request gets the actions its handler returns,
//! and is recorded for the test to look at.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use caldrix_remote::{Endpoint, Options, Remote};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub head: String,
    pub body: String,
}

pub enum Act {
    Write(String),
    Sleep(Duration),
    /// Reads until the client closes, then reports it on the server's `closed` channel.
    AwaitClose,
}

pub struct Fake {
    pub base_url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub closed: mpsc::UnboundedReceiver<()>,
}

type Handler = dyn Fn(&Seen, usize) -> Vec<Act> + Send + Sync;

/// Serves every connection with `handler(request, its index)`, one request per connection.
pub async fn serve(handler: impl Fn(&Seen, usize) -> Vec<Act> + Send + Sync + 'static) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (closed_tx, closed) = mpsc::unbounded_channel();
    let handler: Arc<Handler> = Arc::new(handler);
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { return };
            let (handler, record, closed_tx) = (handler.clone(), record.clone(), closed_tx.clone());
            tokio::spawn(async move {
                let _ = connection(socket, &*handler, &record, &closed_tx).await;
            });
        }
    });
    Fake { base_url, seen, closed }
}

async fn connection(
    mut socket: TcpStream,
    handler: &Handler,
    record: &Mutex<Vec<Seen>>,
    closed: &mpsc::UnboundedSender<()>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    let head_end = loop {
        let n = socket.read(&mut byte).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&byte[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = socket.read(&mut byte).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&byte[..n]);
    }
    let mut words = head.split_whitespace().skip(1);
    let seen = Seen {
        path: words.next().unwrap_or("").to_owned(),
        body: String::from_utf8_lossy(&buf[head_end..]).into_owned(),
        head,
    };
    let index = {
        let mut record = record.lock().unwrap();
        record.push(seen.clone());
        record.len() - 1
    };
    for act in handler(&seen, index) {
        match act {
            Act::Write(text) => socket.write_all(text.as_bytes()).await?,
            Act::Sleep(d) => tokio::time::sleep(d).await,
            Act::AwaitClose => {
                while socket.read(&mut byte).await? > 0 {}
                let _ = closed.send(());
            }
        }
    }
    Ok(())
}

/// A whole reply with a body.
pub fn reply(status: &str, extra: &str, body: &str) -> Act {
    Act::Write(format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n{extra}\r\n{body}",
        body.len()
    ))
}

/// The head of an event stream whose body ends when the connection closes.
pub fn stream_head() -> Act {
    Act::Write(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n".into(),
    )
}

/// One completion event carrying `text`.
pub fn text_event(text: &str) -> Act {
    let event = serde_json::json!({"choices": [{"index": 0, "text": text, "finish_reason": null}]});
    Act::Write(format!("data: {event}\n\n"))
}

/// The last events of a stream: the finish with usage, then `[DONE]`.
pub fn finish_events(prompt: u64, completion: u64, cached: u64) -> Act {
    let event = serde_json::json!({
        "choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    });
    Act::Write(format!("data: {event}\n\ndata: [DONE]\n\n"))
}

pub fn options() -> Options {
    Options {
        waiting_interval: Duration::from_millis(100),
        retry_deadline: Duration::from_secs(5),
        ..Options::default()
    }
}

pub fn remote(fake: &Fake, options: Options) -> Remote {
    let endpoint =
        Endpoint { base_url: fake.base_url.clone(), model: "m".into(), api_key_env: None };
    Remote::new(&endpoint, options).unwrap()
}
