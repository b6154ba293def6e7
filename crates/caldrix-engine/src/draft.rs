//! Drafts: tokens guessed ahead of a generation and checked by the model in one batch. Two
//! sources: the bytes a constraint forces next (llguidance's fast-forward), tokenized with the
//! model's own tokenizer, and prompt lookup (the tokens that followed the last few generated
//! tokens where they occurred earlier in the context: an `edit`'s `old` text copied from a
//! `read` result). A draft never changes the output: every drafted token is kept only if the
//! model, sampling as it would step by step, chooses it (`running.rs`).

use crate::model::{Model, Special, Token};

/// Longest and shortest n-gram looked up; longer matches are tried first (fewer false hits).
const MAX_NGRAM: usize = 3;
const MIN_NGRAM: usize = 2;

/// Bounds of the adaptive lookup draft.
const MIN_LOOKUP: usize = 2;
const MAX_LOOKUP: usize = 32;
const FIRST_LOOKUP: usize = 8;

/// The most tokens a constraint's forced bytes are drafted as (a long enum value, a key).
pub(crate) const MAX_FORCED: usize = 32;

/// The lookup draft's length for one generation: doubled after a draft taken whole, cut back
/// to what was taken (plus one) otherwise, so a generation that copies drafts long and one
/// that does not wastes little.
#[derive(Debug, Clone)]
pub(crate) struct Lookup {
    k: usize,
}

impl Default for Lookup {
    fn default() -> Self {
        Lookup { k: FIRST_LOOKUP }
    }
}

impl Lookup {
    /// The tokens that followed the most recent earlier occurrence of `history`'s last n tokens
    /// (n from `MAX_NGRAM` down to `MIN_NGRAM`), at most `min(k, room)` of them.
    pub(crate) fn propose(&self, history: &[Token], room: usize) -> Vec<Token> {
        let want = self.k.min(room);
        if want == 0 {
            return Vec::new();
        }
        for n in (MIN_NGRAM..=MAX_NGRAM).rev() {
            if history.len() <= n {
                continue;
            }
            let tail = &history[history.len() - n..];
            // Most recent first: the nearest copy is the likeliest to go on the same way.
            let found = (0..history.len() - n).rev().find(|&i| &history[i..i + n] == tail);
            if let Some(i) = found {
                let from = i + n;
                let to = history.len().min(from + want);
                if from < to {
                    return history[from..to].to_vec();
                }
            }
        }
        Vec::new()
    }

    /// After a draft of `proposed` tokens of which the model took `taken`.
    pub(crate) fn update(&mut self, proposed: usize, taken: usize) {
        if proposed == 0 {
            return;
        }
        self.k = if taken == proposed {
            (self.k * 2).min(MAX_LOOKUP)
        } else {
            (taken + 1).clamp(MIN_LOOKUP, MAX_LOOKUP)
        };
    }
}

/// The bytes a constraint forces next, as the model's tokenizer cuts them (at most
/// `MAX_FORCED` tokens). llguidance's own fast-forward tokens need a tokenizer it knows to be
/// canonical, which llama.cpp's vocabulary is not to it; the model checks these instead.
pub(crate) fn forced(model: &Model, matcher: &mut llguidance::Matcher) -> Vec<Token> {
    let bytes = matcher.compute_ff_bytes();
    if bytes.is_empty() {
        return Vec::new();
    }
    // Forced bytes may end inside a character: tokenize the whole characters only.
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => match std::str::from_utf8(&bytes[..e.valid_up_to()]) {
            Ok(t) => t,
            Err(_) => return Vec::new(),
        },
    };
    if text.is_empty() {
        return Vec::new();
    }
    let mut tokens = model.tokenize(text, Special::Plain);
    tokens.truncate(MAX_FORCED);
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(ids: &[u32]) -> Vec<Token> {
        ids.iter().map(|&i| Token(i)).collect()
    }

    #[test]
    fn lookup_drafts_what_followed_the_latest_match() {
        let lookup = Lookup::default();
        // "1 2 3 4 5 ... 1 2 3" → 4 5 (the longest n-gram, 3 tokens, matches at the start).
        let h = toks(&[1, 2, 3, 4, 5, 9, 9, 1, 2, 3]);
        assert_eq!(lookup.propose(&h, 2), toks(&[4, 5]));
        // The most recent occurrence wins.
        let h = toks(&[7, 8, 1, 7, 8, 2, 7, 8]);
        assert_eq!(lookup.propose(&h, 4)[0], Token(2));
        // Nothing matches: no draft; no room: no draft.
        assert!(lookup.propose(&toks(&[1, 2, 3, 4]), 8).is_empty());
        assert!(lookup.propose(&toks(&[1, 2, 1, 2]), 0).is_empty());
    }

    #[test]
    fn lookup_grows_on_full_takes_and_shrinks_on_misses() {
        let mut l = Lookup::default();
        l.update(8, 8);
        assert_eq!(l.k, 16);
        l.update(16, 16);
        l.update(32, 32);
        assert_eq!(l.k, MAX_LOOKUP);
        l.update(32, 3);
        assert_eq!(l.k, 4);
        l.update(4, 0);
        assert_eq!(l.k, MIN_LOOKUP);
        l.update(0, 0);
        assert_eq!(l.k, MIN_LOOKUP);
    }
}
