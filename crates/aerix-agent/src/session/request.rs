//! One request of a session, whichever front end submitted it: its snapshot, `session.start`
//! and checkpoint; `UserPromptSubmit`; the runtime over the session's services; the root live
//! for the next request; `session.end` and the diff.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::request::{Request, Start, run_request};
use crate::runtime::CoreError;
use aerix_session::Outcome;
use aerix_tools::Cancel;

use super::gates::Asking;
use super::{Ended, Session, Starting, exit_of};
use crate::attach::SessionBranch;
use crate::bridge;
use crate::hooks::AgentHooks;
use crate::startup::{self, Snapshot, Stop};

/// What ended a request before or while its root ran.
struct Stopped {
    outcome: Outcome,
    error: Option<String>,
}

impl Session {
    pub(super) async fn request(&mut self, text: String, cancel: &Cancel) -> Ended {
        let number = self.next_number;
        self.next_number += 1;
        let first = self.ran == 0;
        self.ran += 1;
        // The tree before this request: its diff's base (the first request's is the startup's,
        // taken before `SessionStart`) and the checkpoint's commit.
        let own = if first { None } else { Snapshot::take(&self.root) };
        let start = match self.start.take() {
            Some(start) => Ok(start),
            None => Start::next(self.live.take(), &self.record.log_path())
                .map_err(|e| format!("the session log: {e}")),
        };
        let resumed = !matches!(start, Ok(Start::Fresh));
        let snapshot = own.as_ref().or(self.base.as_ref());
        let starting = Starting {
            settings: &self.settings,
            session: &self.id,
            project: &self.project,
            cwd: &self.cwd,
            profile: self.profile.as_ref(),
        };
        let start_commit = snapshot.and_then(|s| s.base.clone());
        self.record.start(starting.event(&text, resumed, start_commit));
        let base = snapshot.and_then(|s| s.base.as_deref());
        let (checkpoint, failed) = crate::checkpoint::take(&self.root, &self.id, number, base);
        if let Some(why) = failed {
            self.record.note(format!("aerix: no checkpoint before this request: {why}"));
        }
        crate::runtime::Sink::event(&mut self.record, checkpoint);
        // The session's first request makes its profile branch.
        if first && let Some(line) = self.branch.as_ref().and_then(SessionBranch::make) {
            self.record.note(line);
        }
        let ran = match start {
            Ok(start) => self.run_root(text, start, cancel).await,
            Err(error) => Err(Stopped { outcome: Outcome::Failed, error: Some(error) }),
        };
        let (outcome, answer, reason, error) = match ran {
            Ok((outcome, answer, reason)) => (outcome, answer, reason, None),
            Err(Stopped { outcome, error }) => (outcome, None, None, error),
        };
        self.last = Some(outcome);
        let exit = exit_of(outcome, &self.cancelled_exit);
        self.record.end(outcome, exit);
        let since_request = own.or_else(|| self.base.clone());
        let since_session = self.base.clone();
        let log_failed = self.record.failed();
        Ended { outcome, exit, answer, reason, error, since_request, since_session, log_failed }
    }

