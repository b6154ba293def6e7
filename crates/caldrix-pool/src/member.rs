//! A member: one loaded model on its own engine thread, serving up to `max_batch` generations
//! at once in queue order (`schedule.rs`), with its prefix store.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use caldrix_engine::{
    EngineError, GenerateParams, Generation, Model, ModelParams, SCRATCH_SEQUENCES, Session,
    SessionParams, Special, Token,
};
use caldrix_proto::{ErrorKind, RemoteInfo, StoreStatus};
use tokio::sync::mpsc::UnboundedSender;

use crate::PoolError;
use crate::remote::{self, RemoteSpec};
use crate::schedule::{self, Engine, Rates, SEQUENCES};
use crate::store::Store;
use crate::vocab::Vocab;

/// The prefill batch when `--batch` is not given.
pub(crate) const DEFAULT_BATCH: u32 = 512;

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
    /// Layers offloaded to a GPU: `None` as many as fit (`caldrix_engine::device::GpuLayers`).
    pub gpu_layers: Option<u32>,
    /// Generations decoded together (1 to `caldrix_proto::MAX_BATCH`; `Pool::load` checks).
    pub max_batch: u32,
    /// `max_batch` is a ceiling: the load takes the most generations up to it whose windows
    /// fit the memory limit (at least 1) instead of refusing (aerix's default batching).
    pub fit_max_batch: bool,
    /// Each generation's `fast_forward` and `draft`: they change speed; output only at near
    /// ties, where a batched decode's other summing order may pick the other token.
    pub fast_forward: bool,
    pub draft: bool,
    /// Bytes of KV rows the prefix store may keep (0 keeps none).
    pub budget_bytes: u64,
    /// A scripted or replay member: its replies are replayed in order instead of generating.
    pub script: Option<Script>,
    /// A remote member (`openai:URL#MODEL`): generations run on that engine, and `model` is
    /// its tokenizer, loaded for the vocabulary and template only.
    pub remote: Option<RemoteSpec>,
}

impl MemberConfig {
    /// A member served as the pool serves one by default: one generation at a time, the
    /// engine's own window, threads and batch, no prefix store, a local model.
    pub fn new(alias: impl Into<String>, reference: impl Into<String>, model: PathBuf) -> Self {
        MemberConfig {
            alias: alias.into(),
            reference: reference.into(),
            model,
            window: None,
            threads: None,
            batch: None,
            gpu_layers: None,
            max_batch: 1,
            fit_max_batch: false,
            fast_forward: false,
            draft: false,
            budget_bytes: 0,
            script: None,
            remote: None,
        }
    }
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
    Done(Result<Finished, PoolError>),
}

impl MemberEvent {
    /// A local generation's end, its engine error as the protocol's.
    pub(crate) fn done(result: Result<Finished, EngineError>) -> MemberEvent {
        MemberEvent::Done(result.map_err(crate::engine_error))
    }
}

#[derive(Debug)]
pub struct Finished {
    pub generation: Generation,
    /// Generated tokens: the generation's own, or what a remote engine reported.
    pub completion_tokens: usize,
    /// The first prompt row computed; `None` when a remote engine reports no cached tokens.
    pub recomputed_from: Option<usize>,
}

impl Finished {
    pub(crate) fn local(generation: Generation, recomputed_from: usize) -> Finished {
        let completion_tokens = generation.tokens.len();
        Finished { generation, completion_tokens, recomputed_from: Some(recomputed_from) }
    }
}

