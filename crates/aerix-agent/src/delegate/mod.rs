//! Delegation, as the turn loop calls it through `crate::runtime::Delegation`: a turn's `agent`
//! calls run after its other calls, each a piece (`piece.rs`: attempts in worktrees of their
//! own, `attempt.rs`: an implementer and its check, `checks.rs`: test commands), up to
//! `delegation.parallel` at once; their changes land in the caller's tree in call order
//! (`land.rs`).
//!
//! Each piece, and each attempt of a piece, is a task of the runtime's, on a pool connection of
//! its own, holding the caller's services by `Arc` (`Shared`): a hook or an approval that
//! blocks its worker (a tool runs on the blocking pool) stalls no other piece. The caller's
//! task writes the pieces' events to its sink as they come, and lands their changes once all
//! have ended. A piece that panics is a failed call, not a lost one.

mod attempt;
pub mod checks;
mod land;
mod opening;
mod piece;
mod reasons;
mod sink;
mod tests_kept;
mod tree;
mod whole;

pub use tree::WorktreePlace;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::runtime::{Caller, Connect, Delegation, Ran, Runtime, Services, Stats};
use aerix_tools::{Cancel, Roots, ToolError};
use aerix_turn::Call;

use crate::delegate::sink::{Outlet, forward};

/// The `[delegation]` and `[verify]` settings and the pool a piece connects to.
#[derive(Clone, Debug)]
pub struct Delegator {
    /// The pool: each piece and attempt opens a connection of its own.
    pub pool: Arc<dyn Connect>,
    /// Pieces run at once.
    pub parallel: u32,
    /// Reruns of an implementer whose work failed verification.
    pub retries: u32,
    /// An implementer's and a verifier's turn budget (a definition's `max_turns` wins).
    pub max_turns: u32,
    /// An agent at this depth or deeper gets no `agent` tool.
    pub depth: u32,
    /// Implementers a piece runs at once, each in a worktree of its own.
    pub attempts: u32,
    /// The sampling temperature of every attempt but the first.
    pub temperature: f64,
    /// The request's seed: attempt k of a piece samples with a seed made from it.
    pub seed: u64,
    /// An implementer with a command check writes its first change as a whole file in a code
    /// fence, asked by aerix after its opening (`delegation.edit_format = "whole"`).
    pub whole: bool,
    /// After a command check passes, a verifier reviews too (`verify.review`).
    pub review: bool,
    /// Where attempts' worktrees live; `None`: pieces run in place, one at a time (the tree is
    /// not a git work tree).
    pub worktrees: Option<WorktreePlace>,
}

/// What every piece of one turn shares, owned (each piece and attempt is a task of the
/// runtime's, holding it by `Arc`): the caller's services, tree and cancel, and where events go.
pub(crate) struct Shared {
    pub(crate) delegator: Delegator,
    pub(crate) services: Arc<Services>,
    pub(crate) cwd: PathBuf,
    pub(crate) roots: Roots,
    pub(crate) cancel: Cancel,
    pub(crate) outlet: Outlet,
}

impl Delegation for Delegator {
    fn depth(&self) -> u32 {
        self.depth
    }

    /// Runs `calls` as pieces, each a task of the runtime's, at most `parallel` at once; the
    /// caller's task writes their events to its sink meanwhile. The pieces' time is added to
    /// the caller's stats.
    fn run_all<'a, 'r: 'a>(
        &'a self,
        rt: &'a mut Runtime<'r>,
        caller: &'a Caller,
        calls: &'a [Call],
    ) -> Ran<'a> {
        Box::pin(self.run_pieces(rt, caller, calls))
    }
}

