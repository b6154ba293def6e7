//! The contexts a fake pool holds, as the pool keeps them: segments appended, replaced and
//! removed, counted at a token per 4 bytes, a reply appended under `append_as` and answered
//! with the context's counts in its `done`. Both fakes (`fake::Member`, `pool::Pool`) keep
//! theirs here.

use std::collections::HashMap;

use aerix_agent::runtime::CoreError;
use caldrix_client::Counts;
use caldrix_proto::{
    ContextId, Done, Edit, Generate, Role, Segment, SegmentCount, SegmentCounts, StopReason, Usage,
};

/// The fake's token count of a text: a token per 4 bytes.
pub fn tokens(text: &str) -> u32 {
    u32::try_from(text.len().div_ceil(4)).unwrap_or(u32::MAX)
}

#[derive(Default)]
pub struct Contexts {
    next: ContextId,
    by_id: HashMap<ContextId, Vec<Segment>>,
}

impl Contexts {
    pub fn create(&mut self, segments: Vec<Segment>) -> Result<Counts, CoreError> {
        self.next += 1;
        self.by_id.insert(self.next, segments);
        self.counts(self.next)
    }

    pub fn segments(&self, context: ContextId) -> Result<&[Segment], CoreError> {
        self.by_id
            .get(&context)
            .map(Vec::as_slice)
            .ok_or_else(|| CoreError::Failed(format!("no context {context}")))
    }

    pub fn counts(&self, context: ContextId) -> Result<Counts, CoreError> {
        let segments = self.segments(context)?;
        Ok(Counts {
            context,
            segments: segments
                .iter()
                .map(|s| SegmentCount { id: s.id.clone(), tokens: tokens(&s.text) })
                .collect(),
            total_tokens: segments.iter().map(|s| tokens(&s.text)).sum(),
        })
    }

    pub fn edit(&mut self, context: ContextId, edits: Vec<Edit>) -> Result<Counts, CoreError> {
        let segments = self
            .by_id
            .get_mut(&context)
            .ok_or_else(|| CoreError::Failed(format!("no context {context}")))?;
        for edit in edits {
            match edit {
                Edit::Append { segment } => segments.push(segment),
                Edit::Replace { id, text, pinned } => {
                    let segment = segments
                        .iter_mut()
                        .find(|s| s.id == id)
                        .ok_or_else(|| CoreError::Failed(format!("no segment {id}")))?;
                    segment.text = text;
                    segment.pinned = pinned.unwrap_or(segment.pinned);
                }
                Edit::Remove { id } => segments.retain(|s| s.id != id),
            }
        }
        self.counts(context)
    }

    pub fn drop_context(&mut self, context: ContextId) {
        self.by_id.remove(&context);
    }

    /// A generation of `generate` answered with `text`: appended under its `append_as`, and
    /// its `done` with the context's counts then (as the pool's).
    pub fn reply(
        &mut self,
        generate: &Generate,
        text: String,
        stop: StopReason,
    ) -> Result<Done, CoreError> {
        let prompt_tokens = self.counts(generate.context)?.total_tokens;
        let counts = match &generate.append_as {
            Some(id) => {
                let segment = Segment {
                    id: id.clone(),
                    role: Role::Assistant,
                    text: text.clone(),
                    pinned: false,
                };
                self.by_id.entry(generate.context).or_default().push(segment);
                let Counts { segments, total_tokens, .. } = self.counts(generate.context)?;
                Some(SegmentCounts { segments, total_tokens })
            }
            None => None,
        };
        let usage = Usage {
            prompt_tokens,
            completion_tokens: tokens(&text),
            recomputed_from: None,
            prefill_ms: 0.0,
            decode_ms: 0.0,
        };
        Ok(Done { text, stop, usage, one_of: None, logprobs: None, tool_calls: vec![], counts })
    }
}
