//! A member's scheduler: up to `max_batch` of its generations decoded together on its one
//! session. Jobs are admitted in queue order while fewer than `max_batch` run (blocking on the
//! queue only when none does); each is set up from the prefix store as a lone generation
//! would be, then every running one advances in one `step` (one decode), and each that
//! finishes is stored and answered. With `max_batch` 1 this is the spec's single-stream loop.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;

use caldrix_engine::{EngineError, Event, Generation, Running, Seq, Session, StopReason, Timings};

use crate::member::{Finished, Job, Keep, MemberConfig, MemberEvent};
use crate::store::Store;

/// Sequences of a member's session: stored prefixes plus the ones being generated on.
pub(crate) const SEQUENCES: u32 = 64;

/// Fewest rows a job must share with a running one, past what the store gives it, to wait for
/// that one's prefill and copy its rows instead of computing them again (pieces of one brief
/// arriving together share a long system prefix; a few rows are not worth a wait).
const MIN_SHARED_ROWS: usize = 64;

/// Fewest own rows an unused entry must hold to be parked in host memory before a generation:
/// below a cache padding step (256 cells), parking rarely shortens the cells attended over.
const MIN_PARKED_ROWS: usize = 256;

/// What the loop works on: the member's session, its store, and the rates it measured.
pub(crate) struct Engine<'m> {
    pub(crate) session: Session<'m>,
    pub(crate) store: Store,
    pub(crate) rates: Rates,
}

