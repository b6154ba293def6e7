//! A member's prefix store, as bookkeeping: which session sequences hold stored rows, for which
//! tokens, used when. The rows themselves live in the member's llama.cpp context, where an entry
//! made from another shares its cells: a stored prefix costs its unique rows only.
//!
//! Pure data: the member thread asks it what to reuse, keep, park and evict, and does the KV
//! work.
//!
//! Parking: llama.cpp attends over every used cell of the context, other sequences' included
//! (masked, yet not free), so rows of entries a request does not use slow its prefill and
//! decode. Before a generation, the rows only an unused entry holds are moved to host memory
//! (a snapshot) and put back when a request needs them. Rows several entries share stay in
//! the cells, so each row is still held once, in cells or on the host.

use caldrix_engine::{Seq, Snapshot, Token};

/// Rows parked in host memory (the engine's snapshot; a stand-in in unit tests).
pub trait Parked {
    /// Position of the first parked row.
    fn start(&self) -> usize;
}

impl Parked for Snapshot {
    fn start(&self) -> usize {
        Snapshot::start(self)
    }
}

#[derive(Debug)]
pub struct Entry<P = Snapshot> {
    pub seq: Seq,
    pub tokens: Vec<Token>,
    last_used: u64,
    /// The rows from `parked.start()` on, in host memory; the cells hold the rows before.
    parked: Option<P>,
}

impl<P: Parked> Entry<P> {
    /// Rows of this entry in the context's cells.
    pub fn resident(&self) -> usize {
        self.parked.as_ref().map_or(self.tokens.len(), P::start)
    }
}

#[derive(Debug)]
pub struct Store<P = Snapshot> {
    entries: Vec<Entry<P>>,
    /// Distinct rows the store may hold; 0 keeps none.
    budget_rows: u64,
    tick: u64,
    pub hits: u64,
    pub misses: u64,
}

impl<P: Parked> Store<P> {
    pub fn new(budget_rows: u64) -> Store<P> {
        Store { entries: Vec::new(), budget_rows, tick: 0, hits: 0, misses: 0 }
    }

    pub fn entries(&self) -> &[Entry<P>] {
        &self.entries
    }

