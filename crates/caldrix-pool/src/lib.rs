//! `caldrix pool` as a library: members on their engine threads, contexts, per-member prefix
//! stores, and the protocol v2 server loop over a Unix socket the binary binds.

mod context;
mod member;
mod remote;
mod schedule;
mod server;
mod store;
mod tools;
mod vocab;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use caldrix_proto::{ErrorKind, FrameFormat, Lane, MemberInfo};
use tokio::sync::{Notify, watch};

pub use member::{MemberConfig, Script, ScriptKind};
pub use remote::{RemoteSettings, RemoteSpec, UNSCORED_OPTION_LOGPROB, parse_remote_ref};

use crate::context::Contexts;
use crate::member::Member;

/// A refusal or failure, as sent to the client in an `error` frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PoolError {
    pub kind: ErrorKind,
    pub message: String,
}

impl PoolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> PoolError {
        PoolError { kind, message: message.into() }
    }
}

#[derive(Debug, Clone)]
pub struct PoolConfig {
    pub frames: FrameFormat,
    pub max_connections: u32,
    /// Exit after this long with no connection open; `None` never.
    pub idle_timeout: Option<Duration>,
    /// Bytes of stored KV rows each member may keep.
    pub context_budget: u64,
    /// What the members' footprints plus one context budget each must fit.
    pub memory_limit: u64,
    /// The only uid served: a connection from another user's process is closed unanswered.
    pub owner_uid: u32,
}

/// The machine's memory limit: the cgroup's when one is set, else physical memory.
pub fn memory_limit() -> u64 {
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let physical = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    match (cgroup, physical) {
        (Some(c), Some(p)) => c.min(p),
        (c, p) => c.or(p).unwrap_or(8 << 30),
    }
}

/// The default `--context-budget`: a quarter of the memory limit, at most 8 GiB.
pub fn default_context_budget(memory_limit: u64) -> u64 {
    (memory_limit / 4).min(8 << 30)
}

