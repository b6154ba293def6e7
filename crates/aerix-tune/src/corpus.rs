//! The corpus: the newest sessions of the project whose `session.start` names the profile and
//! the model, split into their requests (each `session.start` of a log begins one: a resumed
//! session appends its next request to the same log).

use std::path::Path;

use aerix_session::{Event, Outcome, SessionError, Store as Sessions};
use serde_json::Value;

use crate::TuneError;

/// One request of a session, as its log recorded it.
#[derive(Clone, Debug)]
pub struct Request {
    pub session: String,
    /// From 1, in the session's order.
    pub number: usize,
    pub prompt: String,
    pub cwd: String,
    /// `session.start`'s `profile_commit`: the profile commit the request read its prompts from.
    pub profile_commit: Option<String>,
    /// `session.start`'s `start_commit`, when recorded: the project's commit the request
    /// started on (its diff's base).
    pub start_commit: Option<String>,
    /// Whether the request's `session.start` names the profile and the model.
    pub matches: bool,
    /// The events after its `session.start`, up to the next one.
    pub events: Vec<Event>,
    /// `session.end`'s outcome (none when the log was cut before it).
    pub outcome: Option<Outcome>,
}

/// The sessions read, newest first, and their requests (every request of a matching session,
/// in order, so a correction can be seen in the next one).
#[derive(Clone, Debug, Default)]
pub struct Corpus {
    pub sessions: Vec<String>,
    pub requests: Vec<Request>,
}

impl Corpus {
    /// The requests that match the profile and the model.
    pub fn matching(&self) -> impl Iterator<Item = &Request> {
        self.requests.iter().filter(|r| r.matches)
    }
}

/// The newest `limit` sessions of `project` (by the index's `updated`) whose `session.start`
/// names `profile` (its `profile` field) and `model` (its `model`, the main member's reference
/// as configured). Imported sessions (tagged, e.g. `claude-code`) are left out.
pub fn read_corpus(
    sessions: &Sessions,
    project: &str,
    profile: &str,
    model: &str,
    limit: usize,
) -> Result<Corpus, TuneError> {
    let mut entries = sessions.list(project)?;
    entries.retain(|e| e.tag.is_none());
    entries.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| b.id.cmp(&a.id)));
    let mut corpus = Corpus::default();
    for entry in entries {
        if corpus.sessions.len() >= limit {
            break;
        }
        let path = sessions.log_path(project, &entry.id);
        let requests = match read_requests(&path, &entry.id, profile, model) {
            Ok(requests) => requests,
            // A log that went away since the index listed it is not part of the corpus.
            Err(SessionError::Io { error: source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if requests.iter().any(|r| r.matches) {
            corpus.sessions.push(entry.id.clone());
            corpus.requests.extend(requests);
        }
    }
    Ok(corpus)
}

/// A log's requests. Lines that are not events are skipped (as `read_log` does); the profile
/// fields of `session.start` are read from the raw line, so a log written before they existed
/// reads as naming no profile.
fn read_requests(
    path: &Path,
    session: &str,
    profile: &str,
    model: &str,
) -> Result<Vec<Request>, SessionError> {
    let text = std::fs::read_to_string(path).map_err(|error| SessionError::Io {
        what: "reading",
        path: path.to_owned(),
        error,
    })?;
    let mut requests: Vec<Request> = Vec::new();
    // The log's numbering (every `session.start`), which a rewind's `to` names.
    let mut started = 0;
    for line in text.lines() {
        let Ok(raw) = serde_json::from_str::<Value>(line) else { continue };
        let Ok(event) = serde_json::from_value::<Event>(raw.clone()) else { continue };
        match event {
            Event::SessionStart { prompt, cwd, model: started_with, .. } => {
                let field = |name: &str| raw.get(name).and_then(Value::as_str).map(str::to_owned);
                started += 1;
                requests.push(Request {
                    session: session.to_owned(),
                    number: started,
                    prompt,
                    cwd,
                    profile_commit: field("profile_commit"),
                    start_commit: field("start_commit"),
                    matches: field("profile").as_deref() == Some(profile) && started_with == model,
                    events: Vec::new(),
                    outcome: None,
                });
            }
            Event::SessionEnd { outcome, .. } => {
                if let Some(last) = requests.last_mut() {
                    last.outcome = Some(outcome);
                }
            }
            // The user took those requests back: they are not evidence of what the prompts do
            // (a `--files-only` rewind keeps the conversation, and its requests count).
            Event::Rewind { to, conversation: true, .. } => {
                requests.retain(|r| r.number < to as usize);
            }
            other => {
                if let Some(last) = requests.last_mut() {
                    last.events.push(other);
                }
            }
        }
    }
    Ok(requests)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(prompt: &str) -> Event {
        Event::SessionStart {
            session: "s".into(),
            project: "p".into(),
            cwd: "/".into(),
            model: "m".into(),
            decision: None,
            prompt: prompt.into(),
            resumed: prompt != "one",
            version: "0".into(),
            profile: Some("prof".into()),
            profile_branch: None,
            profile_commit: None,
            start_commit: None,
        }
    }

    #[test]
    fn rewound_requests_are_not_read_and_numbers_stay_the_logs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let events = [
            start("one"),
            start("two"),
            start("three"),
            Event::Rewind { to: 2, files: true, conversation: true },
            start("four"),
            Event::Rewind { to: 4, files: true, conversation: false },
        ];
        let lines: Vec<String> = events.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let read = read_requests(&path, "s", "prof", "m").unwrap();
        let kept: Vec<(usize, &str)> = read.iter().map(|r| (r.number, r.prompt.as_str())).collect();
        assert_eq!(kept, [(1, "one"), (4, "four")]);
    }
}
