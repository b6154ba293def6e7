//! Contexts: lists of segments on a member, rendered through its chat template. The daemon is
//! the only source of token counts.

use std::collections::HashMap;

use caldrix_engine::{EngineError, GenerationPrompt, Message, Model, Token};
use caldrix_proto::{ContextId, Edit, ErrorKind, Segment, SegmentCount};

use crate::PoolError;

#[derive(Debug, Clone)]
pub struct Context {
    pub member: String,
    pub segments: Vec<Segment>,
}

impl Context {
    fn messages(segments: &[Segment]) -> Vec<Message> {
        segments.iter().map(|s| Message::new(s.role.as_str(), s.text.as_str())).collect()
    }

    /// The prompt's tokens: every segment, then the header of the assistant turn to generate.
    pub fn prompt(&self, model: &Model) -> Result<Vec<Token>, PoolError> {
        let text =
            model.render(&Self::messages(&self.segments), GenerationPrompt::Add).map_err(engine)?;
        Ok(model.tokenize_prompt(&text))
    }

    /// Each segment's tokens: the whole conversation is rendered once per prefix and the token
    /// counts are differences, so tokens that merge across a boundary are counted once (summing
    /// separately tokenized segments would not be).
    pub fn counts(&self, model: &Model) -> Result<(Vec<SegmentCount>, u32), PoolError> {
        let messages = Self::messages(&self.segments);
        let mut counts = Vec::with_capacity(messages.len());
        let mut before = 0usize;
        for (i, segment) in self.segments.iter().enumerate() {
            let text = model.render(&messages[..=i], GenerationPrompt::Omit).map_err(engine)?;
            let n = model.tokenize_prompt(&text).len();
            counts.push(SegmentCount {
                id: segment.id.clone(),
                tokens: n.saturating_sub(before) as u32,
            });
            before = n;
        }
        let total = self.prompt(model)?.len() as u32;
        Ok((counts, total))
    }

    pub fn apply(&mut self, edits: &[Edit]) -> Result<(), PoolError> {
        // All or nothing: edits apply to a copy that replaces the segments at the end.
        let mut segments = self.segments.clone();
        for edit in edits {
            match edit {
                Edit::Append { segment } => {
                    if segments.iter().any(|s| s.id == segment.id) {
                        return Err(PoolError::new(
                            ErrorKind::BadRequest,
                            format!("segment `{}` already exists", segment.id),
                        ));
                    }
                    segments.push(segment.clone());
                }
                Edit::Replace { id, text, pinned } => {
                    let s = find(&mut segments, id)?;
                    s.text.clone_from(text);
                    if let Some(p) = pinned {
                        s.pinned = *p;
                    }
                }
                Edit::Remove { id } => {
                    find(&mut segments, id)?;
                    segments.retain(|s| &s.id != id);
                }
            }
        }
        self.segments = segments;
        Ok(())
    }
}

fn find<'a>(segments: &'a mut [Segment], id: &str) -> Result<&'a mut Segment, PoolError> {
    segments
        .iter_mut()
        .find(|s| s.id == id)
        .ok_or_else(|| PoolError::new(ErrorKind::UnknownSegment, format!("no segment `{id}`")))
}

fn engine(e: EngineError) -> PoolError {
    PoolError::new(ErrorKind::Engine, e.to_string())
}

/// Every context of the daemon, by id.
#[derive(Debug, Default)]
pub struct Contexts {
    next: ContextId,
    map: HashMap<ContextId, Context>,
}

impl Contexts {
    pub fn insert(&mut self, context: Context) -> ContextId {
        self.next += 1;
        self.map.insert(self.next, context);
        self.next
    }

    pub fn get(&self, id: ContextId) -> Result<&Context, PoolError> {
        self.map.get(&id).ok_or_else(|| unknown(id))
    }

    pub fn get_mut(&mut self, id: ContextId) -> Result<&mut Context, PoolError> {
        self.map.get_mut(&id).ok_or_else(|| unknown(id))
    }

    pub fn remove(&mut self, id: ContextId) -> Result<Context, PoolError> {
        self.map.remove(&id).ok_or_else(|| unknown(id))
    }

    pub fn count_on(&self, member: &str) -> u32 {
        self.map.values().filter(|c| c.member == member).count() as u32
    }

    pub fn drop_member(&mut self, member: &str) {
        self.map.retain(|_, c| c.member != member);
    }
}

fn unknown(id: ContextId) -> PoolError {
    PoolError::new(ErrorKind::UnknownContext, format!("no context {id}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldrix_proto::Role;

    fn seg(id: &str, text: &str) -> Segment {
        Segment { id: id.into(), role: Role::User, text: text.into(), pinned: false }
    }

    #[test]
    fn edits_apply_all_or_nothing() {
        let mut c = Context { member: "m".into(), segments: vec![seg("a", "1")] };
        c.apply(&[
            Edit::Append { segment: seg("b", "2") },
            Edit::Replace { id: "a".into(), text: "x".into(), pinned: Some(true) },
        ])
        .unwrap();
        assert_eq!(c.segments[0].text, "x");
        assert!(c.segments[0].pinned);
        let err = c
            .apply(&[Edit::Remove { id: "a".into() }, Edit::Remove { id: "zz".into() }])
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::UnknownSegment);
        assert_eq!(c.segments.len(), 2, "the failed batch changed nothing");
        let err = c.apply(&[Edit::Append { segment: seg("b", "dup") }]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::BadRequest);
    }
}
