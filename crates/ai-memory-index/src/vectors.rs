//! Page embeddings beside the FTS index, and the hybrid query: bm25's ranking and the
//! embedding's fused (each scaled across its candidates, then weighed equally).
//!
//! Vectors are stored by a hash of what was embedded (model id and text), so a rebuild of the
//! page tables finds its pages' vectors again instead of computing them anew; a page row
//! points at its hash and the change number (`seq`) it was embedded at: a page whose `seq`
//! moved on is stale until the embedder catches up (FTS still finds it meanwhile).

use std::cell::{Cell, OnceCell};
use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::{OptionalExtension, named_params, params};
use sha2::{Digest, Sha256};

use crate::access::READABLE;
use crate::{Hit, Index, IndexError, Principal};

pub(crate) const VECTOR_SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS embeddings (
    hash TEXT NOT NULL,
    window INTEGER NOT NULL,
    -- little-endian f32, unit length
    vector BLOB NOT NULL,
    PRIMARY KEY (hash, window)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS page_embeddings (
    page_id INTEGER PRIMARY KEY REFERENCES pages(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS page_embeddings_hash ON page_embeddings (hash);
-- Hashes a page stopped pointing at: the only ones a prune looks at, so pruning after a write
-- costs the write's hashes, not a scan of every vector. They are pruned later, not at once, so
-- a rebuild's pages find their vectors again first.
CREATE TABLE IF NOT EXISTS embeddings_unlinked (hash TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS page_embeddings_ad AFTER DELETE ON page_embeddings BEGIN
    INSERT OR IGNORE INTO embeddings_unlinked (hash) VALUES (old.hash);
END;
CREATE TRIGGER IF NOT EXISTS page_embeddings_au AFTER UPDATE OF hash ON page_embeddings
    WHEN old.hash != new.hash BEGIN
    INSERT OR IGNORE INTO embeddings_unlinked (hash) VALUES (old.hash);
END;
"#;

/// Candidates each ranking gives the fusion (before the caller's limit).
pub const FUSION_CANDIDATES: usize = 50;
/// The words' share of a fused score (the embedding has the rest): equal, chosen before
/// measuring, not fitted to a benchmark.
pub const WORDS_WEIGHT: f64 = 0.5;
/// The least cosine a page found by meaning only must reach: below it, a query about
/// nothing the project holds would still list every page. (all-MiniLM-L6-v2 puts unrelated
/// sentences near 0 and paraphrases above 0.5.)
pub const MIN_SIMILARITY: f32 = 0.2;
/// The longest snippet of a page found by meaning only (no matching word to show).
const LEAD_CHARS: usize = 200;

/// A page whose embedding is missing or stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingPage {
    pub page_id: i64,
    pub seq: i64,
    /// What is embedded: the title, then the body.
    pub text: String,
}

/// How far the embeddings are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct EmbeddingState {
    pub pages: usize,
    pub embedded: usize,
    pub vectors: usize,
}

/// The key embeddings are stored under.
pub fn embedding_hash(model_id: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(model_id.as_bytes());
    h.update([0]);
    h.update(text.as_bytes());
    format!("{:x}", h.finalize())
}

fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The most floats the window vectors kept in memory hold (64 MiB: about 43,000 windows of
/// all-MiniLM-L6-v2, a few thousand pages); past it the cache starts over.
pub const VECTOR_CACHE_FLOATS: usize = 16 << 20;

/// A page's window vectors by their hash, kept in memory between queries so a query reads
/// only which hash each page has, not every vector. A hash names its text and model, so an
/// entry never goes stale; the cache is only emptied when it is over its bound.
#[derive(Debug)]
pub(crate) struct VectorCache {
    by_hash: HashMap<String, Arc<[f32]>>,
    floats: usize,
    cap: usize,
}

impl Default for VectorCache {
    fn default() -> Self {
        VectorCache { by_hash: HashMap::new(), floats: 0, cap: VECTOR_CACHE_FLOATS }
    }
}

impl VectorCache {
    /// The windows stored under `hash`, one after another, read once.
    fn get(&mut self, conn: &rusqlite::Connection, hash: &str) -> Result<Arc<[f32]>, IndexError> {
        if let Some(v) = self.by_hash.get(hash) {
            return Ok(Arc::clone(v));
        }
        let mut stmt =
            conn.prepare_cached("SELECT vector FROM embeddings WHERE hash = ?1 ORDER BY window")?;
        let mut floats = Vec::new();
        let mut rows = stmt.query([hash])?;
        while let Some(r) = rows.next()? {
            let blob = r.get_ref(0)?.as_blob().map_err(rusqlite::Error::from)?;
            floats
                .extend(blob.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])));
        }
        let v: Arc<[f32]> = floats.into();
        if v.is_empty() {
            // Nothing stored (yet): not kept, so vectors stored later are read.
            return Ok(v);
        }
        if self.floats + v.len() > self.cap {
            self.by_hash.clear();
            self.floats = 0;
        }
        self.floats += v.len();
        self.by_hash.insert(hash.to_owned(), Arc::clone(&v));
        Ok(v)
    }
}

