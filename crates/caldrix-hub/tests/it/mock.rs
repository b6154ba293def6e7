//! A minimal hub on loopback: `GET /api/models/{repo}/revision/main` lists the files,
//! `GET /{repo}/resolve/main/{file}` serves them with the headers hf-hub reads (`etag` holding
//! the SHA-256 like the hub's LFS files, `x-repo-commit`, `Content-Range` for ranged requests).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

pub struct MockHub {
    pub endpoint: String,
    pub requests: Arc<AtomicUsize>,
    /// When set, file downloads serve flipped bytes (the listing and headers stay right).
    pub corrupt: Arc<AtomicBool>,
}

/// A file of a mock repository: its path and contents.
pub type RepoFile = (&'static str, Vec<u8>);

#[derive(Default)]
struct Repos(BTreeMap<String, BTreeMap<String, Vec<u8>>>);

impl MockHub {
    /// Serves `repos`: repository id → (file path → contents).
    pub fn start(repos: &[(&str, &[RepoFile])]) -> MockHub {
        let mut store = Repos::default();
        for (repo, files) in repos {
            let files = files.iter().map(|(name, data)| ((*name).to_owned(), data.clone()));
            store.0.insert((*repo).to_owned(), files.collect());
        }
        let store = Arc::new(Mutex::new(store));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let corrupt = Arc::new(AtomicBool::new(false));
        let (count, flip) = (requests.clone(), corrupt.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let (store, flip) = (store.clone(), flip.clone());
                std::thread::spawn(move || serve(stream, &store, &flip));
            }
        });
        MockHub { endpoint, requests, corrupt }
    }
}

fn sha256(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

fn serve(stream: TcpStream, store: &Mutex<Repos>, corrupt: &AtomicBool) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("range")
        {
            range = Some(value.trim().to_owned());
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let store = store.lock().unwrap();
    let mut out = stream;
    let reply = |out: &mut TcpStream, status: &str, headers: &[(String, String)], body: &[u8]| {
        let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        let _ = out.write_all(head.as_bytes());
        let _ = out.write_all(body);
    };
    if let Some(rest) = path.strip_prefix("/api/models/") {
        let repo = rest.strip_suffix("/revision/main").unwrap_or(rest);
        return match store.0.get(repo) {
            Some(files) => {
                let siblings: Vec<_> =
                    files.keys().map(|f| serde_json::json!({ "rfilename": f })).collect();
                let body = serde_json::json!({ "sha": COMMIT, "siblings": siblings }).to_string();
                reply(&mut out, "200 OK", &[], body.as_bytes());
            }
            None => reply(&mut out, "404 Not Found", &[], b"Repository not found"),
        };
    }
    let found = store.0.iter().find_map(|(repo, files)| {
        let file = path.strip_prefix(&format!("/{repo}/resolve/main/"))?;
        files.get(file)
    });
    let Some(data) = found else {
        return reply(&mut out, "404 Not Found", &[], b"Entry not found");
    };
    let size = data.len();
    let (start, end) = match range.as_deref().and_then(|r| r.strip_prefix("bytes=")) {
        Some(spec) => {
            let (a, b) = spec.split_once('-').unwrap();
            let a: usize = a.parse().unwrap();
            let b: usize = if b.is_empty() { size - 1 } else { b.parse().unwrap() };
            (a, b.min(size - 1))
        }
        None => (0, size - 1),
    };
    let mut body = data[start..=end].to_vec();
    if corrupt.load(Ordering::SeqCst) && body.len() > 1 {
        body.iter_mut().for_each(|b| *b ^= 0xff);
    }
    let headers = vec![
        ("ETag".to_owned(), format!("\"{}\"", sha256(data))),
        ("X-Repo-Commit".to_owned(), COMMIT.to_owned()),
        ("Content-Range".to_owned(), format!("bytes {start}-{end}/{size}")),
    ];
    reply(&mut out, "206 Partial Content", &headers, &body);
}
