//! `aerix tune`: sync the model base, then one reflection per artifact with evidence, the guards
//! and the planted-text check on each answer, and one commit of what survives.

use std::fmt;

use crate::evidence::clip;
use crate::reflect::{parse_reflection, reflect_input};
use crate::upstream;
use crate::{
    Artifacts, CAS_RETRIES, Committed, Corpus, Guard, REFLECT_SCHEMA, Reflector, Store, SyncReport,
    TuneError, UPSTREAM_JSON, find_planted, gather, sha256_hex, sync, unified,
};

/// Characters of a why kept on a `revised` line and in the commit message.
const WHY_CHARS: usize = 400;

#[derive(Clone, Debug)]
pub struct TuneOptions<'a> {
    /// The model base, `model/<encoded model>`.
    pub branch: &'a str,
    pub dry_run: bool,
}

/// One artifact's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Revised { path: String, why: String },
    Kept { path: String },
    Refused { path: String, reason: String },
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Line::Revised { path, why } => write!(f, "revised {path}: {why}"),
            Line::Kept { path } => write!(f, "kept {path}"),
            Line::Refused { path, reason } => write!(f, "refused {path}: {reason}"),
        }
    }
}

/// A surviving revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    pub path: String,
    pub old: String,
    pub new: String,
    pub why: String,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct TuneReport {
    pub branch: String,
    pub dry_run: bool,
    pub sessions: usize,
    pub sync: SyncReport,
    pub lines: Vec<Line>,
    pub revisions: Vec<Revision>,
    /// The commit and its parent.
    pub commit: Option<(String, String)>,
}

impl TuneReport {
    /// stdout: the per-artifact lines, then the commit and `review` (its text from `review`,
    /// given the parent and the commit), or `nothing to revise (...)`; under `--dry-run` the
    /// diffs and the dry-run line.
    pub fn render(&self, review: impl Fn(&str, &str) -> String) -> String {
        let mut out = String::new();
        for line in &self.lines {
            out.push_str(&format!("{line}\n"));
        }
        if self.dry_run {
            for r in &self.revisions {
                out.push_str(&format!("diff {}\n{}", r.path, unified(&r.path, &r.old, &r.new)));
            }
            out.push_str(&format!(
                "dry run: {} revisions from {} sessions; nothing is committed on {}\n",
                self.revisions.len(),
                self.sessions,
                self.branch
            ));
            return out;
        }
        match &self.commit {
            Some((commit, parent)) => {
                out.push_str(&format!("committed {commit} on {}\n", self.branch));
                out.push_str(&format!("review: {}\n", review(parent, commit)));
            }
            None => out.push_str(&format!("nothing to revise ({})\n", self.nothing_why())),
        }
        out
    }

    fn nothing_why(&self) -> String {
        if self.lines.is_empty() {
            return format!("no artifact has evidence in {} sessions", self.sessions);
        }
        let kept = self.lines.iter().filter(|l| matches!(l, Line::Kept { .. })).count();
        let refused = self.lines.iter().filter(|l| matches!(l, Line::Refused { .. })).count();
        format!(
            "{} artifacts asked from {} sessions: {kept} kept, {refused} refused",
            self.lines.len(),
            self.sessions
        )
    }
}