pub struct Pool {
    config: PoolConfig,
    members: Mutex<BTreeMap<String, Arc<Member>>>,
    /// Each member's engine threads, as its load decided them (for `MemberInfo`; its lane is
    /// read from its placement).
    threads: Mutex<BTreeMap<String, Option<u32>>>,
    contexts: Mutex<Contexts>,
    shutdown: Notify,
    active: AtomicU32,
    /// The cancel flag of every generation queued or running, by a key of its own: `stop`
    /// sets them all, so the daemon exits within moments instead of after the longest one.
    running: Mutex<BTreeMap<u64, Arc<AtomicBool>>>,
    next_generation: AtomicU64,
    stopping: AtomicBool,
    /// Set when `stop`'s grace has passed: each connection then answers its generation still
    /// running itself (`server.rs`), so none is left without its `done` when the runtime ends.
    grace_ended: watch::Sender<bool>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Pool {
    pub fn new(config: PoolConfig) -> Arc<Pool> {
        Arc::new(Pool {
            config,
            members: Mutex::new(BTreeMap::new()),
            threads: Mutex::new(BTreeMap::new()),
            contexts: Mutex::new(Contexts::default()),
            shutdown: Notify::new(),
            active: AtomicU32::new(0),
            running: Mutex::new(BTreeMap::new()),
            next_generation: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            grace_ended: watch::Sender::new(false),
        })
    }

    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// Loads a member (blocking: it reads the model). Refused when the alias is taken, when a
    /// serving flag is out of its range, or when the members' footprints plus one context
    /// budget each (and the windows of a batched member) would pass the memory limit.
    pub fn load(&self, mut member: MemberConfig) -> Result<(), PoolError> {
        member.budget_bytes = self.config.context_budget;
        check_serving_flags(&member)?;
        if member.fit_max_batch {
            // A ceiling: one decode holds a token of each generation.
            member.max_batch = member.max_batch.min(member.batch.unwrap_or(member::DEFAULT_BATCH));
        }
        if self.member(&member.alias).is_ok() {
            return Err(PoolError::new(
                ErrorKind::LoadRefused,
                format!("a member named `{}` is already loaded", member.alias),
            ));
        }
        if let Some(spec) = member.remote.clone() {
            // Its weights and rows are the engine's: nothing of the memory fit is taken.
            let alias = member.alias.clone();
            let loaded = Member::start_remote(member, &spec)?;
            tracing::info!(%alias, "remote member loaded");
            self.members.lock().map_err(poisoned)?.insert(alias, Arc::new(loaded));
            return Ok(());
        }
        let size = model_file_size(&member.model)?;
        // The layers a device takes count against the device (the plan refuses what it cannot
        // hold, naming its figures), the rest of the file against system memory.
        let plan = caldrix_engine::Model::plan(&member.model, &member::model_params(&member))
            .map_err(|e| PoolError::new(ErrorKind::LoadRefused, e.to_string()))?;
        // The load places what the fit counted: auto is decided once, here.
        member.gpu_layers = Some(plan.layers);
        let resident: u64 =
            self.members.lock().map_err(poisoned)?.values().map(|m| m.footprint_bytes).sum();
        let alias = member.alias.clone();
        // The number the engine gives llama.cpp; a scripted member opens no session.
        let scripted = member.script.as_ref().is_some_and(|s| s.kind == ScriptKind::Scripted);
        let threads =
            (!scripted).then(|| member.threads.unwrap_or_else(caldrix_engine::default_threads));
        let on_device = plan.on_gpu().then(|| plan.describe());
        let fit = Fit {
            alias: &alias,
            resident,
            model: size.saturating_sub(plan.device_weight_bytes),
            budget: self.config.context_budget,
            limit: self.config.memory_limit,
            device: on_device.as_deref(),
        };
        // The model and budget before the weights are read; the windows once a row's size is
        // measured, before their cells are reserved.
        fit.check(1, 0)?;
        let (max_batch, ceiling) = (member.max_batch, member.fit_max_batch);
        let loaded = Member::start(member, |window| {
            if ceiling { Ok(fit.most(max_batch, window)) } else { fit.check(max_batch, window) }
        })?;
        if ceiling && loaded.max_batch < Some(max_batch) {
            tracing::info!(
                %alias,
                max_batch = loaded.max_batch,
                asked = max_batch,
                "the windows of more generations would pass the memory limit"
            );
        }
        let lane = loaded.placement.as_ref().map_or("remote", |p| lane_of(p).name());
        tracing::info!(%alias, lane, "member loaded");
        self.threads.lock().map_err(poisoned)?.insert(alias.clone(), threads);
        self.members.lock().map_err(poisoned)?.insert(alias, Arc::new(loaded));
        Ok(())
    }

    pub fn unload(&self, alias: &str) -> Result<(), PoolError> {
        let removed = self.members.lock().map_err(poisoned)?.remove(alias);
        if removed.is_none() {
            return Err(unknown_member(alias));
        }
        self.threads.lock().map_err(poisoned)?.remove(alias);
        self.contexts.lock().map_err(poisoned)?.drop_member(alias);
        Ok(())
    }

    pub(crate) fn member(&self, alias: &str) -> Result<Arc<Member>, PoolError> {
        self.members
            .lock()
            .map_err(poisoned)?
            .get(alias)
            .cloned()
            .ok_or_else(|| unknown_member(alias))
    }

    /// What the protocol's `members` answers.
    pub fn member_infos(&self) -> Result<Vec<MemberInfo>, PoolError> {
        let threads = self.threads.lock().map_err(poisoned)?;
        Ok(self
            .members
            .lock()
            .map_err(poisoned)?
            .values()
            .map(|m| MemberInfo {
                lane: m.placement.as_ref().map(lane_of),
                threads: threads.get(&m.alias).copied().flatten(),
                alias: m.alias.clone(),
                reference: m.reference.clone(),
                json_constraint: m.json_constraint,
                model: m.vocab.file(),
                architecture: m.vocab.architecture(),
                context_window: m.window,
                footprint_bytes: m.footprint_bytes,
                max_batch: m.max_batch,
                queue_depth: m.queue_depth(),
                remote: m.remote.clone(),
                gpu: m.placement.as_ref().and_then(gpu_info),
            })
            .collect())
    }

    /// Asks `serve` to return, and cancels every generation queued or running; `serve` lets
    /// their connections send each its `done` first.
    pub fn stop(&self) {
        // Under the lock, so a generation registering meanwhile either is here or sees
        // `stopping`.
        if let Ok(running) = self.running.lock() {
            self.stopping.store(true, Ordering::SeqCst);
            for cancel in running.values() {
                cancel.store(true, Ordering::SeqCst);
            }
        } else {
            self.stopping.store(true, Ordering::SeqCst);
        }
        self.shutdown.notify_one();
    }

    /// Generations registered (queued or running) whose connection has not answered them yet.
    pub(crate) fn generations(&self) -> usize {
        self.running.lock().map_or(0, |running| running.len())
    }

    /// A new generation's cancel flag, registered so `stop` reaches it; already set once the
    /// pool is stopping. The registration ends when the returned guard drops.
    pub(crate) fn register_generation(self: &Arc<Self>) -> Running {
        let key = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let cancel = Arc::new(AtomicBool::new(false));
        match self.running.lock() {
            Ok(mut running) => {
                cancel.store(self.stopping.load(Ordering::SeqCst), Ordering::SeqCst);
                running.insert(key, Arc::clone(&cancel));
            }
            Err(_) => cancel.store(self.stopping.load(Ordering::SeqCst), Ordering::SeqCst),
        }
        Running { pool: Arc::clone(self), key, cancel }
    }
}

/// A generation's place in `Pool::running`, removed however the generation ends.
pub(crate) struct Running {
    pool: Arc<Pool>,
    key: u64,
    pub(crate) cancel: Arc<AtomicBool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(mut running) = self.pool.running.lock() {
            running.remove(&self.key);
        }
    }
}

