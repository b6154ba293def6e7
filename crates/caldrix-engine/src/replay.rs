//! Replaying a scripted reply as if the model had generated it: tokenized with the model's own
//! vocabulary and checked against the request's constraint, with no KV work. Deterministic
//! tests of everything above the engine run on it (a scripted pool member).

use std::time::Duration;

use crate::constraint::{self, Constraint};
use crate::error::EngineError;
use crate::generate::{GenerateParams, Generation, OneOfScores, StopReason, Timings, TokenLogprob};
use crate::model::{Model, Special, Token};

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
            Constraint::Json(schema) => {
                let mut matcher = constraint::json_matcher(self, schema)?;
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
