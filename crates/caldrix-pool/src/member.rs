//! A member: one loaded model on its own engine thread, serving generations one at a time in
//! queue order, with its prefix store.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use caldrix_engine::{
    EngineError, Event, GenerateParams, Generation, Model, ModelParams, SCRATCH_SEQUENCES, Session,
    SessionParams, Special, Token,
};
use caldrix_proto::StoreStatus;
use tokio::sync::mpsc::UnboundedSender;

use crate::store::Store;

/// Sequences of a member's session: stored prefixes plus the one being generated on.
const SEQUENCES: u32 = 64;

/// Fewest own rows an unused entry must hold to be parked in host memory before a generation:
/// below a cache padding step (256 cells), parking rarely shortens the cells attended over.
const MIN_PARKED_ROWS: usize = 256;

/// The most a member's store keeps, in windows of rows.
const MAX_STORED_WINDOWS: u64 = 16;

/// How a member is served.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    pub alias: String,
    /// The reference as the user gave it.
    pub reference: String,
    pub model: PathBuf,
    pub window: Option<u32>,
    pub threads: Option<u32>,
    pub batch: Option<u32>,
    pub gpu_layers: Option<u32>,
    /// Bytes of KV rows the prefix store may keep (0 keeps none).
    pub budget_bytes: u64,
    /// A scripted or replay member: its replies are replayed in order instead of generating.
    pub script: Option<Script>,
}

/// A scripted member's replies, whether it takes the `json` constraint (a member without
/// it lets clients test how they handle free text), and whether replies go through the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub replies: Vec<String>,
    pub json: bool,
    pub kind: ScriptKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptKind {
    /// `script:`: replies checked and returned; no KV row is computed.
    Scripted,
    /// `replay:`: replies forced through the engine after the prompt, resuming from and
    /// stored in the prefix store like a real generation, so prefix costs are measured.
    Replay,
}

/// What a generation keeps in the store afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// An appended turn: prompt and output.
    PromptAndOutput,
    /// A probe (routing, a count): the prompt only.
    Prompt,
}

/// Events of one generation, in order: progress, deltas, then one `Done`.
#[derive(Debug)]
pub enum MemberEvent {
    Progress { done: usize, total: usize },
    Delta(String),
    Done(Result<Finished, EngineError>),
}

#[derive(Debug)]
pub struct Finished {
    pub generation: Generation,
    pub recomputed_from: usize,
}

pub struct Job {
    pub prompt: Vec<Token>,
    pub params: GenerateParams,
    pub keep: Keep,
    pub events: UnboundedSender<MemberEvent>,
    pub cancel: Arc<AtomicBool>,
}

/// The handle the server keeps: the model for tokenizing and rendering off the engine thread
/// (llama.cpp's tokenizer only reads the vocabulary), and the job queue.
pub struct Member {
    pub alias: String,
    pub reference: String,
    pub json_constraint: bool,
    pub model: Arc<Model>,
    pub window: u32,
    jobs: mpsc::Sender<Job>,
    queue: Arc<AtomicU32>,
    /// The prefix store's figures, refreshed after every job.
    pub figures: Arc<Mutex<StoreStatus>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").field("alias", &self.alias).finish_non_exhaustive()
    }
}

