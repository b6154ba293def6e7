//! Embeddings for ai-memory's retrieval by meaning: a local sentence encoder
//! (all-MiniLM-L6-v2) converted to GGUF and run by llama.cpp through caldrix-engine, on a
//! thread of its own (llama.cpp's context stays on the thread that made it).
//!
//! A page is embedded as windows of its tokens (`WINDOW_TOKENS`, overlapping), each a unit
//! vector; a query is one vector. How near a page is to a query is its nearest window's.

pub mod convert;

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

use caldrix_engine::{EmbedParams, Model, ModelParams, Token};

/// The file name of the default model in a models directory.
pub const DEFAULT_MODEL_FILE: &str = "all-MiniLM-L6-v2.gguf";
/// Tokens of one window, its two special tokens included: the length the model was trained
/// on (sentence-transformers fine-tuned all-MiniLM-L6-v2 on 128-token inputs).
pub const WINDOW_TOKENS: usize = 128;
/// Tokens two neighbouring windows share, so a sentence cut by a window's end is whole in
/// the next.
pub const WINDOW_OVERLAP: usize = 16;
/// The most windows a page is embedded as (about 3,500 tokens): the rest of a longer page is
/// found by its words only.
pub const MAX_WINDOWS: usize = 32;
/// The longest query text embedded, in tokens (a longer one is cut).
pub const QUERY_TOKENS: usize = 128;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("the embedding model {path}: {error}")]
    Load { path: PathBuf, error: caldrix_engine::EngineError },
    #[error("embedding failed: {0}")]
    Engine(caldrix_engine::EngineError),
    #[error("the embedding thread has stopped")]
    Stopped,
    #[error("nothing to embed: the text has no tokens")]
    Empty,
}

// Not `#[from]`: that would make the engine's error a `source` too, and a printed chain would
// say it twice.
impl From<caldrix_engine::EngineError> for EmbedError {
    fn from(e: caldrix_engine::EngineError) -> Self {
        EmbedError::Engine(e)
    }
}

/// A loaded sentence encoder, shared by every caller. Pages and queries are embedded on two
/// threads of their own, each with its own llama.cpp context on the one loaded model: a query
/// never waits behind a long page, and it can be embedded while the caller searches words.
pub struct Encoder {
    pages: Jobs<Vec<Vec<f32>>>,
    queries: Jobs<Vec<f32>>,
    dimension: usize,
    model_id: String,
    path: PathBuf,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("path", &self.path)
            .field("model_id", &self.model_id)
            .finish()
    }
}

/// A query's embedding on its way: `wait` for it.
#[derive(Debug)]
pub struct PendingQuery(Result<mpsc::Receiver<Result<Vec<f32>, EmbedError>>, EmbedError>);

impl PendingQuery {
    /// The query's unit vector, once its thread has made it.
    pub fn wait(self) -> Result<Vec<f32>, EmbedError> {
        self.0?.recv().map_err(|_| EmbedError::Stopped)?
    }
}

impl Encoder {
    /// Loads the GGUF at `path` and starts its two threads; returns when both have their
    /// context, or why not. `threads`: llama.cpp's threads for pages (`None`: every core).
    pub fn load(path: &Path, threads: Option<u32>) -> Result<Encoder, EmbedError> {
        let model = Model::load(path, &ModelParams::default())
            .map_err(|error| EmbedError::Load { path: path.to_owned(), error })?;
        let model = Arc::new(model);
        let params = EmbedParams { threads, max_tokens: WINDOW_TOKENS.max(QUERY_TOKENS) as u32 };
        // Queries on one thread: a query is a few tokens, where a second thread adds a barrier
        // per layer and little work, and a thread waiting at that barrier while another
        // process has the core can stall the query (two threads on a busy 2-core machine:
        // query p99 0.5-1.1 s; one thread on a quieter one: 16-19 ms, the two changes not
        // measured apart). The caller's words search takes the other core meanwhile.
        let query_params = EmbedParams { threads: Some(1), ..params.clone() };
        let (pages, dimension) = spawn(path, "ai-memory-embed", &model, params, page_job)?;
        let (queries, _) = spawn(path, "ai-memory-query", &model, query_params, query_job)?;
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        // What the stored vectors depend on: a different model or window makes them stale.
        let model_id = format!("{name}:{size}:w{WINDOW_TOKENS}o{WINDOW_OVERLAP}p");
        Ok(Encoder { pages, queries, dimension, model_id, path: path.to_owned() })
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Names the model and the windowing: stored vectors made under another id are stale.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A query's unit vector.
    pub fn query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        self.query_later(text).wait()
    }

