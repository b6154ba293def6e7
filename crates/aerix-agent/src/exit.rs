//! Exit statuses (docs/configuration.md lists them).

use aerix_session::Outcome;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The request ended with a final answer.
    Done,
    /// A named failure: a turn that never parsed, the pool unreachable or gone, a tool layer
    /// error.
    Failed,
    /// A turn budget ran out.
    Budget,
    /// Ended by a bound (the context floor), or by a hook: a `UserPromptSubmit` hook that
    /// blocked the prompt, a session hook's `continue: false`.
    Killed,
    /// A bad command line, an unknown session.
    Usage,
    /// A settings file that does not parse or holds a bad value.
    Config,
    /// Cancelled by SIGINT or SIGHUP.
    Cancelled,
    /// Cancelled by SIGTERM.
    Terminated,
    /// The screen closed by SIGHUP (a headless run's SIGHUP is `Cancelled`).
    HungUp,
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Done => 0,
            Exit::Failed => 1,
            Exit::Budget => 2,
            Exit::Killed => 3,
            Exit::Usage => 64,
            Exit::Config => 78,
            Exit::Cancelled => 130,
            Exit::Terminated => 143,
            Exit::HungUp => 129,
        }
    }

    pub fn of(outcome: Outcome) -> Exit {
        match outcome {
            Outcome::Done => Exit::Done,
            Outcome::Budget => Exit::Budget,
            Outcome::Failed => Exit::Failed,
            Outcome::Killed => Exit::Killed,
            Outcome::Cancelled => Exit::Cancelled,
        }
    }

    /// An error that exits with this status.
    pub fn with(self, message: impl Into<String>) -> ExitError {
        ExitError { exit: self, message: message.into() }
    }
}

/// An error carrying its exit status.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ExitError {
    pub exit: Exit,
    pub message: String,
}
