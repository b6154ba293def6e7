//! Generation on a session's sequence: the sampling loop under a constraint, log-probabilities,
//! and OneOf scoring.

use std::time::Duration;

use crate::constraint::{self, Constraint};
use crate::error::EngineError;
use crate::limits;
use crate::model::Token;
use crate::running::Running;
use crate::sampling::{self, RepeatPenalty, Sampling};
use crate::session::{Event, Seq, Session};

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateParams {
    pub max_new_tokens: u32,
    pub sampling: Sampling,
    pub constraint: Constraint,
    /// `Some(k)`: report each generated token's log-probability and the `k` most likely
    /// alternatives (`Some(0)`: the token's own only).
    pub logprobs: Option<usize>,
    /// Off by default.
    pub repeat_penalty: Option<RepeatPenalty>,
    /// Tokens a constraint forces are decoded in one batch with the token before them (and
    /// kept only where the model would have chosen them): speed only, the output is the same.
    pub fast_forward: bool,
    /// Prompt-lookup drafting: tokens that followed the last generated ones earlier in the
    /// context are decoded in one batch and kept while the model agrees: speed only.
    pub draft: bool,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            max_new_tokens: 256,
            sampling: Sampling::Greedy,
            constraint: Constraint::None,
            logprobs: None,
            repeat_penalty: None,
            // Off until the speed bench shows them faster on these machines (docs/benchmarks.md).
            fast_forward: false,
            draft: false,
        }
    }
}

impl GenerateParams {
    /// Refuses values out of their range before any work: a negative or non-finite
    /// temperature, `top_p` outside (0, 1], a repeat penalty that is not a positive number,
    /// more top log-probabilities than `limits::MAX_TOP_LOGPROBS`, and OneOf options past
    /// their bounds.
    pub fn check(&self) -> Result<(), EngineError> {
        let bad = |m: String| Err(EngineError::BadSampling(m));
        if let Sampling::Random { temperature, top_p, .. } = self.sampling {
            if !temperature.is_finite() || temperature < 0.0 {
                return bad(format!(
                    "the temperature must be a number of 0 or more, not {temperature}"
                ));
            }
            if !(top_p > 0.0 && top_p <= 1.0) {
                return bad(format!("top_p must be more than 0 and at most 1, not {top_p}"));
            }
        }
        if let Some(p) = self.repeat_penalty
            && !(p.penalty.is_finite() && p.penalty > 0.0)
        {
            return bad(format!("the repeat penalty must be a number above 0, not {}", p.penalty));
        }
        if let Some(k) = self.logprobs
            && k > limits::MAX_TOP_LOGPROBS
        {
            return bad(format!(
                "logprobs asks for {k} alternatives per token, more than the limit of {}",
                limits::MAX_TOP_LOGPROBS
            ));
        }
        if let Constraint::OneOf(options) = &self.constraint {
            constraint::check_options(options)?;
        }
        Ok(())
    }
}

/// Why a generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model ended its turn (an end-of-generation token, not part of the output).
    EndOfTurn,
    /// The constraint is complete: nothing else may follow.
    Complete,
    /// `max_new_tokens` were generated.
    MaxTokens,
    /// The context window is full.
    ContextFull,
    /// The caller's event callback asked to stop.
    Cancelled,
}

/// A token's log-probability under the model's own distribution (before any constraint mask).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub token: Token,
    pub bytes: Vec<u8>,
    pub logprob: f32,
    /// The most likely tokens at that step, most likely first.
    pub top: Vec<(Token, Vec<u8>, f32)>,
}

/// The scores of a OneOf: the log-probability of each option, in the order given (the sum
/// of its tokens' log-probabilities, end-of-turn token included).
#[derive(Debug, Clone, PartialEq)]
pub struct OneOfScores {
    pub chosen: usize,
    pub logprobs: Vec<f64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timings {
    pub prefill: Duration,
    pub decode: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub text: String,
    pub tokens: Vec<Token>,
    pub stop: StopReason,
    pub logprobs: Option<Vec<TokenLogprob>>,
    pub one_of: Option<OneOfScores>,
    pub prompt_tokens: usize,
    /// Prompt tokens whose rows were already in the context (not prefilled again).
    pub reused_tokens: usize,
    pub timings: Timings,
}

impl Generation {
    /// A generation cancelled during its prefill: `reused_tokens` rows were found held.
    pub(crate) fn cancelled(
        prompt_tokens: usize,
        reused_tokens: usize,
        prefill: Duration,
    ) -> Generation {
        Generation {
            text: String::new(),
            tokens: Vec::new(),
            stop: StopReason::Cancelled,
            logprobs: None,
            one_of: None,
            prompt_tokens,
            reused_tokens,
            timings: Timings { prefill, decode: Duration::ZERO },
        }
    }
}

impl Session<'_> {
    /// Generates after `prompt` (already rendered and tokenized) on sequence 0.
    pub fn generate(
        &mut self,
        prompt: &[Token],
        params: &GenerateParams,
    ) -> Result<Generation, EngineError> {
        self.generate_on(0, prompt, params, &mut |_| true)
    }

    /// Generates after `prompt` on `seq`, reusing the rows of the longest prefix `seq` holds.
    /// `on_event` hears prefill progress and every token; answering `false` stops the
    /// generation (`StopReason::Cancelled`). The generated tokens but the last stay in `seq`.
    pub fn generate_on(
        &mut self,
        seq: Seq,
        prompt: &[Token],
        params: &GenerateParams,
        on_event: &mut dyn FnMut(Event<'_>) -> bool,
    ) -> Result<Generation, EngineError> {
        let running = self.begin(seq, prompt, params)?;
        self.run(running, on_event)
    }

    /// Steps one generation alone until it finishes.
    pub(crate) fn run(
        &mut self,
        mut running: Running,
        on_event: &mut dyn FnMut(Event<'_>) -> bool,
    ) -> Result<Generation, EngineError> {
        loop {
            if let Some(done) = running.take_finished() {
                return done;
            }
            self.step(&mut [&mut running], &mut |_, e| on_event(e))?;
        }
    }

    pub(crate) fn record(
        &self,
        logits: &[f32],
        id: u32,
        k: Option<usize>,
        out: Option<&mut Vec<TokenLogprob>>,
    ) {
        let (Some(k), Some(out)) = (k, out) else { return };
        let z = sampling::log_sum_exp(logits);
        let top = sampling::top_k(logits, k)
            .into_iter()
            .map(|(t, l)| (Token(t), self.model.token_bytes(Token(t)), l - z))
            .collect();
        out.push(TokenLogprob {
            token: Token(id),
            bytes: self.model.token_bytes(Token(id)),
            logprob: logits[id as usize] - z,
            top,
        });
    }
}
