//! One llama.cpp context on a loaded model: KV rows of several sequences in one unified cell
//! pool (a sequence copied from another shares its cells), batched prefill, single-token decode,
//! and KV row snapshots. Generation lives in `generate.rs`.

use llama_cpp_2::DecodeError;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::session::{LlamaStateSeqFlags, SeqState};
use llama_cpp_2::llama_batch::LlamaBatch;

use crate::error::EngineError;
use crate::model::{Model, Token};

/// Sequences a session keeps for itself above the caller's: OneOf scoring forks the prompt
/// into these (one option each per round), and snapshots are cut in the first.
pub const SCRATCH_SEQUENCES: u32 = 4;

/// A sequence of the session: `0..SessionParams::sequences`. Sequence 0 is the one `generate`
/// and `evaluate` use.
pub type Seq = u32;

/// KV rows taken out of a session into host memory, to be put back later: a prefix
/// (`snapshot`), or the rows of a sequence from a position on (`park`).
pub struct Snapshot {
    /// Position of the first row.
    start: usize,
    tokens: Vec<Token>,
    state: SeqState,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("start", &self.start)
            .field("tokens", &self.tokens.len())
            .field("bytes", &self.byte_len())
            .finish()
    }
}

impl Snapshot {
    /// Position of the first row (0 for a prefix).
    pub fn start(&self) -> usize {
        self.start
    }
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }
    pub fn byte_len(&self) -> usize {
        self.state.byte_len()
    }
}

/// Something that happens while a prompt is filled or a generation runs; the caller's
/// callback answers `false` to stop (a cancel).
#[derive(Debug)]
pub enum Event<'a> {
    /// Prompt rows computed so far, of `total` to compute (sent after each batch).
    Progress { done: usize, total: usize },
    /// A generated token and its bytes.
    Token { token: Token, bytes: &'a [u8] },
}

/// Tokens decoded at the end of one sequence, in a batch shared with other sequences.
pub(crate) struct Part<'a> {
    pub seq: Seq,
    pub tokens: &'a [Token],
    pub outputs: Outputs,
}

/// Which of a part's tokens the batch computes logits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outputs {
    None,
    Last,
    All,
}

pub struct Session<'m> {
    pub(crate) model: &'m Model,
    ctx: LlamaContext<'m>,
    pub(crate) n_ctx: u32,
    pub(crate) batch_size: u32,
    /// The caller's sequences; scratch sequences follow them.
    sequences: u32,
    pub(crate) batch: LlamaBatch<'static>,
    /// For every sequence, scratch included, the tokens whose rows it holds, in order.
    held: Vec<Vec<Token>>,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("n_ctx", &self.n_ctx)
            .field("sequences", &self.sequences)
            .finish_non_exhaustive()
    }
}

pub(crate) fn decode_error(e: &dyn std::fmt::Display) -> EngineError {
    EngineError::Decode(e.to_string())
}

impl<'m> Session<'m> {
    pub(crate) fn new(
        model: &'m Model,
        ctx: LlamaContext<'m>,
        n_ctx: u32,
        batch_size: u32,
        sequences: u32,
    ) -> Self {
        let total = sequences + SCRATCH_SEQUENCES;
        let batch = LlamaBatch::new(batch_size as usize, total as i32);
        let held = vec![Vec::new(); total as usize];
        Session { model, ctx, n_ctx, batch_size, sequences, batch, held }
    }

    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// Tokens one sequence may hold (and, shared, all sequences together).
    pub fn context_window(&self) -> u32 {
        self.n_ctx
    }

    /// The caller's sequences, `0..n`.
    pub fn sequences(&self) -> u32 {
        self.sequences
    }

    /// The tokens whose rows sequence 0 holds.
    pub fn cached_tokens(&self) -> &[Token] {
        &self.held[0]
    }

    /// The tokens whose rows `seq` holds.
    pub fn held(&self, seq: Seq) -> &[Token] {
        self.held.get(seq as usize).map_or(&[], Vec::as_slice)
    }

    /// Drops every row of every sequence.
    pub fn clear(&mut self) {
        self.ctx.clear_kv_cache();
        self.held.iter_mut().for_each(Vec::clear);
    }