impl Member {
    /// Loads the model and starts the engine thread; returns once the session is open.
    pub fn start(config: MemberConfig) -> Result<Member, EngineError> {
        let params = ModelParams { gpu_layers: config.gpu_layers.unwrap_or(0) };
        let model = Arc::new(Model::load(&config.model, &params)?);
        let json_constraint = config.script.as_ref().is_none_or(|s| s.json);
        if json_constraint {
            // At load, not in the first `json` generation (where a cancel would wait for it).
            model.prepare_constraints()?;
        }
        let window = config.window.unwrap_or(4096.min(model.trained_context()));
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let queue = Arc::new(AtomicU32::new(0));
        let figures = Arc::new(Mutex::new(StoreStatus {
            budget_bytes: 0,
            bytes: 0,
            entries: 0,
            rows: 0,
            bytes_per_row: 0,
            hits: 0,
            misses: 0,
            parked_rows: 0,
        }));
        let alias = config.alias.clone();
        let reference = config.reference.clone();
        let thread = {
            let (model, queue, figures) = (model.clone(), queue.clone(), figures.clone());
            std::thread::Builder::new()
                .name(format!("member-{}", config.alias))
                .spawn(move || {
                    engine_thread(&model, &config, window, rx, &queue, &figures, ready_tx)
                })
                .map_err(|e| EngineError::BadParams(format!("cannot start a thread: {e}")))?
        };
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(EngineError::BadParams("the engine thread died".into())),
        }
        Ok(Member {
            alias,
            reference,
            json_constraint,
            model,
            window,
            jobs,
            queue,
            figures,
            thread: Some(thread),
        })
    }

    pub fn queue_depth(&self) -> u32 {
        self.queue.load(Ordering::Relaxed)
    }

    /// Queues a generation; its events arrive on `job.events`. Fails when the engine thread
    /// has stopped.
    pub fn submit(&self, job: Job) -> Result<(), EngineError> {
        self.queue.fetch_add(1, Ordering::Relaxed);
        self.jobs.send(job).map_err(|_| {
            self.queue.fetch_sub(1, Ordering::Relaxed);
            EngineError::BadParams(format!("member `{}` has stopped", self.alias))
        })
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Closing the queue ends the engine thread after its current job.
        let (tx, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.jobs, tx));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn engine_thread(
    model: &Model,
    config: &MemberConfig,
    window: u32,
    jobs: mpsc::Receiver<Job>,
    queue: &AtomicU32,
    figures: &Mutex<StoreStatus>,
    ready: mpsc::Sender<Result<(), EngineError>>,
) {
    let mut replies = None;
    if let Some(script) = &config.script {
        if script.kind == ScriptKind::Scripted {
            let _ = ready.send(Ok(()));
            return scripted_thread(model, &script.replies, jobs, queue);
        }
        replies = Some(script.replies.iter());
    }
    let setup = || -> Result<(Session<'_>, u64), EngineError> {
        let mut probe = model.session(&SessionParams {
            n_ctx: Some(window.min(64)),
            threads: config.threads,
            ..SessionParams::default()
        })?;
        let bytes_per_row = measure_bytes_per_row(model, &mut probe)?;
        drop(probe);
        let budget_rows = store_rows(config, window, bytes_per_row);
        // Cells: the store's rows plus a window to generate in.
        let cells =
            u32::try_from(budget_rows.saturating_add(u64::from(window))).unwrap_or(u32::MAX);
        // A batch must hold one token per sequence (llama.cpp's outputs): a small `--batch`
        // keeps fewer stored prefixes.
        let batch = config.batch.unwrap_or(512);
        let sequences = SEQUENCES.min(batch.saturating_sub(SCRATCH_SEQUENCES)).max(2);
        let session = model.session(&SessionParams {
            n_ctx: Some(window),
            cells: Some(cells),
            threads: config.threads,
            batch,
            sequences,
            ..SessionParams::default()
        })?;
        Ok((session, bytes_per_row))
    };
    let (mut session, bytes_per_row) = match setup() {
        Ok(s) => {
            let _ = ready.send(Ok(()));
            s
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let mut store = Store::new(store_rows(config, window, bytes_per_row));
    let mut rates = Rates::default();
    let budget_bytes = store.budget_rows() * bytes_per_row;
    let publish = |store: &Store| {
        let rows = store.rows();
        if let Ok(mut f) = figures.lock() {
            *f = StoreStatus {
                budget_bytes,
                bytes: rows * bytes_per_row,
                entries: store.entries().len() as u32,
                rows,
                bytes_per_row,
                hits: store.hits,
                misses: store.misses,
                parked_rows: store.parked_rows(),
            };
        }
    };
    publish(&store);
    let mut replayed = 0usize;
    for job in jobs {
        queue.fetch_sub(1, Ordering::Relaxed);
        // A replay member takes its next reply once per job, whatever `run_job` retries.
        let source = match replies.as_mut().map(Iterator::next) {
            None => Ok(Source::Generate),
            Some(Some(reply)) => {
                replayed += 1;
                Ok(Source::Replay(reply))
            }
            Some(None) => Err(EngineError::ScriptExhausted(replayed)),
        };
        let result =
            source.and_then(|source| run_job(&mut session, &mut store, &mut rates, &job, source));
        publish(&store);
        let _ = job.events.send(MemberEvent::Done(result));
    }
}

/// A scripted member's loop: each job takes the next reply, checked against its constraint by
/// the engine; no KV rows are computed, so `recomputed_from` is 0.
fn scripted_thread(
    model: &Model,
    replies: &[String],
    jobs: mpsc::Receiver<Job>,
    queue: &AtomicU32,
) {
    let mut next = 0usize;
    for job in jobs {
        queue.fetch_sub(1, Ordering::Relaxed);
        let result = match replies.get(next) {
            None => Err(EngineError::ScriptExhausted(next)),
            Some(reply) => {
                next += 1;
                model.replay(&job.prompt, reply, &job.params)
            }
        };
        let result = result.map(|generation| {
            if !generation.text.is_empty() {
                let _ = job.events.send(MemberEvent::Delta(generation.text.clone()));
            }
            Finished { generation, recomputed_from: 0 }
        });
        let _ = job.events.send(MemberEvent::Done(result));
    }
}

/// Rows the store may keep: the budget's, at most `MAX_STORED_WINDOWS` windows (llama.cpp
/// allocates and clears every cell of a context when it is created, so cells are reserved,
/// not grown on demand).
fn store_rows(config: &MemberConfig, window: u32, bytes_per_row: u64) -> u64 {
    (config.budget_bytes / bytes_per_row.max(1)).min(u64::from(window) * MAX_STORED_WINDOWS)
}

/// Bytes of KV state one row costs: the difference between snapshots of 2 and 1 rows.
fn measure_bytes_per_row(model: &Model, session: &mut Session<'_>) -> Result<u64, EngineError> {
    let tokens = model.tokenize("a b", Special::Plain);
    session.evaluate(&tokens)?;
    let one = session.snapshot(1)?.byte_len();
    let two = session.snapshot(2)?.byte_len();
    Ok((two.saturating_sub(one) as u64).max(1))
}

/// Measured costs on this member, which decide between resuming a stored prefix and a full
/// prefill. With llama.cpp, resuming is a cell copy (metadata) and the rest is a batched
/// prefill, so it almost always wins; the rates keep the decision honest if that changes
/// (another backend, host snapshots).
#[derive(Debug, Default)]
struct Rates {
    /// Milliseconds per prefilled row (moving average).
    prefill_ms_per_row: Option<f64>,
    /// Milliseconds of a resume (copying a stored prefix into the working sequence).
    resume_ms: Option<f64>,
}

impl Rates {
    fn resume_pays(&self, stored: usize) -> bool {
        match (self.prefill_ms_per_row, self.resume_ms) {
            (Some(row), Some(resume)) => resume < row * stored as f64,
            // Until measured: a resume costs far less than a row's prefill.
            _ => stored > 0,
        }
    }

    fn record(slot: &mut Option<f64>, value: f64) {
        *slot = Some(slot.map_or(value, |old| 0.8 * old + 0.2 * value));
    }
}

/// Where a job's output comes from.
#[derive(Clone, Copy)]
enum Source<'a> {
    Generate,
    /// A replay member's reply, forced through the engine.
    Replay(&'a str),
}

fn run_job(
    session: &mut Session<'_>,
    store: &mut Store,
    rates: &mut Rates,
    job: &Job,
    source: Source<'_>,
) -> Result<Finished, EngineError> {
    let mut attempts = 0;
    loop {
        match try_job(session, store, rates, job, source) {
            // Cells exhausted (rows of stored prefixes, fragmentation): evict and retry; an
            // evicted prefix costs a prefill, never a refusal.
            Err(EngineError::CellsFull) if attempts < SEQUENCES => {
                attempts += 1;
                match store.evict_lru(None) {
                    Some(seq) => session.drop_sequence(seq)?,
                    None => return Err(EngineError::CellsFull),
                }
            }
            other => return other,
        }
    }
}

fn try_job(
    session: &mut Session<'_>,
    store: &mut Store,
    rates: &mut Rates,
    job: &Job,
    source: Source<'_>,
) -> Result<Finished, EngineError> {
    let work = match store.free_seq(session.sequences()) {
        Some(seq) => seq,
        None => {
            let seq = store.evict_lru(None).ok_or(EngineError::CellsFull)?;
            session.drop_sequence(seq)?;
            seq
        }
    };
    let found = store.longest_prefix(&job.prompt).filter(|&(_, n)| rates.resume_pays(n));
    for (seq, from) in store.to_park(found, MIN_PARKED_ROWS) {
        let snapshot = session.park(seq, from)?;
        store.park(seq, snapshot);
    }
    if let Some((source, stored)) = found
        && stored > store.resident(source)
        && let Some(snapshot) = store.unpark(source)
        && let Err(e) = session.unpark(source, &snapshot)
    {
        // No cells for it now: back to the host; `run_job` evicts and retries on CellsFull.
        store.park(source, snapshot);
        return Err(e);
    }
    match found {
        Some((source, stored)) => {
            let started = Instant::now();
            session.copy_prefix(source, work, stored)?;
            Rates::record(&mut rates.resume_ms, started.elapsed().as_secs_f64() * 1e3);
            store.touch(source);
            store.hits += 1;
        }
        _ => {
            session.drop_sequence(work)?;
            store.misses += 1;
        }
    }
    let mut pending = Vec::new();
    let events = &job.events;
    let cancel = &job.cancel;
    let mut on_event = |event: Event<'_>| {
        match event {
            Event::Progress { done, total } => {
                let _ = events.send(MemberEvent::Progress { done, total });
            }
            Event::Token { bytes, .. } => {
                pending.extend_from_slice(bytes);
                let valid = match std::str::from_utf8(&pending) {
                    Ok(_) => pending.len(),
                    Err(e) => e.valid_up_to(),
                };
                if valid > 0 {
                    let text = String::from_utf8_lossy(&pending[..valid]).into_owned();
                    pending.drain(..valid);
                    let _ = events.send(MemberEvent::Delta(text));
                }
            }
        }
        !cancel.load(Ordering::Relaxed)
    };
    let generation = match source {
        Source::Generate => session.generate_on(work, &job.prompt, &job.params, &mut on_event),
        Source::Replay(reply) => {
            session.replay_on(work, &job.prompt, reply, &job.params, &mut on_event)
        }
    };
    let generation = match generation {
        Ok(g) => g,
        Err(e) => {
            session.drop_sequence(work)?;
            return Err(e);
        }
    };
    let computed = generation.prompt_tokens - generation.reused_tokens;
    if computed > 1 {
        let ms = generation.timings.prefill.as_secs_f64() * 1e3 / computed as f64;
        Rates::record(&mut rates.prefill_ms_per_row, ms);
    }
    if job.keep == Keep::Prompt || generation.stop == caldrix_engine::StopReason::Cancelled {
        let n = job.prompt.len().min(session.held(work).len());
        session.copy_prefix(work, work, n)?;
    }
    let held = session.held(work).to_vec();
    for seq in store.insert(work, held) {
        session.drop_sequence(seq)?;
    }
    for seq in store.enforce_budget() {
        session.drop_sequence(seq)?;
    }
    let recomputed_from = generation.reused_tokens;
    Ok(Finished { generation, recomputed_from })
}
