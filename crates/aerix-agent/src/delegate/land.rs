//! A piece's passing change reaching the caller's tree (in call order, after the turn's pieces
//! end), and the caller's result: `{summary, files_touched, checks_run, outcome, verdicts,
//! landed}` within `tool_caps.agent`.
//!
//! A change lands three-way: a file the caller's tree changed meanwhile is merged, and a
//! conflict writes nothing (never conflict markers); the piece's outcome is then `conflict`
//! and its patch is kept in the session's spool.

use crate::runtime::Sink;
use aerix_session::Event;
use serde_json::{Value, json};

use crate::delegate::piece::Ending;

/// Lands `ending`'s change (if any) for the piece `piece`: what landed, in words, for the
/// result (the log's `land` event has its state: `landed`, `unchanged`, `conflict`,
/// `refused`, `none`, `in place`).
pub(crate) fn land(piece: &str, ending: &mut Ending, sink: &mut dyn Sink) -> String {
    let Some(landing) = ending.landing.take() else {
        let (state, text) = if ending.in_place {
            (
                "in place",
                "the piece ran in place (not a git work tree): its edits are in the tree as made"
                    .to_owned(),
            )
        } else if ending.outcome == aerix_session::Outcome::Done {
            ("unchanged", "nothing: the check passed without a change".to_owned())
        } else {
            ("none", "nothing: no attempt passed its check, and the tree is as it was".to_owned())
        };
        sink.event(Event::Land {
            agent: piece.to_owned(),
            state: state.to_owned(),
            attempt: None,
            files: Vec::new(),
            patch: None,
        });
        return text;
    };
    let files = landing.change.paths();
    if landing.change.is_empty() {
        sink.event(Event::Land {
            agent: piece.to_owned(),
            state: "unchanged".to_owned(),
            attempt: Some(landing.attempt),
            files: Vec::new(),
            patch: None,
        });
        return format!("nothing: attempt {} passed without a change", landing.attempt);
    }
    match aerix_worktrees::apply(&landing.store, &landing.change) {
        Ok(_) => {
            sink.event(Event::Land {
                agent: piece.to_owned(),
                state: "landed".to_owned(),
                attempt: Some(landing.attempt),
                files: files.clone(),
                patch: None,
            });
            format!("attempt {}'s change: {}", landing.attempt, files.join(", "))
        }
        Err(e) => {
            let patch = String::from_utf8_lossy(landing.change.patch()).into_owned();
            let patch = sink.spool(&format!("{piece}.patch"), &patch);
            let kept = match &patch {
                Some(path) => format!("; its patch is kept at {}", path.display()),
                None => "; its patch could not be kept (no session directory)".to_owned(),
            };
            // A conflict is the tree having moved on; anything else, a change aerix refused
            // to write or could not.
            let (state, outcome) = match e {
                aerix_worktrees::Error::Conflict { .. } => ("conflict", "conflict"),
                _ => ("refused", "failed"),
            };
            sink.event(Event::Land {
                agent: piece.to_owned(),
                state: state.to_owned(),
                attempt: Some(landing.attempt),
                files,
                patch: patch.as_ref().map(|p| p.display().to_string()),
            });
            ending.outcome_text = Some(outcome);
            format!(
                "nothing: attempt {} passed, but its change did not land: {e}{kept}",
                landing.attempt
            )
        }
    }
}

/// The caller's JSON, within `cap` bytes: a long summary is cut, the whole result spooled.
pub(crate) fn result_json(
    ending: &Ending,
    landed: &str,
    cap: usize,
    sink: &mut dyn Sink,
) -> String {
    let outcome = ending.outcome_text.unwrap_or(ending.outcome.as_str());
    let verdicts: Vec<Value> = ending.judged.iter().map(|j| j.to_json()).collect();
    let render = |summary: &str, files: &[String], checks: &[String], verdicts: &[Value]| {
        json!({
            "summary": summary,
            "files_touched": files,
            "checks_run": checks,
            "outcome": outcome,
            "verdicts": verdicts,
            "landed": landed,
        })
        .to_string()
    };
    let (files, checks) = (&ending.trace.files, &ending.trace.checks);
    let whole = render(&ending.summary, files, checks, &verdicts);
    if whole.len() <= cap {
        return whole;
    }
    let pointer = match sink.spool("agent.json", &whole) {
        Some(path) => format!(" [truncated: the whole result is in {}]", path.display()),
        None => " [truncated]".to_owned(),
    };
    // Lists first kept whole, then cut: the verdicts first (earliest first: the last decided;
    // the log has them all), then the commands and files from the end; the summary takes what
    // room is left.
    let (mut files, mut checks, mut verdicts) = (files.to_vec(), checks.to_vec(), verdicts);
    loop {
        let bare = render(&pointer, &files, &checks, &verdicts);
        if bare.len() <= cap || (files.is_empty() && checks.is_empty() && verdicts.is_empty()) {
            let room = cap.saturating_sub(bare.len());
            let mut summary = String::new();
            for c in ending.summary.chars() {
                // JSON escapes may grow a character: measure as rendered.
                let grown = serde_json::to_string(&c.to_string()).map_or(6, |s| s.len() - 2);
                if summary.len() + grown > room {
                    break;
                }
                summary.push(c);
            }
            summary.push_str(&pointer);
            return render(&summary, &files, &checks, &verdicts);
        }
        if !verdicts.is_empty() {
            verdicts.remove(0);
        } else if checks.len() >= files.len() && !checks.is_empty() {
            checks.pop();
        } else {
            files.pop();
        }
    }
}