/// Serves `jobs` until the queue closes and the last running generation has finished.
/// `replies`: a replay member's replies, taken once per job in queue order. `publish` is
/// called with the store after every job.
pub(crate) fn serve(
    engine: &mut Engine<'_>,
    config: &MemberConfig,
    jobs: &mpsc::Receiver<Job>,
    mut replies: Option<std::slice::Iter<'_, String>>,
    publish: &dyn Fn(&Store),
) {
    // Each running generation holds a work sequence of its own.
    let max = (config.max_batch.max(1)).min(engine.session.sequences()) as usize;
    let mut active: Vec<Active> = Vec::new();
    // Admitted jobs waiting for a running one's prefill to pass the prefix they share.
    let mut waiting: Vec<Waiting<'_>> = Vec::new();
    let mut replayed = 0usize;
    let mut closed = false;
    let mut serial = 0u64;
    loop {
        admit_waiting(engine, &mut active, &mut waiting, publish);
        while !closed && active.len() + waiting.len() < max {
            let mut job = if active.is_empty() && waiting.is_empty() {
                match jobs.recv() {
                    Ok(job) => job,
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            } else {
                match jobs.try_recv() {
                    Ok(job) => job,
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            };
            if !job.place.take() {
                // Withdrawn by its connection (its client left, or `stop`'s grace passed while
                // it waited): nobody waits for it, and a replay member's reply stays unspent.
                continue;
            }
            if job.cancel.load(Ordering::Relaxed) {
                // Cancelled while queued (a `stop`): answered at once, nothing computed, so its
                // connection has its `done` before the daemon exits.
                let _ = job.events.send(MemberEvent::done(Ok(Finished::local(
                    Generation {
                        text: String::new(),
                        tokens: Vec::new(),
                        stop: StopReason::Cancelled,
                        logprobs: None,
                        one_of: None,
                        prompt_tokens: job.prompt.len(),
                        reused_tokens: 0,
                        timings: Timings::default(),
                    },
                    0,
                ))));
                continue;
            }
            // Speed only: the output is the same either way.
            job.params.fast_forward = config.fast_forward;
            job.params.draft = config.draft;
            let source = match replies.as_mut().map(Iterator::next) {
                None => Ok(Source::Generate),
                Some(Some(reply)) => {
                    replayed += 1;
                    Ok(Source::Replay(reply))
                }
                Some(None) => Err(EngineError::ScriptExhausted(replayed)),
            };
            let source = match source {
                Ok(source) => source,
                Err(e) => {
                    publish(&engine.store);
                    let _ = job.events.send(MemberEvent::done(Err(e)));
                    continue;
                }
            };
            serial += 1;
            match leader(engine, &job, &active) {
                Some((leader, rows))
                    if engine.session.held(active[leader].running.seq()).len() < rows =>
                {
                    let leader = active[leader].serial;
                    waiting.push(Waiting { job, source, serial, leader, rows });
                }
                donor => {
                    let donor = donor.map(|(i, rows)| (active[i].running.seq(), rows));
                    start(engine, &mut active, job, source, serial, donor, publish);
                }
            }
        }
        if active.is_empty() {
            if closed && waiting.is_empty() {
                return;
            }
            continue;
        }
        step(engine, &mut active, publish);
        finish(engine, &mut active, publish);
    }
}

/// Measured costs on this member, which decide between resuming a stored prefix and a full
/// prefill. With llama.cpp, resuming is a cell copy (metadata) and the rest is a batched
/// prefill, so it almost always wins; the rates keep the decision honest if that changes
/// (another backend, host snapshots).
#[derive(Debug, Default)]
pub(crate) struct Rates {
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

/// A job being generated: its running generation (on its work sequence), the stored prefix it
/// resumed from (kept in the cells while it runs), and the bytes of a character its deltas
/// have not completed yet.
struct Active {
    job: Job,
    running: Running,
    resumed: Option<(Seq, usize)>,
    pending: Vec<u8>,
    /// Admission order, naming a leader for the jobs that wait on it.
    serial: u64,
}

/// A job that shares a long prefix with a running one (its leader) whose prefill has not
/// reached it yet: it starts once the leader holds `rows` rows, from a copy of them.
struct Waiting<'a> {
    job: Job,
    source: Source<'a>,
    serial: u64,
    leader: u64,
    rows: usize,
}

/// The running job `job` should take its first rows from, and how many: the longest prompt
/// prefix it shares with one, when that passes what the store holds by `MIN_SHARED_ROWS`.
fn leader(engine: &Engine<'_>, job: &Job, active: &[Active]) -> Option<(usize, usize)> {
    let stored = engine.store.longest_prefix(&job.prompt).map_or(0, |(_, n)| n);
    // At least the last prompt row is computed: its logits choose the first token.
    let most = job.prompt.len().saturating_sub(1);
    active
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let shared = job.prompt.iter().zip(&a.job.prompt).take_while(|(x, y)| x == y).count();
            (i, shared.min(most))
        })
        .max_by_key(|&(_, shared)| shared)
        .filter(|&(_, shared)| shared >= stored + MIN_SHARED_ROWS)
}

/// Starts the waiting jobs whose leader's prefill has passed their shared rows, and the ones
/// whose leader is gone (its rows are in the store now, if it kept them) or that were
/// cancelled while waiting.
fn admit_waiting(
    engine: &mut Engine<'_>,
    active: &mut Vec<Active>,
    waiting: &mut Vec<Waiting<'_>>,
    publish: &dyn Fn(&Store),
) {
    let mut i = 0;
    while i < waiting.len() {
        let w = &waiting[i];
        let leader = active.iter().find(|a| a.serial == w.leader).map(|a| a.running.seq());
        let held = leader.map(|seq| engine.session.held(seq).len());
        let donor = match (leader, held) {
            (Some(seq), Some(held)) if held >= w.rows => Some((seq, w.rows)),
            (Some(_), _) if !w.job.cancel.load(Ordering::Relaxed) => {
                i += 1;
                continue;
            }
            _ => None,
        };
        let Waiting { job, source, serial, .. } = waiting.remove(i);
        start(engine, active, job, source, serial, donor, publish);
    }
}