/// The lane is where the layers went, never what the flag asked for.
fn lane_of(p: &caldrix_engine::device::Placement) -> Lane {
    if p.on_gpu() { Lane::Gpu } else { Lane::Cpu }
}

/// A member's GPU, when some of its layers are on one.
fn gpu_info(p: &caldrix_engine::device::Placement) -> Option<caldrix_proto::GpuInfo> {
    let d = p.device.as_ref().filter(|_| p.on_gpu())?;
    Some(caldrix_proto::GpuInfo {
        device: d.name.clone(),
        description: d.description.clone(),
        total_bytes: d.total_bytes,
        free_bytes: d.free_bytes,
        layers: p.layers,
        total_layers: p.total_layers,
        member_bytes: p.device_bytes,
    })
}

/// The error reply for an engine refusal or failure: what the caller can fix is a request
/// error (`bad_request`, `bad_constraint`, `too_long`), the rest the engine's.
pub(crate) fn engine_error(e: caldrix_engine::EngineError) -> PoolError {
    use caldrix_engine::{EngineError as E, TemplateError};
    let kind = match &e {
        E::PromptTooLong { .. } | E::EmptyPrompt => ErrorKind::TooLong,
        E::BadSchema(_) | E::EmptyOneOf | E::TooManyOptions { .. } | E::BadOption { .. } => {
            ErrorKind::BadConstraint
        }
        E::BadSampling(_) | E::Template(TemplateError::Refused(_)) => ErrorKind::BadRequest,
        E::ScriptRefused { .. } | E::ScriptExhausted(_) => ErrorKind::Script,
        _ => ErrorKind::Engine,
    };
    PoolError::new(kind, e.to_string())
}

