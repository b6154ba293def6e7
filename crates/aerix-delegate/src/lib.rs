//! Delegation, as the turn loop calls it through `aerix_core::Delegation`: a turn's `agent`
//! calls run after its other calls, each a piece (`piece.rs`: implementer, verifier, retries),
//! up to `delegation.parallel` at once.
//!
//! Each piece runs on a thread of its own (scoped, so it borrows the caller's prompts, hooks
//! and sink) driving its future with the request's tokio handle, on a pool connection of its
//! own: tools block (`bash` may run for minutes), and a blocking call in one piece must not
//! stall the others, which concurrent futures on one task would. The caller's task waits in a
//! blocking section meanwhile (it has nothing else to do until its pieces end).

mod piece;
mod sink;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aerix_core::{
    AskGate, Caller, Compaction, Definitions, Delegation, Options, Permissions, Prompts, Runtime,
    RuntimeHooks, Sink, Skills, Stats,
};
use aerix_tools::{Cancel, Roots, Sandbox, ToolError};
use aerix_turn::Call;

/// The `[delegation]` settings and the pool a piece connects to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delegator {
    /// The pool's socket: each piece opens a connection of its own.
    pub socket: PathBuf,
    /// Pieces run at once.
    pub parallel: u32,
    /// Reruns of an implementer whose work failed verification.
    pub retries: u32,
    /// An implementer's and a verifier's turn budget (a definition's `max_turns` wins).
    pub max_turns: u32,
    /// An agent at this depth or deeper gets no `agent` tool.
    pub depth: u32,
}

/// A piece that ran: its call's id, its result, its generations' time.
type Ended = (String, Result<String, ToolError>, Stats);

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
    pub(crate) ask_gate: &'s dyn AskGate,
    pub(crate) permissions: &'s dyn Permissions,
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
        let workers = usize::try_from(self.parallel).unwrap_or(1).clamp(1, calls.len());
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
            ask_gate: rt.ask_gate,
            permissions: rt.permissions,
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
        let mut results = Vec::new();
        for (id, result, stats) in lock(&ended).drain(..) {
            rt.stats.add(&stats);
            results.push((id, result));
        }
        results
    }
}

/// A lock whose holder panicked still guards plain data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