    /// The entry sharing the longest prefix with `prompt`, and that length (0 when none).
    pub fn longest_prefix(&self, prompt: &[Token]) -> Option<(Seq, usize)> {
        self.entries
            .iter()
            .map(|e| (e.seq, common_prefix(&e.tokens, prompt)))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(_, n)| n)
    }

    pub fn touch(&mut self, seq: Seq) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(e) = self.entries.iter_mut().find(|e| e.seq == seq) {
            e.last_used = tick;
        }
    }

    /// Resident entries whose own rows (rows no other entry shares, and for an entry of
    /// `in_use`, those a generation resumes from, rows past the prefix it uses) number at least
    /// `min_rows`, with the position those rows start at: what to park before the generation.
    pub fn to_park(&self, in_use: &[(Seq, usize)], min_rows: usize) -> Vec<(Seq, usize)> {
        self.entries
            .iter()
            .filter(|e| e.parked.is_none())
            .filter_map(|e| {
                let used = in_use
                    .iter()
                    .filter(|&&(seq, _)| seq == e.seq)
                    .map(|&(_, n)| n)
                    .fold(0, usize::max);
                let shared = self
                    .entries
                    .iter()
                    .filter(|o| o.seq != e.seq)
                    .map(|o| common_prefix(&e.tokens, &o.tokens).min(o.resident()))
                    .fold(used, usize::max);
                (e.tokens.len() >= shared + min_rows).then_some((e.seq, shared))
            })
            .collect()
    }

    pub fn park(&mut self, seq: Seq, snapshot: P) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.seq == seq) {
            e.parked = Some(snapshot);
        }
    }

    /// The parked rows of `seq`, taken back to be put in the cells.
    pub fn unpark(&mut self, seq: Seq) -> Option<P> {
        self.entries.iter_mut().find(|e| e.seq == seq)?.parked.take()
    }

    /// Rows held in host memory.
    pub fn parked_rows(&self) -> u64 {
        self.entries.iter().map(|e| (e.tokens.len() - e.resident()) as u64).sum()
    }

    /// Rows of `seq` in the cells.
    pub fn resident(&self, seq: Seq) -> usize {
        self.entries.iter().find(|e| e.seq == seq).map_or(0, Entry::resident)
    }

    /// A sequence below `total` that no entry uses and is not `busy` (generated on).
    pub fn free_seq(&self, total: u32, busy: &[Seq]) -> Option<Seq> {
        (0..total).find(|s| !busy.contains(s) && self.entries.iter().all(|e| e.seq != *s))
    }

    /// Distinct rows held: the size of the trie of all entries' token lists (rows shared by
    /// entries count once), computed as the sum of lengths minus the common prefixes of
    /// neighbours in sorted order.
    pub fn rows(&self) -> u64 {
        let mut lists: Vec<&[Token]> = self.entries.iter().map(|e| e.tokens.as_slice()).collect();
        lists.sort_unstable();
        let total: usize = lists.iter().map(|l| l.len()).sum();
        let shared: usize = lists.windows(2).map(|w| common_prefix(w[0], w[1])).sum();
        (total - shared) as u64
    }

    /// Stores `seq` as holding `tokens`. Returns the sequences to drop: entries made redundant
    /// (their tokens are a prefix of the new one's, so every lookup they would answer the new
    /// one answers as well), or the new one itself when an entry already covers it.
    pub fn insert(&mut self, seq: Seq, tokens: Vec<Token>) -> Vec<Seq> {
        self.tick += 1;
        if tokens.is_empty() || self.budget_rows == 0 {
            return vec![seq];
        }
        if let Some(cover) = self.entries.iter_mut().find(|e| e.tokens.starts_with(&tokens)) {
            cover.last_used = self.tick;
            return vec![seq];
        }
        let mut dropped = Vec::new();
        self.entries.retain(|e| {
            let redundant = tokens.starts_with(&e.tokens);
            if redundant {
                dropped.push(e.seq);
            }
            !redundant
        });
        self.entries.push(Entry { seq, tokens, last_used: self.tick, parked: None });
        dropped
    }

    /// Removes the least recently used entry, unless it is `keep`.
    pub fn evict_lru(&mut self, keep: Option<Seq>) -> Option<Seq> {
        let (i, _) = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| Some(e.seq) != keep)
            .min_by_key(|(_, e)| e.last_used)?;
        Some(self.entries.remove(i).seq)
    }

    /// Evicts least recently used entries until the rows fit the budget; returns their
    /// sequences. The most recent entry goes last, and only when it alone is over budget.
    pub fn enforce_budget(&mut self) -> Vec<Seq> {
        let mut evicted = Vec::new();
        while self.rows() > self.budget_rows {
            let newest = self.entries.iter().max_by_key(|e| e.last_used).map(|e| e.seq);
            match self.evict_lru(newest).or_else(|| self.evict_lru(None)) {
                Some(seq) => evicted.push(seq),
                None => break,
            }
        }
        evicted
    }
}

