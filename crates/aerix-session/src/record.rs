//! The log's closed vocabularies: a segment's role (the wire's) and label, and a request's
//! route. Each is written as one lowercase word and read back exactly; a word none of them names is an error
//! naming it (serde's "unknown variant"), never a default.

use serde::{Deserialize, Deserializer, Serialize};

/// Who a segment or a message speaks as: the pool's own roles, so the log and the wire can
/// never disagree on one (their words are the same: `system`, `user`, `assistant`, `tool`).
pub use caldrix_proto::Role;

/// What a segment is, for the log, the context tool and compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    System,
    Instructions,
    /// The pinned `# Hook context` of the session's `SessionStart` hooks.
    Hook,
    Prompt,
    Turn,
    Result,
    Note,
    Job,
    Scratchpad,
    Summary,
}

impl Label {
    pub fn as_str(self) -> &'static str {
        match self {
            Label::System => "system",
            Label::Instructions => "instructions",
            Label::Hook => "hook",
            Label::Prompt => "prompt",
            Label::Turn => "turn",
            Label::Result => "result",
            Label::Note => "note",
            Label::Job => "job",
            Label::Scratchpad => "scratchpad",
            Label::Summary => "summary",
        }
    }

    /// `drop` and `summarize` refuse these: the spec's three, and the prompt (a request or a
    /// brief), whose turns would otherwise answer nothing (and some chat templates refuse a
    /// conversation that opens with the assistant).
    pub fn is_protected(self) -> bool {
        matches!(self, Label::System | Label::Instructions | Label::Scratchpad | Label::Prompt)
    }
}

/// The shape of work a request was routed to, or `delegate`: an agent a caller's brief made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    Answer,
    Edit,
    Investigate,
    Plan,
    Delegate,
}

impl Route {
    /// The routes a request is classified into, in the routing prompt's order.
    pub const REQUEST: [Route; 4] = [Route::Answer, Route::Edit, Route::Investigate, Route::Plan];

    pub fn as_str(self) -> &'static str {
        match self {
            Route::Answer => "answer",
            Route::Edit => "edit",
            Route::Investigate => "investigate",
            Route::Plan => "plan",
            Route::Delegate => "delegate",
        }
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An `agent.spawn`'s route: absent for an agent no route made (an imported session's), which
/// logs before the field was optional wrote as `""`.
pub(crate) fn spawn_route<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Route>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Route(Route),
        Other(String),
    }
    match Option::<Written>::deserialize(d)? {
        None => Ok(None),
        Some(Written::Route(route)) => Ok(Some(route)),
        Some(Written::Other(empty)) if empty.is_empty() => Ok(None),
        Some(Written::Other(other)) => Err(serde::de::Error::custom(format!(
            "unknown route `{other}`, expected one of `answer`, `edit`, `investigate`, `plan`, \
             `delegate`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_itself_and_an_unknown_one_is_named() {
        for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
            let text = serde_json::to_string(&role).unwrap();
            assert_eq!(text, format!("\"{}\"", role.as_str()));
            assert_eq!(serde_json::from_str::<Role>(&text).unwrap(), role);
        }
        let labels = [
            Label::System,
            Label::Instructions,
            Label::Hook,
            Label::Prompt,
            Label::Turn,
            Label::Result,
            Label::Note,
            Label::Job,
            Label::Scratchpad,
            Label::Summary,
        ];
        for label in labels {
            let text = serde_json::to_string(&label).unwrap();
            assert_eq!(text, format!("\"{}\"", label.as_str()));
            assert_eq!(serde_json::from_str::<Label>(&text).unwrap(), label);
        }
        for route in Route::REQUEST.into_iter().chain([Route::Delegate]) {
            let text = serde_json::to_string(&route).unwrap();
            assert_eq!(text, format!("\"{route}\""));
            assert_eq!(serde_json::from_str::<Route>(&text).unwrap(), route);
        }
        let wrong = serde_json::from_str::<Label>("\"memo\"").unwrap_err().to_string();
        assert!(wrong.contains("unknown variant `memo`"), "{wrong}");
    }
}