/// A generation counted in its member's `in_flight`, until dropped.
pub(crate) struct InFlight(Arc<AtomicU32>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A job's entry in its member's queue (`queue_depth`), given up exactly once: taken by the
/// member when it dequeues the job, or withdrawn by its connection first (the client left, or
/// `stop`'s grace passed with the job still queued). So a job nobody waits for holds neither a
/// queue entry nor its connection's place while the generation ahead of it runs, and the
/// member drops it unrun when it reaches it.
#[derive(Debug, Clone)]
pub struct QueuePlace {
    state: Arc<AtomicU8>,
    depth: Arc<AtomicU32>,
}

const QUEUED: u8 = 0;
const TAKEN: u8 = 1;
const WITHDRAWN: u8 = 2;

impl QueuePlace {
    /// A new entry, counted in `depth` until it is taken or withdrawn.
    pub(crate) fn new(depth: &Arc<AtomicU32>) -> QueuePlace {
        depth.fetch_add(1, Ordering::SeqCst);
        QueuePlace { state: Arc::new(AtomicU8::new(QUEUED)), depth: Arc::clone(depth) }
    }

    /// The member's side: true when the job is its to run, false when its connection
    /// withdrew it (nobody waits for it: it is dropped unrun, no reply and no row spent).
    pub(crate) fn take(&self) -> bool {
        self.leave(TAKEN)
    }

    /// The connection's side: true when the job was still queued and is now out of the queue
    /// (the member will drop it unrun); false once the member has taken it.
    pub(crate) fn withdraw(&self) -> bool {
        self.leave(WITHDRAWN)
    }

    fn leave(&self, to: u8) -> bool {
        let left =
            self.state.compare_exchange(QUEUED, to, Ordering::SeqCst, Ordering::SeqCst).is_ok();
        if left {
            self.depth.fetch_sub(1, Ordering::SeqCst);
        }
        left
    }
}

pub struct Job {
    pub prompt: Vec<Token>,
    /// The conversation itself, for a remote member whose engine renders it (its `prompt` is
    /// then the engine's tokens of it, for counts).
    pub chat: Option<Vec<caldrix_remote::ChatMessage>>,
    pub params: GenerateParams,
    pub keep: Keep,
    pub events: UnboundedSender<MemberEvent>,
    pub cancel: Arc<AtomicBool>,
    /// Its entry in the queue (`Member::place`).
    pub place: QueuePlace,
}

/// The handle the server keeps: the model for tokenizing and rendering off the engine thread
/// (llama.cpp's tokenizer only reads the vocabulary), and the job queue.
pub struct Member {
    pub alias: String,
    pub reference: String,
    pub json_constraint: bool,
    /// What renders and counts its contexts.
    pub(crate) vocab: Vocab,
    pub window: u32,
    /// What the member counts against the memory limit: its model file's size, the pool's
    /// context budget, and the windows of its generations past the first.
    pub footprint_bytes: u64,
    /// Generations decoded together, as loaded (a remote member's engine batches itself).
    pub max_batch: Option<u32>,
    /// A remote member's engine.
    pub remote: Option<RemoteInfo>,
    /// Where the load put a local member's layers (a remote member's: none here).
    pub placement: Option<caldrix_engine::device::Placement>,
    backend: Backend,
    queue: Arc<AtomicU32>,
    /// Generations submitted and not yet answered: queued (`queue`) or running.
    in_flight: Arc<AtomicU32>,
    /// The prefix store's figures, refreshed after every job (a remote member keeps none:
    /// all 0).
    pub figures: Arc<Mutex<StoreStatus>>,
}

/// Where a member's jobs go: its engine thread, or the remote engine's client.
enum Backend {
    Local { jobs: mpsc::Sender<Job>, thread: Option<std::thread::JoinHandle<()>> },
    Remote(remote::Handle),
}

/// The engine's flags for a member's weights: its layers on a device hold the KV rows of
/// its window for each generation it decodes together.
pub(crate) fn model_params(config: &MemberConfig) -> ModelParams {
    ModelParams {
        gpu_layers: config.gpu_layers,
        window: config.window,
        generations: config.max_batch,
        vocab_only: false,
    }
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").field("alias", &self.alias).finish_non_exhaustive()
    }
}