fn common_prefix(a: &[Token], b: &[Token]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parked rows from a position on, without an engine.
    #[derive(Debug)]
    struct From(usize);

    impl Parked for From {
        fn start(&self) -> usize {
            self.0
        }
    }

    type Store = super::Store<From>;

    fn t(ids: &[u32]) -> Vec<Token> {
        ids.iter().map(|&i| Token(i)).collect()
    }

    #[test]
    fn only_rows_no_other_entry_shares_are_parked() {
        let mut store = Store::new(100);
        store.insert(0, t(&[1, 2, 3, 4, 5, 6]));
        store.insert(1, t(&[1, 2, 7, 8, 9]));
        store.insert(2, t(&[1, 2, 7, 6]));
        store.insert(3, t(&[4]));
        // Entry 1 shares 3 rows with entry 2: its own rows are 8, 9. Entry 2 has one own row,
        // entry 3 one.
        assert_eq!(store.to_park(&[(0, 6)], 2), vec![(1, 3)]);
        assert_eq!(store.to_park(&[(1, 5)], 2), vec![(0, 2)]);
        assert_eq!(store.to_park(&[(1, 5)], 1), vec![(0, 2), (2, 3), (3, 0)]);
        // Two generations running at once: neither's rows are parked.
        assert_eq!(store.to_park(&[(0, 6), (1, 5)], 1), vec![(2, 3), (3, 0)]);
        // A generation resuming from the first 3 rows of entry 0 leaves its last 3 unused.
        assert_eq!(store.to_park(&[(0, 3)], 3), vec![(0, 3)]);

        store.park(0, From(2));
        assert_eq!(store.resident(0), 2);
        assert_eq!(store.parked_rows(), 4);
        assert_eq!(store.rows(), 11, "parked rows still count against the budget");
        assert_eq!(store.to_park(&[], 1), vec![(1, 3), (2, 3), (3, 0)], "parked once");
        // Sharing with a parked entry counts only its rows still in the cells: 1, 2 of entry 0.
        store.insert(4, t(&[1, 2, 3, 4, 9]));
        assert_eq!(store.to_park(&[(1, 5)], 1), vec![(2, 3), (3, 0), (4, 2)]);

        assert_eq!(store.unpark(0).map(|p| p.0), Some(2));
        assert_eq!((store.resident(0), store.parked_rows()), (6, 0));
        assert!(store.unpark(0).is_none());
    }

    #[test]
    fn shared_rows_count_once() {
        let mut store = Store::new(100);
        assert!(store.insert(0, t(&[1, 2, 3, 4])).is_empty());
        assert!(store.insert(1, t(&[1, 2, 9])).is_empty());
        assert!(store.insert(2, t(&[5])).is_empty());
        // Trie: 1-2-3-4, 1-2-9, 5 → 4 + 1 + 1 rows.
        assert_eq!(store.rows(), 6);
    }

    #[test]
    fn the_longest_prefix_wins() {
        let mut store = Store::new(100);
        store.insert(0, t(&[1, 2, 3, 4]));
        store.insert(1, t(&[1, 2, 9]));
        assert_eq!(store.longest_prefix(&t(&[1, 2, 3, 7])), Some((0, 3)));
        assert_eq!(store.longest_prefix(&t(&[1, 2, 9, 9])), Some((1, 3)));
        assert_eq!(store.longest_prefix(&t(&[8])), None);
    }

    #[test]
    fn an_extension_replaces_its_prefix_and_a_covered_entry_is_not_stored() {
        let mut store = Store::new(100);
        store.insert(0, t(&[1, 2]));
        assert_eq!(store.insert(1, t(&[1, 2, 3])), vec![0], "the old prefix is redundant");
        assert_eq!(store.insert(2, t(&[1, 2])), vec![2], "already covered by entry 1");
        assert_eq!(store.entries().len(), 1);
        assert_eq!(store.free_seq(3, &[]), Some(0));
        assert_eq!(store.free_seq(3, &[0]), Some(2), "a sequence generated on is not free");
    }

    #[test]
    fn least_recently_used_goes_first_under_the_budget() {
        let mut store = Store::new(5);
        store.insert(0, t(&[1, 2, 3]));
        store.insert(1, t(&[4, 5]));
        store.touch(0);
        store.insert(2, t(&[6, 7]));
        // 7 rows > 5: entry 1 is the least recently used.
        assert_eq!(store.enforce_budget(), vec![1]);
        assert_eq!(store.rows(), 5);
        let mut none = Store::new(0);
        assert_eq!(none.insert(3, t(&[1])), vec![3], "a zero budget keeps nothing");
        let mut tiny = Store::new(1);
        tiny.insert(0, t(&[1, 2, 3]));
        assert_eq!(tiny.enforce_budget(), vec![0], "an entry alone over budget is dropped");
    }
}
