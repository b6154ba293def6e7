//! One compaction pass: `select` decides what goes (pure); this applies it through the
//! `Context` (the pool counts, a `segment` event per change), fires `PreCompact`/
//! `ContextCompact`/`PostCompact`, tells the model and writes the `compaction` event.

use crate::runtime::{Context, CoreError, HookFire, Label, Runtime};
use aerix_session::Event;

use crate::compact::select::{Budget, Why, marker, plan};

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

/// One compaction pass: `PreCompact` (a block skips it), markers until the target, a note for
/// the model, the `compaction` event, `ContextCompact`. A hook's `continue: false` kills the
/// agent.
pub(crate) async fn pass(
    budget: Budget,
    context: &mut Context,
    rt: &mut Runtime<'_>,
    why: Why,
) -> Result<Pass, CoreError> {
    let before = context.total_tokens;
    if plan(&context.segments, before, budget.target).is_empty() {
        return Ok(Pass::Nothing);
    }
    let id = context.agent.clone();
    let pre = rt.services.hooks.fire(HookFire::PreCompact { agent: &id, trigger: "auto" });
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
        let picked = plan(&context.segments, context.total_tokens, budget.target);
        if picked.is_empty() {
            break;
        }
        let texts: Vec<(String, String)> = picked
            .iter()
            .map(|&i| &context.segments[i])
            .map(|s| (s.id.clone(), marker(s)))
            .collect();
        compacted.extend(texts.iter().map(|(id, _)| id.clone()));
        context.replace_all(rt.client, rt.sink, texts).await?;
    }
    let after = context.total_tokens;
    let n = u32::try_from(compacted.len()).unwrap_or(u32::MAX);
    // Only the latest pass's note stays: notes are never compacted, so they would pile up.
    let earlier: Vec<String> = context
        .segments
        .iter()
        .filter(|s| s.label == Label::Note && s.text.starts_with(NOTE_PREFIX))
        .map(|s| s.id.clone())
        .collect();
    context.remove_all(rt.client, rt.sink, &earlier).await?;
    context
        .add_note(
            rt.client,
            rt.sink,
            Label::Note,
            format!(
                "{NOTE_PREFIX} The context was near its window of {} tokens, so the runtime replaced {n} older segments ({}) with markers: {before} -> {after} tokens. Call a tool again if you need what a compacted result said.",
                budget.window,
                compacted.join(", "),
            ),
        )
        .await?;
    rt.sink.event(event(&id, why, &budget, before, after, compacted, None));
    let post = rt.services.hooks.fire(HookFire::ContextCompact {
        agent: &id,
        before,
        after,
        compacted: n,
    });
    if let Some(reason) = post.stop {
        return Err(CoreError::Killed(format!("a ContextCompact hook ended the agent: {reason}")));
    }
    let post = rt.services.hooks.fire(HookFire::PostCompact { agent: &id, trigger: "auto" });
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
