//! Evidence per artifact: what the corpus's requests show about each prompt, bounded, with where
//! each piece came from (the planted-text check needs to know what the user did not write).

use std::collections::BTreeMap;

use aerix_session::{Event, Label, Outcome, Role, SegmentOp};
use serde_json::Value;

use crate::{Artifacts, Corpus, Request};

/// Items kept per artifact (the first ones in corpus order: newest session first).
pub const EVIDENCE_ITEMS: usize = 20;
/// Characters kept of one item's text.
pub const ITEM_CHARS: usize = 400;
/// Characters of evidence per artifact, all items together.
pub const EVIDENCE_CHARS: usize = 6_000;
/// Characters of untrusted text (every tool result, verifier reason, model output the corpus
/// holds) the planted-text check compares a revision with.
pub const UNTRUSTED_CHARS: usize = 2_000_000;

/// Who wrote an item's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The user's own prompt.
    User,
    /// Aerix's record of what happened (outcomes, routes, compactions), in its own words.
    Harness,
    /// A tool's result (file contents, command output).
    ToolOutput,
    /// A tool's error or refusal.
    ToolError,
    /// A verifier's reason.
    VerifierReason,
    /// The model's own output (a turn that did not parse).
    Model,
}

impl Source {
    /// Text the user did not write and aerix did not compose.
    pub fn untrusted(self) -> bool {
        !matches!(self, Source::User | Source::Harness)
    }
}

/// One piece of evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub session: String,
    pub source: Source,
    /// Where it came from, for a refusal: `a tool error of bash (session S)`.
    pub place: String,
    pub text: String,
}

/// What the corpus shows, by artifact path; and the texts a revision is checked against.
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    pub by_artifact: BTreeMap<String, Vec<Item>>,
    /// Every untrusted text of the corpus (not only what was shown), within `UNTRUSTED_CHARS`.
    pub untrusted: Vec<Item>,
    /// The user's prompts.
    pub prompts: Vec<String>,
}

/// The evidence of `corpus` for `artifacts` (only paths `artifacts.upstream` holds get any).
pub fn gather(corpus: &Corpus, artifacts: &Artifacts) -> Evidence {
    let mut g = Gather { artifacts, evidence: Evidence::default(), untrusted_chars: 0 };
    for (i, request) in corpus.requests.iter().enumerate() {
        if !request.matches {
            continue;
        }
        let next = corpus
            .requests
            .get(i + 1)
            .filter(|n| n.session == request.session && n.number == request.number + 1);
        g.request(request, next);
    }
    g.evidence
}

struct Gather<'a> {
    artifacts: &'a Artifacts,
    evidence: Evidence,
    untrusted_chars: usize,
}

