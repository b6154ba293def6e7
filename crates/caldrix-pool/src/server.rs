//! The server loop: accept connections (at most `max_connections`), one task per connection
//! reading requests in order; a generation streams its events while the connection still
//! reads (for `cancel`, or to notice the client left).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use caldrix_engine::{Constraint, GenerateParams, Sampling, limits};
use caldrix_proto::{
    self as proto, Done, ErrorKind, FrameError, FrameFormat, PROTOCOL_VERSION, Reply, Request,
    Usage,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

use crate::member::{Job, Keep, MemberEvent};
use crate::{Pool, PoolError, poisoned};
use control::{append, control, counts_for_done, on_context};

/// The handshake and every control request are answered within this.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `stop` waits for the members to end the cancelled generations (each ends at its
/// member's next step, its connection sending the member's `done`). The daemon is gone within
/// 2 s of a `stop`: this, `DONE_WRITES`, then the binary's own bounds.
const STOP_GRACE: Duration = Duration::from_millis(800);

/// How long `stop` then waits for the connections to write the `done` of each generation
/// their member has not ended (writes to a local socket: moments, unless a client stopped
/// reading).
const DONE_WRITES: Duration = Duration::from_millis(200);

/// The longest error message sent, in bytes (escapes and the cut mark included).
const MAX_MESSAGE_BYTES: usize = 1000;

impl Pool {
    /// Serves until `stop` (a `stop` request or `Pool::stop`) or the idle timeout.
    pub async fn serve(self: &Arc<Self>, listener: UnixListener) -> std::io::Result<()> {
        let mut idle_since = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, _) = accepted?;
                    // Another user's process gets nothing, not even an error frame.
                    match stream.peer_cred().map(|c| c.uid()) {
                        Ok(uid) if uid == self.config.owner_uid => {}
                        Ok(uid) => {
                            tracing::warn!(uid, "refused a connection from another user's process");
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!("refused a connection whose credentials cannot be read: {e}");
                            continue;
                        }
                    }
                    let (read, write) = stream.into_split();
                    if self.active.load(Ordering::SeqCst) >= self.config.max_connections {
                        tokio::spawn(refuse(write, self.config.frames, self.config.max_connections));
                        continue;
                    }
                    // Released however the task ends, a panic included.
                    let slot = Slot::take(self);
                    let pool = Arc::clone(self);
                    tokio::spawn(async move {
                        let _slot = slot;
                        let mut conn = Connection { pool, read, write, buf: Vec::new() };
                        if let Err(e) = conn.run().await {
                            tracing::debug!("connection ended: {e}");
                        }
                    });
                }
                _ = self.shutdown.notified() => {
                    // Every generation queued or running was cancelled: its connection sends its
                    // `done` before the runtime ends the tasks. One its member has not ended
                    // by the grace's end (a step slowed by a loaded machine, a stalled remote
                    // engine) is answered by its connection itself.
                    self.settle(STOP_GRACE).await;
                    self.grace_ended.send_replace(true);
                    self.settle(DONE_WRITES).await;
                    return Ok(());
                }
                _ = tick.tick() => {
                    if self.active.load(Ordering::SeqCst) > 0 {
                        idle_since = Instant::now();
                    } else if let Some(idle) = self.config.idle_timeout
                        && idle_since.elapsed() >= idle
                    {
                        tracing::info!("idle for {}s with no connection: exiting", idle.as_secs());
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Waits, at most `bound`, until no generation is registered (each deregisters once its
    /// connection has written its `done`).
    async fn settle(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        while self.generations() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A connection's place among `max_connections`.
struct Slot(Arc<Pool>);

impl Slot {
    fn take(pool: &Arc<Pool>) -> Slot {
        pool.active.fetch_add(1, Ordering::SeqCst);
        Slot(Arc::clone(pool))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn refuse(mut write: OwnedWriteHalf, frames: FrameFormat, max: u32) {
    let reply = Reply::Error {
        kind: ErrorKind::TooManyConnections,
        message: format!("{max} connections are open (--max-connections); try again later"),
    };
    if let Ok(bytes) = proto::encode(&reply, frames) {
        let _ = write.write_all(&bytes).await;
    }
    let _ = write.shutdown().await;
}

enum Incoming {
    Frame(Vec<u8>),
    Closed,
}

struct Connection {
    pool: Arc<Pool>,
    read: OwnedReadHalf,
    write: OwnedWriteHalf,
    buf: Vec<u8>,
}

#[derive(Debug)]
enum ConnError {
    Io(std::io::Error),
    /// The stream cannot be read on (a bad length prefix, a truncated frame).
    Fatal(String),
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnError::Io(e) => write!(f, "{e}"),
            ConnError::Fatal(m) => f.write_str(m),
        }
    }
}

impl From<std::io::Error> for ConnError {
    fn from(e: std::io::Error) -> Self {
        ConnError::Io(e)
    }
}

impl Connection {
    fn frames(&self) -> FrameFormat {
        self.pool.config.frames
    }

    /// The next frame's payload. Cancel-safe: bytes read stay in `buf`.
    async fn next(&mut self) -> Result<Incoming, ConnError> {
        loop {
            match proto::split_frame(&self.buf) {
                Ok(Some((payload, used))) => {
                    let payload = payload.to_vec();
                    self.buf.drain(..used);
                    return Ok(Incoming::Frame(payload));
                }
                Ok(None) => {}
                Err(e) => return Err(ConnError::Fatal(e.to_string())),
            }
            if self.read.read_buf(&mut self.buf).await? == 0 {
                if self.buf.is_empty() {
                    return Ok(Incoming::Closed);
                }
                return Err(ConnError::Fatal(format!(
                    "the connection closed inside a frame ({} bytes of it arrived)",
                    self.buf.len()
                )));
            }
        }
    }

    async fn send(&mut self, reply: &Reply) -> Result<(), ConnError> {
        let bytes =
            proto::encode(reply, self.frames()).map_err(|e| ConnError::Fatal(e.to_string()))?;
        self.write.write_all(&bytes).await?;
        Ok(())
    }

    async fn send_error(&mut self, e: &PoolError) -> Result<(), ConnError> {
        self.send(&Reply::Error { kind: e.kind, message: readable(&e.message) }).await
    }

    fn decode(&self, payload: &[u8]) -> Result<Request, PoolError> {
        proto::decode(payload, self.frames()).map_err(|e| match e {
            FrameError::WrongFormat { .. } => PoolError::new(ErrorKind::BadFrame, e.to_string()),
            other => PoolError::new(ErrorKind::BadRequest, other.to_string()),
        })
    }

    async fn run(&mut self) -> Result<(), ConnError> {
        let result = self.serve().await;
        if let Err(ConnError::Fatal(message)) = &result {
            // The stream is out of step: say why, then close.
            let e = PoolError::new(ErrorKind::BadFrame, message.clone());
            let _ = self.send_error(&e).await;
        }
        let _ = self.write.shutdown().await;
        result
    }

    async fn serve(&mut self) -> Result<(), ConnError> {
        let first = match tokio::time::timeout(CONTROL_TIMEOUT, self.next()).await {
            Ok(r) => r?,
            Err(_) => return Err(ConnError::Fatal("no hello within 30 s".into())),
        };
        let Incoming::Frame(payload) = first else { return Ok(()) };
        match self.decode(&payload) {
            Ok(Request::Hello { version, .. }) if version == PROTOCOL_VERSION => {
                let server = format!("caldrix/{}", env!("CARGO_PKG_VERSION"));
                self.send(&Reply::Hello { version: PROTOCOL_VERSION, server }).await?;
            }
            Ok(Request::Hello { version, .. }) => {
                let e = PoolError::new(
                    ErrorKind::Version,
                    format!("this pool speaks protocol {PROTOCOL_VERSION}, not {version}"),
                );
                return self.send_error(&e).await;
            }
            Ok(_) => {
                let e = PoolError::new(ErrorKind::BadRequest, "the first request must be hello");
                return self.send_error(&e).await;
            }
            Err(e) => return self.send_error(&e).await,
        }
        loop {
            let Incoming::Frame(payload) = self.next().await? else { return Ok(()) };
            let request = match self.decode(&payload) {
                Ok(r) => r,
                Err(e) => {
                    self.send_error(&e).await?;
                    continue;
                }
            };
            match request {
                Request::Generate(g) => self.generate(g).await?,
                Request::Stop {} => {
                    self.send(&Reply::Ok).await?;
                    self.pool.stop();
                    return Ok(());
                }
                other => {
                    // A load reads (or downloads) a model: the client bounds it with its own
                    // start timeout. Everything else is answered within the control bound.
                    let bounded = !matches!(other, Request::MemberLoad { .. });
                    let pool = Arc::clone(&self.pool);
                    let task = tokio::task::spawn_blocking(move || control(&pool, other));
                    let reply = answer(task, bounded.then_some(CONTROL_TIMEOUT)).await;
                    match reply {
                        Ok(reply) => self.send(&reply).await?,
                        Err(e) => self.send_error(&e).await?,
                    }
                }
            }
        }
    }

    async fn generate(&mut self, g: proto::Generate) -> Result<(), ConnError> {
        // Registered before it is prepared: a `stop` meanwhile cancels it and waits for it,
        // and it gets its `done` like any other.
        let mut grace = self.pool.grace_ended.subscribe();
        let running = self.pool.register_generation();
        let cancel = Arc::clone(&running.cancel);
        // Rendering and tokenizing block (a remote member's tokenizer is a request to its
        // engine): off the runtime's workers.
        let (pool, request) = (Arc::clone(&self.pool), g.clone());
        let preparing = tokio::task::spawn_blocking(move || prepare(&pool, &request));
        let prepared = tokio::select! {
            prepared = preparing => prepared.unwrap_or_else(|_| {
                Err(PoolError::new(
                    ErrorKind::Internal,
                    "the daemon failed while preparing this generation (a bug: see its log)",
                ))
            }),
            // Still being prepared when `stop`'s grace passed (a remote tokenizer that does
            // not answer): cancelled before a token of it was known.
            () = grace_ended(&mut grace) => {
                return self.send(&Reply::Done(Streamed::new(0).cancelled())).await;
            }
        };
        let (member, job_params, (prompt, chat)) = match prepared {
            Ok(p) => p,
            Err(e) => return self.send_error(&e).await,
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let prompt_tokens = prompt.len();
        let keep = if g.append_as.is_some() { Keep::PromptAndOutput } else { Keep::Prompt };
        let cancel_job = Arc::clone(&cancel);
        let _in_flight = member.in_flight();
        let place = member.place();
        let job = Job {
            prompt,
            chat,
            params: job_params,
            keep,
            events: tx,
            cancel: cancel_job,
            place: place.clone(),
        };
        if member.submit(job).is_err() {
            let e = PoolError::new(ErrorKind::Engine, "the member's engine thread has stopped");
            return self.send_error(&e).await;
        }
        let mut streamed = Streamed::new(prompt_tokens);
        let mut client_gone = false;
        loop {
            tokio::select! {
                event = rx.recv() => {
                    let Some(event) = event else {
                        let e = PoolError::new(ErrorKind::Internal, "the member dropped the generation");
                        return self.send_error(&e).await;
                    };
                    if client_gone {
                        if matches!(event, MemberEvent::Done(_)) {
                            return Ok(());
                        }
                        continue;
                    }
                    match event {
                        MemberEvent::Progress { done, total } => {
                            self.send(&Reply::Progress { done: done as u32, total: total as u32 }).await?;
                        }
                        MemberEvent::Delta(text) => {
                            streamed.heard(&text);
                            self.send(&Reply::Delta { text }).await?;
                        }
                        MemberEvent::Done(Err(e)) => return self.send_error(&e).await,
                        MemberEvent::Done(Ok(finished)) => {
                            let generation = finished.generation;
                            let mut counts = None;
                            if let Some(id) = &g.append_as {
                                let appended = append(&self.pool, g.context, id, &generation.text);
                                if let Err(e) = appended {
                                    return self.send_error(&e).await;
                                }
                                counts = counts_for_done(&self.pool, g.context, CONTROL_TIMEOUT).await;
                            }
                            let scored = generation.one_of.is_some();
                            let done = Done {
                                usage: Usage {
                                    prompt_tokens: generation.prompt_tokens as u32,
                                    completion_tokens: finished.completion_tokens as u32,
                                    recomputed_from: finished.recomputed_from.map(|r| r as u32),
                                    prefill_ms: generation.timings.prefill.as_secs_f64() * 1e3,
                                    decode_ms: generation.timings.decode.as_secs_f64() * 1e3,
                                },
                                stop: stop_reason(generation.stop),
                                one_of: generation.one_of.map(|s| proto::OneOfScores {
                                    chosen: s.chosen as u32,
                                    logprobs: s.logprobs,
                                }),
                                // A OneOf answers with its options' scores only, on every
                                // kind of member (a model member computes no token rows for
                                // it; a scripted or remote one would have sent some).
                                logprobs: generation
                                    .logprobs
                                    .filter(|_| !scored)
                                    .map(|lps| lps.into_iter().map(token_logprob).collect()),
                                // The grammar admits calls only in their text form, so
                                // a reply that opens one parses (one cut short by
                                // max_new_tokens is no call: its `stop` says so).
                                tool_calls: match g.constraint {
                                    proto::Constraint::Tools { .. } => {
                                        proto::parse_tool_calls(&generation.text)
                                            .unwrap_or_default()
                                    }
                                    _ => Vec::new(),
                                },
                                text: generation.text,
                                counts,
                            };
                            return self.send(&Reply::Done(done)).await;
                        }
                    }
                }
                incoming = self.next(), if !client_gone => {
                    match incoming {
                        Ok(Incoming::Frame(payload)) => match self.decode(&payload) {
                            Ok(Request::Cancel {}) => cancel.store(true, Ordering::Relaxed),
                            Ok(_) => {
                                let e = PoolError::new(ErrorKind::BadRequest, "a generation is in progress on this connection: only cancel is accepted");
                                self.send_error(&e).await?;
                            }
                            Err(e) => self.send_error(&e).await?,
                        },
                        // The client left: stop the generation, let its rows be stored.
                        Ok(Incoming::Closed) | Err(_) => {
                            cancel.store(true, Ordering::Relaxed);
                            // Still queued: out of the queue now, and this connection's place
                            // freed with it, not once the generation ahead ends (the member
                            // drops the job unrun).
                            if place.withdraw() {
                                return Ok(());
                            }
                            client_gone = true;
                        }
                    }
                }
                // `stop`'s grace passed and the member has not ended this generation: its
                // `done` is written here, and the member's late one is dropped with `rx`.
                // This `select` is the one place that picks which `done` the client gets.
                () = grace_ended(&mut grace) => {
                    if client_gone {
                        return Ok(());
                    }
                    // Still queued (the member busy with a long step): it computed nothing,
                    // and its `done` says so, as the member's own would.
                    if place.withdraw() {
                        return self.send(&Reply::Done(streamed.unstarted())).await;
                    }
                    return self.send(&Reply::Done(streamed.cancelled())).await;
                }
            }
        }
    }
}

/// Resolves once `stop`'s grace has passed (or the pool is gone). The watch's guard is not
/// held past it: it is not `Send`.
async fn grace_ended(grace: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = grace.wait_for(|&ended| ended).await;
}

/// What a connection has streamed of its generation, for the `done` it writes itself when its
/// member has not ended the generation by the end of `stop`'s grace.
struct Streamed {
    prompt_tokens: usize,
    text: String,
    deltas: usize,
    submitted: Instant,
    first: Option<Instant>,
}

impl Streamed {
    fn new(prompt_tokens: usize) -> Streamed {
        Streamed {
            prompt_tokens,
            text: String::new(),
            deltas: 0,
            submitted: Instant::now(),
            first: None,
        }
    }

    fn heard(&mut self, text: &str) {
        self.first.get_or_insert_with(Instant::now);
        self.text.push_str(text);
        self.deltas += 1;
    }

    /// The `done` of a generation cancelled while queued, the member's own figures for one
    /// (`schedule.rs`): nothing computed, `recomputed_from` 0, no time spent.
    fn unstarted(self) -> Done {
        Done {
            usage: Usage {
                prompt_tokens: self.prompt_tokens as u32,
                completion_tokens: 0,
                recomputed_from: Some(0),
                prefill_ms: 0.0,
                decode_ms: 0.0,
            },
            stop: proto::StopReason::Cancelled,
            one_of: None,
            logprobs: None,
            tool_calls: Vec::new(),
            text: String::new(),
            counts: None,
        }
    }

    /// The text sent so far; the member reported no usage, so `completion_tokens` is the
    /// deltas sent (each holds at least one token's text), `recomputed_from` is absent, and
    /// the times are this connection's: from the job's submission to the first delta, then
    /// to now.
    fn cancelled(self) -> Done {
        let now = Instant::now();
        let first = self.first.unwrap_or(now);
        Done {
            usage: Usage {
                prompt_tokens: self.prompt_tokens as u32,
                completion_tokens: self.deltas as u32,
                recomputed_from: None,
                prefill_ms: (first - self.submitted).as_secs_f64() * 1e3,
                decode_ms: (now - first).as_secs_f64() * 1e3,
            },
            stop: proto::StopReason::Cancelled,
            one_of: None,
            logprobs: None,
            tool_calls: Vec::new(),
            text: self.text,
            counts: None,
        }
    }
}

/// An error message as one line a person can read: a message may quote what the client sent
/// (an unknown variant's name, a segment id), so control characters are escaped and a long
/// quote is cut, to at most `MAX_MESSAGE_BYTES` in all.
fn readable(message: &str) -> String {
    const CUT: &str = " ...";
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_BYTES));
    // Where `out` may be cut: the end of its last character (or escape) that leaves room for
    // the mark.
    let mut fits = 0;
    for c in message.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
        if out.len() <= MAX_MESSAGE_BYTES - CUT.len() {
            fits = out.len();
        }
        if out.len() > MAX_MESSAGE_BYTES {
            out.truncate(fits);
            out.push_str(CUT);
            break;
        }
    }
    out
}

/// A control request's reply from its blocking task, within `limit` when there is one.
async fn answer(
    task: tokio::task::JoinHandle<Result<Reply, PoolError>>,
    limit: Option<Duration>,
) -> Result<Reply, PoolError> {
    let joined = match limit {
        Some(limit) => match tokio::time::timeout(limit, task).await {
            Ok(joined) => joined,
            Err(_) => {
                return Err(PoolError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the request was not answered within {} s (the bound on control \
                         requests); it may still take effect",
                        limit.as_secs()
                    ),
                ));
            }
        },
        None => task.await,
    };
    joined.unwrap_or_else(|_| {
        Err(PoolError::new(
            ErrorKind::Internal,
            "the daemon failed while answering this request (a bug: see its log)",
        ))
    })
}

/// The member, the generation's parameters, and its prompt: tokens, and the conversation when
/// the member's engine renders it.
type Prepared = (
    Arc<crate::member::Member>,
    GenerateParams,
    (Vec<caldrix_engine::Token>, Option<Vec<caldrix_remote::ChatMessage>>),
);

fn prepare(pool: &Pool, g: &proto::Generate) -> Result<Prepared, PoolError> {
    let name = pool.contexts.lock().map_err(poisoned)?.get(g.context)?.member.clone();
    let member = pool.member(&name)?;
    let vocab = &member.vocab;
    let (prompt, chat, tools) = on_context(pool, g.context, vocab, |c| {
        Ok((c.prompt(vocab)?, vocab.chat(&c.segments), c.tools.clone()))
    })?;
    if prompt.len() >= member.window as usize {
        return Err(PoolError::new(
            ErrorKind::TooLong,
            format!(
                "the prompt has {} tokens but the member's window holds {}",
                prompt.len(),
                member.window
            ),
        ));
    }
    let constraint = match &g.constraint {
        proto::Constraint::None => Constraint::None,
        proto::Constraint::Json { schema } if schema.len() > limits::MAX_SCHEMA_BYTES => {
            return Err(PoolError::new(
                ErrorKind::BadConstraint,
                format!(
                    "the schema is {} bytes, more than the limit of {}",
                    schema.len(),
                    limits::MAX_SCHEMA_BYTES
                ),
            ));
        }
        proto::Constraint::Json { .. } if !member.json_constraint => {
            return Err(PoolError::new(
                ErrorKind::BadConstraint,
                format!("member `{}` does not take the json constraint", member.alias),
            ));
        }
        proto::Constraint::Json { schema } => {
            Constraint::Json(serde_json::from_str(schema).map_err(|e| {
                PoolError::new(ErrorKind::BadConstraint, format!("the schema is not JSON: {e}"))
            })?)
        }
        proto::Constraint::OneOf { options } => Constraint::OneOf(options.clone()),
        proto::Constraint::Tools { .. } if !member.json_constraint => {
            return Err(PoolError::new(
                ErrorKind::BadConstraint,
                format!("member `{}` does not take the tools constraint", member.alias),
            ));
        }
        proto::Constraint::Tools { choice, parallel } => {
            Constraint::Grammar(tools.grammar(choice, *parallel)?)
        }
        _ => {
            return Err(PoolError::new(
                ErrorKind::BadConstraint,
                "this daemon does not know the constraint's kind",
            ));
        }
    };
    // Temperature 0 is greedy; the range of every value is checked below.
    let sampling = match g.sampling {
        None => Sampling::Greedy,
        Some(s) if s.temperature == 0.0 && s.top_p > 0.0 && s.top_p <= 1.0 => Sampling::Greedy,
        Some(s) => Sampling::Random { temperature: s.temperature, top_p: s.top_p, seed: s.seed },
    };
    let params = GenerateParams {
        max_new_tokens: g.max_new_tokens,
        sampling,
        constraint,
        logprobs: g.logprobs.map(|k| usize::try_from(k).unwrap_or(usize::MAX)),
        ..GenerateParams::default()
    };
    // Refused before the job is queued: nothing is computed for a bad request.
    params.check().map_err(crate::engine_error)?;
    Ok((member, params, (prompt, chat)))
}

fn stop_reason(stop: caldrix_engine::StopReason) -> proto::StopReason {
    use caldrix_engine::StopReason as S;
    match stop {
        S::EndOfTurn => proto::StopReason::EndOfTurn,
        S::Complete => proto::StopReason::Complete,
        S::MaxTokens => proto::StopReason::MaxTokens,
        S::ContextFull => proto::StopReason::ContextFull,
        S::Cancelled => proto::StopReason::Cancelled,
    }
}

fn token_logprob(t: caldrix_engine::TokenLogprob) -> proto::TokenLogprob {
    proto::TokenLogprob {
        token: t.token.0,
        text: String::from_utf8_lossy(&t.bytes).into_owned(),
        logprob: t.logprob,
        top: t
            .top
            .into_iter()
            .map(|(token, bytes, logprob)| proto::TopLogprob {
                token: token.0,
                text: String::from_utf8_lossy(&bytes).into_owned(),
                logprob,
            })
            .collect(),
    }
}

mod control;
#[cfg(test)]
mod tests;