/// A member's model reference: a path to a GGUF file or a Hugging Face reference (see
/// `caldrix_hub`; downloaded into the hub cache when missing), or `script:REPLIES@MODEL` for a
/// scripted member (REPLIES: a JSON file holding an array of reply strings, replayed in order,
/// or `{"json": false, "replies": [...]}` for a member that refuses the `json` constraint;
/// MODEL: the model reference whose vocabulary and template count tokens), or
/// `replay:REPLIES@MODEL` for a replay member (the same file; each reply is forced through
/// MODEL's engine, so its rows and the prompt's are computed and stored).
pub fn parse_model_ref(reference: &str) -> Result<(PathBuf, Option<Script>), PoolError> {
    let refused = |m: String| PoolError::new(ErrorKind::LoadRefused, m);
    let resolve = |model: &str| {
        caldrix_hub::Hub::from_env().resolve_str(model).map_err(|e| refused(e.to_string()))
    };
    let (prefix, kind, rest) = if let Some(rest) = reference.strip_prefix("script:") {
        ("script", ScriptKind::Scripted, rest)
    } else if let Some(rest) = reference.strip_prefix("replay:") {
        ("replay", ScriptKind::Replay, rest)
    } else {
        return Ok((resolve(reference)?, None));
    };
    let (replies, model) = rest.split_once('@').ok_or_else(|| {
        let what = if kind == ScriptKind::Replay { "a replay" } else { "a scripted" };
        refused(format!("`{reference}`: {what} member is {prefix}:REPLIES@MODEL"))
    })?;
    let text = std::fs::read_to_string(replies)
        .map_err(|e| refused(format!("cannot read the script {replies}: {e}")))?;
    let strings = |v: &serde_json::Value| -> Option<Vec<String>> {
        v.as_array()?.iter().map(|r| r.as_str().map(String::from)).collect()
    };
    let value: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    let script = match &value {
        Some(v @ serde_json::Value::Array(_)) => {
            strings(v).map(|replies| Script { replies, json: true, kind })
        }
        Some(serde_json::Value::Object(o)) => o
            .get("replies")
            .and_then(strings)
            .zip(o.get("json").and_then(serde_json::Value::as_bool).or(Some(true)))
            .map(|(replies, json)| Script { replies, json, kind }),
        _ => None,
    }
    .ok_or_else(|| {
        refused(format!(
            "the script {replies} is neither a JSON array of strings nor \
             {{\"json\": BOOL, \"replies\": [...]}}"
        ))
    })?;
    Ok((resolve(model)?, Some(script)))
}

/// What a member reference loads: a model path (for a remote member its tokenizer, empty
/// when none was given), a script, or a remote engine (`openai:URL#MODEL`, with the
/// settings only a remote member takes).
pub fn member_source(
    reference: &str,
    remote: &RemoteSettings<'_>,
) -> Result<(PathBuf, Option<Script>, Option<RemoteSpec>), PoolError> {
    if let Some(spec) = parse_remote_ref(reference, remote)? {
        return Ok((spec.tokenizer.clone().unwrap_or_default(), None, Some(spec)));
    }
    let (path, script) = parse_model_ref(reference)?;
    Ok((path, script, None))
}

/// Refuses a serving flag out of its range by name, before anything is loaded.
fn check_serving_flags(member: &MemberConfig) -> Result<(), PoolError> {
    let refused = |m: String| Err(PoolError::new(ErrorKind::LoadRefused, m));
    let n = member.max_batch;
    if !(1..=caldrix_proto::MAX_BATCH).contains(&n) {
        return refused(format!(
            "max_batch {n} is out of range: a member decodes 1 to {} generations together",
            caldrix_proto::MAX_BATCH
        ));
    }
    let batch = member.batch.unwrap_or(member::DEFAULT_BATCH);
    if n > batch && !member.fit_max_batch {
        return refused(format!(
            "max_batch {n} is more than batch {batch}: one decode holds a token of each generation"
        ));
    }
    Ok(())
}

/// The memory fit of a member being loaded: what resident members take, its model file and
/// context budget, and the KV windows of its generations past the first (a member decoding N
/// at once holds N windows of rows; the first was always within the budget's figure).
#[derive(Debug, Clone, Copy)]
struct Fit<'a> {
    alias: &'a str,
    resident: u64,
    model: u64,
    budget: u64,
    limit: u64,
    /// Where the offloaded layers went, when any did (their weights are not in `model`).
    device: Option<&'a str>,
}

impl Fit<'_> {
    /// The most generations, up to `ceiling` and at least 1, whose windows fit (the base,
    /// one generation, was checked before the weights were read).
    fn most(&self, ceiling: u32, window: u64) -> u32 {
        (1..=ceiling.max(1)).rev().find(|&n| self.check(n, window).is_ok()).unwrap_or(1)
    }

    /// `max_batch` generations, each holding a `window` of bytes past the first (0 until
    /// measured): that count, or the refusal naming the figures.
    fn check(&self, max_batch: u32, window: u64) -> Result<u32, PoolError> {
        let windows = u64::from(max_batch.saturating_sub(1)).saturating_mul(window);
        let need = self.model + self.budget + windows;
        if self.resident + need <= self.limit {
            return Ok(max_batch);
        }
        let extra = if windows > 0 {
            format!(" + {} MiB for the windows of max_batch {max_batch}", windows >> 20)
        } else {
            String::new()
        };
        let (model, device) = match &self.device {
            Some(device) => ("the model's layers on the CPU", format!("; on the {device}")),
            None => ("model", String::new()),
        };
        Err(PoolError::new(
            ErrorKind::LoadRefused,
            format!(
                "`{}` needs {} MiB of system memory ({model} {} MiB + context budget {} \
                 MiB{extra}) but {} MiB of the {} MiB limit are taken by resident \
                 members{device}",
                self.alias,
                need >> 20,
                self.model >> 20,
                self.budget >> 20,
                self.resident >> 20,
                self.limit >> 20
            ),
        ))
    }
}