impl Member {
    /// Loads the model and starts the engine thread; returns once the session is open.
    /// `fits` hears the bytes of one KV window once a row's size is measured, before the
    /// cells are reserved, and answers how many generations the member decodes together (a
    /// member decoding N at once holds a window for each); its refusal is the load's.
    pub fn start(
        mut config: MemberConfig,
        fits: impl FnOnce(u64) -> Result<u32, PoolError>,
    ) -> Result<Member, PoolError> {
        let refused = |e: EngineError| PoolError::new(ErrorKind::LoadRefused, e.to_string());
        let params = model_params(&config);
        let model = Arc::new(Model::load(&config.model, &params).map_err(refused)?);
        let json_constraint = config.script.as_ref().is_none_or(|s| s.json);
        if json_constraint {
            // At load, not in the first `json` generation (where a cancel would wait for it).
            model.prepare_constraints().map_err(refused)?;
        }
        let window =
            config.window.unwrap_or(caldrix_engine::DEFAULT_WINDOW.min(model.trained_context()));
        // A scripted member computes no rows.
        let computes_rows = config.script.as_ref().is_none_or(|s| s.kind == ScriptKind::Replay);
        let bytes_per_row = if computes_rows {
            measure_bytes_per_row(&model, window, config.threads).map_err(refused)?
        } else {
            0
        };
        config.max_batch = fits(u64::from(window) * bytes_per_row)?;
        let windows =
            u64::from(config.max_batch.saturating_sub(1)) * u64::from(window) * bytes_per_row;
        // The file's size, as the memory fit charged it before the weights were read.
        let file_bytes =
            std::fs::metadata(&config.model).map_or_else(|_| model.size_bytes(), |m| m.len());
        // Less the weights a device holds: they count against the device, not this memory.
        let on_device = model.placement().device_weight_bytes;
        let footprint_bytes = file_bytes.saturating_sub(on_device) + config.budget_bytes + windows;
        let max_batch = Some(config.max_batch);
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let queue = Arc::new(AtomicU32::new(0));
        let figures = Arc::new(Mutex::new(no_store()));
        let alias = config.alias.clone();
        let reference = config.reference.clone();
        let thread = {
            let (model, figures) = (model.clone(), figures.clone());
            let rows = Rows { window, bytes_per_row };
            std::thread::Builder::new()
                .name(format!("member-{}", config.alias))
                .spawn(move || engine_thread(&model, &config, rows, rx, &figures, ready_tx))
                .map_err(|e| {
                    PoolError::new(ErrorKind::LoadRefused, format!("cannot start a thread: {e}"))
                })?
        };
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(refused(e)),
            Err(_) => {
                return Err(PoolError::new(ErrorKind::LoadRefused, "the engine thread died"));
            }
        }
        Ok(Member {
            alias,
            reference,
            json_constraint,
            placement: Some(model.placement().clone()),
            vocab: Vocab::Local(model),
            window,
            footprint_bytes,
            max_batch,
            remote: None,
            backend: Backend::Local { jobs, thread: Some(thread) },
            queue,
            in_flight: Arc::default(),
            figures,
        })
    }

    /// A remote member: its tokenizer loaded (vocabulary and template only) and checked
    /// against the engine's, or the engine's own template and tokenizer (`remote.rs`). Takes
    /// no memory of the pool's: its footprint is 0.
    pub fn start_remote(config: MemberConfig, spec: &RemoteSpec) -> Result<Member, PoolError> {
        let queue = Arc::new(AtomicU32::new(0));
        let started = remote::start(&config.alias, spec)?;
        let window = config.window.unwrap_or(started.window);
        Ok(Member {
            alias: config.alias,
            reference: config.reference,
            json_constraint: true,
            vocab: started.vocab,
            window,
            footprint_bytes: 0,
            max_batch: None,
            remote: Some(started.info),
            placement: None,
            backend: Backend::Remote(started.handle),
            queue,
            in_flight: Arc::default(),
            figures: Arc::new(Mutex::new(no_store())),
        })
    }

    pub fn queue_depth(&self) -> u32 {
        self.queue.load(Ordering::SeqCst)
    }

    /// Generations the member runs now: those in flight that have left the queue.
    pub fn running(&self) -> u32 {
        self.in_flight.load(Ordering::SeqCst).saturating_sub(self.queue_depth())
    }

    /// Counts a generation in flight until the guard drops (when its connection has its end).
    pub(crate) fn in_flight(&self) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(&self.in_flight))
    }

    /// A new entry in this member's queue, for the job about to be submitted.
    pub(crate) fn place(&self) -> QueuePlace {
        QueuePlace::new(&self.queue)
    }

    /// Queues a generation; its events arrive on `job.events`. Fails when the engine thread
    /// has stopped.
    pub fn submit(&self, job: Job) -> Result<(), EngineError> {
        let place = job.place.clone();
        let sent = match &self.backend {
            Backend::Local { jobs, .. } => jobs.send(job).is_ok(),
            Backend::Remote(handle) => handle.submit(job),
        };
        if sent {
            return Ok(());
        }
        place.withdraw();
        Err(EngineError::BadParams(format!("member `{}` has stopped", self.alias)))
    }
}

