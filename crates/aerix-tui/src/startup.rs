//! What the startup knows before the first request: the launch frame's info line and the
//! startup block's rows.

use std::time::Duration;

/// The launch frame's info line.
#[derive(Clone, Debug, Default)]
pub struct Launch {
    /// The main member's model, as settings name it.
    pub model: String,
    /// Its lane (`cpu`, or `gpu` with the layers offloaded), when the pool says.
    pub lane: Option<String>,
    /// Its context window, in tokens.
    pub window: u32,
    /// The working directory with the home directory written `~`.
    pub cwd: String,
    pub version: String,
    pub resumed: bool,
}

/// The startup block.
#[derive(Clone, Debug, Default)]
pub struct Startup {
    pub pool: Option<PoolRow>,
    pub profile: ProfileRow,
    /// The `loaded` row: instruction files, skills, agents, plugins and hooks (`None`: none).
    pub loaded: Option<String>,
    /// The session's id; `resumed` is the launch's.
    pub session: Option<String>,
    pub notes: Vec<Note>,
    /// Set once startup is over: `✓ ready in <time>`.
    pub ready: Option<Duration>,
}

/// The `pool` row.
#[derive(Clone, Debug, Default)]
pub struct PoolRow {
    pub model: String,
    pub lane: Option<String>,
    /// The CPU lane's thread count, when the pool knows it.
    pub threads: Option<u32>,
    /// The GPU lane's device and what the member holds there.
    pub device: Option<String>,
    pub decision: Option<String>,
    pub socket: String,
}

/// The `profile` row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ProfileRow {
    /// No profile could be opened (or none is attached yet): the release's embedded prompts.
    #[default]
    Embedded,
    Attached {
        name: String,
        /// The model branch, `model/<model>`.
        branch: String,
        /// The session's commit (shown abbreviated).
        commit: String,
        /// How many of the embedded prompts that commit tunes; `None` when the profile's
        /// `upstream.json` does not parse (then it is left out).
        tuned: Option<u32>,
    },
}

/// A startup note as a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub level: Level,
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    /// Ember `▲`.
    Warning,
    /// Red `✗`.
    Error,
}

impl Note {
    /// A note as the startup printed it: `warning: ...` and `error: ...` (or a line naming
    /// what could not be used) take their level from the text.
    pub fn classify(text: &str) -> Note {
        let lower = text.to_ascii_lowercase();
        let level = if lower.starts_with("error") || lower.contains(": error") {
            Level::Error
        } else if lower.starts_with("warning")
            || lower.contains("cannot")
            || lower.contains("could not")
            || lower.contains("skipped")
            || lower.contains("not used")
        {
            Level::Warning
        } else {
            Level::Info
        };
        Note { level, text: text.to_owned() }
    }
}

#[cfg(test)]
mod tests {
    use super::{Level, Note};

    #[test]
    fn a_note_takes_its_level_from_its_text() {
        assert_eq!(Note::classify("error: the pool is gone").level, Level::Error);
        assert_eq!(Note::classify("hooks: x.json cannot be read: denied").level, Level::Warning);
        assert_eq!(Note::classify("loaded 3 skills").level, Level::Info);
    }
}
