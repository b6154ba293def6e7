//! One llama.cpp context on a loaded model: the KV rows of a main sequence, batched prefill,
//! single-token decode, constrained generation, OneOf scoring, and KV row snapshots.

use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::session::LlamaStateSeqFlags;
use llama_cpp_2::context::session::SeqState;
use llama_cpp_2::llama_batch::LlamaBatch;

use crate::constraint::{self, Constraint};
use crate::error::EngineError;
use crate::model::{Model, Special, Token};
use crate::sampling::{self, RepeatPenalty, Rng, Sampling};

/// The sequence whose rows a session keeps between calls.
const MAIN: i32 = 0;
/// A sequence used only inside one call (snapshots).
const SCRATCH: i32 = 1;

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

/// The KV rows of a token prefix, taken out of a session, to be put back later.
pub struct Snapshot {
    tokens: Vec<Token>,
    state: SeqState,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("tokens", &self.tokens.len())
            .field("bytes", &self.byte_len())
            .finish()
    }
}

impl Snapshot {
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }
    pub fn byte_len(&self) -> usize {
        self.state.byte_len()
    }
}

pub struct Session<'m> {
    model: &'m Model,
    ctx: LlamaContext<'m>,
    n_ctx: u32,
    batch_size: u32,
    sequences: u32,
    batch: LlamaBatch<'static>,
    /// The tokens whose rows the main sequence holds, in order.
    cached: Vec<Token>,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("n_ctx", &self.n_ctx)
            .field("cached", &self.cached.len())
            .finish()
    }
}

impl<'m> Session<'m> {
    pub(crate) fn new(
        model: &'m Model,
        ctx: LlamaContext<'m>,
        n_ctx: u32,
        batch_size: u32,
        sequences: u32,
    ) -> Self {
        let batch = LlamaBatch::new(batch_size as usize, sequences as i32);
        Session { model, ctx, n_ctx, batch_size, sequences, batch, cached: Vec::new() }
    }