impl Delegator {
    async fn run_pieces(
        &self,
        rt: &mut Runtime<'_>,
        caller: &Caller,
        calls: &[Call],
    ) -> Vec<(String, Result<String, ToolError>)> {
        if calls.is_empty() {
            return Vec::new();
        }
        // A piece asked twice in one turn (the same input) runs once: the copies would do the
        // same work on the same tree, and a small model repeats its one call up to the limit.
        let (calls, copies) = once_each(calls);
        // In place (no worktrees), pieces would edit one tree at once: one at a time.
        let parallel = if self.worktrees.is_some() { self.parallel } else { 1 };
        let room = usize::try_from(parallel).unwrap_or(1).clamp(1, calls.len());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            delegator: self.clone(),
            services: Arc::clone(&rt.services),
            cwd: rt.cwd.to_owned(),
            roots: rt.roots.clone(),
            cancel: rt.cancel.clone(),
            outlet: Outlet { tx, spool_dir: rt.sink.spool_dir() },
        });
        let caller = Arc::new(caller.clone());
        let room = Arc::new(tokio::sync::Semaphore::new(room));
        let mut pieces = tokio::task::JoinSet::new();
        let mut ids = HashMap::new();
        let mut ended: Vec<Ended> = Vec::new();
        // Pieces start in call order, each once it has room; the caller's task writes their
        // events to its sink as they come.
        let mut waiting = calls.iter();
        let mut next = waiting.next();
        while next.is_some() || !pieces.is_empty() {
            tokio::select! {
                biased;
                Some(out) = rx.recv() => forward(&mut *rt.sink, out),
                permit = Arc::clone(&room).acquire_owned(), if next.is_some() => {
                    let (Some(call), Ok(permit)) = (next.take(), permit) else { break };
                    // Cancelled first: this call and the rest read "did not run".
                    if shared.cancel.is_cancelled() {
                        continue;
                    }
                    let (shared, caller, call) =
                        (Arc::clone(&shared), Arc::clone(&caller), call.clone());
                    let id = call.id.clone();
                    let task = pieces.spawn(async move {
                        let _room = permit;
                        let (result, stats) = piece::run(&shared, &caller, &call).await;
                        (call.id, result, stats)
                    });
                    // Only a piece that did not return needs its call found this way.
                    ids.insert(task.id(), id);
                    next = waiting.next();
                }
                Some(joined) = pieces.join_next() => match joined {
                    Ok(one) => ended.push(one),
                    Err(e) => {
                        let why = ToolError::new(format!("the piece failed: it {}", stopped(&e)));
                        let id = ids.get(&e.id()).cloned().unwrap_or_default();
                        ended.push((id, Err(why), Stats::default()));
                    }
                },
            }
        }
        // Every piece has ended: what they sent last is written too.
        drop(shared);
        while let Ok(out) = rx.try_recv() {
            forward(&mut *rt.sink, out);
        }
        // Changes land in call order, each on the tree the earlier ones left.
        ended.sort_by_key(|(id, ..)| calls.iter().position(|c| c.id == *id));
        let cap = usize::try_from(rt.services.options.tool_cap("agent")).unwrap_or(usize::MAX);
        let mut results = Vec::new();
        for (id, ending, stats) in ended {
            rt.stats.add(&stats);
            let piece = format!("{}.{id}", caller.id);
            let result = ending.map(|mut ending| {
                let landed = land::land(&piece, &mut ending, &mut *rt.sink);
                land::result_json(&ending, &landed, cap, &mut *rt.sink)
            });
            results.push((id, result));
        }
        for (id, first) in copies {
            let text = format!(
                "[same piece as {first}, asked twice in this turn: it ran once, and its result \
                 is {first}'s]"
            );
            results.push((id, Ok(text)));
        }
        results
    }
}

/// A piece that ran: its call's id, how it ended, its generations' time.
type Ended = (String, Result<piece::Ending, ToolError>, Stats);

/// The calls with distinct inputs (in order), and each copy's id with its first's.
fn once_each(calls: &[Call]) -> (Vec<Call>, Vec<(String, String)>) {
    let mut distinct: Vec<Call> = Vec::new();
    let mut copies = Vec::new();
    for call in calls {
        match distinct.iter().find(|d| d.input == call.input) {
            Some(first) => copies.push((call.id.clone(), first.id.clone())),
            None => distinct.push(call.clone()),
        }
    }
    (distinct, copies)
}

/// How a piece's or an attempt's task ended without returning.
pub(crate) fn stopped(e: &tokio::task::JoinError) -> &'static str {
    if e.is_panic() { "panicked" } else { "was stopped" }
}

/// A lock whose holder panicked still guards plain data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