    /// Starts embedding a query and returns at once: the caller works meanwhile and `wait`s.
    pub fn query_later(&self, text: &str) -> PendingQuery {
        let (tx, rx) = mpsc::channel();
        let sent = self.queries.send((text.to_owned(), tx));
        PendingQuery(sent.map(|()| rx).map_err(|_| EmbedError::Stopped))
    }

    /// A page's windows' unit vectors (none for a text without tokens).
    pub fn page(&self, text: &str) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (tx, rx) = mpsc::channel();
        self.pages.send((text.to_owned(), tx)).map_err(|_| EmbedError::Stopped)?;
        rx.recv().map_err(|_| EmbedError::Stopped)?
    }
}

type Reply<T> = mpsc::Sender<Result<T, EmbedError>>;
/// A worker's queue: a text and where its answer goes.
type Jobs<T> = mpsc::Sender<(String, Reply<T>)>;

/// Starts a thread that owns a context on `model` and answers `(text, reply)` jobs with
/// `job`; returns its queue and the vectors' dimension once the context is made.
fn spawn<T: Send + 'static>(
    path: &Path,
    name: &str,
    model: &Arc<Model>,
    params: EmbedParams,
    job: fn(&mut caldrix_engine::Embedder<'_>, &str) -> Result<T, EmbedError>,
) -> Result<(Jobs<T>, usize), EmbedError> {
    let (jobs, rx) = mpsc::channel::<(String, Reply<T>)>();
    let (ready_tx, ready_rx) = mpsc::channel();
    let model = Arc::clone(model);
    let owned = path.to_owned();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            // llama.cpp's context stays on the thread that made it.
            let mut embedder = match model.embedder(&params) {
                Ok(e) => e,
                Err(error) => {
                    let _ = ready_tx.send(Err(EmbedError::Load { path: owned, error }));
                    return;
                }
            };
            if ready_tx.send(Ok(embedder.dimension())).is_err() {
                return;
            }
            for (text, reply) in rx {
                let _ = reply.send(job(&mut embedder, &text));
            }
        })
        .map_err(|e| EmbedError::Load {
            path: path.to_owned(),
            error: caldrix_engine::EngineError::BadParams(format!("cannot start its thread: {e}")),
        })?;
    let dimension = ready_rx.recv().map_err(|_| EmbedError::Stopped)??;
    Ok((jobs, dimension))
}

fn query_job(
    embedder: &mut caldrix_engine::Embedder<'_>,
    text: &str,
) -> Result<Vec<f32>, EmbedError> {
    let tokens = embedder.tokens(text);
    one(embedder, tokens)
}

fn page_job(
    embedder: &mut caldrix_engine::Embedder<'_>,
    text: &str,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let paragraphs: Vec<Vec<Token>> =
        paragraphs(text).map(|p| embedder.plain_tokens(p)).filter(|t| !t.is_empty()).collect();
    windows(&paragraphs)
        .into_iter()
        .map(|w| {
            let wrapped = embedder.wrap(&w);
            one(embedder, wrapped)
        })
        .collect()
}

fn one(
    embedder: &mut caldrix_engine::Embedder<'_>,
    tokens: Vec<Token>,
) -> Result<Vec<f32>, EmbedError> {
    if tokens.is_empty() {
        return Err(EmbedError::Empty);
    }
    let mut v = embedder.embed(&tokens)?;
    normalize(&mut v);
    Ok(v)
}

/// A text's paragraphs: its runs of lines between blank ones (`\r\n` line ends too).
pub fn paragraphs(text: &str) -> impl Iterator<Item = &str> {
    let mut at = 0;
    let mut start = 0;
    let mut out = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() {
            out.push(&text[start..at]);
            start = at + line.len();
        }
        at += line.len();
    }
    out.push(&text[start..]);
    out.into_iter().map(str::trim).filter(|p| !p.is_empty())
}

