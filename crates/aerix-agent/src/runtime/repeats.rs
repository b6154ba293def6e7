//! The repeat guard as the turn loop uses it (`context.repeat_guard`; the rules are
//! `aerix_turn::repeats`): a repeat whose earlier result (or failure) still stands in the context
//! is answered with a pointer to it. While a background job of the agent runs, or has ended
//! unreported, nothing stands: the job may change the files at any time.

use aerix_turn::Call;
use aerix_turn::repeats::{Repeats, Seen};
use serde_json::Value;

use crate::runtime::context::Context;

/// One agent's repeat guard as the turn loop uses it: the standing results, the calls run
/// this turn (their results stand though they reach the context at the turn's end), and why
/// the agent is stuck.
#[derive(Clone, Debug, Default)]
pub struct Guard {
    repeats: Repeats,
    this_turn: Vec<String>,
    stuck: Option<String>,
}

impl Guard {
    pub fn new_turn(&mut self) {
        self.this_turn.clear();
    }

    /// The pointer (and whether it points at a failure) that answers `call` instead of
    /// running it, when it repeats a call whose result stands; the last of a row that goes
    /// nowhere also marks the agent stuck. `jobs`: background jobs running or unreported.
    pub fn answer(
        &mut self,
        call: &Call,
        context: &Context,
        jobs: usize,
    ) -> Option<(String, bool)> {
        if jobs > 0 {
            self.repeats.changed();
        }
        let seen = self.repeats.check(&call.tool, &call.input);
        let Seen::Repeat { earlier, failed, .. } = &seen else {
            return None;
        };
        if !self.stands(&call.tool, earlier, context) {
            // Compacted or dropped: the call runs again, as a fresh one.
            self.repeats.forget(earlier);
            let _ = self.repeats.check(&call.tool, &call.input);
            return None;
        }
        if seen.is_stuck() {
            self.stuck = Some(Repeats::stuck(&call.tool, &call.input, earlier, *failed));
        }
        Some((Repeats::pointer(earlier, *failed), *failed))
    }

    /// `call` ran (it was not answered by `answer`) with result `ok`; `jobs` as for `answer`
    /// (a result got while a job runs may be stale at once).
    pub fn ran(&mut self, call: &Call, ok: bool, jobs: usize) {
        self.repeats.ran(&call.tool, &call.input, &call.id, ok);
        if jobs > 0 {
            self.repeats.changed();
        }
        self.this_turn.push(call.id.clone());
    }

    pub fn take_stuck(&mut self) -> Option<String> {
        self.stuck.take()
    }

    /// The tools a turn's schema offers: `tools`, less `repo_map` once its result stands (it
    /// is computed once per request: a second call can only repeat it).
    pub fn offered(&self, tools: &[String], context: &Context) -> Vec<String> {
        let empty = Value::Object(Default::default());
        let mapped = self
            .repeats
            .earlier("repo_map", &empty)
            .is_some_and(|id| self.stands("repo_map", id, context));
        let offered: Vec<String> =
            tools.iter().filter(|t| !(mapped && *t == "repo_map")).cloned().collect();
        if offered.is_empty() { tools.to_vec() } else { offered }
    }

    /// Whether the result of call `id` is as it was: run this turn, or in the context
    /// uncompacted.
    fn stands(&self, tool: &str, id: &str, context: &Context) -> bool {
        let header = format!("[{tool} {id}]");
        self.this_turn.iter().any(|t| t == id)
            || context.get(id).is_some_and(|s| s.text.starts_with(&header))
    }
}