    /// Drops the rows of one sequence (cells shared with another sequence stay).
    pub fn drop_sequence(&mut self, seq: Seq) -> Result<(), EngineError> {
        self.check_seq(seq)?;
        self.ctx.kv_cache_seq_rm(seq as i32, None, None).map_err(|e| decode_error(&e))?;
        self.held[seq as usize].clear();
        Ok(())
    }

    /// Makes `dst` hold the first `n` rows of `src`, sharing their cells (no copy).
    pub fn copy_prefix(&mut self, src: Seq, dst: Seq, n: usize) -> Result<(), EngineError> {
        self.check_seq(src)?;
        self.check_seq(dst)?;
        if n > self.held[src as usize].len() {
            return Err(EngineError::BadParams(format!(
                "sequence {src} holds {} rows, not {n}",
                self.held[src as usize].len()
            )));
        }
        self.copy_raw(src as i32, dst as i32, n)
    }

    fn copy_raw(&mut self, src: i32, dst: i32, n: usize) -> Result<(), EngineError> {
        if src == dst {
            self.ctx.kv_cache_seq_rm(dst, Some(n as u32), None).map_err(|e| decode_error(&e))?;
            self.held[dst as usize].truncate(n);
            return Ok(());
        }
        self.ctx.kv_cache_seq_rm(dst, None, None).map_err(|e| decode_error(&e))?;
        self.ctx
            .kv_cache_seq_cp(src, dst, Some(0), Some(n as u32))
            .map_err(|e| decode_error(&e))?;
        self.held[dst as usize] = self.held[src as usize][..n].to_vec();
        Ok(())
    }

    fn check_seq(&self, seq: Seq) -> Result<(), EngineError> {
        if seq >= self.sequences {
            return Err(EngineError::BadParams(format!(
                "sequence {seq} does not exist (the session has {})",
                self.sequences
            )));
        }
        Ok(())
    }

    /// The logits of the token after `tokens` on sequence 0, reusing the rows of the longest
    /// prefix it already holds and prefilling the rest in batches.
    pub fn evaluate(&mut self, tokens: &[Token]) -> Result<Vec<f32>, EngineError> {
        self.fill(0, tokens)
    }

    /// Takes the rows of the first `n` tokens sequence 0 holds out as a snapshot (host memory).
    pub fn snapshot(&mut self, n: usize) -> Result<Snapshot, EngineError> {
        if n == 0 || n > self.held[0].len() {
            return Err(EngineError::Snapshot(format!(
                "cannot take {n} rows: the session holds {}",
                self.held[0].len()
            )));
        }
        let scratch = self.sequences as i32;
        self.copy_raw(0, scratch, n)?;
        let state = self.ctx.state_seq_get(scratch, LlamaStateSeqFlags::empty());
        self.ctx.kv_cache_seq_rm(scratch, None, None).map_err(|e| decode_error(&e))?;
        self.held[scratch as usize].clear();
        let state = state.map_err(|e| EngineError::Snapshot(e.to_string()))?;
        Ok(Snapshot { start: 0, tokens: self.held[0][..n].to_vec(), state })
    }

    /// Replaces sequence 0's rows with a prefix snapshot's; the next call continues from them.
    pub fn restore(&mut self, snapshot: &Snapshot) -> Result<(), EngineError> {
        if snapshot.start != 0 {
            return Err(EngineError::Snapshot(format!(
                "the snapshot starts at row {}, not at the start of a prompt",
                snapshot.start
            )));
        }
        self.ctx.kv_cache_seq_rm(0, None, None).map_err(|e| decode_error(&e))?;
        self.held[0].clear();
        self.ctx.state_seq_set(&snapshot.state, 0).map_err(|e| {
            EngineError::Snapshot(format!("the snapshot does not fit this context: {e}"))
        })?;
        self.held[0] = snapshot.tokens.clone();
        Ok(())
    }

