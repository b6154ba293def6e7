//! Retrieval on LoCoMo: our side of `scripts/bench-memory-locomo`, which prepares the corpus
//! (one page per conversation session, one project per conversation, the questions with the
//! pages holding their evidence), runs this and the peer in alternating rounds and scores both.
//!
//!     cargo bench -p ai-memory-server --bench locomo -- --corpus DIR [--pad N] [--model GGUF]
//!
//! Without `--model`, full-text search only (`[embedding] enabled = false`). With it, hybrid:
//! after the pages are written, every page is embedded (`Memory::embed_pending`, what the
//! server's background embedder runs; timed, with the windows it made), and every query
//! embeds its question and fuses the two rankings (timed as part of the query).
//!
//! One round: a fresh data directory; every page of `DIR/pages/<project>/<path>` written
//! through `Memory::write_page` (sanitize, parse, a git commit, the index row: what
//! `memory_write_page` and `ai-memory write-page` call); then every question of
//! `DIR/questions.jsonl` asked through `Memory::query` in its conversation's project (what
//! `memory_query` calls), limit 10, each call timed. With `--pad N`, copies of the pages are
//! then written into a project of their own (`padding`, folders `copy-K/<project>/`) until
//! the wiki holds N pages, the index rebuilt from git once (timed: the cold `reindex`), and the
//! questions asked again. Prints one JSON object: per stage, the pages, load time, each
//! query's time and its ranked paths.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

use std::path::{Path, PathBuf};
use std::time::Instant;

use ai_memory_core::{ProjectName, Settings};
use ai_memory_index::Principal;
use ai_memory_server::{Caller, Memory, Query, WritePage};
use anyhow::{Context, Result};
use serde_json::{Value, json};

struct Page {
    project: String,
    path: String,
    text: String,
}