fn model_file_size(path: &Path) -> Result<u64, PoolError> {
    std::fs::metadata(path).map(|m| m.len()).map_err(|e| {
        PoolError::new(ErrorKind::LoadRefused, format!("cannot read model {}: {e}", path.display()))
    })
}

fn unknown_member(alias: &str) -> PoolError {
    PoolError::new(ErrorKind::UnknownMember, format!("no member named `{alias}`"))
}

pub(crate) fn poisoned<T>(_: T) -> PoolError {
    PoolError::new(ErrorKind::Internal, "a lock was poisoned by a panic")
}

#[cfg(all(test, feature = "vulkan"))]
mod gpu_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn member(max_batch: u32, batch: Option<u32>) -> MemberConfig {
        MemberConfig { batch, max_batch, ..MemberConfig::new("m", "m.gguf", "m.gguf".into()) }
    }

    #[test]
    fn max_batch_out_of_its_range_is_refused_by_name() {
        for n in [1, 4, caldrix_proto::MAX_BATCH] {
            assert_eq!(check_serving_flags(&member(n, None)), Ok(()), "{n}");
        }
        for n in [0, caldrix_proto::MAX_BATCH + 1] {
            let e = check_serving_flags(&member(n, None)).unwrap_err();
            assert_eq!(e.kind, ErrorKind::LoadRefused);
            assert!(e.message.contains(&format!("max_batch {n} is out of range")), "{e}");
        }
        let e = check_serving_flags(&member(8, Some(4))).unwrap_err();
        assert!(e.message.contains("max_batch 8 is more than batch 4"), "{e}");
    }

    /// 56 MiB left for windows: 100 resident, 50 of model, 50 of budget, of 256.
    const FIT: Fit<'static> = Fit {
        alias: "m",
        resident: 100 << 20,
        model: 50 << 20,
        budget: 50 << 20,
        limit: 256 << 20,
        device: None,
    };

    #[test]
    fn a_batched_member_s_windows_count_against_the_limit() {
        let fit = FIT;
        assert_eq!(fit.check(1, 0), Ok(1));
        assert_eq!(fit.check(4, 18 << 20), Ok(4), "54 of the 56 MiB left fit");
        assert_eq!(fit.check(5, 14 << 20), Ok(5), "exactly the limit fits");
        let e = fit.check(4, 19 << 20).unwrap_err();
        assert_eq!(e.kind, ErrorKind::LoadRefused);
        assert_eq!(
            e.message,
            "`m` needs 157 MiB of system memory (model 50 MiB + context budget 50 MiB + 57 MiB \
             for the windows of max_batch 4) but 100 MiB of the 256 MiB limit are taken by \
             resident members"
        );
    }

    #[test]
    fn a_member_on_a_device_names_both_memories_when_refused() {
        let fit = Fit { device: Some("GPU Vulkan0 (a card), 5 of 5 layers"), ..FIT };
        let e = fit.check(4, 19 << 20).unwrap_err();
        assert_eq!(
            e.message,
            "`m` needs 157 MiB of system memory (the model's layers on the CPU 50 MiB + context \
             budget 50 MiB + 57 MiB for the windows of max_batch 4) but 100 MiB of the 256 MiB \
             limit are taken by resident members; on the GPU Vulkan0 (a card), 5 of 5 layers"
        );
    }

    #[test]
    fn a_ceiling_takes_the_most_generations_that_fit_and_at_least_one() {
        let fit = FIT;
        assert_eq!(fit.most(4, 18 << 20), 4, "all four fit");
        assert_eq!(fit.most(4, 19 << 20), 3, "two windows of 19 MiB fit, three pass 56 MiB");
        assert_eq!(fit.most(4, 57 << 20), 1, "not even a second window fits");
        assert_eq!(fit.most(1, 1 << 40), 1);
    }
}
