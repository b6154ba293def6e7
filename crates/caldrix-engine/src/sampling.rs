//! Choosing a token from logits: greedy or seeded temperature/top-p, under an optional mask,
//! and the log-probabilities reported beside the choice.

use crate::model::Token;

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// The most likely allowed token.
    Greedy,
    /// Softmax at `temperature`, cut to the smallest set holding `top_p` of the mass, drawn
    /// with a generator seeded by `seed` (same seed, same draws).
    Random { temperature: f32, top_p: f32, seed: u64 },
}

/// llama.cpp's repetition penalty: each token among the last `last_n` generated has its logit
/// divided by `penalty` (multiplied when negative), so a small model is pushed out of loops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepeatPenalty {
    pub penalty: f32,
    pub last_n: usize,
}

pub(crate) fn penalize(logits: &mut [f32], generated: &[Token], p: RepeatPenalty) {
    let recent = &generated[generated.len().saturating_sub(p.last_n)..];
    let mut seen = std::collections::HashSet::with_capacity(recent.len());
    for &Token(id) in recent {
        if seen.insert(id)
            && let Some(l) = logits.get_mut(id as usize)
        {
            *l = if *l > 0.0 { *l / p.penalty } else { *l * p.penalty };
        }
    }
}

/// SplitMix64: tiny, fast, and stable across releases (a library generator may change its
/// stream between versions, which would break "same seed, same text").
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `log(sum(exp(logits)))`, the normaliser of the model's distribution.
pub(crate) fn log_sum_exp(logits: &[f32]) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return max;
    }
    let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    max + sum.ln() as f32
}

/// The `k` most likely token ids with their logits, most likely first.
pub(crate) fn top_k(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    if k == 0 {
        return best;
    }
    for (id, &l) in logits.iter().enumerate() {
        if best.len() == k && l <= best[k - 1].1 {
            continue;
        }
        let at = best.partition_point(|&(_, b)| b >= l);
        best.insert(at, (id as u32, l));
        best.truncate(k);
    }
    best
}

/// Picks a token among those whose logit is finite (masked tokens are `-inf`); `None` when
/// nothing is allowed.
pub(crate) fn choose(logits: &[f32], sampling: Sampling, rng: &mut Rng) -> Option<u32> {
    match sampling {
        Sampling::Greedy => {
            let mut best: Option<(u32, f32)> = None;
            for (id, &l) in logits.iter().enumerate() {
                if l.is_finite() && best.is_none_or(|(_, b)| l > b) {
                    best = Some((id as u32, l));
                }
            }
            best.map(|(id, _)| id)
        }
        Sampling::Random { temperature, top_p, .. } => {
            if temperature <= 0.0 {
                return choose(logits, Sampling::Greedy, rng);
            }
            let max =
                logits.iter().copied().filter(|l| l.is_finite()).fold(f32::NEG_INFINITY, f32::max);
            if !max.is_finite() {
                return None;
            }
            let mut cands: Vec<(u32, f64)> = logits
                .iter()
                .enumerate()
                .filter(|(_, l)| l.is_finite())
                .map(|(id, &l)| (id as u32, f64::from((l - max) / temperature).exp()))
                .collect();
            let total: f64 = cands.iter().map(|c| c.1).sum();
            if top_p < 1.0 {
                // The nucleus is almost always within the most likely few hundred tokens:
                // select those first and sort only them (a full sort of a 262k vocabulary costs
                // more than a decode step); sort everything only when they hold too little.
                let head = 512.min(cands.len());
                if head < cands.len() {
                    cands.select_nth_unstable_by(head - 1, |a, b| b.1.total_cmp(&a.1));
                    let mass: f64 = cands[..head].iter().map(|c| c.1).sum();
                    if mass >= f64::from(top_p) * total {
                        cands.truncate(head);
                    }
                }
                cands.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                let mut kept = 0.0;
                let mut n = 0;
                for c in &cands {
                    kept += c.1;
                    n += 1;
                    if kept >= f64::from(top_p) * total {
                        break;
                    }
                }
                cands.truncate(n.max(1));
            }
            let mass: f64 = cands.iter().map(|c| c.1).sum();
            let mut target = rng.unit() * mass;
            for &(id, p) in &cands {
                if target < p {
                    return Some(id);
                }
                target -= p;
            }
            cands.last().map(|c| c.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_skips_masked_tokens() {
        let logits = [1.0, f32::NEG_INFINITY, 0.5, 3.0];
        assert_eq!(choose(&logits, Sampling::Greedy, &mut Rng::new(0)), Some(3));
        let masked = [1.0, f32::NEG_INFINITY, 0.5, f32::NEG_INFINITY];
        assert_eq!(choose(&masked, Sampling::Greedy, &mut Rng::new(0)), Some(0));
        assert_eq!(choose(&[f32::NEG_INFINITY; 3], Sampling::Greedy, &mut Rng::new(0)), None);
    }

    #[test]
    fn random_is_reproducible_and_respects_top_p() {
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32).collect();
        let s = Sampling::Random { temperature: 1.0, top_p: 1.0, seed: 7 };
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..20).map(|_| choose(&logits, s, &mut rng).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        // A tiny top_p keeps only the most likely tokens (logit 6: ids 6, 13, 20, ...).
        let narrow = Sampling::Random { temperature: 1.0, top_p: 0.01, seed: 1 };
        let mut rng = Rng::new(1);
        for _ in 0..20 {
            assert_eq!(choose(&logits, narrow, &mut rng).unwrap() % 7, 6);
        }
    }

    #[test]
    fn penalty_lowers_recent_tokens_once() {
        let mut logits = [2.0, -2.0, 2.0, 1.0];
        let p = RepeatPenalty { penalty: 2.0, last_n: 3 };
        // Token 2 is outside the window; token 0 appears twice but is penalised once.
        penalize(&mut logits, &[Token(2), Token(0), Token(1), Token(0)], p);
        assert_eq!(logits, [1.0, -4.0, 2.0, 1.0]);
    }

    #[test]
    fn top_k_and_normaliser() {
        let logits = [0.0, 2.0, 1.0, 2.0];
        assert_eq!(top_k(&logits, 2), vec![(1, 2.0), (3, 2.0)]);
        let z = log_sum_exp(&[0.0f32.ln(), 1.0f32.ln()]);
        assert!(z.abs() < 1e-6, "{z}");
    }
}
