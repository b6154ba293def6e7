//! Replaying a scripted reply as if the model had generated it: tokenized with the model's own
//! vocabulary and checked against the request's constraint, with no KV work (`Model::replay`:
//! a scripted pool member), or forced through a session so that its rows are computed and held
//! as a real generation's (`Session::replay_on`: a replay member). Deterministic tests of
//! everything above the engine run on them.

use std::time::Duration;

use crate::constraint::{self, Constraint};
use crate::error::EngineError;
use crate::generate::{GenerateParams, Generation, OneOfScores, StopReason, Timings, TokenLogprob};
use crate::model::{Model, Special, Token};
use crate::session::{Event, Seq, Session};

/// The score a scripted OneOf gives the options it did not choose (the chosen one scores 0):
/// finite, so that it serializes, and far below any real option's.
pub const SCRIPTED_OTHER_OPTION_LOGPROB: f64 = -1000.0;

impl Model {
    /// `reply` as the generation after `prompt`. Refused when the constraint refuses it; cut at
    /// `max_new_tokens` like a real generation.
    pub fn replay(
        &self,
        prompt: &[Token],
        reply: &str,
        params: &GenerateParams,
    ) -> Result<Generation, EngineError> {
        params.check()?;
        let refused = |why: String| EngineError::ScriptRefused { reply: reply.to_owned(), why };
        let mut tokens = self.tokenize(reply, Special::Plain);
        let mut one_of = None;
        let mut stop = StopReason::EndOfTurn;
        match &params.constraint {
            Constraint::None => {}
            Constraint::Json(_) | Constraint::Grammar(_) => {
                let Some(mut matcher) = constraint::matcher_of(self, &params.constraint)? else {
                    return Err(refused("the constraint has no grammar".into()));
                };
                for t in &tokens {
                    matcher.consume_token(t.0).map_err(|e| refused(format!("{e:#}")))?;
                }
                let accepting = matcher.is_accepting().map_err(|e| refused(format!("{e:#}")))?;
                if !accepting {
                    return Err(refused("the JSON value is incomplete".into()));
                }
                stop = StopReason::Complete;
            }
            Constraint::OneOf(options) => {
                constraint::check_options(options)?;
                let chosen = options
                    .iter()
                    .position(|o| o == reply)
                    .ok_or_else(|| refused(format!("it is none of the options {options:?}")))?;
                let logprobs = (0..options.len())
                    .map(|i| if i == chosen { 0.0 } else { SCRIPTED_OTHER_OPTION_LOGPROB })
                    .collect();
                one_of = Some(OneOfScores { chosen, logprobs });
                stop = StopReason::Complete;
            }
        }
        if tokens.len() > params.max_new_tokens as usize {
            tokens.truncate(params.max_new_tokens as usize);
            stop = StopReason::MaxTokens;
        }
        let logprobs = params.logprobs.map(|_| {
            tokens
                .iter()
                .map(|&t| TokenLogprob {
                    token: t,
                    bytes: self.token_bytes(t),
                    logprob: 0.0,
                    top: Vec::new(),
                })
                .collect()
        });
        Ok(Generation {
            text: String::from_utf8_lossy(&self.detokenize(&tokens)).into_owned(),
            tokens,
            stop,
            logprobs,
            one_of,
            prompt_tokens: prompt.len(),
            reused_tokens: 0,
            timings: Timings { prefill: Duration::ZERO, decode: Duration::ZERO },
        })
    }
}

impl Session<'_> {
    /// `reply` as the generation after `prompt` on `seq`, computed for real: the prompt is
    /// filled as `generate_on` fills it (reusing the longest prefix `seq` holds), then the
    /// reply's tokens are decoded in batches as if generated, so `seq` holds what a real
    /// generation ending the same way would (every output token on an end of turn, all but the
    /// last on `Complete`, `MaxTokens` or a full window). The reply is checked first, exactly
    /// as `Model::replay` checks it, before any row is computed. Log-probabilities are the
    /// model's own. A OneOf is scored for real (`generate_on`'s path) but chooses the reply's
    /// option, which must be one of them.
    pub fn replay_on(
        &mut self,
        seq: Seq,
        prompt: &[Token],
        reply: &str,
        params: &GenerateParams,
        on_event: &mut dyn FnMut(Event<'_>) -> bool,
    ) -> Result<Generation, EngineError> {
        let running = self.begin_replay(seq, prompt, reply, params)?;
        self.run(running, on_event)
    }
}