    /// Moves the rows of `seq` from position `from` on into host memory; `seq` keeps the rows
    /// before `from`. Cells this frees stop costing attention: every prefill and decode of
    /// the session attends over all used cells, other sequences' included.
    pub fn park(&mut self, seq: Seq, from: usize) -> Result<Snapshot, EngineError> {
        self.check_seq(seq)?;
        let held = self.held[seq as usize].len();
        if from >= held {
            return Err(EngineError::Snapshot(format!(
                "cannot park sequence {seq} from row {from}: it holds {held}"
            )));
        }
        let (s, scratch) = (seq as i32, self.sequences as i32);
        self.ctx.kv_cache_seq_rm(scratch, None, None).map_err(|e| decode_error(&e))?;
        self.ctx
            .kv_cache_seq_cp(s, scratch, Some(from as u32), None)
            .map_err(|e| decode_error(&e))?;
        let state = self.ctx.state_seq_get(scratch, LlamaStateSeqFlags::empty());
        self.ctx.kv_cache_seq_rm(scratch, None, None).map_err(|e| decode_error(&e))?;
        let state = state.map_err(|e| EngineError::Snapshot(e.to_string()))?;
        self.ctx.kv_cache_seq_rm(s, Some(from as u32), None).map_err(|e| decode_error(&e))?;
        let tokens = self.held[seq as usize].split_off(from);
        Ok(Snapshot { start: from, tokens, state })
    }

    /// Puts parked rows back at the end of `seq`, which must hold exactly the rows before them.
    /// Fails with `CellsFull` when the cells are taken; `seq` is then unchanged.
    pub fn unpark(&mut self, seq: Seq, parked: &Snapshot) -> Result<(), EngineError> {
        self.check_seq(seq)?;
        let held = self.held[seq as usize].len();
        if held != parked.start {
            return Err(EngineError::Snapshot(format!(
                "rows parked from {} cannot follow the {held} rows sequence {seq} holds",
                parked.start
            )));
        }
        let (s, scratch) = (seq as i32, self.sequences as i32);
        if self.ctx.state_seq_set(&parked.state, scratch).is_err() {
            let _ = self.ctx.kv_cache_seq_rm(scratch, None, None);
            return Err(EngineError::CellsFull);
        }
        let joined = self.ctx.kv_cache_seq_cp(scratch, s, Some(parked.start as u32), None);
        self.ctx.kv_cache_seq_rm(scratch, None, None).map_err(|e| decode_error(&e))?;
        joined.map_err(|e| decode_error(&e))?;
        self.held[seq as usize].extend_from_slice(&parked.tokens);
        Ok(())
    }