/// The windows a page is embedded as, from its paragraphs' plain tokens: whole paragraphs
/// packed in order while they fit (a window ends where a paragraph does, so no sentence is
/// cut and a window is about whole things, as a question is); a paragraph longer than a
/// window is cut into windows of its own sharing `WINDOW_OVERLAP` tokens. At most
/// `MAX_WINDOWS`, each leaving room for the two special tokens.
pub fn windows(paragraphs: &[Vec<Token>]) -> Vec<Vec<Token>> {
    let size = WINDOW_TOKENS - 2;
    let mut out: Vec<Vec<Token>> = Vec::new();
    let mut open: Vec<Token> = Vec::new();
    for p in paragraphs {
        if p.len() > size {
            if !open.is_empty() {
                out.push(std::mem::take(&mut open));
            }
            out.extend(cut(p).into_iter().map(<[Token]>::to_vec));
        } else {
            if open.len() + p.len() > size {
                out.push(std::mem::take(&mut open));
            }
            open.extend_from_slice(p);
        }
        if out.len() >= MAX_WINDOWS {
            break;
        }
    }
    if !open.is_empty() {
        out.push(open);
    }
    out.truncate(MAX_WINDOWS);
    out
}

/// A long run of tokens cut into windows sharing `WINDOW_OVERLAP`, so a sentence cut by one
/// window's end is whole in the next.
fn cut(tokens: &[Token]) -> Vec<&[Token]> {
    let size = WINDOW_TOKENS - 2;
    let step = size - WINDOW_OVERLAP;
    let mut out = Vec::new();
    let mut start = 0;
    while start < tokens.len() && out.len() < MAX_WINDOWS {
        let end = (start + size).min(tokens.len());
        out.push(&tokens[start..end]);
        if end == tokens.len() {
            break;
        }
        start += step;
    }
    out
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The dot product: the cosine of two unit vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The model `ai-memory models fetch` installs, or the one settings name.
pub fn model_path(models_dir: &Path, configured: Option<&Path>) -> PathBuf {
    configured.map_or_else(|| models_dir.join(DEFAULT_MODEL_FILE), Path::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(from: u32, n: u32) -> Vec<Token> {
        (from..from + n).map(Token).collect()
    }

    #[test]
    fn a_long_paragraph_is_cut_into_overlapping_windows_up_to_the_bound() {
        let w = windows(&[run(0, 300)]);
        assert_eq!(w.len(), 3);
        assert_eq!(w[0].len(), WINDOW_TOKENS - 2);
        assert_eq!(w[1][0], Token((WINDOW_TOKENS - 2 - WINDOW_OVERLAP) as u32));
        assert_eq!(w[2].last(), Some(&Token(299)));
        assert!(windows(&[]).is_empty());
        assert_eq!(windows(&[run(0, 100_000)]).len(), MAX_WINDOWS);
        let many: Vec<Vec<Token>> = (0..1000).map(|i| run(i * 100, 100)).collect();
        assert_eq!(windows(&many).len(), MAX_WINDOWS);
    }

    #[test]
    fn paragraphs_are_packed_whole_and_a_window_ends_where_one_does() {
        // 50 + 50 fit in 126; the third would not: it opens the next window.
        let w = windows(&[run(0, 50), run(100, 50), run(200, 50), run(300, 10)]);
        assert_eq!(
            w,
            vec![[run(0, 50), run(100, 50)].concat(), [run(200, 50), run(300, 10)].concat()]
        );
        // A long paragraph closes the open window and is cut on its own.
        let w = windows(&[run(0, 10), run(100, 200), run(400, 5)]);
        assert_eq!(w.len(), 4);
        assert_eq!(w[0], run(0, 10));
        assert_eq!(w[1][0], Token(100));
        assert_eq!(w[3], run(400, 5));
        assert_eq!(
            paragraphs("# T\n\na b\nc\n\n\n  \n\nd ").collect::<Vec<_>>(),
            ["# T", "a b\nc", "d"]
        );
    }

    #[test]
    fn normalize_makes_unit_vectors() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
        let mut z = vec![0.0; 3];
        normalize(&mut z);
        assert_eq!(z, vec![0.0; 3]);
    }
}
