//! Delegation: a turn's `agent` calls run after its other calls, each a piece (`piece.rs`:
//! implementer, verifier, retries), up to `delegation.parallel` at once.
//!
//! Each piece runs on a thread of its own (scoped, so it borrows the caller's settings, prompts,
//! hooks and sink) driving its future with the request's tokio handle, on a pool connection of
//! its own: tools block (`bash` may run for minutes), and a blocking call in one piece must not
//! stall the others, which concurrent futures on one task would. The caller's task waits in a
//! blocking section meanwhile (it has nothing else to do until its pieces end).

mod piece;
mod sink;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use aerix_config::Settings;
use aerix_tools::ToolError;

use crate::agent::Agent;
use crate::context::{Label, Segment};
use crate::hooks::HookFire;
use crate::turn::Call;
use crate::{CoreError, Runtime, Stats};

/// `Stop` (the root) and `SubagentStop` continue an agent at most this many times per run.
pub const STOP_CONTINUES: u32 = 5;

/// Splits a turn's calls: the `agent` calls the agent may make run later, together.
pub(crate) fn set_aside(calls: Vec<Call>, tools: &[String]) -> (Vec<Call>, Vec<Call>) {
    if !tools.iter().any(|t| t == "agent") {
        return (calls, Vec::new());
    }
    calls.into_iter().partition(|c| c.tool != "agent")
}

/// Results go back in call order (`c2` before `c10`), whichever ran first.
pub(crate) fn in_call_order(results: &mut [Segment]) {
    results.sort_by_key(|s| s.id.strip_prefix('c').and_then(|n| n.parse::<u32>().ok()));
}

/// `tools` without `agent` for an agent at `depth` when that is the depth limit.
pub(crate) fn without_agent_at(tools: Vec<String>, depth: u32, settings: &Settings) -> Vec<String> {
    if depth < settings.delegation.depth {
        return tools;
    }
    tools.into_iter().filter(|t| t != "agent").collect()
}

/// An `agent` call's result, run by `run_all`.
pub(crate) fn result(agent: &mut Agent, call: &Call) -> Result<String, ToolError> {
    agent.delegated.remove(&call.id).unwrap_or_else(|| {
        Err(ToolError::new("this piece did not run: the request was cancelled before it started"))
    })
}

/// A piece that ran: its call's id, its result, its generations' time.
type Ended = (String, Result<String, ToolError>, Stats);

/// What every piece of one turn shares: the caller's runtime, borrowed.
pub(crate) struct Shared<'s> {
    pub(crate) settings: &'s Settings,
    pub(crate) prompts: &'s crate::Prompts,
    pub(crate) cwd: &'s std::path::Path,
    pub(crate) hooks: &'s dyn crate::RuntimeHooks,
    pub(crate) definitions: &'s dyn crate::Definitions,
    pub(crate) skills: &'s dyn crate::Skills,
    pub(crate) ask_gate: &'s dyn crate::AskGate,
    pub(crate) cancel: aerix_tools::Cancel,
    pub(crate) sink: Mutex<&'s mut dyn crate::Sink>,
}

/// The calling agent, as its pieces see it.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    pub(crate) id: String,
    pub(crate) depth: u32,
    pub(crate) member: String,
    pub(crate) window: u32,
    pub(crate) json: bool,
    /// The leading system and instruction segments: every piece's context starts with them, so
    /// the pool's prefix store resumes their rows.
    pub(crate) prefix: Vec<Segment>,
}

/// Runs `calls` (a turn's `agent` calls) as pieces, at most `delegation.parallel` at once;
/// their results wait in `agent.delegated` for the turn's result path.
pub(crate) async fn run_all(agent: &mut Agent, rt: &mut Runtime<'_>, calls: &[Call]) {
    let caller = Caller {
        id: agent.spec.id.clone(),
        depth: agent.spec.depth,
        member: agent.spec.member.clone(),
        window: agent.spec.window,
        json: agent.spec.json,
        prefix: agent
            .context
            .segments
            .iter()
            .take_while(|s| matches!(s.label, Label::System | Label::Instructions))
            .map(|s| Segment { tokens: 0, ..s.clone() })
            .collect(),
    };
    let workers =
        usize::try_from(rt.settings.delegation.parallel).unwrap_or(1).clamp(1, calls.len());
    let handle = tokio::runtime::Handle::current();
    let shared = Shared {
        settings: rt.settings,
        prompts: rt.prompts,
        cwd: rt.cwd,
        hooks: rt.hooks,
        definitions: rt.definitions,
        skills: rt.skills,
        ask_gate: rt.ask_gate,
        cancel: agent.cancel.clone(),
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
                                handle.block_on(piece::run(&shared, &caller, call));
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
    for (id, result, stats) in lock(&ended).drain(..) {
        rt.stats.generations += stats.generations;
        rt.stats.generating += stats.generating;
        rt.stats.turns += stats.turns;
        if let Some(first) = stats.first_generate {
            rt.stats.first_generate.get_or_insert(first);
        }
        agent.delegated.insert(id, result);
    }
}

/// A final fires `Stop` (the root) or `SubagentStop`; a block continues the agent (the reason is
/// its next instruction), at most `STOP_CONTINUES` times per run. True when it goes on.
pub(crate) async fn stop_continues(
    agent: &mut Agent,
    rt: &mut Runtime<'_>,
    last_message: &str,
) -> Result<bool, CoreError> {
    let active = agent.stop_continues > 0;
    let id = agent.spec.id.clone();
    let (event, reply) = match agent.spec.agent_type.clone() {
        Some(agent_type) => (
            "SubagentStop",
            rt.hooks.fire(HookFire::SubagentStop {
                agent: &id,
                agent_type: &agent_type,
                last_message,
                active,
            }),
        ),
        None => ("Stop", rt.hooks.fire(HookFire::Stop { agent: &id, last_message, active })),
    };
    match reply.block {
        Some(reason) if reply.stop.is_none() && agent.stop_continues < STOP_CONTINUES => {
            agent.stop_continues += 1;
            agent.add_note(rt, Label::Note, format!("[{event} hook] {reason}")).await?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// A lock whose holder panicked still guards plain data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