/// Admits `job` (from `donor`'s rows when given, else from the store) and makes it active,
/// or answers its refusal.
fn start(
    engine: &mut Engine<'_>,
    active: &mut Vec<Active>,
    job: Job,
    source: Source<'_>,
    serial: u64,
    donor: Option<(Seq, usize)>,
    publish: &dyn Fn(&Store),
) {
    match admit(engine, &job, source, active, donor) {
        Ok((running, resumed)) => {
            active.push(Active { job, running, resumed, pending: Vec::new(), serial })
        }
        Err(e) => {
            publish(&engine.store);
            let _ = job.events.send(MemberEvent::done(Err(e)));
        }
    }
}

/// Sets a job up and begins it, evicting on `CellsFull` as a lone generation always did: an
/// evicted prefix costs a prefill, never a refusal.
fn admit(
    engine: &mut Engine<'_>,
    job: &Job,
    source: Source<'_>,
    active: &[Active],
    donor: Option<(Seq, usize)>,
) -> Result<(Running, Option<(Seq, usize)>), EngineError> {
    let mut attempts = 0;
    loop {
        match try_admit(engine, job, source, active, donor) {
            Err(EngineError::CellsFull) if attempts < SEQUENCES => {
                attempts += 1;
                match engine.store.evict_lru(None) {
                    Some(seq) => engine.session.drop_sequence(seq)?,
                    None => return Err(EngineError::CellsFull),
                }
            }
            other => return other,
        }
    }
}

/// The store lookup, parking, and the copy of the stored prefix (or of a running `donor`'s
/// first rows: their cells are shared, not duplicated) into a work sequence no running job
/// holds; then `begin` (a refusal has computed no row).
fn try_admit(
    engine: &mut Engine<'_>,
    job: &Job,
    source: Source<'_>,
    active: &[Active],
    donor: Option<(Seq, usize)>,
) -> Result<(Running, Option<(Seq, usize)>), EngineError> {
    let Engine { session, store, rates } = engine;
    let busy: Vec<Seq> = active.iter().map(|a| a.running.seq()).collect();
    let work = match store.free_seq(session.sequences(), &busy) {
        Some(seq) => seq,
        None => {
            let seq = store.evict_lru(None).ok_or(EngineError::CellsFull)?;
            session.drop_sequence(seq)?;
            seq
        }
    };
    let found = match donor {
        Some(_) => None,
        None => store.longest_prefix(&job.prompt).filter(|&(_, n)| rates.resume_pays(n)),
    };
    // Rows the running jobs resumed from are attended over by them: they stay in the cells.
    let in_use: Vec<(Seq, usize)> =
        found.into_iter().chain(active.iter().filter_map(|a| a.resumed)).collect();
    for (seq, from) in store.to_park(&in_use, MIN_PARKED_ROWS) {
        let snapshot = session.park(seq, from)?;
        store.park(seq, snapshot);
    }
    if let Some((source, stored)) = found
        && stored > store.resident(source)
        && let Some(snapshot) = store.unpark(source)
        && let Err(e) = session.unpark(source, &snapshot)
    {
        // No cells for it now: back to the host; `admit` evicts and retries on CellsFull.
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
            if let Some((from, rows)) = donor {
                session.copy_prefix(from, work, rows)?;
            }
        }
    }
    let begun = match source {
        Source::Generate => session.begin(work, &job.prompt, &job.params),
        Source::Replay(reply) => session.begin_replay(work, &job.prompt, reply, &job.params),
    };
    match begun {
        Ok(running) => Ok((running, found)),
        Err(e) => {
            session.drop_sequence(work)?;
            Err(e)
        }
    }
}

