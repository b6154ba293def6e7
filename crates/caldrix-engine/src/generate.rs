//! Generation on a session's sequence: the sampling loop under a constraint, log-probabilities,
//! and OneOf scoring.

use std::time::{Duration, Instant};

use crate::constraint::{self, Constraint};
use crate::error::EngineError;
use crate::limits;
use crate::model::{Special, Token};
use crate::sampling::{self, RepeatPenalty, Rng, Sampling};
use crate::session::{Event, Filled, Seq, Session};

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
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            max_new_tokens: 256,
            sampling: Sampling::Greedy,
            constraint: Constraint::None,
            logprobs: None,
            repeat_penalty: None,
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

/// A prompt's fill: the logits after it, the rows found held, the time it took.
pub(crate) type Prefilled = (Vec<f32>, usize, Duration);

impl Session<'_> {
    /// The prompt's fill, timed: the logits after it, the rows found held and the time; or,
    /// on a cancel between batches, the cancelled generation to return.
    pub(crate) fn prefill(
        &mut self,
        seq: Seq,
        prompt: &[Token],
        on_event: &mut dyn FnMut(Event<'_>) -> bool,
    ) -> Result<Result<Prefilled, Generation>, EngineError> {
        let started = Instant::now();
        Ok(match self.fill(seq, prompt, on_event)? {
            Filled::Logits(logits, reused) => Ok((logits, reused, started.elapsed())),
            Filled::Cancelled { reused } => {
                Err(Generation::cancelled(prompt.len(), reused, started.elapsed()))
            }
        })
    }

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
        // Everything that can be refused is refused before any row is computed.
        params.check()?;
        let mut matcher = match &params.constraint {
            Constraint::Json(schema) => Some(constraint::json_matcher(self.model, schema)?),
            // OneOf's options were checked by `check`.
            Constraint::OneOf(_) | Constraint::None => None,
        };
        if prompt.len() >= self.n_ctx as usize {
            return Err(EngineError::PromptTooLong { prompt: prompt.len(), window: self.n_ctx });
        }
        let mut rng = match params.sampling {
            Sampling::Random { seed, .. } => Rng::new(seed),
            Sampling::Greedy => Rng::new(0),
        };
        if let Constraint::OneOf(options) = &params.constraint {
            return self.one_of(seq, prompt, options, params, &mut rng, on_event);
        }

        let (mut logits, reused, prefill) = match self.prefill(seq, prompt, on_event)? {
            Ok(filled) => filled,
            Err(cancelled) => return Ok(cancelled),
        };
        let started = Instant::now();
        let mut tokens = Vec::new();
        let mut bytes = Vec::new();
        let mut logprobs = params.logprobs.map(|_| Vec::new());
        let stop = loop {
            if tokens.len() >= params.max_new_tokens as usize {
                break StopReason::MaxTokens;
            }
            // Scores come from the model's own distribution, before penalty and mask.
            let mut raw = None;
            if let Some(p) = params.repeat_penalty {
                if params.logprobs.is_some() {
                    raw = Some(logits.clone());
                }
                sampling::penalize(&mut logits, &tokens, p);
            }
            if let Some(matcher) = matcher.as_mut() {
                let mask = matcher
                    .compute_mask()
                    .map_err(|e| EngineError::Constraint(format!("{e:#}")))?;
                if params.logprobs.is_some() && raw.is_none() {
                    raw = Some(logits.clone());
                }
                for (id, l) in logits.iter_mut().enumerate() {
                    if !mask.is_allowed(id as u32) {
                        *l = f32::NEG_INFINITY;
                    }
                }
            }
            let Some(id) = sampling::choose(&logits, params.sampling, &mut rng) else {
                return Err(EngineError::Constraint("no token is allowed".into()));
            };
            self.record(raw.as_deref().unwrap_or(&logits), id, params.logprobs, logprobs.as_mut());
            let before = bytes.len();
            if self.step(id, &mut tokens, &mut bytes, matcher.as_mut())? {
                break StopReason::EndOfTurn;
            }
            if !on_event(Event::Token { token: Token(id), bytes: &bytes[before..] }) {
                break StopReason::Cancelled;
            }
            if matcher.as_ref().is_some_and(|m| m.is_stopped()) {
                break StopReason::Complete;
            }
            if tokens.len() >= params.max_new_tokens as usize {
                break StopReason::MaxTokens;
            }
            if self.held(seq).len() >= self.n_ctx as usize {
                break StopReason::ContextFull;
            }
            let last = tokens[tokens.len() - 1];
            logits = self.decode_one(seq, last)?;
        };
        Ok(Generation {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            tokens,
            stop,
            logprobs,
            one_of: None,
            prompt_tokens: prompt.len(),
            reused_tokens: reused,
            timings: Timings { prefill, decode: started.elapsed() },
        })
    }

    /// Takes token `id`: `true` when it ends the turn (it is then not part of the output).
    fn step(
        &mut self,
        id: u32,
        tokens: &mut Vec<Token>,
        bytes: &mut Vec<u8>,
        matcher: Option<&mut llguidance::Matcher>,
    ) -> Result<bool, EngineError> {
        let token = Token(id);
        if self.model.is_end_of_generation(token) {
            return Ok(true);
        }
        if let Some(matcher) = matcher {
            matcher
                .consume_token(id)
                .map_err(|e| EngineError::Constraint(format!("token {id} was refused: {e:#}")))?;
        }
        tokens.push(token);
        bytes.extend(self.model.token_bytes(token));
        Ok(false)
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

    /// Scores every option after the prompt in one batch per round (each option on its own
    /// sequence forked from the prompt's, sharing its cells) and picks one.
    fn one_of(
        &mut self,
        seq: Seq,
        prompt: &[Token],
        options: &[String],
        params: &GenerateParams,
        rng: &mut Rng,
        on_event: &mut dyn FnMut(Event<'_>) -> bool,
    ) -> Result<Generation, EngineError> {
        let eot = self.model.end_of_turn();
        let tokenized: Vec<Vec<Token>> = options
            .iter()
            .map(|o| {
                let mut t = self.model.tokenize(o, Special::Plain);
                t.push(eot);
                t
            })
            .collect();
        for (option, toks) in options.iter().zip(&tokenized) {
            let n = toks.len() - 1;
            if n > params.max_new_tokens as usize {
                return Err(EngineError::BadOption {
                    option: option.clone(),
                    problem: format!(
                        "is {n} tokens, more than max_new_tokens ({})",
                        params.max_new_tokens
                    ),
                });
            }
            if prompt.len() + toks.len() > self.n_ctx as usize {
                return Err(EngineError::PromptTooLong {
                    prompt: prompt.len() + toks.len(),
                    window: self.n_ctx,
                });
            }
        }
        let (first, reused, prefill) = match self.prefill(seq, prompt, on_event)? {
            Ok(filled) => filled,
            Err(cancelled) => return Ok(cancelled),
        };
        let started = Instant::now();
        let scores = self.score_continuations(seq, &first, &tokenized)?;

        let chosen = match params.sampling {
            Sampling::Greedy => argmax(&scores),
            Sampling::Random { temperature, .. } => {
                let logits: Vec<f32> = scores.iter().map(|&s| s as f32).collect();
                let s = Sampling::Random { temperature, top_p: 1.0, seed: 0 };
                sampling::choose(&logits, s, rng).map_or_else(|| argmax(&scores), |i| i as usize)
            }
        };
        let tokens = tokenized[chosen][..tokenized[chosen].len() - 1].to_vec();
        Ok(Generation {
            text: options[chosen].clone(),
            tokens,
            stop: StopReason::Complete,
            logprobs: None,
            one_of: Some(OneOfScores { chosen, logprobs: scores }),
            prompt_tokens: prompt.len(),
            reused_tokens: reused,
            timings: Timings { prefill, decode: started.elapsed() },
        })
    }
}

fn argmax(scores: &[f64]) -> usize {
    scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}
