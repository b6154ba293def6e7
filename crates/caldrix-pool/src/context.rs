//! Contexts: lists of segments on a member, rendered through its chat template. The daemon is
//! the only source of token counts.

use std::collections::HashMap;

use caldrix_engine::{EngineError, GenerationPrompt, Message, Model, Special, Token};

use crate::vocab::{RemoteVocab, Vocab};
use caldrix_proto::{ContextId, Edit, ErrorKind, Segment, SegmentCount};

use crate::PoolError;
use crate::tools::Tools;

/// The most text one context's segments may hold (64 MiB): far past any window, so only a
/// runaway client meets it, and the daemon's memory stays bounded by contexts, not edits.
pub const MAX_CONTEXT_BYTES: usize = 64 << 20;

#[derive(Debug, Clone)]
pub struct Context {
    pub member: String,
    pub segments: Vec<Segment>,
    /// The tools it offers (`context_create`), rendered with every prefix.
    pub(crate) tools: Tools,
    /// Renders and tokens of the segments counted so far (edits truncate it).
    counted: Counted,
}

/// The render of `segments[..ends.len()]` and its tokens, with where each segment ends in both.
/// An append renders the conversation once and tokenizes only the new text when the template
/// kept the earlier text as it was and the new text starts with a special token: llama.cpp's
/// tokenizer splits at special tokens before anything else, so the tokens are exactly those of
/// the whole render. Otherwise the whole render is tokenized.
#[derive(Debug, Clone, Default)]
struct Counted {
    text: String,
    tokens: Vec<Token>,
    /// Per counted segment: its end in `text` (bytes) and in `tokens`; `None` once a render
    /// did not extend the previous one (then an edit recounts from the start).
    ends: Vec<(Option<usize>, usize)>,
}

impl Context {
    #[cfg(test)]
    pub fn new(member: String) -> Context {
        Context::with_tools(member, Tools::default())
    }

    pub(crate) fn with_tools(member: String, tools: Tools) -> Context {
        Context { member, segments: Vec::new(), tools, counted: Counted::default() }
    }

    /// The messages of `segments` (a prefix of this context's) as the template renders them.
    fn messages(&self, segments: &[Segment], vocab: &Vocab) -> Vec<Message> {
        self.tools.messages(segments, vocab.takes_tools())
    }

    fn render(
        &self,
        segments: &[Segment],
        vocab: &Vocab,
        prompt: GenerationPrompt,
    ) -> Result<String, PoolError> {
        vocab.render(&self.messages(segments, vocab), self.tools.for_template(), prompt)
    }

    /// Counts the segments not counted yet. A remote engine's tokenizer counts each render
    /// whole (one request; the incremental path would take three).
    fn count(&mut self, vocab: &Vocab) -> Result<(), PoolError> {
        if let Some(engine) = vocab.engine_renders() {
            let messages = self.messages(&self.segments, vocab);
            return self.count_rendered_by(engine, &messages);
        }
        for i in self.counted.ends.len()..self.segments.len() {
            let text = self.render(&self.segments[..=i], vocab, GenerationPrompt::Omit)?;
            let chained = self.counted.ends.last().is_none_or(|(end, _)| end.is_some());
            let delta = text.strip_prefix(self.counted.text.as_str());
            match (delta, vocab.local()) {
                (Some(delta), Some(model))
                    if i > 0 && chained && starts_with_special(model, delta) =>
                {
                    let tokens = model.tokenize(delta, Special::Parse);
                    self.counted.tokens.extend(tokens);
                    self.counted.ends.push((Some(text.len()), self.counted.tokens.len()));
                }
                (extends, _) => {
                    self.counted.tokens = vocab.tokenize_prompt(&text)?;
                    let end = (i == 0 || (extends.is_some() && chained)).then_some(text.len());
                    self.counted.ends.push((end, self.counted.tokens.len()));
                }
            }
            self.counted.text = text;
        }
        Ok(())
    }

    /// [`Context::count`] where the engine renders: each prefix is the engine's tokens of the
    /// conversation so far. No text is kept (its ends are 0), so a prefix extends the one
    /// before when its tokens do.
    fn count_rendered_by(
        &mut self,
        engine: &RemoteVocab,
        messages: &[Message],
    ) -> Result<(), PoolError> {
        for i in self.counted.ends.len()..messages.len() {
            let tokens = engine.chat_tokens(&messages[..=i], GenerationPrompt::Omit)?;
            let chained = self.counted.ends.last().is_none_or(|(end, _)| end.is_some());
            let extends = tokens.starts_with(&self.counted.tokens);
            let end = (i == 0 || (extends && chained)).then_some(0);
            self.counted.tokens = tokens;
            self.counted.ends.push((end, self.counted.tokens.len()));
        }
        Ok(())
    }

    /// Forgets the counts from segment `i` on.
    fn uncount_from(&mut self, i: usize) {
        let counted = &mut self.counted;
        if i >= counted.ends.len() {
            return;
        }
        match i.checked_sub(1).map(|j| counted.ends[j]) {
            Some((Some(bytes), tokens)) if counted.ends[..i].iter().all(|(e, _)| e.is_some()) => {
                counted.text.truncate(bytes);
                counted.tokens.truncate(tokens);
                counted.ends.truncate(i);
            }
            _ => *counted = Counted::default(),
        }
    }