/// What gives a query's vector once it is made.
type Wait<'a> = Box<dyn FnOnce() -> Option<Vec<f32>> + 'a>;

/// A query's embedding, which may still be computing: the words are searched meanwhile, and
/// the fusion asks for it once it needs it (`None`: no vector, words only).
pub struct Near<'a> {
    value: OnceCell<Option<Vec<f32>>>,
    later: Cell<Option<Wait<'a>>>,
}

impl<'a> Near<'a> {
    /// A vector at hand.
    pub fn ready(vector: Vec<f32>) -> Near<'a> {
        Near { value: OnceCell::from(Some(vector)), later: Cell::new(None) }
    }

    /// A vector `wait` gives when first asked for.
    pub fn later(wait: impl FnOnce() -> Option<Vec<f32>> + 'a) -> Near<'a> {
        Near { value: OnceCell::new(), later: Cell::new(Some(Box::new(wait))) }
    }

    pub(crate) fn get(&self) -> Option<&[f32]> {
        self.value.get_or_init(|| self.later.take().and_then(|wait| wait())).as_deref()
    }
}

impl std::fmt::Debug for Near<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Near").field("ready", &self.value.get().is_some()).finish()
    }
}

impl Index {
    /// Up to `limit` pages whose embedding is missing or older than the page.
    pub fn pages_to_embed(&self, limit: usize) -> Result<Vec<PendingPage>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT p.id, p.seq, p.title, p.body FROM pages p
             LEFT JOIN page_embeddings pe ON pe.page_id = p.id
             WHERE pe.page_id IS NULL OR pe.seq != p.seq
             ORDER BY p.seq LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit as i64], |r| {
            let title: String = r.get(2)?;
            let body: String = r.get(3)?;
            Ok(PendingPage {
                page_id: r.get(0)?,
                seq: r.get(1)?,
                text: format!("{title}\n\n{body}"),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Points the page at vectors already stored under `hash` (a rebuilt index, a page
    /// written back unchanged); false when there are none and the text must be embedded.
    pub fn reuse_embedding(&self, page: &PendingPage, hash: &str) -> Result<bool, IndexError> {
        let conn = self.conn();
        let known: Option<i64> = conn
            .query_row("SELECT 1 FROM embeddings WHERE hash = ?1 LIMIT 1", [hash], |r| r.get(0))
            .optional()?;
        if known.is_none() {
            return Ok(false);
        }
        link(&conn, page, hash)?;
        Ok(true)
    }

    /// Stores a page's window vectors under `hash`. A page changed (or deleted) since it was
    /// read keeps no link: it is pending again with its new text.
    pub fn store_embedding(
        &self,
        page: &PendingPage,
        hash: &str,
        vectors: &[Vec<f32>],
    ) -> Result<(), IndexError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for (i, v) in vectors.iter().enumerate() {
            tx.execute(
                "INSERT OR REPLACE INTO embeddings (hash, window, vector) VALUES (?1, ?2, ?3)",
                params![hash, i as i64, to_blob(v)],
            )?;
        }
        link(&tx, page, hash)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes the vectors of hashes pages stopped pointing at and no page points at now;
    /// returns how many.
    pub fn prune_embeddings(&self) -> Result<usize, IndexError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let pruned = tx.execute(
            "DELETE FROM embeddings WHERE hash IN (
                 SELECT u.hash FROM embeddings_unlinked u
                 WHERE NOT EXISTS (SELECT 1 FROM page_embeddings pe WHERE pe.hash = u.hash))",
            [],
        )?;
        tx.execute("DELETE FROM embeddings_unlinked", [])?;
        tx.commit()?;
        Ok(pruned)
    }

    pub fn embedding_state(&self) -> Result<EmbeddingState, IndexError> {
        let conn = self.conn();
        let count = |sql: &str| -> Result<usize, IndexError> {
            Ok(conn.query_row(sql, [], |r| r.get::<_, i64>(0))? as usize)
        };
        Ok(EmbeddingState {
            pages: count("SELECT COUNT(*) FROM pages")?,
            embedded: count(
                "SELECT COUNT(*) FROM pages p JOIN page_embeddings pe ON pe.page_id = p.id
                 WHERE pe.seq = p.seq",
            )?,
            vectors: count("SELECT COUNT(*) FROM embeddings")?,
        })
    }

    /// The paths of the pages nearest to `query` with their cosine, no floor: what the
    /// benchmark reads to compare ways of fusing.
    pub fn nearest_paths(
        &self,
        who: Principal,
        ws: &str,
        project: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<(String, f32)>, IndexError> {
        let near = self.nearest_above(who, ws, project, query, limit, f32::MIN)?;
        let conn = self.conn();
        let mut stmt = conn.prepare_cached("SELECT path FROM pages WHERE id = ?1")?;
        near.into_iter().map(|(id, s)| Ok((stmt.query_row([id], |r| r.get(0))?, s))).collect()
    }

    /// The pages of one project nearest to `query` (a unit vector) at a cosine of `floor` or
    /// more, best first: each page as near as its nearest window. Only a project `who` may
    /// read answers.
    fn nearest_above(
        &self,
        who: Principal,
        ws: &str,
        project: &str,
        query: &[f32],
        limit: usize,
        floor: f32,
    ) -> Result<Vec<(i64, f32)>, IndexError> {
        if query.is_empty() {
            return Ok(Vec::new());
        }
        let (root, user) = Index::bind_principal(who);
        let sql = format!(
            "SELECT p.id, pe.hash FROM pages p
             JOIN projects pr ON pr.id = p.project_id
             JOIN page_embeddings pe ON pe.page_id = p.id
             WHERE pr.workspace = :ws AND pr.name = :project AND {READABLE}"
        );
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&sql)?;
        let pages = stmt
            .query_map(
                named_params! { ":ws": ws, ":project": project, ":root": root, ":user": user },
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
            )?
            .collect::<Result<Vec<_>, _>>()?;
        let mut cache = self.vectors.lock().unwrap_or_else(|p| p.into_inner());
        let mut ranked = Vec::with_capacity(pages.len());
        for (id, hash) in pages {
            let windows = cache.get(&conn, &hash)?;
            if windows.len() % query.len() != 0 {
                continue;
            }
            let best =
                windows.chunks_exact(query.len()).map(|w| dot(w, query)).fold(f32::MIN, f32::max);
            if best >= floor {
                ranked.push((id, best));
            }
        }
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(limit);
        Ok(ranked)
    }

    /// Hits for pages found by meaning only: their lead as the snippet.
    fn hits_by_id(&self, ids: &[i64]) -> Result<HashMap<i64, Hit>, IndexError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT pr.workspace, pr.name, p.path, p.title, p.summary, substr(p.body, 1, ?2)
             FROM pages p JOIN projects pr ON pr.id = p.project_id WHERE p.id = ?1",
        )?;
        let mut out = HashMap::new();
        for &id in ids {
            let hit = stmt
                .query_row(params![id, (LEAD_CHARS * 4) as i64], |r| {
                    let lead: String = r.get(5)?;
                    Ok(Hit {
                        workspace: r.get(0)?,
                        project: r.get(1)?,
                        path: r.get(2)?,
                        title: r.get(3)?,
                        summary: r.get(4)?,
                        snippet: lead_of(&lead),
                        score: 0.0,
                    })
                })
                .optional()?;
            if let Some(hit) = hit {
                out.insert(id, hit);
            }
        }
        Ok(out)
    }

    /// bm25's candidates and the embedding's, fused (`fuse_scores`); the score is minus the
    /// fused one, so lower is better as with bm25 alone.
    pub(crate) fn fuse(
        &self,
        who: Principal,
        ws: &str,
        project: &str,
        by_words: Vec<(i64, Hit)>,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        let by_meaning =
            self.nearest_above(who, ws, project, query, FUSION_CANDIDATES, f32::MIN)?;
        let ranked = fuse_scores(
            &by_words.iter().map(|(id, h)| (*id, h.score)).collect::<Vec<_>>(),
            &by_meaning,
        );
        let mut hits: HashMap<i64, Hit> = by_words.into_iter().collect();
        let missing: Vec<i64> = ranked
            .iter()
            .take(limit)
            .map(|(id, _)| *id)
            .filter(|id| !hits.contains_key(id))
            .collect();
        hits.extend(self.hits_by_id(&missing)?);
        Ok(ranked
            .into_iter()
            .filter_map(|(id, score)| {
                hits.remove(&id).map(|mut h| {
                    h.score = -score;
                    h
                })
            })
            .take(limit)
            .collect())
    }
}

