//! The runtime's own budget of each context (spec, "Context management"): a compaction pass
//! before a turn over the soft limit or without room, and results fitted to the room left.
//! `select` decides what goes (pure); this module applies it through the `Context` (the pool
//! counts, a `segment` event per change), fires `PreCompact`/`ContextCompact`, tells the model
//! and writes the `compaction` event.

mod fit;
mod select;

use aerix_session::Event;

use crate::agent::Agent;
use crate::context::Label;
use crate::hooks::HookFire;
use crate::{CoreError, Runtime};

pub(crate) use fit::append_results;
use select::{Budget, Why, marker, plan};

/// How the note that tells the model about a pass starts.
const NOTE_PREFIX: &str = "[compaction]";

/// What a pass came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Nothing could be compacted: no hook fired, no event.
    Nothing,
    /// A `PreCompact` hook blocked it.
    Blocked,
    /// This many segments were replaced by markers.
    Compacted(u32),
}

/// Before a turn: a pass when the context is over the soft limit or the turn has no room.
/// The hard limit comes after it (`Agent::turn_tokens`).
pub(crate) async fn before_turn(agent: &mut Agent, rt: &mut Runtime<'_>) -> Result<(), CoreError> {
    let budget = Budget::new(&rt.settings.context, agent.spec.window);
    match budget.before_turn(agent.context.total_tokens) {
        Some(why) => pass(agent, rt, why).await.map(|_| ()),
        None => Ok(()),
    }
}

/// One compaction pass: `PreCompact` (a block skips it), markers until the target, a note for
/// the model, the `compaction` event, `ContextCompact`. A hook's `continue: false` kills the
/// agent.
pub(crate) async fn pass(
    agent: &mut Agent,
    rt: &mut Runtime<'_>,
    why: Why,
) -> Result<Pass, CoreError> {
    let budget = Budget::new(&rt.settings.context, agent.spec.window);
    let before = agent.context.total_tokens;
    if plan(&agent.context.segments, before, budget.target).is_empty() {
        return Ok(Pass::Nothing);
    }
    let id = agent.spec.id.clone();
    let pre = rt.hooks.fire(HookFire::PreCompact { agent: &id, trigger: "auto" });
    if let Some(reason) = pre.stop {
        return Err(CoreError::Killed(format!("a PreCompact hook ended the agent: {reason}")));
    }
    if let Some(reason) = pre.block {
        rt.sink.event(event(&id, why, &budget, before, before, Vec::new(), Some(reason)));
        return Ok(Pass::Blocked);
    }
    // Planned on the markers' estimated size; the pool's count after decides whether a second
    // round is needed (a marker larger than estimated).
    let mut compacted = Vec::new();
    for _round in 0..2 {
        let picked = plan(&agent.context.segments, agent.context.total_tokens, budget.target);
        if picked.is_empty() {
            break;
        }
        let texts: Vec<(String, String)> = picked
            .iter()
            .map(|&i| &agent.context.segments[i])
            .map(|s| (s.id.clone(), marker(s)))
            .collect();
        compacted.extend(texts.iter().map(|(id, _)| id.clone()));
        agent.context.replace_all(rt.client, rt.sink, texts).await?;
    }
    let after = agent.context.total_tokens;
    let n = u32::try_from(compacted.len()).unwrap_or(u32::MAX);
    // Only the latest pass's note stays: notes are never compacted, so they would pile up.
    let earlier: Vec<String> = agent
        .context
        .segments
        .iter()
        .filter(|s| s.label == Label::Note && s.text.starts_with(NOTE_PREFIX))
        .map(|s| s.id.clone())
        .collect();
    agent.context.remove_all(rt.client, rt.sink, &earlier).await?;
    agent
        .add_note(
            rt,
            Label::Note,
            format!(
                "{NOTE_PREFIX} The context was near its window of {} tokens, so the runtime replaced {n} older segments ({}) with markers: {before} -> {after} tokens. Call a tool again if you need what a compacted result said.",
                budget.window,
                compacted.join(", "),
            ),
        )
        .await?;
    rt.sink.event(event(&id, why, &budget, before, after, compacted, None));
    let post = rt.hooks.fire(HookFire::ContextCompact { agent: &id, before, after, compacted: n });
    if let Some(reason) = post.stop {
        return Err(CoreError::Killed(format!("a ContextCompact hook ended the agent: {reason}")));
    }
    let post = rt.hooks.fire(HookFire::PostCompact { agent: &id, trigger: "auto" });
    if let Some(reason) = post.stop {
        return Err(CoreError::Killed(format!("a PostCompact hook ended the agent: {reason}")));
    }
    Ok(Pass::Compacted(n))
}

fn event(
    agent: &str,
    why: Why,
    budget: &Budget,
    before: u32,
    after: u32,
    compacted: Vec<String>,
    blocked: Option<String>,
) -> Event {
    Event::Compaction {
        agent: agent.to_owned(),
        reason: why.as_str().to_owned(),
        before,
        after,
        target: budget.target,
        window: budget.window,
        compacted,
        blocked,
    }
}
