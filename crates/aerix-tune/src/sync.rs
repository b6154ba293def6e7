//! `aerix profile sync`: every artifact whose upstream changed since the branch recorded it. An
//! untuned one takes the new upstream and an embedded file the branch lacks is added, without
//! the model; a tuned one is reconciled by the reflection member (the old upstream, the diff to
//! the new one and the tuned text → `{"text", "why"}`), the guards run on the answer, and the
//! result is committed with the new upstream hash.

use std::collections::BTreeMap;
use std::fmt;

use crate::reflect::{parse_reconciled, reconcile_input};
use crate::upstream;
use crate::{
    Artifacts, CAS_RETRIES, Committed, Guard, RECONCILE_SCHEMA, Reflector, Store, TuneError,
    UPSTREAM_JSON, Upstreams, sha256_hex, unified,
};

/// What sync found for one artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// An embedded file the branch lacks.
    Add { text: String },
    /// Untuned: the new upstream replaces it.
    Update { text: String },
    /// Tuned: the model reconciles `tuned` with the change from `old` to `new`.
    Reconcile { old: String, new: String, tuned: String },
    /// Cannot be reconciled (stays stale).
    Stale { reason: String },
}

/// One line of sync's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncLine {
    Added(String),
    Updated(String),
    Reconciled { path: String, why: String },
    Kept { path: String, why: String },
    Stale { path: String, reason: String },
}

impl fmt::Display for SyncLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncLine::Added(path) => write!(f, "added {path}"),
            SyncLine::Updated(path) => write!(f, "updated {path}: this release's text"),
            SyncLine::Reconciled { path, why } => write!(f, "reconciled {path}: {why}"),
            SyncLine::Kept { path, why } => write!(f, "kept {path}: {why}"),
            SyncLine::Stale { path, reason } => write!(f, "stale {path}: {reason}"),
        }
    }
}

/// What sync did.
#[derive(Clone, Debug, Default)]
pub struct SyncReport {
    pub lines: Vec<SyncLine>,
    pub commit: Option<String>,
    /// The branch's head after sync.
    pub head: String,
    /// Paths left stale (tune does not tune them).
    pub stale: Vec<String>,
    /// Whether the reflection member was asked.
    pub asked_model: bool,
}

/// What sync would do, found without the model.
#[derive(Clone, Debug)]
pub struct SyncPlan {
    pub branch: String,
    pub head: String,
    steps: Vec<(String, Step)>,
    upstreams: Upstreams,
}