/// Runs tune on `options.branch` over `corpus` (which has sessions: without any, the caller
/// says so and binds no pool).
pub async fn tune<R: Reflector>(
    store: &dyn Store,
    corpus: &Corpus,
    artifacts: &Artifacts,
    guard: &dyn Guard,
    reflector: &mut R,
    options: &TuneOptions<'_>,
) -> Result<TuneReport, TuneError> {
    let branch = options.branch;
    let synced = sync(store, branch, artifacts, guard, Some(&mut *reflector)).await?;
    let base = synced.head.clone();
    let evidence = gather(corpus, artifacts);
    let prompt = store
        .read(&base, "tune/reflect.md")?
        .or_else(|| artifacts.upstream.get("tune/reflect.md").cloned())
        .unwrap_or_default();
    let mut report = TuneReport {
        branch: branch.to_owned(),
        dry_run: options.dry_run,
        sessions: corpus.sessions.len(),
        ..TuneReport::default()
    };
    for (path, items) in &evidence.by_artifact {
        if synced.stale.contains(path) {
            continue;
        }
        let Some(upstream) = artifacts.upstream.get(path) else { continue };
        let current = store.read(&base, path)?.unwrap_or_else(|| upstream.clone());
        let input = reflect_input(path, &current, items, report.sessions);
        let raw = reflector.ask(&prompt, &input, REFLECT_SCHEMA).await?;
        let line = match parse_reflection(&raw) {
            Err(e) => Line::Refused { path: path.clone(), reason: e },
            Ok(answer) if !answer.revise || answer.text.trim().is_empty() => {
                Line::Kept { path: path.clone() }
            }
            Ok(answer) if answer.text.trim() == current.trim() => Line::Kept { path: path.clone() },
            Ok(answer) => {
                let mut allowed: Vec<&str> = vec![&current, upstream];
                allowed.extend(evidence.prompts.iter().map(String::as_str));
                let planted = find_planted(&answer.text, &allowed, &evidence.untrusted);
                // Planted text first: it is the refusal a reader most needs to see.
                match (planted, guard.check(path, &answer.text, upstream)) {
                    (Some(p), _) => Line::Refused {
                        path: path.clone(),
                        reason: format!("carries text from {}: \"{}\"", p.place, p.matched),
                    },
                    (None, Err(reason)) => Line::Refused { path: path.clone(), reason },
                    (None, Ok(())) => {
                        let why = one_line(&answer.why);
                        report.revisions.push(Revision {
                            path: path.clone(),
                            old: current.clone(),
                            new: answer.text,
                            why: why.clone(),
                        });
                        Line::Revised { path: path.clone(), why }
                    }
                }
            }
        };
        report.lines.push(line);
    }
    report.sync = synced;
    if report.revisions.is_empty() || options.dry_run {
        return Ok(report);
    }
    commit(store, corpus, artifacts, reflector.member(), &base, &mut report)?;
    Ok(report)
}

/// The revisions as one commit by compare-and-swap. A path whose text on the branch changed
/// since `base` (a hand edit during the run) is refused, not overwritten.
fn commit(
    store: &dyn Store,
    corpus: &Corpus,
    artifacts: &Artifacts,
    member: &str,
    base: &str,
    report: &mut TuneReport,
) -> Result<(), TuneError> {
    let branch = report.branch.clone();
    for _ in 0..=CAS_RETRIES {
        let head =
            store.head(&branch)?.ok_or_else(|| TuneError::NoBranch { branch: branch.clone() })?;
        if head != base {
            let mut kept = Vec::new();
            for revision in std::mem::take(&mut report.revisions) {
                if store.read(&head, &revision.path)? == store.read(base, &revision.path)? {
                    kept.push(revision);
                    continue;
                }
                let reason = format!("changed on {branch} during the run; not overwritten");
                for line in &mut report.lines {
                    if matches!(line, Line::Revised { path, .. } if *path == revision.path) {
                        *line =
                            Line::Refused { path: revision.path.clone(), reason: reason.clone() };
                    }
                }
            }
            report.revisions = kept;
            if report.revisions.is_empty() {
                return Ok(());
            }
        }
        let upstreams = upstream::read(store, &branch, &head)?;
        let mut next = upstreams.clone();
        let mut files = Vec::new();
        for r in &report.revisions {
            let source = artifacts.upstream.get(&r.path).cloned().unwrap_or_default();
            // The upstream it was tuned from: the recorded one, else (never tuned) the text's own.
            let hash = upstream::of(&upstreams, &r.path, &r.old);
            next.hashes.insert(r.path.clone(), hash.clone());
            if Artifacts::is_overlay(&r.path) && sha256_hex(&source) == hash {
                files.push((format!("upstream/{}", r.path), source));
            }
            files.push((r.path.clone(), r.new.clone()));
        }
        if next != upstreams {
            files.push((UPSTREAM_JSON.to_owned(), next.render()));
        }
        let message = message(&branch, member, corpus, &report.revisions);
        match store.commit(&branch, &head, &files, &message)? {
            Committed::Done(commit) => {
                report.commit = Some((commit, head));
                return Ok(());
            }
            Committed::Moved(_) => continue,
        }
    }
    Err(TuneError::Raced { branch, attempts: CAS_RETRIES + 1 })
}

fn message(branch: &str, member: &str, corpus: &Corpus, revisions: &[Revision]) -> String {
    let mut m = format!("tune: {} revision(s) on {branch}\n\n", revisions.len());
    m.push_str(&format!("reflection member: {member}\n"));
    m.push_str(&format!("sessions: {}\n\n", corpus.sessions.join(", ")));
    for r in revisions {
        m.push_str(&format!("- {}: {}\n", r.path, r.why));
    }
    m
}

fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() { "(no why given)".to_owned() } else { clip(&flat, WHY_CHARS) }
}