impl Gather<'_> {
    fn request(&mut self, r: &Request, next: Option<&Request>) {
        let s = &r.session;
        self.evidence.prompts.push(r.prompt.clone());
        let prompt = clip(&r.prompt, 160);
        let route = r.events.iter().find_map(|e| match e {
            Event::Route { agent, route, .. } if agent == "a1" => Some(route.as_str()),
            _ => None,
        });
        let root_end = end_of(&r.events, "a1");
        let outcome = r.outcome.or(root_end.map(|(o, ..)| o)).map_or("unfinished", Outcome::as_str);
        let reason = root_end.and_then(|(_, reason, _, _)| reason).map(|r| format!(": {r}"));
        let turns = root_end.map_or(0, |(.., turns)| turns);
        let route = route.unwrap_or("none");
        let line = format!(
            "request {prompt:?}: routed {route}, ended {outcome}{} after {turns} turn(s)",
            reason.unwrap_or_default()
        );
        self.add("system.md", s, Source::Harness, "the request's outcome", &line);
        self.add("routing.md", s, Source::Harness, "the request's route", &line);
        if let Some(next) = next
            && reads_as_correction(&next.prompt)
        {
            let text = format!(
                "the request after {prompt:?} reads as a correction: {:?}",
                clip(&next.prompt, 240)
            );
            self.add("system.md", s, Source::User, "the user's next request", &text);
            self.add("routing.md", s, Source::User, "the user's next request", &text);
        }
        if let Some(name) = r.prompt.strip_prefix('/').and_then(|p| p.split_whitespace().next()) {
            self.skill_used(s, name, "the prompt's first line", outcome);
        }
        for event in &r.events {
            self.event(r, event, outcome);
        }
    }

    fn event(&mut self, r: &Request, event: &Event, outcome: &str) {
        let s = &r.session;
        match event {
            Event::Segment {
                agent,
                op: SegmentOp::Append,
                label: Some(Label::Note),
                text: Some(text),
                ..
            } => {
                if let Some(error) = text.strip_prefix("[parse error]") {
                    let place = format!("the model's output (session {s})");
                    let line = format!("a turn of {agent} was dropped: parse error:{error}");
                    self.add("system.md", s, Source::Model, &place, &line);
                    self.untrusted(s, Source::Model, &place, error);
                } else if text.starts_with("Your last turn reached the limit") {
                    let line = format!(
                        "a turn of {agent} was dropped: cut by max_new_tokens before its JSON closed"
                    );
                    self.add("system.md", s, Source::Harness, "a dropped turn", &line);
                }
            }
            Event::Compaction { agent, reason, before, after, window, blocked, .. } => {
                let line = match blocked {
                    Some(why) => {
                        format!("compaction of {agent} ({reason}) blocked by a hook: {why}")
                    }
                    None => format!(
                        "compaction of {agent} ({reason}): {before} → {after} tokens of a {window}-token window"
                    ),
                };
                self.add("system.md", s, Source::Harness, "a compaction", &line);
            }
            Event::Message {
                agent,
                role: Role::Tool,
                tool: Some(tool),
                call,
                input,
                text,
                error,
                ..
            } => {
                let call = call.as_deref().unwrap_or("?");
                if *error == Some(true) {
                    let place = format!("a tool error of {tool} (session {s})");
                    let (kind, what) = match text.strip_prefix("refused: ") {
                        Some(reason) => ("refused", reason),
                        None => ("failed", text.strip_prefix("error: ").unwrap_or(text)),
                    };
                    let line = format!("{tool} call {agent}.{call} {kind}: {what}");
                    let path = format!("tools/{tool}.md");
                    self.add(&path, s, Source::ToolError, &place, &line);
                    self.untrusted(s, Source::ToolError, &place, text);
                } else {
                    let place = format!("a tool result of {tool} (session {s})");
                    self.untrusted(s, Source::ToolOutput, &place, text);
                }
                if tool == "skill"
                    && let Some(name) =
                        input.as_ref().and_then(|i| i.get("name")).and_then(Value::as_str)
                {
                    self.skill_used(s, name, &format!("{agent}'s skill call"), outcome);
                }
            }
            Event::AgentSpawn { agent, kind, parent: Some(_), .. } => {
                self.subagent(r, agent, kind);
            }
            _ => {}
        }
    }

    /// An implementer, a verifier or a definition's agent: its end, and a verifier's verdict.
    fn subagent(&mut self, r: &Request, agent: &str, kind: &str) {
        let s = &r.session;
        let Some((outcome, reason, final_text, _)) = end_of(&r.events, agent) else { return };
        let reason = reason.map(|r| format!(": {r}")).unwrap_or_default();
        if kind == "verifier" {
            let verdict: Value =
                final_text.and_then(|t| serde_json::from_str(t.trim()).ok()).unwrap_or(Value::Null);
            let why = verdict.get("reason").and_then(Value::as_str).unwrap_or_default();
            let place = format!("a verifier's reason (session {s})");
            match (outcome, verdict.get("verdict").and_then(Value::as_str)) {
                (Outcome::Done, Some("pass")) => {
                    self.add(
                        "verifier.md",
                        s,
                        Source::Harness,
                        "a verdict",
                        &format!("verifier {agent}: pass"),
                    );
                }
                (Outcome::Done, Some("fail")) => {
                    let line = format!("verifier {agent}: fail: {why}");
                    self.add("verifier.md", s, Source::VerifierReason, &place, &line);
                    self.add("brief.md", s, Source::VerifierReason, &place, &line);
                    self.untrusted(s, Source::VerifierReason, &place, why);
                }
                _ => {
                    let line = format!(
                        "verifier {agent} ended {} without a verdict{reason}",
                        outcome.as_str()
                    );
                    self.add("verifier.md", s, Source::Harness, "a verifier's end", &line);
                    if let Some(text) = final_text {
                        self.untrusted(
                            s,
                            Source::Model,
                            &format!("the model's output (session {s})"),
                            text,
                        );
                    }
                }
            }
            return;
        }
        let line = format!("{kind} {agent} ended {}{reason}", outcome.as_str());
        self.add("brief.md", s, Source::Harness, "a piece's end", &line);
        if let Some(path) = self.artifacts.agents.get(kind).cloned() {
            let line = format!(
                "agent definition {kind} ran as {agent}; it ended {}{reason}",
                outcome.as_str()
            );
            self.add(&path, s, Source::Harness, "an agent definition's run", &line);
        }
    }

    fn skill_used(&mut self, session: &str, name: &str, by: &str, outcome: &str) {
        if let Some(path) = self.artifacts.skills.get(name).cloned() {
            let line = format!("skill {name} loaded by {by}; the request ended {outcome}");
            self.add(&path, session, Source::Harness, "a skill's use", &line);
        }
    }

    /// An item for `path`, within the bounds; a path with no upstream is no artifact.
    fn add(&mut self, path: &str, session: &str, source: Source, place: &str, text: &str) {
        if !self.artifacts.upstream.contains_key(path) || !crate::Artifacts::tunable(path) {
            return;
        }
        let items = self.evidence.by_artifact.entry(path.to_owned()).or_default();
        let used: usize = items.iter().map(|i| i.text.chars().count()).sum();
        let text = clip(text, ITEM_CHARS);
        if items.len() >= EVIDENCE_ITEMS || used + text.chars().count() > EVIDENCE_CHARS {
            return;
        }
        items.push(Item { session: session.to_owned(), source, place: place.to_owned(), text });
    }

    fn untrusted(&mut self, session: &str, source: Source, place: &str, text: &str) {
        let n = text.chars().count();
        if text.trim().is_empty() || self.untrusted_chars + n > UNTRUSTED_CHARS {
            return;
        }
        self.untrusted_chars += n;
        self.evidence.untrusted.push(Item {
            session: session.to_owned(),
            source,
            place: place.to_owned(),
            text: text.to_owned(),
        });
    }
}

