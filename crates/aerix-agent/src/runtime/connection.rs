//! The model connection: what the runtime asks of the pool (contexts, their counts, a
//! generation the cancel flag can end, the members). `Client`, a pool connection, is the one
//! the session hands in; the turn loop's unit tests hand in a scripted fake, no daemon.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, Instant};

use aerix_tools::Cancel;
use caldrix_client::{Client, ClientError, Counts, FRAME_TIMEOUT};
use caldrix_proto::{
    ContextId, Done, Edit, ErrorKind, FrameFormat, Generate, MemberInfo, Reply, Request, Segment,
};

use crate::runtime::error::CoreError;

/// What an asynchronous call of a trait object comes to.
pub type Later<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// What a connection's request comes to.
pub type Pending<'a, T> = Later<'a, Result<T, CoreError>>;

/// The pool as the runtime uses it.
pub trait Connection: Send {
    /// A new context of `member` holding `segments`; its counts.
    fn create_context(&mut self, member: &str, segments: Vec<Segment>) -> Pending<'_, Counts>;
    /// `edits` applied in one request; the context's counts after.
    fn edit_context(&mut self, context: ContextId, edits: Vec<Edit>) -> Pending<'_, Counts>;
    fn context_counts(&mut self, context: ContextId) -> Pending<'_, Counts>;
    fn drop_context(&mut self, context: ContextId) -> Pending<'_, ()>;
    fn members(&mut self) -> Pending<'_, Vec<MemberInfo>>;
    /// Runs `generate` to its `done`, calling `streamed` on each piece of text, or until
    /// `cancel` is set (then `CoreError::Cancelled`).
    fn generate<'a>(
        &'a mut self,
        generate: Generate,
        cancel: &'a Cancel,
        streamed: &'a mut (dyn FnMut() + Send),
    ) -> Pending<'a, Done>;
}

/// Opens connections of their own to the pool, for agents that run beside their caller
/// (delegation's pieces and attempts): [`PoolSocket`] in the session, a scripted pool in tests.
pub trait Connect: Send + Sync + std::fmt::Debug {
    /// A new connection; waits while the pool has no room for one, until `cancel` is set.
    fn connect<'a>(&'a self, cancel: &'a Cancel) -> Pending<'a, Box<dyn Connection>>;
}

/// How long a connection waits for the pool's room (its `max_connections`) before it fails:
/// the bound of a control request.
const CONNECT_WAIT: Duration = Duration::from_secs(30);
const CONNECT_POLL: Duration = Duration::from_millis(100);

/// The pool at its socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSocket(pub PathBuf);

impl Connect for PoolSocket {
    /// The pool's `TooManyConnections` is waited out (an agent ending frees one), up to
    /// `CONNECT_WAIT`.
    fn connect<'a>(&'a self, cancel: &'a Cancel) -> Pending<'a, Box<dyn Connection>> {
        Box::pin(async move {
            let start = Instant::now();
            loop {
                match Client::connect(&self.0, FrameFormat::Cbor, "aerix").await {
                    Ok(client) => return Ok(Box::new(client) as Box<dyn Connection>),
                    Err(e)
                        if e.kind() == Some(ErrorKind::TooManyConnections)
                            && start.elapsed() < CONNECT_WAIT
                            && !cancel.is_cancelled() =>
                    {
                        tokio::time::sleep(CONNECT_POLL).await;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        })
    }
}

impl Connection for Client {
    fn create_context(&mut self, member: &str, segments: Vec<Segment>) -> Pending<'_, Counts> {
        let member = member.to_owned();
        Box::pin(async move { Ok(Client::create_context(self, &member, segments).await?) })
    }

    fn edit_context(&mut self, context: ContextId, edits: Vec<Edit>) -> Pending<'_, Counts> {
        Box::pin(async move { Ok(Client::edit_context(self, context, edits).await?) })
    }

    fn context_counts(&mut self, context: ContextId) -> Pending<'_, Counts> {
        Box::pin(async move { Ok(Client::context_counts(self, context).await?) })
    }

    fn drop_context(&mut self, context: ContextId) -> Pending<'_, ()> {
        Box::pin(async move { Ok(Client::drop_context(self, context).await?) })
    }

    fn members(&mut self) -> Pending<'_, Vec<MemberInfo>> {
        Box::pin(async move { Ok(Client::members(self).await?) })
    }

    fn generate<'a>(
        &'a mut self,
        generate: Generate,
        cancel: &'a Cancel,
        streamed: &'a mut (dyn FnMut() + Send),
    ) -> Pending<'a, Done> {
        Box::pin(run(self, generate, cancel, streamed))
    }
}

/// How often a generation in flight looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);
/// How long a cancelled generation's `done` is waited for: the user is waiting to get out.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// One generation on the pool that the cancel flag can end: a `cancel` frame, then the pool's
/// `done` read back, so the pool stops decoding and the connection stays in step.
async fn run(
    client: &mut Client,
    generate: Generate,
    cancel: &Cancel,
    streamed: &mut (dyn FnMut() + Send),
) -> Result<Done, CoreError> {
    if cancel.is_cancelled() {
        return Err(CoreError::Cancelled);
    }
    client.send(&Request::Generate(generate)).await?;
    loop {
        // `Client::recv` awaits only a read into its own buffer, so dropping it when the
        // flag wins loses no frame. Biased: a frame already there is taken first.
        let reply = tokio::select! {
            biased;
            reply = client.recv(FRAME_TIMEOUT) => reply?,
            () = cancelled(cancel) => return stop(client).await,
        };
        match reply {
            Reply::Done(done) => return Ok(done),
            Reply::Delta { .. } => streamed(),
            Reply::Progress { .. } => {}
            other => return Err(ClientError::Unexpected(format!("{other:?}")).into()),
        }
    }
}

/// Resolves once `cancel` is set (looked at every 50 ms): what an awaited generation, gate or
/// step races against.
pub async fn cancelled(cancel: &Cancel) {
    while !cancel.is_cancelled() {
        tokio::time::sleep(CANCEL_POLL).await;
    }
}

/// Sends `cancel` and reads up to the generation's `done`. The run is cancelled whatever the
/// pool answers; a pool that has not answered within `CANCEL_WAIT` is left behind.
async fn stop(client: &mut Client) -> Result<Done, CoreError> {
    if client.send(&Request::Cancel {}).await.is_ok() {
        let _ = tokio::time::timeout(CANCEL_WAIT, async {
            while let Ok(Reply::Progress { .. } | Reply::Delta { .. }) =
                client.recv(CANCEL_WAIT).await
            {}
        })
        .await;
    }
    Err(CoreError::Cancelled)
}