#[cfg(test)]
impl Member {
    /// A member on no engine thread: the test receives its jobs and answers them, or never
    /// does (an engine stuck past every bound).
    pub(crate) fn held(alias: &str, model: Arc<Model>) -> (Member, mpsc::Receiver<Job>) {
        let (jobs, rx) = mpsc::channel();
        let member = Member {
            alias: alias.to_owned(),
            reference: alias.to_owned(),
            json_constraint: false,
            vocab: Vocab::Local(model),
            window: 2048,
            footprint_bytes: 0,
            max_batch: Some(1),
            remote: None,
            placement: None,
            backend: Backend::Local { jobs, thread: None },
            queue: Arc::new(AtomicU32::new(0)),
            in_flight: Arc::default(),
            figures: Arc::new(Mutex::new(no_store())),
        };
        (member, rx)
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Closing the queue ends the engine thread after its running jobs (a remote
        // member's handle closes its own when it drops).
        if let Backend::Local { jobs, thread } = &mut self.backend {
            let (tx, _) = mpsc::channel();
            drop(std::mem::replace(jobs, tx));
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// The figures of a store holding nothing.
fn no_store() -> StoreStatus {
    StoreStatus {
        budget_bytes: 0,
        bytes: 0,
        entries: 0,
        rows: 0,
        bytes_per_row: 0,
        hits: 0,
        misses: 0,
        parked_rows: 0,
    }
}

/// A member's window and the measured bytes of one KV row.
#[derive(Debug, Clone, Copy)]
struct Rows {
    window: u32,
    bytes_per_row: u64,
}

fn engine_thread(
    model: &Model,
    config: &MemberConfig,
    rows: Rows,
    jobs: mpsc::Receiver<Job>,
    figures: &Mutex<StoreStatus>,
    ready: mpsc::Sender<Result<(), EngineError>>,
) {
    let Rows { window, bytes_per_row } = rows;
    let mut replies = None;
    if let Some(script) = &config.script {
        if script.kind == ScriptKind::Scripted {
            let _ = ready.send(Ok(()));
            return scripted_thread(model, &script.replies, jobs);
        }
        replies = Some(script.replies.iter());
    }
    let budget_rows = store_rows(config, window, bytes_per_row);
    let setup = || -> Result<Session<'_>, EngineError> {
        // Cells: the store's rows plus a window for each generation decoded at once.
        let windows = u64::from(window) * u64::from(config.max_batch.max(1));
        let cells = u32::try_from(budget_rows.saturating_add(windows)).unwrap_or(u32::MAX);
        // A batch must hold one token per sequence (llama.cpp's outputs): a small `--batch`
        // keeps fewer stored prefixes.
        let batch = config.batch.unwrap_or(DEFAULT_BATCH);
        let sequences = SEQUENCES.min(batch.saturating_sub(SCRATCH_SEQUENCES)).max(2);
        model.session(&SessionParams {
            n_ctx: Some(window),
            cells: Some(cells),
            threads: config.threads,
            batch,
            sequences,
            ..SessionParams::default()
        })
    };
    let session = match setup() {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let mut engine = Engine { session, store: Store::new(budget_rows), rates: Rates::default() };
    let budget_bytes = budget_rows * bytes_per_row;
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
    // Before the load is answered: a `status` right after `member_load`'s `ok` shows the
    // member's figures (its `bytes_per_row`, its budget), not an empty store's zeros.
    publish(&engine.store);
    let _ = ready.send(Ok(()));
    schedule::serve(&mut engine, config, &jobs, replies, &publish);
}

/// A scripted member's loop: each job takes the next reply, checked against its constraint by
/// the engine; no KV rows are computed, so `recomputed_from` is 0.
fn scripted_thread(model: &Model, replies: &[String], jobs: mpsc::Receiver<Job>) {
    let mut next = 0usize;
    for job in jobs {
        // Withdrawn by its connection (the client left): nobody waits, no reply is spent.
        if !job.place.take() {
            continue;
        }
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
            Finished::local(generation, 0)
        });
        let _ = job.events.send(MemberEvent::done(result));
    }
}

/// Rows the store may keep: the budget's, at most `MAX_STORED_WINDOWS` windows (llama.cpp
/// allocates and clears every cell of a context when it is created, so cells are reserved,
/// not grown on demand).
fn store_rows(config: &MemberConfig, window: u32, bytes_per_row: u64) -> u64 {
    (config.budget_bytes / bytes_per_row.max(1)).min(u64::from(window) * MAX_STORED_WINDOWS)
}

/// Bytes of KV state one row costs: the difference between snapshots of 2 and 1 rows, on a
/// small session of its own.
fn measure_bytes_per_row(
    model: &Model,
    window: u32,
    threads: Option<u32>,
) -> Result<u64, EngineError> {
    let mut session = model.session(&SessionParams {
        n_ctx: Some(window.min(64)),
        threads,
        ..SessionParams::default()
    })?;
    let tokens = model.tokenize("a b", Special::Plain);
    session.evaluate(&tokens)?;
    let one = session.snapshot(1)?.byte_len();
    let two = session.snapshot(2)?.byte_len();
    Ok((two.saturating_sub(one) as u64).max(1))
}
