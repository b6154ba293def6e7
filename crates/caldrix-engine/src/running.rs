//! Generations in progress, advanced together: `Session::step` decodes, in one llama.cpp
//! batch, the next token (and its drafts) of every decoding generation and a chunk of every
//! prompt still being filled, so several generations of one member share each pass over the
//! weights. A single generation is the same machine stepped alone (`generate_on`).
//!
//! Output never depends on batching or drafts: each token is chosen from the logits after the
//! tokens before it, exactly as the step-by-step loop chooses it (same mask, penalty and random
//! draw), and a drafted token is kept only when it is the token so chosen. For a draft that is
//! one fixed guess this is also the best speculative acceptance rule there is: the guess is kept
//! with the model's own probability of it, and a refused guess is replaced by a draw from the
//! model's distribution without it, as rejection sampling would.

use std::time::{Duration, Instant};

use crate::constraint::{self, Constraint};
use crate::draft::{self, Lookup};
use crate::error::EngineError;
use crate::generate::{GenerateParams, Generation, OneOfScores, StopReason, Timings, TokenLogprob};
use crate::model::{Special, Token};
use crate::sampling::{self, Rng, Sampling};
use crate::session::{Event, Outputs, Part, Seq, Session};

/// A generation in progress on one sequence of a session: a prompt being filled, tokens being
/// decoded, a replay's reply being forced, or a OneOf being scored.
pub struct Running {
    seq: Seq,
    prompt: Vec<Token>,
    params: GenerateParams,
    kind: Kind,
    phase: Phase,
    matcher: Option<llguidance::Matcher>,
    rng: Rng,
    /// The prompt, then every generated token: what prompt lookup searches.
    history: Vec<Token>,
    tokens: Vec<Token>,
    bytes: Vec<u8>,
    logprobs: Option<Vec<TokenLogprob>>,
    lookup: Lookup,
    /// Rows found held when the generation began (not prefilled again).
    reused: usize,
    started: Option<Instant>,
    prefill: Duration,
    decode_started: Option<Instant>,
    finished: Option<Result<Generation, EngineError>>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("seq", &self.seq)
            .field("prompt", &self.prompt.len())
            .field("tokens", &self.tokens.len())
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

enum Kind {
    Generate,
    /// Each option's tokens with the end of turn after them; `chosen` set for a replay, whose
    /// reply names the option whatever the scores say.
    OneOf {
        tokenized: Vec<Vec<Token>>,
        chosen: Option<usize>,
    },
    /// A replay member's reply: its tokens, how it ends, and how many of its rows a real
    /// generation ending that way would hold.
    Replay {
        tokens: Vec<Token>,
        stop: StopReason,
        rows: usize,
    },
}

enum Phase {
    /// Filling the prompt: the sequence holds its first `next` rows.
    Prefill {
        next: usize,
    },
    /// A OneOf's prompt is filled: its options are scored at the start of the next step.
    Score {
        first: Vec<f32>,
    },
    /// `pending` was chosen and is decoded next (with drafts after it).
    Decode {
        pending: Token,
    },
    /// A replay's reply: the first `next` of its rows are decoded.
    Reply {
        next: usize,
    },
    Done,
}

impl Running {
    pub fn seq(&self) -> Seq {
        self.seq
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// The result once finished (`Some` once, then `None`).
    pub fn take_finished(&mut self) -> Option<Result<Generation, EngineError>> {
        self.finished.take()
    }

    fn finish(&mut self, result: Result<Generation, EngineError>) {
        self.phase = Phase::Done;
        self.finished = Some(result);
    }

    fn generation(&mut self, stop: StopReason) -> Generation {
        let now = Instant::now();
        let decode = self.decode_started.map_or(Duration::ZERO, |t| now - t);
        Generation {
            text: String::from_utf8_lossy(&self.bytes).into_owned(),
            tokens: std::mem::take(&mut self.tokens),
            stop,
            logprobs: self.logprobs.take(),
            one_of: None,
            prompt_tokens: self.prompt.len(),
            reused_tokens: self.reused,
            timings: Timings { prefill: self.prefill, decode },
        }
    }

    fn end(&mut self, stop: StopReason) {
        let g = self.generation(stop);
        self.finish(Ok(g));
    }

    fn end_prefill(&mut self) {
        if let Some(t) = self.started {
            self.prefill = t.elapsed();
        }
        self.decode_started = Some(Instant::now());
    }

    /// Chooses the token after `logits` as the step-by-step loop does and takes it; `rows` is
    /// what the sequence holds before it. `Err(stop)` ends the generation (the chosen token is
    /// then in the output unless it ended the turn).
    fn choose(
        &mut self,
        session: &Session<'_>,
        mut logits: Vec<f32>,
        rows: usize,
        on_event: &mut dyn FnMut(Event<'_>) -> bool,
    ) -> Result<Result<Token, StopReason>, EngineError> {
        let p = &self.params;
        if self.tokens.len() >= p.max_new_tokens as usize {
            return Ok(Err(StopReason::MaxTokens));
        }
        // Scores come from the model's own distribution, before penalty and mask.
        let mut raw = None;
        if let Some(penalty) = p.repeat_penalty {
            if p.logprobs.is_some() {
                raw = Some(logits.clone());
            }
            sampling::penalize(&mut logits, &self.tokens, penalty);
        }
        if let Some(matcher) = self.matcher.as_mut() {
            let mask =
                matcher.compute_mask().map_err(|e| EngineError::Constraint(format!("{e:#}")))?;
            if p.logprobs.is_some() && raw.is_none() {
                raw = Some(logits.clone());
            }
            for (id, l) in logits.iter_mut().enumerate() {
                if !mask.is_allowed(id as u32) {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
        let Some(id) = sampling::choose(&logits, p.sampling, &mut self.rng) else {
            return Err(EngineError::Constraint("no token is allowed".into()));
        };
        session.record(raw.as_deref().unwrap_or(&logits), id, p.logprobs, self.logprobs.as_mut());
        let token = Token(id);
        let model = session.model();
        if model.is_end_of_generation(token) {
            return Ok(Err(StopReason::EndOfTurn));
        }
        if let Some(matcher) = self.matcher.as_mut() {
            matcher
                .consume_token(id)
                .map_err(|e| EngineError::Constraint(format!("token {id} was refused: {e:#}")))?;
        }
        self.tokens.push(token);
        self.history.push(token);
        let before = self.bytes.len();
        self.bytes.extend(model.token_bytes(token));
        if !on_event(Event::Token { token, bytes: &self.bytes[before..] }) {
            return Ok(Err(StopReason::Cancelled));
        }
        if self.matcher.as_ref().is_some_and(|m| m.is_stopped()) {
            return Ok(Err(StopReason::Complete));
        }
        if self.tokens.len() >= self.params.max_new_tokens as usize {
            return Ok(Err(StopReason::MaxTokens));
        }
        if rows >= session.n_ctx as usize {
            return Ok(Err(StopReason::ContextFull));
        }
        Ok(Ok(token))
    }

    /// What this generation decodes in the next batch, at most `room` tokens.
    fn plan(&mut self, session: &Session<'_>, room: usize) -> Option<(Vec<Token>, Outputs)> {
        if room == 0 {
            return None;
        }
        let held = session.held(self.seq).len();
        match &self.phase {
            Phase::Prefill { next } => {
                let end = self.prompt.len().min(next + room);
                let outputs = if end == self.prompt.len() { Outputs::Last } else { Outputs::None };
                Some((self.prompt[*next..end].to_vec(), outputs))
            }
            Phase::Decode { pending } => {
                let mut tokens = vec![*pending];
                // Drafts may not run past the window (nor the batch).
                let room = (room - 1).min((session.n_ctx as usize).saturating_sub(held + 1));
                let mut drafted = Vec::new();
                if self.params.fast_forward
                    && let Some(m) = self.matcher.as_mut()
                {
                    drafted = draft::forced(session.model(), m);
                }
                if self.params.draft && drafted.len() < room {
                    // `history` ends with `pending` (taken when it was chosen); the forced
                    // tokens come before what lookup drafts after them.
                    let base = self.history.len();
                    self.history.extend_from_slice(&drafted);
                    let more = self.lookup.propose(&self.history, room - drafted.len());
                    self.history.truncate(base);
                    drafted.extend(more);
                }
                drafted.truncate(room);
                // Under a constraint, a draft is cut where the grammar would refuse it (the
                // matcher has taken `pending` already).
                if !drafted.is_empty()
                    && let Some(m) = self.matcher.as_mut()
                {
                    let valid = m.validate_tokens(&ids(&drafted)).unwrap_or(0);
                    drafted.truncate(valid);
                }
                tokens.extend(drafted);
                let outputs = Outputs::All;
                Some((tokens, outputs))
            }
            Phase::Reply { next } => {
                let Kind::Replay { tokens, rows, .. } = &self.kind else { return None };
                let end = (*rows).min(next + room);
                let outputs =
                    if self.params.logprobs.is_some() { Outputs::All } else { Outputs::Last };
                Some((tokens[*next..end].to_vec(), outputs))
            }
            Phase::Score { .. } | Phase::Done => None,
        }
    }
}

fn ids(tokens: &[Token]) -> Vec<u32> {
    tokens.iter().map(|t| t.0).collect()
}

impl Session<'_> {
    /// Starts a generation after `prompt` on `seq`, reusing the rows of the longest prefix
    /// `seq` holds. Everything that can be refused is refused here, before any row is
    /// computed; nothing is decoded until `step`.
    pub fn begin(
        &mut self,
        seq: Seq,
        prompt: &[Token],
        params: &GenerateParams,
    ) -> Result<Running, EngineError> {
        params.check()?;
        // OneOf's options were checked by `check`; it has no matcher.
        let matcher = constraint::matcher_of(self.model, &params.constraint)?;
        if prompt.len() >= self.n_ctx as usize {
            return Err(EngineError::PromptTooLong { prompt: prompt.len(), window: self.n_ctx });
        }
        let kind = match &params.constraint {
            Constraint::OneOf(options) => self.one_of_kind(prompt, options, params)?,
            _ => Kind::Generate,
        };
        self.start(seq, prompt, params, kind, matcher)
    }

    fn one_of_kind(
        &self,
        prompt: &[Token],
        options: &[String],
        params: &GenerateParams,
    ) -> Result<Kind, EngineError> {
        let eot = self.model.end_of_turn();
        let mut tokenized = Vec::with_capacity(options.len());
        for option in options {
            let mut toks = self.model.tokenize(option, Special::Plain);
            let n = toks.len();
            if n > params.max_new_tokens as usize {
                return Err(EngineError::BadOption {
                    option: option.clone(),
                    problem: format!(
                        "is {n} tokens, more than max_new_tokens ({})",
                        params.max_new_tokens
                    ),
                });
            }
            toks.push(eot);
            if prompt.len() + toks.len() > self.n_ctx as usize {
                return Err(EngineError::PromptTooLong {
                    prompt: prompt.len() + toks.len(),
                    window: self.n_ctx,
                });
            }
            tokenized.push(toks);
        }
        Ok(Kind::OneOf { tokenized, chosen: None })
    }

    fn start(
        &mut self,
        seq: Seq,
        prompt: &[Token],
        params: &GenerateParams,
        kind: Kind,
        matcher: Option<llguidance::Matcher>,
    ) -> Result<Running, EngineError> {
        if prompt.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let reused = self.keep_prefix(seq, prompt)?;
        let seed = match params.sampling {
            Sampling::Random { seed, .. } => seed,
            Sampling::Greedy => 0,
        };
        Ok(Running {
            seq,
            prompt: prompt.to_vec(),
            params: params.clone(),
            kind,
            phase: Phase::Prefill { next: reused },
            matcher,
            rng: Rng::new(seed),
            history: prompt.to_vec(),
            tokens: Vec::new(),
            bytes: Vec::new(),
            logprobs: params.logprobs.map(|_| Vec::new()),
            lookup: Lookup::default(),
            reused,
            started: None,
            prefill: Duration::ZERO,
            decode_started: None,
            finished: None,
        })
    }

    /// `replay_on` as a running generation: `reply` (checked first, exactly as `Model::replay`
    /// checks it) forced through the engine after `prompt`.
    pub fn begin_replay(
        &mut self,
        seq: Seq,
        prompt: &[Token],
        reply: &str,
        params: &GenerateParams,
    ) -> Result<Running, EngineError> {
        let scripted = self.model.replay(prompt, reply, params)?;
        if let Some(script) = &scripted.one_of {
            let mut running = self.begin(seq, prompt, params)?;
            if let Kind::OneOf { chosen, .. } = &mut running.kind {
                *chosen = Some(script.chosen);
            }
            return Ok(running);
        }
        if prompt.len() >= self.n_ctx as usize {
            return Err(EngineError::PromptTooLong { prompt: prompt.len(), window: self.n_ctx });
        }
        let mut tokens = scripted.tokens;
        let mut stop = scripted.stop;
        let room = self.n_ctx as usize - prompt.len();
        if tokens.len() > room {
            tokens.truncate(room);
            stop = StopReason::ContextFull;
        }
        if stop == StopReason::EndOfTurn && tokens.len() >= params.max_new_tokens as usize {
            // A real generation stops at the bound before it could choose the end of turn.
            stop = StopReason::MaxTokens;
        }
        // A real generation decodes each token before choosing the next; the last one is
        // decoded only when the model went on to end its turn.
        let rows = if stop == StopReason::EndOfTurn {
            tokens.len()
        } else {
            tokens.len().saturating_sub(1)
        };
        self.start(seq, prompt, params, Kind::Replay { tokens, stop, rows }, None)
    }

    /// One llama.cpp decode advancing every unfinished generation in `running` (each on its
    /// own sequence): decoding ones by their next token and its drafts, prompts by a chunk of
    /// what the batch has left. `on_event(i, event)` hears `running[i]`'s progress and tokens;
    /// answering `false` cancels that generation only. An error (`CellsFull`, a failed decode)
    /// leaves every generation as it was before the step, so the caller may free cells and call
    /// again.
    pub fn step(
        &mut self,
        running: &mut [&mut Running],
        on_event: &mut dyn FnMut(usize, Event<'_>) -> bool,
    ) -> Result<(), EngineError> {
        // OneOf scoring first: its batches are its own, and a failure here changes nothing else.
        for r in running.iter_mut() {
            if let Phase::Score { first } = &r.phase {
                let first = first.clone();
                self.score(r, &first)?;
            }
        }
        // Decoding generations first (one token each and drafts), prompts in what is left.
        let mut room = self.batch_size as usize;
        let mut plans: Vec<(usize, Vec<Token>, Outputs)> = Vec::new();
        for pass in [false, true] {
            for (i, r) in running.iter_mut().enumerate() {
                if matches!(r.phase, Phase::Prefill { .. }) != pass {
                    continue;
                }
                if let Some((tokens, outputs)) = r.plan(self, room) {
                    room -= tokens.len();
                    plans.push((i, tokens, outputs));
                }
            }
        }
        if plans.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        for (i, _, _) in &plans {
            running[*i].started.get_or_insert(now);
        }
        let parts: Vec<Part<'_>> = plans
            .iter()
            .map(|(i, tokens, outputs)| Part { seq: running[*i].seq, tokens, outputs: *outputs })
            .collect();
        let starts = self.decode_parts(&parts)?;
        for ((i, tokens, _), at) in plans.iter().zip(starts) {
            let r = &mut *running[*i];
            let mut hear = |e: Event<'_>| on_event(*i, e);
            if let Err(e) = self.advance(r, tokens, at, &mut hear) {
                let _ = self.copy_prefix(r.seq, r.seq, r.prompt.len().min(self.held(r.seq).len()));
                r.finish(Err(e));
            }
        }
        Ok(())
    }

    /// Takes in what the batch computed for `r`'s `tokens` (its first at batch index `at`).
    fn advance(
        &mut self,
        r: &mut Running,
        tokens: &[Token],
        at: i32,
        on_event: &mut dyn FnMut(Event<'_>) -> bool,
    ) -> Result<(), EngineError> {
        let held = self.held(r.seq).len();
        match r.phase {
            Phase::Prefill { next } => {
                let next = next + tokens.len();
                if next < r.prompt.len() {
                    r.phase = Phase::Prefill { next };
                    let total = r.prompt.len() - r.reused;
                    if !on_event(Event::Progress { done: next - r.reused, total }) {
                        r.prefill = r.started.map_or(Duration::ZERO, |t| t.elapsed());
                        let cancelled = Generation::cancelled(r.prompt.len(), r.reused, r.prefill);
                        r.finish(Ok(cancelled));
                    }
                    return Ok(());
                }
                r.end_prefill();
                let logits = self.logits_at(at + tokens.len() as i32 - 1).to_vec();
                match &r.kind {
                    Kind::Generate => match r.choose(self, logits, held, on_event)? {
                        Ok(pending) => r.phase = Phase::Decode { pending },
                        Err(stop) => r.end(stop),
                    },
                    Kind::OneOf { .. } => r.phase = Phase::Score { first: logits },
                    Kind::Replay { .. } => self.reply_starts(r, logits, on_event),
                }
            }
            Phase::Decode { .. } => {
                // tokens[0] was chosen; each later one is a draft, kept while the model would
                // have chosen it.
                let base = held - tokens.len();
                let drafted = tokens.len() - 1;
                let mut taken = 0;
                for k in 0..tokens.len() {
                    let logits = self.logits_at(at + k as i32).to_vec();
                    let rows = base + k + 1;
                    match r.choose(self, logits, rows, on_event)? {
                        Ok(next) if k < drafted && next == tokens[k + 1] => taken += 1,
                        Ok(next) => {
                            self.copy_prefix(r.seq, r.seq, rows)?;
                            r.phase = Phase::Decode { pending: next };
                            break;
                        }
                        Err(stop) => {
                            self.copy_prefix(r.seq, r.seq, rows)?;
                            r.end(stop);
                            break;
                        }
                    }
                }
                r.lookup.update(drafted, taken);
            }
            Phase::Reply { next } => {
                let next = next + tokens.len();
                let logits: Vec<Vec<f32>> = if r.params.logprobs.is_some() {
                    (0..tokens.len()).map(|k| self.logits_at(at + k as i32).to_vec()).collect()
                } else {
                    Vec::new()
                };
                self.reply_continues(r, next, logits, on_event);
            }
            Phase::Score { .. } | Phase::Done => {}
        }
        Ok(())
    }

    /// A replay's prompt is filled: its first token streams now (a client's time to first
    /// token is the fill's, as for a real generation), the rest as their rows are decoded.
    fn reply_starts(
        &mut self,
        r: &mut Running,
        first: Vec<f32>,
        on_event: &mut dyn FnMut(Event<'_>) -> bool,
    ) {
        let Kind::Replay { tokens, .. } = &r.kind else { return };
        if let Some(&t) = tokens.first() {
            self.record(&first, t.0, r.params.logprobs, r.logprobs.as_mut());
            r.tokens.push(t);
            r.bytes.extend(self.model.token_bytes(t));
            if !on_event(Event::Token { token: t, bytes: &r.bytes }) {
                return r.end(StopReason::Cancelled);
            }
        }
        r.phase = Phase::Reply { next: 0 };
        self.reply_continues(r, 0, Vec::new(), on_event);
    }

    /// A replay's rows up to `next` are decoded (`logits` after each new one, with logprobs):
    /// the tokens they let out stream; the replay ends once its rows are all decoded.
    fn reply_continues(
        &mut self,
        r: &mut Running,
        next: usize,
        logits: Vec<Vec<f32>>,
        on_event: &mut dyn FnMut(Event<'_>) -> bool,
    ) {
        let Kind::Replay { tokens, stop, rows } = &r.kind else { return };
        let (stop, rows) = (*stop, *rows);
        // Token j is known once row j - 1 is: those of the rows just decoded stream now.
        let from = r.tokens.len();
        let to = tokens.len().min(next + 1);
        let new: Vec<Token> = tokens[from.min(to)..to].to_vec();
        // `logits[i]` follows row `first_row + i`, which token `first_row + i + 1` comes after.
        let first_row = next - logits.len();
        for (j, t) in (from..).zip(new) {
            if let Some(l) = (j - 1).checked_sub(first_row).and_then(|i| logits.get(i)) {
                self.record(l, t.0, r.params.logprobs, r.logprobs.as_mut());
            }
            r.tokens.push(t);
            let before = r.bytes.len();
            r.bytes.extend(self.model.token_bytes(t));
            if !on_event(Event::Token { token: t, bytes: &r.bytes[before..] }) {
                return r.end(StopReason::Cancelled);
            }
        }
        if next >= rows {
            return r.end(stop);
        }
        if let Phase::Reply { next: n } = &mut r.phase {
            *n = next;
        }
    }

    /// Scores a OneOf's options after its filled prompt and ends it.
    fn score(&mut self, r: &mut Running, first: &[f32]) -> Result<(), EngineError> {
        let Kind::OneOf { tokenized, chosen } = &r.kind else { return Ok(()) };
        let scores = self.score_continuations(r.seq, first, tokenized)?;
        let chosen = match (chosen, r.params.sampling) {
            (Some(c), _) => *c,
            (None, Sampling::Greedy) => argmax(&scores),
            (None, Sampling::Random { temperature, .. }) => {
                let logits: Vec<f32> = scores.iter().map(|&s| s as f32).collect();
                let s = Sampling::Random { temperature, top_p: 1.0, seed: 0 };
                sampling::choose(&logits, s, &mut r.rng)
                    .map_or_else(|| argmax(&scores), |i| i as usize)
            }
        };
        let tokens = tokenized[chosen][..tokenized[chosen].len() - 1].to_vec();
        let text = match &r.params.constraint {
            Constraint::OneOf(options) => options[chosen].clone(),
            _ => String::new(),
        };
        let mut g = r.generation(StopReason::Complete);
        g.text = text;
        g.tokens = tokens;
        g.logprobs = None;
        g.one_of = Some(OneOfScores { chosen, logprobs: scores });
        r.finish(Ok(g));
        Ok(())
    }
}

fn argmax(scores: &[f64]) -> usize {
    scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}