    pub fn model(&self) -> &'m Model {
        self.model
    }

    pub fn context_window(&self) -> u32 {
        self.n_ctx
    }

    /// The tokens whose rows the session holds.
    pub fn cached_tokens(&self) -> &[Token] {
        &self.cached
    }

    /// Drops every row.
    pub fn clear(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
    }

    /// The logits of the token after `tokens`, reusing the rows of the longest prefix the
    /// session already holds and prefilling the rest in batches.
    pub fn evaluate(&mut self, tokens: &[Token]) -> Result<Vec<f32>, EngineError> {
        self.fill(tokens).map(|(logits, _)| logits)
    }

    /// Takes the rows of the first `n` held tokens out as a snapshot (host memory).
    pub fn snapshot(&mut self, n: usize) -> Result<Snapshot, EngineError> {
        if n == 0 || n > self.cached.len() {
            return Err(EngineError::Snapshot(format!(
                "cannot take {n} rows: the session holds {}",
                self.cached.len()
            )));
        }
        let fail = |e: &dyn std::fmt::Display| EngineError::Snapshot(e.to_string());
        self.ctx.kv_cache_seq_rm(SCRATCH, None, None).map_err(|e| fail(&e))?;
        self.ctx.kv_cache_seq_cp(MAIN, SCRATCH, Some(0), Some(n as u32)).map_err(|e| fail(&e))?;
        let state = self.ctx.state_seq_get(SCRATCH, LlamaStateSeqFlags::empty());
        self.ctx.kv_cache_seq_rm(SCRATCH, None, None).map_err(|e| fail(&e))?;
        Ok(Snapshot { tokens: self.cached[..n].to_vec(), state: state.map_err(|e| fail(&e))? })
    }

    /// Replaces the session's rows with a snapshot's; the next call continues from them.
    pub fn restore(&mut self, snapshot: &Snapshot) -> Result<(), EngineError> {
        self.ctx
            .kv_cache_seq_rm(MAIN, None, None)
            .map_err(|e| EngineError::Snapshot(e.to_string()))?;
        self.cached.clear();
        self.ctx.state_seq_set(&snapshot.state, MAIN).map_err(|e| {
            EngineError::Snapshot(format!("the snapshot does not fit this context: {e}"))
        })?;
        self.cached = snapshot.tokens.clone();
        Ok(())
    }

    /// Generates after `prompt` (already rendered and tokenized).
    pub fn generate(
        &mut self,
        prompt: &[Token],
        params: &GenerateParams,
    ) -> Result<Generation, EngineError> {
        // Everything that can be refused is refused before any row is computed.
        let mut matcher = match &params.constraint {
            Constraint::Json(schema) => Some(constraint::json_matcher(self.model, schema)?),
            Constraint::OneOf(options) => {
                constraint::check_options(options)?;
                None
            }
            Constraint::None => None,
        };
        if prompt.len() >= self.n_ctx as usize {
            return Err(EngineError::PromptTooLong { prompt: prompt.len(), window: self.n_ctx });
        }
        let mut rng = match params.sampling {
            Sampling::Random { seed, .. } => Rng::new(seed),
            Sampling::Greedy => Rng::new(0),
        };
        if let Constraint::OneOf(options) = &params.constraint {
            return self.one_of(prompt, options, params, &mut rng);
        }

        let started = Instant::now();
        let (mut logits, reused) = self.fill(prompt)?;
        let prefill = started.elapsed();
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
            if self.step(id, &mut tokens, &mut bytes, matcher.as_mut())? {
                break StopReason::EndOfTurn;
            }
            if matcher.as_ref().is_some_and(|m| m.is_stopped()) {
                break StopReason::Complete;
            }
            if tokens.len() >= params.max_new_tokens as usize {
                break StopReason::MaxTokens;
            }
            if self.cached.len() >= self.n_ctx as usize {
                break StopReason::ContextFull;
            }
            let last = tokens[tokens.len() - 1];
            logits = self.decode_one(last)?;
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

    fn record(
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
        prompt: &[Token],
        options: &[String],
        params: &GenerateParams,
        rng: &mut Rng,
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
        let started = Instant::now();
        let (first, reused) = self.fill(prompt)?;
        let prefill = started.elapsed();
        let started = Instant::now();
        let z0 = sampling::log_sum_exp(&first);
        let mut scores: Vec<f64> =
            tokenized.iter().map(|t| f64::from(first[t[0].0 as usize] - z0)).collect();

        // Options needing more than their first token are decoded on forked sequences.
        let pending: Vec<usize> = (0..options.len()).filter(|&i| tokenized[i].len() > 1).collect();
        let per_round = (self.sequences - 1) as usize;
        let base = prompt.len() as i32;
        let mut rest = &pending[..];
        while !rest.is_empty() {
            // A round: as many options as there are spare sequences and batch room.
            let mut round = Vec::new();
            let mut used = 0usize;
            for &i in rest {
                let n = tokenized[i].len() - 1;
                if round.len() == per_round
                    || (used + n > self.batch_size as usize && !round.is_empty())
                {
                    break;
                }
                round.push(i);
                used += n;
            }
            rest = &rest[round.len()..];
            self.batch.clear();
            let mut index = Vec::new();
            for (slot, &i) in round.iter().enumerate() {
                let seq = slot as i32 + 1;
                self.ctx
                    .kv_cache_seq_cp(MAIN, seq, None, None)
                    .map_err(|e| EngineError::Decode(e.to_string()))?;
                let toks = &tokenized[i];
                for (k, t) in toks[..toks.len() - 1].iter().enumerate() {
                    index.push((i, k + 1, self.batch.n_tokens()));
                    self.batch
                        .add(t.llama(), base + k as i32, &[seq], true)
                        .map_err(|e| EngineError::Decode(e.to_string()))?;
                }
            }
            let decoded =
                self.ctx.decode(&mut self.batch).map_err(|e| EngineError::Decode(e.to_string()));
            if decoded.is_ok() {
                for &(i, k, at) in &index {
                    let logits = self.ctx.get_logits_ith(at);
                    let z = sampling::log_sum_exp(logits);
                    scores[i] += f64::from(logits[tokenized[i][k].0 as usize] - z);
                }
            }
            for slot in 0..round.len() {
                let _ = self.ctx.kv_cache_seq_rm(slot as i32 + 1, None, None);
            }
            decoded?;
        }

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

    /// Makes the main sequence hold exactly `tokens`; returns the logits after the last one
    /// and how many leading rows were kept.
    fn fill(&mut self, tokens: &[Token]) -> Result<(Vec<f32>, usize), EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        if tokens.len() > self.n_ctx as usize {
            return Err(EngineError::PromptTooLong { prompt: tokens.len(), window: self.n_ctx });
        }
        let common = self.cached.iter().zip(tokens).take_while(|(a, b)| a == b).count();
        // The last prompt token is always decoded again: its logits are not kept.
        let mut keep = common.min(tokens.len() - 1);
        if self.ctx.kv_cache_seq_rm(MAIN, Some(keep as u32), None).is_err() {
            self.ctx
                .kv_cache_seq_rm(MAIN, None, None)
                .map_err(|e| EngineError::Decode(e.to_string()))?;
            keep = 0;
        }
        self.cached.truncate(keep);
        let mut logits = Vec::new();
        for chunk_start in (keep..tokens.len()).step_by(self.batch_size as usize) {
            let chunk =
                &tokens[chunk_start..tokens.len().min(chunk_start + self.batch_size as usize)];
            self.batch.clear();
            for (k, t) in chunk.iter().enumerate() {
                let last = chunk_start + k == tokens.len() - 1;
                self.batch
                    .add(t.llama(), (chunk_start + k) as i32, &[MAIN], last)
                    .map_err(|e| EngineError::Decode(e.to_string()))?;
            }
            self.decode_batch()?;
            self.cached.extend_from_slice(chunk);
            if chunk_start + chunk.len() == tokens.len() {
                logits = self.ctx.get_logits_ith(self.batch.n_tokens() - 1).to_vec();
            }
        }
        Ok((logits, keep))
    }

    fn decode_one(&mut self, token: Token) -> Result<Vec<f32>, EngineError> {
        self.batch.clear();
        self.batch
            .add(token.llama(), self.cached.len() as i32, &[MAIN], true)
            .map_err(|e| EngineError::Decode(e.to_string()))?;
        self.decode_batch()?;
        self.cached.push(token);
        Ok(self.ctx.get_logits_ith(0).to_vec())
    }

    fn decode_batch(&mut self) -> Result<(), EngineError> {
        self.ctx.decode(&mut self.batch).map_err(|e| {
            // A failed decode may leave rows of this batch behind: forget what we think we hold.
            let _ = self.ctx.kv_cache_seq_rm(MAIN, Some(self.cached.len() as u32), None);
            EngineError::Decode(e.to_string())
        })
    }
}

fn argmax(scores: &[f64]) -> usize {
    scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}