    /// Makes `seq` hold exactly `tokens`; returns the logits after the last one.
    fn fill(&mut self, seq: Seq, tokens: &[Token]) -> Result<Vec<f32>, EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        if tokens.len() > self.n_ctx as usize {
            return Err(EngineError::PromptTooLong { prompt: tokens.len(), window: self.n_ctx });
        }
        let keep = self.keep_prefix(seq, tokens)?;
        let mut at = 0;
        for chunk in tokens[keep..].chunks(self.batch_size as usize) {
            let part = Part { seq, tokens: chunk, outputs: Outputs::Last };
            at = self.decode_parts(&[part])?[0] + chunk.len() as i32 - 1;
        }
        Ok(self.logits_at(at).to_vec())
    }

    /// Keeps the rows of the longest prefix of `tokens` that `seq` holds, but never the last
    /// token's (its logits are not kept, so it is decoded again); drops the rest. Returns how
    /// many rows were kept.
    pub(crate) fn keep_prefix(&mut self, seq: Seq, tokens: &[Token]) -> Result<usize, EngineError> {
        self.check_seq(seq)?;
        let held = &self.held[seq as usize];
        let common = held.iter().zip(tokens).take_while(|(a, b)| a == b).count();
        let mut keep = common.min(tokens.len().saturating_sub(1));
        let s = seq as i32;
        if self.ctx.kv_cache_seq_rm(s, Some(keep as u32), None).is_err() {
            self.ctx.kv_cache_seq_rm(s, None, None).map_err(|e| decode_error(&e))?;
            keep = 0;
        }
        self.held[seq as usize].truncate(keep);
        Ok(keep)
    }

    /// Decodes every part at the end of its own sequence in one batch (they must fit the batch
    /// together, and no two parts may share a sequence). Returns each part's index of its first
    /// token in the batch, for `logits_at`. On failure no part's sequence holds a row of it.
    pub(crate) fn decode_parts(&mut self, parts: &[Part<'_>]) -> Result<Vec<i32>, EngineError> {
        self.batch.clear();
        let mut starts = Vec::with_capacity(parts.len());
        for part in parts {
            self.check_seq(part.seq)?;
            starts.push(self.batch.n_tokens());
            let start = self.held[part.seq as usize].len();
            let n = part.tokens.len();
            for (k, t) in part.tokens.iter().enumerate() {
                let output = match part.outputs {
                    Outputs::All => true,
                    Outputs::Last => k == n - 1,
                    Outputs::None => false,
                };
                self.batch
                    .add(t.llama(), (start + k) as i32, &[part.seq as i32], output)
                    .map_err(|e| decode_error(&e))?;
            }
        }
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            // A failed decode may leave rows of this batch behind: forget them.
            for part in parts {
                let held = self.held[part.seq as usize].len() as u32;
                let _ = self.ctx.kv_cache_seq_rm(part.seq as i32, Some(held), None);
            }
            return Err(match e {
                DecodeError::NoKvCacheSlot => EngineError::CellsFull,
                other => decode_error(&other),
            });
        }
        for part in parts {
            self.held[part.seq as usize].extend_from_slice(part.tokens);
        }
        Ok(starts)
    }

    /// The logits after the token at `index` of the last batch (it must have asked for them).
    pub(crate) fn logits_at(&self, index: i32) -> &[f32] {
        self.ctx.get_logits_ith(index)
    }

    /// Scores continuations of `seq`'s rows: each candidate's tokens are decoded on a scratch
    /// sequence forked from `seq` (sharing its cells), as many per batch as there are scratch
    /// sequences. `first` is the distribution after `seq`'s last token; returns each
    /// candidate's summed log-probability.
    pub(crate) fn score_continuations(
        &mut self,
        seq: Seq,
        first: &[f32],
        candidates: &[Vec<Token>],
    ) -> Result<Vec<f64>, EngineError> {
        use crate::sampling::log_sum_exp;
        let z0 = log_sum_exp(first);
        let mut scores: Vec<f64> =
            candidates.iter().map(|t| f64::from(first[t[0].0 as usize] - z0)).collect();
        let pending: Vec<usize> =
            (0..candidates.len()).filter(|&i| candidates[i].len() > 1).collect();
        let base = self.held[seq as usize].len() as i32;
        let mut rest = &pending[..];
        while !rest.is_empty() {
            let mut round = Vec::new();
            let mut used = 0usize;
            for &i in rest {
                let n = candidates[i].len() - 1;
                let full = round.len() == SCRATCH_SEQUENCES as usize
                    || (used + n > self.batch_size as usize && !round.is_empty());
                if full {
                    break;
                }
                round.push(i);
                used += n;
            }
            rest = &rest[round.len()..];
            self.batch.clear();
            let mut index = Vec::new();
            for (slot, &i) in round.iter().enumerate() {
                let scratch = (self.sequences + slot as u32) as i32;
                self.copy_raw(seq as i32, scratch, base as usize)?;
                let toks = &candidates[i];
                for (k, t) in toks[..toks.len() - 1].iter().enumerate() {
                    index.push((i, k + 1, self.batch.n_tokens()));
                    self.batch
                        .add(t.llama(), base + k as i32, &[scratch], true)
                        .map_err(|e| decode_error(&e))?;
                }
            }
            let decoded = self.ctx.decode(&mut self.batch).map_err(|e| match e {
                DecodeError::NoKvCacheSlot => EngineError::CellsFull,
                other => decode_error(&other),
            });
            if decoded.is_ok() {
                for &(i, k, at) in &index {
                    let logits = self.ctx.get_logits_ith(at);
                    let z = log_sum_exp(logits);
                    scores[i] += f64::from(logits[candidates[i][k].0 as usize] - z);
                }
            }
            for slot in 0..round.len() {
                let scratch = self.sequences + slot as u32;
                let _ = self.ctx.kv_cache_seq_rm(scratch as i32, None, None);
                self.held[scratch as usize].clear();
            }
            decoded?;
        }
        Ok(scores)
    }
}