/// An agent's `agent.end`: outcome, reason, final text, turns.
fn end_of<'a>(
    events: &'a [Event],
    id: &str,
) -> Option<(Outcome, Option<&'a str>, Option<&'a str>, u32)> {
    events.iter().rev().find_map(|e| match e {
        Event::AgentEnd { agent, outcome, reason, final_text, turns } if agent == id => {
            Some((*outcome, reason.as_deref(), final_text.as_deref(), *turns))
        }
        _ => None,
    })
}

/// The documented rule: a prompt reads as a correction when, lowercased, it starts with one of
/// `CORRECTION_STARTS` as whole words, or holds one of `CORRECTION_PHRASES`.
pub fn reads_as_correction(prompt: &str) -> bool {
    let p = prompt.trim().to_lowercase();
    let starts = CORRECTION_STARTS.iter().any(|start| {
        p.strip_prefix(start)
            .is_some_and(|rest| rest.is_empty() || !rest.starts_with(char::is_alphanumeric))
    });
    starts || CORRECTION_PHRASES.iter().any(|phrase| p.contains(phrase))
}

pub const CORRECTION_STARTS: [&str; 14] = [
    "no",
    "nope",
    "wrong",
    "not",
    "don't",
    "do not",
    "undo",
    "revert",
    "stop",
    "still",
    "try again",
    "instead",
    "you didn't",
    "that's wrong",
];
pub const CORRECTION_PHRASES: [&str; 10] = [
    "still fails",
    "still failing",
    "doesn't work",
    "does not work",
    "didn't work",
    "did not work",
    "not what i",
    "that's not",
    "that is not",
    "you broke",
];

/// At most `n` characters of `text`, `…` marking a cut.
pub(crate) fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrections_by_the_documented_rule() {
        for yes in [
            "No, the other file",
            "wrong: it is in lib.rs",
            "That's not it",
            "it still fails",
            "Try again.",
        ] {
            assert!(reads_as_correction(yes), "{yes}");
        }
        for no in ["Now add a test", "Notes please", "Fix calc.sh", "stopwatch module"] {
            assert!(!reads_as_correction(no), "{no}");
        }
    }

    #[test]
    fn clip_marks_the_cut() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
    }
}