struct Question {
    project: String,
    question: String,
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let (mut corpus, mut pad, mut model, mut dump) = (None, 0usize, None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--corpus" => corpus = args.next().map(PathBuf::from),
            "--model" => model = args.next(),
            "--dump" => dump = args.next().map(PathBuf::from),
            "--pad" => pad = args.next().context("--pad N")?.parse().context("--pad N")?,
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let corpus = corpus.context("--corpus DIR (made by scripts/bench-memory-locomo)")?;
    let pages = read_pages(&corpus.join("pages"))?;
    let questions = read_questions(&corpus.join("questions.jsonl"))?;

    let dir = std::env::temp_dir().join(format!("ai-memory-locomo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut settings = Settings::default();
    match &model {
        Some(m) => settings.embedding.model = m.clone(),
        None => settings.embedding.enabled = false,
    }
    let memory = Memory::open(&dir, settings)?;

    let started = Instant::now();
    for p in &pages {
        write(&memory, &p.project, &p.path, &p.text)?;
    }
    let load_s = started.elapsed().as_secs_f64();
    let embed = embed_all(&memory, model.is_some())?;
    if let (Some(out), Some(model)) = (&dump, &model) {
        return dump_rankings(&memory, &questions, Path::new(model), out);
    }
    let mut stages = vec![ask(&memory, &questions, pages.len(), load_s, None, embed)?];

    if pad > pages.len() {
        let started = Instant::now();
        let mut n = pages.len();
        'copies: for k in 1.. {
            for p in &pages {
                if n >= pad {
                    break 'copies;
                }
                write(&memory, "padding", &format!("copy-{k}/{}/{}", p.project, p.path), &p.text)?;
                n += 1;
            }
        }
        let load_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let (indexed, broken) = memory.reindex()?;
        anyhow::ensure!(indexed == n && broken.is_empty(), "reindex: {indexed} pages, {broken:?}");
        let reindex_s = started.elapsed().as_secs_f64();
        let embed = embed_all(&memory, model.is_some())?;
        stages.push(ask(&memory, &questions, n, load_s, Some(reindex_s), embed)?);
    }
    drop(memory);
    let _ = std::fs::remove_dir_all(&dir);
    println!("{}", json!({ "side": "ai-memory", "stages": stages }));
    Ok(())
}

fn caller(project: &str) -> Result<Caller> {
    Ok(Caller {
        who: Principal::Root,
        workspace: None,
        project: Some(ProjectName::new(project).with_context(|| format!("project {project}"))?),
    })
}

fn write(memory: &Memory, project: &str, path: &str, text: &str) -> Result<()> {
    let req = WritePage { path: path.to_owned(), body: text.to_owned(), ..WritePage::default() };
    memory.write_page(&caller(project)?, &req).with_context(|| format!("{project}/{path}"))?;
    Ok(())
}

/// For each question, the words' first 50 (path, bm25) and the embedding's first 50 (path,
/// cosine), one JSON line each: to compare ways of fusing them without embedding again.
fn dump_rankings(memory: &Memory, questions: &[Question], model: &Path, out: &Path) -> Result<()> {
    use std::io::Write;
    let encoder = ai_memory_embed::Encoder::load(model, None)?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(out)?);
    for q in questions {
        let words = memory
            .index()
            .query_project(Principal::Root, "default", &q.project, &q.question, None, 50)
            .unwrap_or_default();
        let v = encoder.query(&q.question)?;
        let near = memory.index().nearest_paths(Principal::Root, "default", &q.project, &v, 50)?;
        let words: Vec<(String, f64)> = words.into_iter().map(|h| (h.path, h.score)).collect();
        writeln!(f, "{}", json!({ "words": words, "near": near }))?;
    }
    Ok(())
}

/// Embeds every pending page; its time, pages and the index's vectors.
fn embed_all(memory: &Memory, hybrid: bool) -> Result<Value> {
    if !hybrid {
        return Ok(Value::Null);
    }
    let started = Instant::now();
    let pages = memory.embed_pending(None)?;
    let embed_s = started.elapsed().as_secs_f64();
    let status = memory.embedding_status()?;
    anyhow::ensure!(status.reason.is_none(), "the model did not load: {:?}", status.reason);
    anyhow::ensure!(status.embedded == status.pages, "{status:?}");
    let vectors = memory.index().embedding_state()?.vectors;
    Ok(json!({ "embed_s": embed_s, "pages": pages, "vectors": vectors }))
}

/// Every question in its conversation's project: each call's time and the paths it ranked.
fn ask(
    memory: &Memory,
    questions: &[Question],
    pages: usize,
    load_s: f64,
    reindex_s: Option<f64>,
    embed: Value,
) -> Result<Value> {
    let mut times_ms = Vec::with_capacity(questions.len());
    let mut top = Vec::with_capacity(questions.len());
    for q in questions {
        let who = caller(&q.project)?;
        let req = Query { query: q.question.clone(), limit: Some(10), ..Query::default() };
        let t = Instant::now();
        let result = memory.query(&who, &req);
        times_ms.push(t.elapsed().as_secs_f64() * 1e3);
        // A question with no word left to search for ranks nothing.
        let paths: Vec<String> = match result {
            Ok(r) => r.hits.into_iter().map(|h| h.path).collect(),
            Err(_) => Vec::new(),
        };
        top.push(paths);
    }
    Ok(json!({
        "pages": pages, "load_s": load_s, "reindex_s": reindex_s, "embed": embed,
        "times_ms": times_ms, "top": top,
    }))
}

/// `root/<project>/<path>`, in path order.
fn read_pages(root: &Path) -> Result<Vec<Page>> {
    let mut pages = Vec::new();
    let mut projects: Vec<_> = std::fs::read_dir(root)
        .with_context(|| root.display().to_string())?
        .collect::<Result<_, _>>()?;
    projects.sort_by_key(|e| e.file_name());
    for project in projects {
        let name = project.file_name().to_string_lossy().into_owned();
        let mut files = Vec::new();
        walk(&project.path(), &mut files)?;
        files.sort();
        for f in files {
            let path = f.strip_prefix(project.path())?.to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&f).with_context(|| f.display().to_string())?;
            pages.push(Page { project: name.clone(), path, text });
        }
    }
    Ok(pages)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
    Ok(())
}

fn read_questions(path: &Path) -> Result<Vec<Question>> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l)?;
            let field = |k: &str| v[k].as_str().map(str::to_owned).context(format!("no `{k}`"));
            Ok(Question { project: field("project")?, question: field("question")? })
        })
        .collect()
}