/// One decode of every running generation, each one's events to its own job. `CellsFull`:
/// the least recently used stored prefix goes and the step is tried again; with nothing left
/// to evict the newest job fails with it and the rest go on.
fn step(engine: &mut Engine<'_>, active: &mut Vec<Active>, publish: &dyn Fn(&Store)) {
    while !active.is_empty() {
        let stepped = {
            let (mut running, mut sinks): (Vec<&mut Running>, Vec<Sink<'_>>) = active
                .iter_mut()
                .map(|a| (&mut a.running, Sink { job: &a.job, pending: &mut a.pending }))
                .unzip();
            engine
                .session
                .step(&mut running, &mut |i, event| sinks.get_mut(i).is_some_and(|s| s.hear(event)))
        };
        let failed = match stepped {
            Ok(()) => return,
            Err(EngineError::CellsFull) => match engine.store.evict_lru(None) {
                Some(seq) => match engine.session.drop_sequence(seq) {
                    Ok(()) => continue,
                    Err(e) => e,
                },
                None => {
                    if let Some(newest) = active.pop() {
                        fail(engine, newest, EngineError::CellsFull, publish);
                    }
                    continue;
                }
            },
            Err(e) => e,
        };
        // A decode that failed otherwise fails every generation it carried.
        let message = failed.to_string();
        let mut first = Some(failed);
        for a in std::mem::take(active) {
            let e = first.take().unwrap_or_else(|| EngineError::Decode(message.clone()));
            fail(engine, a, e, publish);
        }
    }
}

fn fail(engine: &mut Engine<'_>, a: Active, e: EngineError, publish: &dyn Fn(&Store)) {
    let result = engine.session.drop_sequence(a.running.seq()).and(Err(e));
    publish(&engine.store);
    let _ = a.job.events.send(MemberEvent::done(result));
}

/// Stores and answers every finished generation, in admission order.
fn finish(engine: &mut Engine<'_>, active: &mut Vec<Active>, publish: &dyn Fn(&Store)) {
    let mut i = 0;
    while i < active.len() {
        if !active[i].running.is_finished() {
            i += 1;
            continue;
        }
        let mut a = active.remove(i);
        let work = a.running.seq();
        let result = match a.running.take_finished() {
            Some(Ok(generation)) => keep(engine, &a.job, work, generation),
            Some(Err(e)) => engine.session.drop_sequence(work).and(Err(e)),
            None => engine
                .session
                .drop_sequence(work)
                .and(Err(EngineError::Decode("a finished generation had no result".into()))),
        };
        publish(&engine.store);
        let _ = a.job.events.send(MemberEvent::done(result));
    }
}

/// A finished generation's rows into the store: an appended turn keeps prompt and output, a
/// probe or a cancel its prompt.
fn keep(
    engine: &mut Engine<'_>,
    job: &Job,
    work: Seq,
    generation: Generation,
) -> Result<Finished, EngineError> {
    let Engine { session, store, rates } = engine;
    let computed = generation.prompt_tokens - generation.reused_tokens;
    if computed > 1 {
        let ms = generation.timings.prefill.as_secs_f64() * 1e3 / computed as f64;
        Rates::record(&mut rates.prefill_ms_per_row, ms);
    }
    if job.keep == Keep::Prompt || generation.stop == StopReason::Cancelled {
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
    Ok(Finished::local(generation, recomputed_from))
}

/// One job's side of a step: its progress and text (bytes of a split character wait for the
/// rest), and its own cancel flag.
struct Sink<'a> {
    job: &'a Job,
    pending: &'a mut Vec<u8>,
}

impl Sink<'_> {
    fn hear(&mut self, event: Event<'_>) -> bool {
        match event {
            Event::Progress { done, total } => {
                let _ = self.job.events.send(MemberEvent::Progress { done, total });
            }
            Event::Token { bytes, .. } => {
                self.pending.extend_from_slice(bytes);
                let valid = match std::str::from_utf8(self.pending) {
                    Ok(_) => self.pending.len(),
                    Err(e) => e.valid_up_to(),
                };
                if valid > 0 {
                    let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
                    self.pending.drain(..valid);
                    let _ = self.job.events.send(MemberEvent::Delta(text));
                }
            }
        }
        !self.job.cancel.load(Ordering::Relaxed)
    }
}
