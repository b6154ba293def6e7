//! What can go wrong talking to a remote engine. Every message is one sentence naming the URL
//! (base URL and path, never a credential: URLs with a user or password are refused up front)
//! and, where the engine said why, its message cut to [`MESSAGE_CHARS`].

use std::time::Duration;

/// The longest excerpt of a remote's text (an error message, a malformed event) put in an error.
pub const MESSAGE_CHARS: usize = 300;

/// A bound of the client's own (see the crate docs) that a reply went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// One line of the event stream: [`crate::Limits::line_bytes`].
    Line(usize),
    /// One event (its `data:` lines together): [`crate::Limits::event_bytes`].
    Event(usize),
    /// Events in one streamed reply: [`crate::Limits::events`].
    Events(usize),
    /// A whole reply's body: [`crate::Limits::reply_bytes`].
    Reply(usize),
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Bound::Line(n) => write!(f, "a line of the event stream longer than {n} bytes"),
            Bound::Event(n) => write!(f, "an event larger than {n} bytes"),
            Bound::Events(n) => write!(f, "more than {n} events in one reply"),
            Bound::Reply(n) => write!(f, "a reply larger than {n} bytes"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    #[error("the remote engine's URL {url:?} is not usable: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("the API key's environment variable {var} is not set (or not valid UTF-8)")]
    MissingKey { var: String },
    #[error("{url} is unreachable: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{url} refused the request ({status}): {}", key_hint(.key_env))]
    Unauthorized { url: String, status: u16, key_env: Option<String> },
    #[error("{url} does not serve the model {model:?}{}", listed_hint(.listed))]
    ModelNotFound { url: String, model: String, listed: Vec<String> },
    #[error("{url} answered 404: {message}")]
    NotFound { url: String, message: String },
    #[error("{url} is rate limited: still 429 after {attempts} attempts over {:.1} s", .waited.as_secs_f64())]
    RateLimited { url: String, attempts: u32, waited: Duration },
    #[error("{url} failed ({status}): {message}")]
    Server { url: String, status: u16, message: String },
    #[error("{url} refused the constraint: {message}")]
    BadConstraint { url: String, message: String },
    #[error("{url} refused the request ({status}): {message}")]
    BadRequest { url: String, status: u16, message: String },
    #[error("{url} answered an unexpected status {status}: {message}")]
    Status { url: String, status: u16, message: String },
    #[error("{url} cut the stream mid-generation, after {events} events and no finish")]
    StreamCut { url: String, events: usize },
    #[error("{url} sent no data for {} s", .idle.as_secs())]
    Stalled { url: String, idle: Duration },
    #[error("{url} sent {what} that does not parse: {excerpt:?}")]
    Malformed { url: String, what: &'static str, excerpt: String },
    #[error("{url} sent {bound}")]
    TooLarge { url: String, bound: Bound },
    #[error("{url}: {what}")]
    Unsupported { url: String, what: String },
}

fn key_hint(var: &Option<String>) -> String {
    match var {
        Some(var) => format!("check the API key in the environment variable {var}"),
        None => "it wants an API key: name its environment variable in the settings".to_owned(),
    }
}

fn listed_hint(listed: &[String]) -> String {
    if listed.is_empty() {
        return String::new();
    }
    let mut names: Vec<&str> = listed.iter().take(8).map(String::as_str).collect();
    if listed.len() > 8 {
        names.push("...");
    }
    format!(" (it lists {})", names.join(", "))
}

/// `text` on one line, at most [`MESSAGE_CHARS`] characters.
pub(crate) fn excerpt(text: &str) -> String {
    let mut out: String =
        text.chars().take(MESSAGE_CHARS).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if text.chars().nth(MESSAGE_CHARS).is_some() {
        out.push_str("...");
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_is_one_bounded_line() {
        let long = format!("a\nb{}", "x".repeat(1000));
        let got = excerpt(&long);
        assert!(!got.contains('\n'));
        assert_eq!(got.chars().count(), MESSAGE_CHARS + 3);
    }

    #[test]
    fn unauthorized_names_the_variable_not_its_value() {
        let e = RemoteError::Unauthorized {
            url: "http://h/v1/models".into(),
            status: 401,
            key_env: Some("TEAM_KEY".into()),
        };
        assert_eq!(
            e.to_string(),
            "http://h/v1/models refused the request (401): check the API key in the \
             environment variable TEAM_KEY"
        );
    }
}
