//! The async client of caldrix protocol v2, used by aerix, ai-memory and the tests, and the
//! socket's trust rules both ends share (`trust`).

pub mod trust;

use std::path::Path;
use std::time::Duration;

use caldrix_proto::{
    self as proto, ContextId, Done, Edit, ErrorKind, FrameError, FrameFormat, Generate, MemberInfo,
    PROTOCOL_VERSION, PoolStatus, Reply, Request, Segment, SegmentCount,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Control requests and the handshake are answered within this (the protocol's bound).
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait between two frames of a generation (`progress` frames count).
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the pool at {path}: {error}")]
    Connect { path: String, error: std::io::Error },
    /// The socket's directory or the process serving on it is not this user's.
    #[error(transparent)]
    Untrusted(#[from] trust::TrustError),
    #[error("the pool connection failed: {0}")]
    Io(std::io::Error),
    #[error("the pool sent a frame this client cannot read: {0}")]
    Frame(FrameError),
    /// The pool answered with an error frame.
    #[error("the pool refused: {message}")]
    Pool { kind: ErrorKind, message: String },
    #[error("the pool closed the connection")]
    Closed,
    #[error("no frame from the pool within {0:?}")]
    Timeout(Duration),
    #[error("unexpected reply from the pool: {0}")]
    Unexpected(String),
}

// By hand, not `#[from]`: the message holds the cause, so it is not a `source` too (a printed
// chain would say it twice; ARCHITECTURE.md, errors).
impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}

impl From<FrameError> for ClientError {
    fn from(e: FrameError) -> Self {
        ClientError::Frame(e)
    }
}

impl ClientError {
    /// The pool's error kind, when the pool refused.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ClientError::Pool { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// A context's token counts, as the pool reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct Counts {
    pub context: ContextId,
    pub segments: Vec<SegmentCount>,
    pub total_tokens: u32,
}

#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    frames: FrameFormat,
    buf: Vec<u8>,
}

impl Client {
    /// Checks the socket's directory, connects, checks that the pool runs as this user, and
    /// shakes hands; nothing is sent to a pool that fails a check.
    pub async fn connect(
        path: &Path,
        frames: FrameFormat,
        name: &str,
    ) -> Result<Client, ClientError> {
        trust::check_socket_dir(path)?;
        let stream = UnixStream::connect(path)
            .await
            .map_err(|error| ClientError::Connect { path: path.display().to_string(), error })?;
        trust::check_peer(path, stream.peer_cred().map(|c| c.uid()))?;
        let mut client = Client { stream, frames, buf: Vec::new() };
        let hello = Request::Hello { version: PROTOCOL_VERSION, client: name.to_owned() };
        // A pool refusing the connection (too many open) writes its error and closes without
        // reading: the hello may fail to send, and the error is still there to read.
        let sent = client.send(&hello).await;
        match (sent, client.recv(CONTROL_TIMEOUT).await) {
            (_, Err(refused @ ClientError::Pool { .. })) => Err(refused),
            (Err(e), _) => Err(e),
            (Ok(()), Ok(Reply::Hello { .. })) => Ok(client),
            (Ok(()), Ok(other)) => Err(ClientError::Unexpected(format!("{other:?}"))),
            (Ok(()), Err(e)) => Err(e),
        }
    }

    /// Sends one request.
    pub async fn send(&mut self, request: &Request) -> Result<(), ClientError> {
        let bytes = proto::encode(request, self.frames)?;
        self.stream.write_all(&bytes).await?;
        Ok(())
    }

    /// Sends raw bytes (tests of the daemon's handling of bad frames).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// The next reply; an `error` frame becomes `ClientError::Pool`.
    pub async fn recv(&mut self, timeout: Duration) -> Result<Reply, ClientError> {
        let reply = tokio::time::timeout(timeout, self.next())
            .await
            .map_err(|_| ClientError::Timeout(timeout))??;
        match reply {
            Reply::Error { kind, message } => Err(ClientError::Pool { kind, message }),
            other => Ok(other),
        }
    }

    async fn next(&mut self) -> Result<Reply, ClientError> {
        loop {
            if let Some((payload, used)) = proto::split_frame(&self.buf)? {
                let reply = proto::decode(payload, self.frames)?;
                self.buf.drain(..used);
                return Ok(reply);
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(ClientError::Closed);
            }
        }
    }

