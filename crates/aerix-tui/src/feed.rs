//! What the screen is told.

use aerix_session::{Event, Outcome};

/// One thing the screen is told, in the order it happened.
#[derive(Clone, Debug)]
pub enum Feed {
    /// An event of the session, as the log gets it.
    Event(Event),
    /// A generation of `agent` was sent to the pool.
    Generating { agent: String },
    /// A piece of its text arrived (one token, or a few bytes that complete one).
    Streamed { agent: String },
    /// It ended (its `done`, an error, or a cancel).
    Generated { agent: String },
    /// A request started running.
    RequestStarted { prompt: String, max_turns: u32 },
    /// The request ended.
    RequestEnded(RequestEnd),
    /// `git diff --numstat` against the session's start commit, taken as a request finished
    /// (`None`: outside a git repository).
    Diff(Option<DiffStat>),
    /// A line the binary has for the user (a hook's note, a failure to start).
    Note(crate::Note),
}

#[derive(Clone, Debug)]
pub struct RequestEnd {
    pub outcome: Outcome,
    /// The root's final answer.
    pub answer: Option<String>,
    /// What ended it, when it did not end `done`.
    pub error: Option<String>,
    /// The local time it finished, `14:02:07`.
    pub local_time: String,
}

/// Added and removed lines and files changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiffStat {
    pub added: u64,
    pub removed: u64,
    pub files: u64,
}

impl DiffStat {
    /// Sums `git diff --numstat` lines (`-` for a binary file counts as a file, no lines).
    pub fn parse(numstat: &str) -> DiffStat {
        let mut stat = DiffStat::default();
        for line in numstat.lines() {
            let mut parts = line.split('\t');
            let (Some(added), Some(removed), Some(_path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            stat.added += added.parse::<u64>().unwrap_or(0);
            stat.removed += removed.parse::<u64>().unwrap_or(0);
            stat.files += 1;
        }
        stat
    }
}

#[cfg(test)]
mod tests {
    use super::DiffStat;

    #[test]
    fn numstat_lines_are_summed() {
        let stat = DiffStat::parse("3\t1\tsrc/a.rs\n-\t-\tlogo.png\n10\t0\tb.md\n");
        assert_eq!(stat, DiffStat { added: 13, removed: 1, files: 3 });
        assert_eq!(DiffStat::parse(""), DiffStat::default());
    }
}