    /// The prompt submitted (its skill, `UserPromptSubmit`), then the root's turns.
    async fn run_root(
        &mut self,
        text: String,
        start: Start,
        cancel: &Cancel,
    ) -> Result<(Outcome, Option<String>, Option<String>), Stopped> {
        // `/name args` on the first line: that line becomes the skill's text.
        let prompt = match self.skills.expand_prompt(&text) {
            Ok(Some(expanded)) => expanded,
            Ok(None) => text,
            Err(e) => {
                start.release(&mut self.client).await;
                return Err(Stopped { outcome: Outcome::Failed, error: Some(e.to_string()) });
            }
        };
        let submitted = startup::prompt_submit(&self.hooks, &prompt, cancel, &mut self.record);
        let prompt_context = match submitted {
            Ok(context) => context,
            Err(stop) => {
                start.release(&mut self.client).await;
                return Err(match stop {
                    Stop::Cancelled => Stopped { outcome: Outcome::Cancelled, error: None },
                    Stop::Killed(reason) => {
                        Stopped { outcome: Outcome::Killed, error: Some(reason) }
                    }
                });
            }
        };
        let request = Request {
            prompt,
            instructions: self.instructions.clone(),
            hook_context: self.hook_context.clone(),
            prompt_context,
            main: self.main.alias.clone(),
            window: self.main.window,
            json: self.main.json,
            decision: self.decision.clone(),
            max_turns: self.max_turns,
            start,
        };
        let agent_hooks = AgentHooks {
            hooks: Arc::clone(&self.hooks),
            record: Mutex::new(self.record.clone()),
            cancel: cancel.clone(),
        };
        let mut sink = self.record.clone();
        let runtime = bridge::runtime(
            &mut self.client,
            &mut sink,
            &self.settings,
            Arc::clone(&self.prompts),
            bridge::Place {
                cwd: &self.cwd,
                additional: self.permissions.additional_directories(),
                worktrees: self.worktrees.as_ref(),
                checks: &self.checks,
            },
            cancel.clone(),
        )
        .with_members(self.members.clone())
        .with_hooks(Arc::new(agent_hooks))
        .with_definitions(Arc::clone(&self.agents))
        .with_skills(Arc::clone(&self.skills))
        .with_external(Arc::clone(&self.mcp))
        .with_permissions(Some(Arc::clone(&self.permissions)));
        // Who answers a question: the front end, unless it cannot ask (`aerix -p`: the
        // permissions deny what would ask, and a plan is accepted as written).
        let mut runtime = match self.permissions.front() {
            aerix_permissions::Front::Headless => runtime,
            aerix_permissions::Front::Screen => {
                let outs = self.record.outs().clone();
                let one = tokio::sync::Mutex::new(());
                let gates = Arc::new(Asking { outs, cancel: cancel.clone(), one });
                runtime.with_gates(Arc::clone(&gates) as Arc<dyn crate::runtime::PlanGate>, gates)
            }
        };
        let started = Instant::now();
        let result = run_request(&mut runtime, request).await;
        if std::env::var_os("AERIX_TIMING").is_some() {
            self.record.note(timing(&runtime.stats, started, self.started));
        }
        drop(runtime);
        match result {
            Ok(end) => {
                self.live = end.root;
                Ok((end.end.outcome, end.end.final_text, end.end.reason))
            }
            Err(CoreError::Cancelled) => Err(Stopped { outcome: Outcome::Cancelled, error: None }),
            // A hook's `continue: false` before the root ran (RouteDecision).
            Err(CoreError::Killed(reason)) => {
                Err(Stopped { outcome: Outcome::Killed, error: Some(reason) })
            }
            Err(e) => {
                let error = format!("{:#}", anyhow::Error::from(e));
                Err(Stopped { outcome: Outcome::Failed, error: Some(error) })
            }
        }
    }
}

/// For scripts/bench-aerix (`aerix -p` prints it on stderr): the runtime's own cost, apart
/// from the pool's generations.
fn timing(stats: &crate::runtime::Stats, request_start: Instant, process_start: Instant) -> String {
    let wall = request_start.elapsed();
    let overhead = wall.saturating_sub(stats.generating);
    let first = stats.first_generate.map(|t| t.duration_since(process_start));
    format!(
        "timing: first_generate_ms={:.2} turns={} generations={} wall_ms={:.2} generating_ms={:.2} overhead_per_turn_ms={:.3}",
        first.map(|d| d.as_secs_f64() * 1e3).unwrap_or(f64::NAN),
        stats.turns,
        stats.generations,
        wall.as_secs_f64() * 1e3,
        stats.generating.as_secs_f64() * 1e3,
        overhead.as_secs_f64() * 1e3 / f64::from(stats.turns.max(1)),
    )
}