    /// The prompt's tokens: every segment, then the header of the assistant turn to generate.
    pub(crate) fn prompt(&mut self, vocab: &Vocab) -> Result<Vec<Token>, PoolError> {
        self.count(vocab)?;
        if let Some(engine) = vocab.engine_renders() {
            let messages = self.messages(&self.segments, vocab);
            return engine.chat_tokens(&messages, GenerationPrompt::Add);
        }
        let text = self.render(&self.segments, vocab, GenerationPrompt::Add)?;
        let chained = self.counted.ends.last().is_none_or(|(end, _)| end.is_some());
        match (text.strip_prefix(self.counted.text.as_str()), vocab.local()) {
            (Some(delta), Some(model))
                if chained && !self.segments.is_empty() && starts_with_special(model, delta) =>
            {
                let mut tokens = self.counted.tokens.clone();
                tokens.extend(model.tokenize(delta, Special::Parse));
                Ok(tokens)
            }
            _ => vocab.tokenize_prompt(&text),
        }
    }

    /// Each segment's tokens: counts are differences between renders of successive prefixes,
    /// so tokens that merge across a boundary are counted once (summing separately tokenized
    /// segments would not be). Only segments not counted since the last edit cost a render.
    pub(crate) fn counts(&mut self, vocab: &Vocab) -> Result<(Vec<SegmentCount>, u32), PoolError> {
        self.count(vocab)?;
        let mut before = 0usize;
        let counts = self
            .segments
            .iter()
            .zip(&self.counted.ends)
            .map(|(segment, (_, end))| {
                let tokens = end.saturating_sub(before) as u32;
                before = *end;
                SegmentCount { id: segment.id.clone(), tokens }
            })
            .collect();
        let total = self.prompt(vocab)?.len() as u32;
        Ok((counts, total))
    }

    pub fn apply(&mut self, edits: &[Edit]) -> Result<(), PoolError> {
        // All or nothing: edits apply to a copy that replaces the segments at the end.
        let mut segments = self.segments.clone();
        let mut first_changed = segments.len();
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
                    first_changed = first_changed.min(position(&segments, id)?);
                    let s = find(&mut segments, id)?;
                    s.text.clone_from(text);
                    if let Some(p) = pinned {
                        s.pinned = *p;
                    }
                }
                Edit::Remove { id } => {
                    first_changed = first_changed.min(position(&segments, id)?);
                    segments.retain(|s| &s.id != id);
                }
            }
        }
        let bytes: usize = segments.iter().map(|s| s.text.len()).sum();
        if bytes > MAX_CONTEXT_BYTES {
            return Err(PoolError::new(
                ErrorKind::TooLong,
                format!(
                    "the context's segments would hold {bytes} bytes of text, more than the \
                     limit of {MAX_CONTEXT_BYTES}"
                ),
            ));
        }
        self.segments = segments;
        self.uncount_from(first_changed);
        Ok(())
    }
}

fn position(segments: &[Segment], id: &str) -> Result<usize, PoolError> {
    segments
        .iter()
        .position(|s| s.id == id)
        .ok_or_else(|| PoolError::new(ErrorKind::UnknownSegment, format!("no segment `{id}`")))
}

/// Whether `text` starts with a special token (one that exists only when special tokens are
/// parsed: its text tokenized as plain text gives something else).
fn starts_with_special(model: &Model, text: &str) -> bool {
    // A special token's text is short: tokenizing the start of `text` is enough.
    let mut cut = text.len().min(64);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let Some(first) = model.tokenize(&text[..cut], Special::Parse).first().copied() else {
        return false;
    };
    let piece = model.token_bytes(first);
    if !text.as_bytes().starts_with(&piece) {
        return false;
    }
    let Ok(piece) = std::str::from_utf8(&piece) else { return false };
    model.tokenize(piece, Special::Plain) != [first]
}

fn find<'a>(segments: &'a mut [Segment], id: &str) -> Result<&'a mut Segment, PoolError> {
    segments
        .iter_mut()
        .find(|s| s.id == id)
        .ok_or_else(|| PoolError::new(ErrorKind::UnknownSegment, format!("no segment `{id}`")))
}

pub(crate) fn engine(e: EngineError) -> PoolError {
    crate::engine_error(e)
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
        let mut c = Context::new("m".into());
        c.segments.push(seg("a", "1"));
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

    #[test]
    fn a_context_past_its_text_bound_is_too_long_and_unchanged() {
        let mut c = Context::new("m".into());
        let big = "x".repeat(MAX_CONTEXT_BYTES / 2);
        c.apply(&[Edit::Append { segment: seg("a", &big) }]).unwrap();
        let err = c
            .apply(&[
                Edit::Append { segment: seg("b", &big) },
                Edit::Append { segment: seg("c", "y") },
            ])
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::TooLong);
        assert!(err.message.contains("limit of 67108864"), "{}", err.message);
        assert_eq!(c.segments.len(), 1);
    }
}
