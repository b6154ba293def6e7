//! Each context's budget (the spec's "Context management"), as the turn loop calls it through
//! `crate::runtime::Compaction`: a compaction pass before a turn over the soft limit or without
//! room (`pass.rs`, choosing with `select.rs`), a turn's results fitted to the room left
//! (`fit.rs`), and the model's own `context` tool (`tool.rs`). It sees a context's segments
//! and the pool's counts, and changes them only through `Context` (each change to the pool,
//! its counts back, a `segment` event).

mod fit;
mod pass;
mod select;
mod tool;

use crate::runtime::{Compaction, Context, CoreError, Later, Runtime, Segment};
use aerix_tools::ToolError;
use serde_json::Value;

use crate::compact::select::Budget;

/// The window's shares a context keeps to (`context.soft_ratio`, `context.target_ratio`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratios {
    /// Over `soft_ratio × W` a context is compacted before the next turn.
    pub soft_ratio: f64,
    /// A pass stops at or under `target_ratio × W`.
    pub target_ratio: f64,
}

/// The runtime's compaction, for `Runtime::with_compaction`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Compactor {
    pub ratios: Ratios,
}

impl Compactor {
    fn budget(&self, rt: &Runtime<'_>, window: u32) -> Budget {
        Budget::new(&self.ratios, rt.services.options.max_new_tokens, window)
    }
}

impl Compaction for Compactor {
    /// A pass when the context is over the soft limit or the turn has no room.
    fn before_turn<'a>(
        &'a self,
        context: &'a mut Context,
        window: u32,
        rt: &'a mut Runtime<'_>,
    ) -> Later<'a, Result<(), CoreError>> {
        Box::pin(async move {
            let budget = self.budget(rt, window);
            match budget.before_turn(context.total_tokens) {
                Some(why) => pass::pass(budget, context, rt, why).await.map(|_| ()),
                None => Ok(()),
            }
        })
    }

    fn append_results<'a>(
        &'a self,
        context: &'a mut Context,
        window: u32,
        rt: &'a mut Runtime<'_>,
        results: Vec<Segment>,
    ) -> Later<'a, Result<(), CoreError>> {
        Box::pin(async move {
            let budget = self.budget(rt, window);
            fit::append_results(budget, context, rt, results).await
        })
    }

    fn context_tool<'a>(
        &'a self,
        context: &'a mut Context,
        window: u32,
        rt: &'a mut Runtime<'_>,
        input: &'a Value,
    ) -> Later<'a, Result<String, ToolError>> {
        Box::pin(tool::context(context, window, rt, input))
    }
}
