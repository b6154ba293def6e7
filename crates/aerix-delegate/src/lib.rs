//! Delegation, as the turn loop calls it through `aerix_core::Delegation`: a turn's `agent`
//! calls run after its other calls, each a piece (`piece.rs`: attempts in worktrees of their
//! own, `attempt.rs`: an implementer and its check, `checks.rs`: test commands), up to
//! `delegation.parallel` at once; their changes land in the caller's tree in call order
//! (`land.rs`).
//!
//! Each piece runs on a thread of its own (scoped, so it borrows the caller's prompts, hooks
//! and sink) driving its future with the request's tokio handle, on a pool connection of its
//! own: tools block (`bash` may run for minutes), and a blocking call in one piece must not
//! stall the others, which concurrent futures on one task would. The caller's task waits in a
//! blocking section meanwhile (it has nothing else to do until its pieces end).

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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aerix_core::{
    AskGate, Caller, Compaction, Connect, Definitions, Delegation, Options, Permissions, Prompts,
    Runtime, RuntimeHooks, Sink, Skills, Stats,
};
use aerix_tools::{Cancel, Roots, Sandbox, ToolError};
use aerix_turn::Call;

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

/// A piece that ran: its call's id, how it ended, its generations' time.
type Ended = (String, Result<piece::Ending, ToolError>, Stats);

/// What every piece of one turn shares: the caller's runtime, borrowed.
pub(crate) struct Shared<'s> {
    pub(crate) delegator: &'s Delegator,
    pub(crate) options: &'s Options,
    pub(crate) prompts: &'s Prompts,
    pub(crate) cwd: &'s std::path::Path,
    pub(crate) roots: Roots,
    pub(crate) sandbox: Option<Sandbox>,
    pub(crate) hooks: &'s dyn RuntimeHooks,
    pub(crate) definitions: &'s dyn Definitions,
    pub(crate) skills: &'s dyn Skills,
    pub(crate) external: &'s dyn aerix_core::ExternalTools,
    pub(crate) ask_gate: &'s dyn AskGate,
    pub(crate) permissions: &'s dyn Permissions,
    pub(crate) checks: &'s [String],
    pub(crate) compaction: Arc<dyn Compaction>,
    pub(crate) delegation: Arc<dyn Delegation>,
    pub(crate) cancel: Cancel,
    pub(crate) sink: Mutex<&'s mut dyn Sink>,
}

impl Delegation for Delegator {
    fn depth(&self) -> u32 {
        self.depth
    }

    /// Runs `calls` as pieces, at most `parallel` at once; the pieces' time is added to the
    /// caller's stats.
    fn run_all(
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
        let calls = calls.as_slice();
        // In place (no worktrees), pieces would edit one tree at once: one at a time.
        let parallel = if self.worktrees.is_some() { self.parallel } else { 1 };
        let workers = usize::try_from(parallel).unwrap_or(1).clamp(1, calls.len());
        let checks = rt.checks.clone();
        let handle = tokio::runtime::Handle::current();
        let options = rt.options.clone();
        let shared = Shared {
            delegator: self,
            options: &options,
            prompts: rt.prompts,
            cwd: rt.cwd,
            roots: rt.roots.clone(),
            sandbox: rt.sandbox.clone(),
            hooks: rt.hooks,
            definitions: rt.definitions,
            skills: rt.skills,
            external: rt.external,
            ask_gate: rt.ask_gate,
            permissions: rt.permissions,
            checks: &checks,
            compaction: Arc::clone(&rt.compaction),
            delegation: Arc::clone(&rt.delegation),
            cancel: rt.cancel.clone(),
            sink: Mutex::new(&mut *rt.sink),
        };
        let next = AtomicUsize::new(0);
        let ended: Mutex<Vec<Ended>> = Mutex::new(Vec::new());
        tokio::task::block_in_place(|| {
            std::thread::scope(|scope| {
                let running: Vec<_> = (0..workers)
                    .map(|_| {
                        scope.spawn(|| {
                            // Each worker takes the next piece when its last one ends.
                            while let Some(call) = calls.get(next.fetch_add(1, Ordering::SeqCst)) {
                                if shared.cancel.is_cancelled() {
                                    break;
                                }
                                let (result, stats) =
                                    handle.block_on(piece::run(&shared, caller, call));
                                lock(&ended).push((call.id.clone(), result, stats));
                            }
                        })
                    })
                    .collect();
                for worker in running {
                    // A worker that panicked loses its piece: its call reads "did not run".
                    let _ = worker.join();
                }
            });
        });
        drop(shared);
        let mut ended = std::mem::take(&mut *lock(&ended));
        // Changes land in call order, each on the tree the earlier ones left.
        ended.sort_by_key(|(id, ..)| calls.iter().position(|c| c.id == *id));
        let cap = usize::try_from(rt.options.tool_cap("agent")).unwrap_or(usize::MAX);
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

/// A lock whose holder panicked still guards plain data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