    /// A control request and its one reply.
    pub async fn request(&mut self, request: &Request) -> Result<Reply, ClientError> {
        self.send(request).await?;
        self.recv(CONTROL_TIMEOUT).await
    }

    async fn counts(&mut self, request: &Request) -> Result<Counts, ClientError> {
        match self.request(request).await? {
            Reply::Context { context, segments, total_tokens } => {
                Ok(Counts { context, segments, total_tokens })
            }
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    async fn ok(&mut self, request: &Request) -> Result<(), ClientError> {
        match self.request(request).await? {
            Reply::Ok => Ok(()),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    pub async fn members(&mut self) -> Result<Vec<MemberInfo>, ClientError> {
        match self.request(&Request::MemberList {}).await? {
            Reply::Members { members } => Ok(members),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    pub async fn load_member(
        &mut self,
        alias: &str,
        model: &str,
        flags: proto::ServingFlags,
    ) -> Result<(), ClientError> {
        self.ok(&Request::MemberLoad { alias: alias.into(), model: model.into(), flags }).await
    }

    /// `load_member` with a bound of its own: a load may download the model first.
    pub async fn load_member_within(
        &mut self,
        alias: &str,
        model: &str,
        flags: proto::ServingFlags,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let request = Request::MemberLoad { alias: alias.into(), model: model.into(), flags };
        self.send(&request).await?;
        match self.recv(timeout).await? {
            Reply::Ok => Ok(()),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    pub async fn create_context(
        &mut self,
        member: &str,
        segments: Vec<Segment>,
    ) -> Result<Counts, ClientError> {
        self.counts(&Request::ContextCreate { member: member.into(), segments, tools: Vec::new() })
            .await
    }

    pub async fn edit_context(
        &mut self,
        context: ContextId,
        edits: Vec<Edit>,
    ) -> Result<Counts, ClientError> {
        self.counts(&Request::ContextEdit { context, edits }).await
    }

    pub async fn fork_context(&mut self, context: ContextId) -> Result<Counts, ClientError> {
        self.counts(&Request::ContextFork { context }).await
    }

    pub async fn context_counts(&mut self, context: ContextId) -> Result<Counts, ClientError> {
        self.counts(&Request::ContextCounts { context }).await
    }

    pub async fn drop_context(&mut self, context: ContextId) -> Result<(), ClientError> {
        self.ok(&Request::ContextDrop { context }).await
    }

    pub async fn status(&mut self) -> Result<PoolStatus, ClientError> {
        match self.request(&Request::Status {}).await? {
            Reply::Status(status) => Ok(status),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    pub async fn stop(&mut self) -> Result<(), ClientError> {
        self.ok(&Request::Stop {}).await
    }

    /// Runs a generation to its end; `on_frame` sees every `progress` and `delta` frame.
    pub async fn generate(
        &mut self,
        generate: Generate,
        mut on_frame: impl FnMut(&Reply),
    ) -> Result<Done, ClientError> {
        self.send(&Request::Generate(generate)).await?;
        loop {
            match self.recv(FRAME_TIMEOUT).await? {
                Reply::Done(done) => return Ok(done),
                frame @ (Reply::Progress { .. } | Reply::Delta { .. }) => on_frame(&frame),
                other => return Err(ClientError::Unexpected(format!("{other:?}"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cause is in the message and is not a `source` as well (`From` is by hand): the
    /// binaries' `{:#}` prints it once, as `{}` does.
    #[test]
    fn an_error_s_cause_is_printed_once() {
        let cause = "connection reset by peer";
        let errors = [
            ClientError::from(std::io::Error::other(cause)),
            ClientError::Connect {
                path: "/run/pool.sock".into(),
                error: std::io::Error::other(cause),
            },
            ClientError::from(trust::TrustError::PeerUnknown {
                path: "/run/pool.sock".into(),
                error: std::io::Error::other(cause),
            }),
        ];
        for e in errors {
            let plain = e.to_string();
            let chain = format!("{:#}", anyhow::Error::new(e));
            assert_eq!(plain.matches(cause).count(), 1, "{plain}");
            assert_eq!(chain.matches(cause).count(), 1, "{chain}");
        }
    }
}
