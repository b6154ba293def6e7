//! The endpoint's rules against a scripted HTTP/1.1 server on loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::profile::llm::classify;

const KEY: &str = "sk-unit-test-9d2f41c7";
const MIB: usize = 1 << 20;

/// What the fake answers a request with.
enum Reply {
    /// A status line (and any headers, without the blank line), then this body.
    Whole(String, Vec<u8>),
    /// A status line, then `total` bytes of spaces (endless with `None`) until the client hangs
    /// up; the bytes written go to the fake's `written` channel.
    Stream(String, Option<usize>),
}

struct Fake {
    url: String,
    /// The head of every request, in order.
    seen: Arc<Mutex<Vec<String>>>,
    written: mpsc::Receiver<usize>,
}

/// Serves every connection with `reply(the request's head)`, one request per connection.
fn serve(reply: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (tx, written) = mpsc::channel();
    let (record, reply) = (seen.clone(), Arc::new(reply));
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(socket) = socket else { return };
            let (reply, record, tx) = (reply.clone(), record.clone(), tx.clone());
            std::thread::spawn(move || connection(socket, &*reply, &record, &tx));
        }
    });
    Fake { url, seen, written }
}

fn connection(
    mut socket: TcpStream,
    reply: &(dyn Fn(&str) -> Reply + Send + Sync),
    record: &Mutex<Vec<String>>,
    written: &mpsc::Sender<usize>,
) {
    let mut reader = BufReader::new(socket.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    record.lock().unwrap().push(head.clone());
    match reply(&head) {
        Reply::Whole(status, body) => {
            let head =
                format!("{status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = socket.write_all(head.as_bytes()).and_then(|()| socket.write_all(&body));
        }
        Reply::Stream(status, total) => {
            let length =
                total.map_or("Connection: close".to_owned(), |n| format!("Content-Length: {n}"));
            if socket.write_all(format!("{status}\r\n{length}\r\n\r\n").as_bytes()).is_err() {
                return;
            }
            let chunk = vec![b' '; 64 << 10];
            let mut sent = 0;
            while total.is_none_or(|t| sent < t) {
                let n = total.map_or(chunk.len(), |t| (t - sent).min(chunk.len()));
                if socket.write_all(&chunk[..n]).is_err() {
                    break;
                }
                sent += n;
            }
            let _ = written.send(sent);
        }
    }
}

fn provider(url: &str) -> OpenAiProvider {
    OpenAiProvider::new(url, "m", KEY, Duration::from_secs(20)).unwrap()
}

fn call(provider: &OpenAiProvider) -> Result<Value, LlmError> {
    provider.structured("system", "user", &json!({"type": "object"}), 10)
}

fn ok(content: &str) -> Reply {
    let reply = json!({"choices": [{"finish_reason": "stop", "message": {"content": content}}]});
    Reply::Whole(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json".into(),
        reply.to_string().into(),
    )
}

#[test]
fn a_good_reply_is_parsed_and_the_key_sent_as_a_bearer_token() {
    let fake = serve(|_| ok(r#"{"fine": true}"#));
    assert_eq!(call(&provider(&format!("{}/v1/", fake.url))).unwrap(), json!({"fine": true}));
    let seen = fake.seen.lock().unwrap();
    assert!(seen[0].starts_with("POST /v1/chat/completions "), "{}", seen[0]);
    assert!(seen[0].contains(&format!("Authorization: Bearer {KEY}\r\n")), "{}", seen[0]);
}

#[test]
fn a_redirect_is_an_error_and_its_target_gets_no_request() {
    let target = serve(|_| ok(r#"{"fine": true}"#));
    let location = format!("{}/chat/completions", target.url);
    let fake = serve(move |_| {
        Reply::Whole(format!("HTTP/1.1 302 Found\r\nLocation: {location}"), Vec::new())
    });
    let e = call(&provider(&fake.url)).unwrap_err();
    assert!(matches!(e, LlmError::Redirect { status: 302, .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("302") && text.contains("redirects are not followed"), "{text}");
    assert!(text.contains(&target.url), "names where it points: {text}");
    assert_eq!(fake.seen.lock().unwrap().len(), 1);
    assert!(target.seen.lock().unwrap().is_empty(), "the redirect was followed");
}

#[test]
fn a_fifty_mebibyte_reply_is_refused_at_the_cap_without_being_read() {
    let fake = serve(|_| Reply::Stream("HTTP/1.1 200 OK".into(), Some(50 * MIB)));
    let started = Instant::now();
    let e = call(&provider(&fake.url)).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(matches!(e, LlmError::TooLarge { cap: REPLY_BYTES, .. }), "{e:?}");
    assert!(e.to_string().contains(&format!("cap of {REPLY_BYTES} bytes")), "{e}");
    // The client hung up: the server got out only what the sockets' buffers hold.
    let sent = fake.written.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(sent < 25 * MIB, "{sent} bytes were taken");
}

#[test]
fn an_endless_reply_is_refused_at_the_cap() {
    let fake = serve(|_| Reply::Stream("HTTP/1.1 200 OK".into(), None));
    let started = Instant::now();
    let e = call(&provider(&fake.url)).unwrap_err();
    assert!(matches!(e, LlmError::TooLarge { cap: REPLY_BYTES, .. }), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let sent = fake.written.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(sent < 25 * MIB, "{sent} bytes were taken");
}

#[test]
fn a_500_with_a_mebibyte_body_gives_a_short_one_line_error() {
    let mut body = "first line\nsecond \u{1b}[31mred\r\n".to_owned();
    body.push_str(&"x".repeat(MIB));
    let fake = serve(move |_| {
        Reply::Whole("HTTP/1.1 500 Internal Server Error".into(), body.clone().into())
    });
    let e = call(&provider(&fake.url)).unwrap_err();
    assert!(matches!(e, LlmError::Status { status: 500, .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.chars().count() <= fake.url.len() + 40 + MESSAGE_CHARS, "{} chars", text.len());
    assert!(!text.contains(['\n', '\r', '\u{1b}']), "{text:?}");
    assert!(text.contains(r"first line\nsecond \u{1b}[31mred"), "escaped, not dropped: {text}");
    assert!(text.ends_with("xxx..."), "{text}");
}

#[test]
fn an_endless_error_body_is_read_only_to_its_bound() {
    let fake = serve(|_| Reply::Stream("HTTP/1.1 500 Internal Server Error".into(), None));
    let started = Instant::now();
    let e = call(&provider(&fake.url)).unwrap_err();
    assert!(matches!(e, LlmError::Status { status: 500, .. }), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let sent = fake.written.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(sent < 25 * MIB, "{sent} bytes were taken");
}

#[test]
fn debug_of_the_provider_hides_the_key() {
    let provider = provider("http://127.0.0.1:9/v1");
    let shown = format!("{provider:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("<redacted>") && shown.contains("127.0.0.1:9"), "{shown}");
    let boxed: Box<dyn Provider> = Box::new(provider);
    assert!(!format!("{boxed:?} {boxed:#?}").contains(KEY));
    assert!(!format!("{:?}", ApiKey::new(KEY)).contains(KEY));
}

/// An endpoint that quotes the request's `Authorization` header back, in every place a reply
/// reaches an error: the key is in none of them.
#[test]
fn an_endpoint_echoing_the_authorization_header_gets_no_key_into_an_error() {
    fn echo(head: &str) -> String {
        let line = head.lines().find(|l| l.starts_with("Authorization:")).unwrap_or("none");
        format!("you sent {line}")
    }
    type Script = fn(&str) -> Reply;
    let cases: [(&str, Script, &str); 6] = [
        (
            "a 500's JSON message",
            |h| {
                let body = json!({"error": {"message": echo(h)}}).to_string();
                Reply::Whole("HTTP/1.1 500 Internal Server Error".into(), body.into())
            },
            "you sent Authorization: Bearer <redacted>",
        ),
        (
            "a 400's text",
            |h| Reply::Whole("HTTP/1.1 400 Bad Request".into(), echo(h).into()),
            "<redacted>",
        ),
        (
            "a 401 (its body is not read)",
            |h| Reply::Whole("HTTP/1.1 401 Unauthorized".into(), echo(h).into()),
            "check [llm] api_key",
        ),
        (
            "a redirect's Location",
            |h| {
                let token = echo(h).rsplit(' ').next().unwrap_or_default().to_owned();
                Reply::Whole(
                    format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: /{token}"),
                    vec![],
                )
            },
            "/<redacted>",
        ),
        (
            "a 200 without content",
            |h| {
                let body = json!({"echo": echo(h)}).to_string();
                Reply::Whole("HTTP/1.1 200 OK".into(), body.into())
            },
            "no message content in",
        ),
        (
            "a 200 whose answer the schema refuses",
            |h| ok(&json!({"items": echo(h)}).to_string()),
            "does not fit the schema",
        ),
    ];
    for (what, script, expected) in cases {
        let fake = serve(script);
        let e = classify(&provider(&fake.url), &["Always use pnpm.".into()], &[]).unwrap_err();
        let text = e.to_string();
        assert!(fake.seen.lock().unwrap()[0].contains(KEY), "{what}: the key was sent");
        assert!(!text.contains(KEY), "{what}: {text}");
        assert!(!format!("{e:?}").contains(KEY), "{what}: {e:?}");
        assert!(text.contains(expected), "{what}: {text}");
        if what != "a 401 (its body is not read)" {
            assert!(text.contains("<redacted>"), "{what}: the echo reached the error: {text}");
        }
    }
}

#[test]
fn endpoint_urls_with_credentials_a_query_or_no_scheme_are_refused() {
    let timeout = Duration::from_secs(1);
    let e = OpenAiProvider::new("http://me:hunter2@h/v1", "m", "", timeout).unwrap_err();
    let text = e.to_string();
    assert!(!text.contains("hunter2") && text.contains("[llm] api_key"), "{text}");
    for (bad, why) in [
        ("127.0.0.1:8080/v1", "http:// or https://"),
        ("ftp://h", "http:// or https://"),
        ("http:///v1", "no host"),
        ("http://h/v1?key=1", "query"),
    ] {
        let e = OpenAiProvider::new(bad, "m", "", timeout).unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
    assert!(OpenAiProvider::new("https://api.example/v1/", "m", KEY, timeout).is_ok());
}

#[test]
fn an_excerpt_is_one_bounded_line() {
    assert_eq!(excerpt("  a\tb\n"), r"a\tb");
    let long = excerpt(&"\u{7}".repeat(1000));
    assert!(long.chars().count() <= MESSAGE_CHARS + 3 && long.ends_with("..."), "{long}");
    assert_eq!(message_of(r#"{"error":{"message":"bad\nschema"}}"#), r"bad\nschema");
    assert_eq!(message_of(r#"{"detail":"Not Found"}"#), "Not Found");
}