fn link(conn: &rusqlite::Connection, page: &PendingPage, hash: &str) -> Result<(), IndexError> {
    // Only if the page is still at the change number that was embedded.
    conn.execute(
        "INSERT INTO page_embeddings (page_id, seq, hash)
         SELECT id, seq, ?3 FROM pages WHERE id = ?1 AND seq = ?2
         ON CONFLICT (page_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
        params![page.page_id, page.seq, hash],
    )?;
    Ok(())
}

/// Fuses bm25's candidates `(id, bm25)` (lower is better) and the embedding's `(id, cosine)`:
/// each list's scores scaled to 0..1 across its candidates (min-max), then
/// `WORDS_WEIGHT * words + (1 - WORDS_WEIGHT) * meaning`, best first. A page the words did not
/// find and whose cosine is under `MIN_SIMILARITY` is left out, so a query about nothing the
/// project holds does not list every page. Ties keep the words' order.
///
/// A convex combination of normalized scores rather than reciprocal rank fusion: on LoCoMo,
/// RRF (k = 60, equal weights) lost 3.9 points of R@5 against bm25 alone, because a rank
/// says nothing of how far ahead the words' first page is (docs/benchmarks.md).
pub(crate) fn fuse_scores(by_words: &[(i64, f64)], by_meaning: &[(i64, f32)]) -> Vec<(i64, f64)> {
    fn scaled(values: &[f64]) -> Vec<f64> {
        let (lo, hi) =
            values.iter().fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        values.iter().map(|v| if hi > lo { (v - lo) / (hi - lo) } else { 1.0 }).collect()
    }
    let mut score: HashMap<i64, (f64, usize)> = HashMap::new();
    let words = scaled(&by_words.iter().map(|(_, b)| -b).collect::<Vec<_>>());
    for (order, ((id, _), w)) in by_words.iter().zip(words).enumerate() {
        score.entry(*id).or_insert((0.0, order)).0 += WORDS_WEIGHT * w;
    }
    let n = by_words.len();
    let meaning = scaled(&by_meaning.iter().map(|(_, c)| f64::from(*c)).collect::<Vec<_>>());
    for (order, ((id, cos), m)) in by_meaning.iter().zip(meaning).enumerate() {
        if *cos < MIN_SIMILARITY && !score.contains_key(id) {
            continue;
        }
        score.entry(*id).or_insert((0.0, n + order)).0 += (1.0 - WORDS_WEIGHT) * m;
    }
    let mut out: Vec<(i64, f64, usize)> =
        score.into_iter().map(|(id, (s, o))| (id, s, o)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    out.into_iter().map(|(id, s, _)| (id, s)).collect()
}

/// The first `LEAD_CHARS` characters of a body, on one line.
fn lead_of(body: &str) -> String {
    let flat: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(LEAD_CHARS) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_weighs_both_scores_and_drops_far_pages_found_by_meaning_only() {
        // bm25: page 1 far ahead of 2 and 3; meaning: 3 first, 4 near, 5 unrelated.
        let words = [(1, -10.0), (2, -2.0), (3, -1.0)];
        let meaning = [(3, 0.9f32), (4, 0.5), (1, 0.3), (5, 0.05)];
        let fused = fuse_scores(&words, &meaning);
        let ids: Vec<i64> = fused.iter().map(|(id, _)| *id).collect();
        // 1: 0.5*1 + 0.5*(0.25/0.85); 3: 0.5*0 + 0.5*1; 4: 0.5*(0.45/0.85); 2: 0.5*(1/9).
        assert_eq!(ids, vec![1, 3, 4, 2]);
        assert!((fused[1].1 - 0.5).abs() < 1e-9);
        // 5 is under the floor and no word found it: left out.
        assert!(!ids.contains(&5));
        // One candidate on a side scales to 1.
        assert_eq!(fuse_scores(&[(7, -3.0)], &[]), vec![(7, 0.5)]);
        assert!(fuse_scores(&[], &[]).is_empty());
    }

    /// Two projects of one workspace, one restricted to its creator (user 7), with pages.
    fn index_with_pages() -> Index {
        let index = Index::in_memory().unwrap();
        index
            .conn()
            .execute_batch(
                "INSERT INTO projects (id, workspace, name, restricted, creator) VALUES
                    (1, 'default', 'open', 0, NULL), (2, 'default', 'closed', 1, 7);
                 INSERT INTO pages (id, project_id, path, project_key, title, frontmatter, body, seq)
                 VALUES (1, 1, 'a.md', 'p1', 'A', '{}', 'alpha', 1),
                        (2, 1, 'b.md', 'p1', 'B', '{}', 'beta', 2),
                        (3, 2, 'c.md', 'p2', 'C', '{}', 'gamma', 3);",
            )
            .unwrap();
        index
    }

    #[test]
    fn pages_are_pending_until_embedded_and_again_when_rewritten() {
        let index = index_with_pages();
        let pending = index.pages_to_embed(10).unwrap();
        assert_eq!(pending.iter().map(|p| p.page_id).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(pending[0].text, "A\n\nalpha");
        let unit = |i: usize| {
            let mut v = vec![0.0f32; 3];
            v[i] = 1.0;
            v
        };
        for (p, i) in pending.iter().zip([0, 1, 2]) {
            let hash = embedding_hash("m", &p.text);
            assert!(!index.reuse_embedding(p, &hash).unwrap());
            index.store_embedding(p, &hash, &[unit(i)]).unwrap();
        }
        assert!(index.pages_to_embed(10).unwrap().is_empty());
        let state = index.embedding_state().unwrap();
        assert_eq!((state.pages, state.embedded, state.vectors), (3, 3, 3));

        // A rewrite moves the page's change number on: stale, pending again; the same text
        // written back finds its vectors by hash.
        index.conn().execute("UPDATE pages SET seq = 9 WHERE id = 1", []).unwrap();
        let again = index.pages_to_embed(10).unwrap();
        assert_eq!(again.len(), 1);
        assert!(index.reuse_embedding(&again[0], &embedding_hash("m", &again[0].text)).unwrap());
        assert!(index.pages_to_embed(10).unwrap().is_empty());

        // Vectors computed for a version that has since changed are not linked to the page.
        index.conn().execute("UPDATE pages SET seq = 10, body = 'new' WHERE id = 2", []).unwrap();
        let old = PendingPage { page_id: 2, seq: 2, text: "B\n\nbeta".into() };
        index.store_embedding(&old, &embedding_hash("m", &old.text), &[unit(1)]).unwrap();
        assert_eq!(index.pages_to_embed(10).unwrap().len(), 1, "still pending with its new text");
        // Deleting the page removes its link; pruning removes vectors no page points at.
        index.conn().execute("DELETE FROM pages WHERE id = 2", []).unwrap();
        assert_eq!(index.prune_embeddings().unwrap(), 1);
    }

    #[test]
    fn nearest_ranks_by_the_best_window_and_hides_unreadable_projects() {
        let index = index_with_pages();
        let pending = index.pages_to_embed(10).unwrap();
        let windows =
            [vec![vec![1.0f32, 0.0], vec![0.0, 1.0]], vec![vec![0.6, 0.8]], vec![vec![0.0, 1.0]]];
        for (p, w) in pending.iter().zip(&windows) {
            index.store_embedding(p, &embedding_hash("m", &p.text), w).unwrap();
        }
        let near = index
            .nearest_above(Principal::Root, "default", "open", &[0.0, 1.0], 10, MIN_SIMILARITY)
            .unwrap();
        // Page 1's second window matches exactly; page 2 is at 0.8.
        assert_eq!(near.iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![1, 2]);
        // Below the floor, nothing.
        let none = index
            .nearest_above(Principal::Root, "default", "open", &[0.0, 0.1], 10, MIN_SIMILARITY)
            .unwrap();
        assert!(none.is_empty(), "{none:?}");
        // The restricted project answers its creator only.
        let q = [0.0, 1.0];
        assert!(
            index
                .nearest_above(Principal::User(8), "default", "closed", &q, 10, 0.0)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            index
                .nearest_above(Principal::User(7), "default", "closed", &q, 10, 0.0)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn windows_are_read_back_in_order_once_and_the_cache_keeps_its_bound() {
        let index = index_with_pages();
        let pending = index.pages_to_embed(10).unwrap();
        let hash = embedding_hash("m", &pending[0].text);
        let windows = vec![vec![0.5f32, -0.25], vec![1.0, 0.0], vec![0.0, 1.0]];
        index.store_embedding(&pending[0], &hash, &windows).unwrap();
        let conn = index.conn();
        let mut cache = VectorCache { cap: 8, ..VectorCache::default() };
        assert_eq!(&cache.get(&conn, &hash).unwrap()[..], &[0.5, -0.25, 1.0, 0.0, 0.0, 1.0]);
        // Read once: the rows can go, the cache still answers.
        conn.execute("DELETE FROM embeddings", []).unwrap();
        assert_eq!(cache.get(&conn, &hash).unwrap().len(), 6);
        // A hash with no vectors reads as none, and is not kept.
        assert!(cache.get(&conn, "unknown").unwrap().is_empty());
        assert!(!cache.by_hash.contains_key("unknown"));
        // A second entry of 4 floats would pass the bound of 8: the cache starts over.
        let other = embedding_hash("m", &pending[1].text);
        drop(conn);
        index.store_embedding(&pending[1], &other, &[vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap();
        let conn = index.conn();
        assert_eq!(cache.get(&conn, &other).unwrap().len(), 4);
        assert_eq!(cache.floats, 4, "the first entry was dropped with the rest");
        assert!(!cache.by_hash.contains_key(&hash));
    }

    #[test]
    fn a_prune_drops_only_hashes_no_page_points_at_after_a_rebuild_relinked_them() {
        let index = index_with_pages();
        let pending = index.pages_to_embed(10).unwrap();
        for p in &pending {
            index.store_embedding(p, &embedding_hash("m", &p.text), &[vec![1.0, 0.0]]).unwrap();
        }
        // A rebuild: every page row goes and comes back; before a prune, each finds its
        // vectors by hash again.
        index.conn().execute("DELETE FROM page_embeddings", []).unwrap();
        for p in &pending {
            assert!(index.reuse_embedding(p, &embedding_hash("m", &p.text)).unwrap());
        }
        assert_eq!(index.prune_embeddings().unwrap(), 0);
        // A page moved to new text: its old hash is pruned, the others stay.
        let moved = PendingPage { text: "new text".into(), ..pending[0].clone() };
        index
            .store_embedding(&moved, &embedding_hash("m", &moved.text), &[vec![0.0, 1.0]])
            .unwrap();
        assert_eq!(index.prune_embeddings().unwrap(), 1);
        assert_eq!(index.embedding_state().unwrap().vectors, pending.len());
        assert_eq!(index.prune_embeddings().unwrap(), 0, "nothing is looked at twice");
    }

    #[test]
    fn the_hash_depends_on_model_and_text() {
        let a = embedding_hash("m1", "text");
        assert_eq!(a, embedding_hash("m1", "text"));
        assert_ne!(a, embedding_hash("m2", "text"));
        assert_ne!(a, embedding_hash("m1", "text!"));
    }

    #[test]
    fn a_lead_is_one_line_and_bounded() {
        assert_eq!(lead_of("a\n\nb  c"), "a b c");
        let long = "x".repeat(500);
        assert_eq!(lead_of(&long).chars().count(), LEAD_CHARS + 1);
    }
}