impl SyncPlan {
    /// Whether a tuned artifact is stale: only then is a pool needed.
    pub fn needs_model(&self) -> bool {
        self.steps.iter().any(|(_, s)| matches!(s, Step::Reconcile { .. }))
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// A reconciliation asked: the path, the tuned text's hash and the new upstream's.
type AnswerKey = (String, String, String);
/// Its answer (text and why), or why it is refused.
type Answer = Result<(String, String), String>;

/// The plan for `branch` at its head.
pub fn plan_sync(
    store: &dyn Store,
    branch: &str,
    artifacts: &Artifacts,
) -> Result<SyncPlan, TuneError> {
    let head =
        store.head(branch)?.ok_or_else(|| TuneError::NoBranch { branch: branch.to_owned() })?;
    let upstreams = upstream::read(store, branch, &head)?;
    let mut steps = Vec::new();
    for (path, new) in &artifacts.upstream {
        let overlay = Artifacts::is_overlay(path);
        let Some(text) = store.read(&head, path)? else {
            // An overlay the branch lacks is no overlay; an embedded file is added.
            if !overlay {
                steps.push((path.clone(), Step::Add { text: new.clone() }));
            }
            continue;
        };
        let recorded = match upstreams.hashes.get(path) {
            Some(hash) => hash.clone(),
            None if overlay => match store.read(&head, &format!("upstream/{path}"))? {
                Some(kept) => sha256_hex(&kept),
                // An overlay with no upstream recorded: nothing to compare it with.
                None => continue,
            },
            None => {
                // A file without a recorded upstream is its own upstream when `main` ever held
                // it (never tuned); otherwise it was edited without a record and is not stale.
                if text != *new && store.history("main", path)?.contains(&text) {
                    steps.push((path.clone(), Step::Update { text: new.clone() }));
                }
                continue;
            }
        };
        if recorded == sha256_hex(new) {
            continue;
        }
        if sha256_hex(&text) == recorded {
            steps.push((path.clone(), Step::Update { text: new.clone() }));
            continue;
        }
        let step = match old_upstream(store, &head, path, &recorded)? {
            Some(old) => Step::Reconcile { old, new: new.clone(), tuned: text },
            None => Step::Stale { reason: "its old upstream text is gone".into() },
        };
        steps.push((path.clone(), step));
    }
    Ok(SyncPlan { branch: branch.to_owned(), head, steps, upstreams })
}

/// The upstream text whose hash is `hash`: an overlay's `upstream/<path>`, a built-in's text in
/// `main`'s history.
fn old_upstream(
    store: &dyn Store,
    head: &str,
    path: &str,
    hash: &str,
) -> Result<Option<String>, TuneError> {
    if Artifacts::is_overlay(path) {
        let kept = store.read(head, &format!("upstream/{path}"))?;
        return Ok(kept.filter(|t| sha256_hex(t) == hash));
    }
    Ok(store.history("main", path)?.into_iter().find(|t| sha256_hex(t) == hash))
}

/// Runs sync on `branch`: plans, asks `reflector` once per stale tuned artifact (a plan that
/// needs none never uses it), and commits by compare-and-swap, planning again from the new
/// head when the branch moved (at most `CAS_RETRIES` times; answers already given are reused).
pub async fn sync<R: Reflector>(
    store: &dyn Store,
    branch: &str,
    artifacts: &Artifacts,
    guard: &dyn Guard,
    mut reflector: Option<&mut R>,
) -> Result<SyncReport, TuneError> {
    let mut answers: BTreeMap<AnswerKey, Answer> = BTreeMap::new();
    let mut asked = false;
    for _ in 0..=CAS_RETRIES {
        let plan = plan_sync(store, branch, artifacts)?;
        if plan.is_empty() {
            return Ok(SyncReport { head: plan.head, ..SyncReport::default() });
        }
        let prompt = store
            .read(&plan.head, "tune/reconcile.md")?
            .or_else(|| artifacts.upstream.get("tune/reconcile.md").cloned())
            .unwrap_or_default();
        let mut upstreams = plan.upstreams.clone();
        let mut files = Vec::new();
        let mut report = SyncReport::default();
        let mut whys = Vec::new();
        for (path, step) in &plan.steps {
            let record =
                |upstreams: &mut Upstreams, files: &mut Vec<(String, String)>, new: &str| {
                    upstreams.hashes.insert(path.clone(), sha256_hex(new));
                    if Artifacts::is_overlay(path) {
                        files.push((format!("upstream/{path}"), new.to_owned()));
                    }
                };
            match step {
                Step::Add { text } => {
                    files.push((path.clone(), text.clone()));
                    report.lines.push(SyncLine::Added(path.clone()));
                    whys.push(format!("{path}: added from this release"));
                }
                Step::Update { text } => {
                    files.push((path.clone(), text.clone()));
                    record(&mut upstreams, &mut files, text);
                    report.lines.push(SyncLine::Updated(path.clone()));
                    whys.push(format!("{path}: this release's text (never tuned)"));
                }
                Step::Stale { reason } => {
                    report.stale.push(path.clone());
                    report
                        .lines
                        .push(SyncLine::Stale { path: path.clone(), reason: reason.clone() });
                }
                Step::Reconcile { old, new, tuned } => {
                    let key = (path.clone(), sha256_hex(tuned), sha256_hex(new));
                    let answer = match answers.get(&key) {
                        Some(answer) => answer.clone(),
                        None => {
                            let Some(model) = reflector.as_deref_mut() else {
                                return Err(TuneError::Pool(
                                    "sync needs a reflection member".into(),
                                ));
                            };
                            asked = true;
                            let diff = unified(path, old, new);
                            let input = reconcile_input(path, old, &diff, tuned);
                            let raw = model.ask(&prompt, &input, RECONCILE_SCHEMA).await?;
                            let answer = parse_reconciled(&raw)
                                .map(|r| (r.text, r.why))
                                .map_err(|e| format!("the answer is refused: {e}"));
                            answers.insert(key, answer.clone());
                            answer
                        }
                    };
                    let answer = answer.and_then(|(text, why)| {
                        if text.trim() == tuned.trim() {
                            return Ok((None, why));
                        }
                        guard
                            .check(path, &text, new)
                            .map(|()| (Some(text), why))
                            .map_err(|e| format!("the answer is refused: {e}"))
                    });
                    match answer {
                        Ok((text, why)) => {
                            record(&mut upstreams, &mut files, new);
                            whys.push(format!("{path}: {why}"));
                            match text {
                                Some(text) => {
                                    files.push((path.clone(), text));
                                    report
                                        .lines
                                        .push(SyncLine::Reconciled { path: path.clone(), why });
                                }
                                None => {
                                    report.lines.push(SyncLine::Kept { path: path.clone(), why })
                                }
                            }
                        }
                        Err(reason) => {
                            report.stale.push(path.clone());
                            report.lines.push(SyncLine::Stale { path: path.clone(), reason });
                        }
                    }
                }
            }
        }
        report.asked_model = asked;
        if upstreams != plan.upstreams {
            files.push((UPSTREAM_JSON.to_owned(), upstreams.render()));
        }
        if files.is_empty() {
            report.head = plan.head;
            return Ok(report);
        }
        let mut message = format!("profile sync on {branch}\n\n");
        for why in &whys {
            message.push_str(&format!("- {why}\n"));
        }
        if asked && let Some(model) = reflector.as_deref() {
            message.push_str(&format!("\nreflection member: {}\n", model.member()));
        }
        match store.commit(branch, &plan.head, &files, &message)? {
            Committed::Done(commit) => {
                report.head = commit.clone();
                report.commit = Some(commit);
                return Ok(report);
            }
            Committed::Moved(_) => continue,
        }
    }
    Err(TuneError::Raced { branch: branch.to_owned(), attempts: CAS_RETRIES + 1 })
}
