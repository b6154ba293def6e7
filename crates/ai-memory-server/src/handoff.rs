//! Handoffs: where a project's last session left off (what the user asked, which files its
//! edit and write tools changed), written when the session ends and shown at the start of the
//! project's next session, whatever its harness. A read never consumes one: it stays until a
//! newer session's handoff replaces it.

use ai_memory_core::{Clean, sanitize};
use ai_memory_index::{HandoffRow, Principal, ProjectRow};

use crate::error::MemoryError;
use crate::service::{HookEvent, Memory};

/// The most bytes a handoff holds.
pub const HANDOFF_MAX_BYTES: usize = 1_500;
/// The most distinct files a session records for its handoff.
pub const MAX_SESSION_FILES: usize = 200;
/// Harnesses that send no session-end event: their sessions are handed off at the project's
/// next session start (any harness's).
pub const NO_END_EVENT: &[&str] = &["codex"];

/// The heading a handoff opens with.
pub const HANDOFF_HEADING: &str = "## Where the last session left off";
/// Each prompt is cut to this many bytes.
const PROMPT_BYTES: usize = 200;
/// The most prompts repeated: the first (usually the task) and the latest ones.
const MAX_PROMPTS: usize = 6;
/// The most files named.
const MAX_FILES: usize = 20;

/// A prompt on one line, harness blocks removed, cut to `PROMPT_BYTES`.
fn shorten(prompt: &str) -> Option<String> {
    let text = ai_memory_profile::sentence::user_text(prompt);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return None;
    }
    if line.len() <= PROMPT_BYTES {
        return Some(line);
    }
    let mut end = PROMPT_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Some(format!("{}…", line[..end].trim_end()))
}

/// The handoff of a session: `None` when it has nothing to say (no prompt, no file).
/// `prompts_captured` is false when `capture.prompts` is off: the handoff says so.
pub fn compose(
    harness: &str,
    prompts: &[String],
    files: &[String],
    prompts_captured: bool,
) -> Option<Clean> {
    let asked: Vec<String> = prompts.iter().filter_map(|p| shorten(p)).collect();
    if asked.is_empty() && files.is_empty() {
        return None;
    }
    let mut out = format!("{HANDOFF_HEADING}\nThe last session here ({harness})");
    if asked.is_empty() {
        out.push_str(if prompts_captured {
            " changed files without a prompt.\n"
        } else {
            ": prompts are not captured (`capture.prompts` is off).\n"
        });
    } else {
        out.push_str(" was asked:\n");
        let skipped = asked.len().saturating_sub(MAX_PROMPTS);
        for (i, p) in asked.iter().enumerate() {
            if i == 1 && skipped > 0 {
                out.push_str(&format!("- ({skipped} more prompts)\n"));
            }
            if i == 0 || i > skipped {
                out.push_str(&format!("- {p}\n"));
            }
        }
    }
    if !files.is_empty() {
        // The files line gets what the prompts left, and says how many it leaves out.
        let room = HANDOFF_MAX_BYTES.saturating_sub(out.len() + 40);
        let mut line = String::from("Files changed:");
        let mut shown = 0;
        for f in files.iter().take(MAX_FILES) {
            let item = format!(" `{f}`,");
            if line.len() + item.len() > room {
                break;
            }
            line.push_str(&item);
            shown += 1;
        }
        let line = line.trim_end_matches(',');
        out.push_str(line);
        if shown < files.len() {
            let n = files.len() - shown;
            out.push_str(&format!(" (and {n} more)"));
        }
        out.push('\n');
    }
    // Made of captured prompts and recorded paths, both sanitized already; once more for the
    // joins, and the bound holds whatever the parts were.
    Some(sanitize(&out).truncated(HANDOFF_MAX_BYTES))
}

/// The handoff as the session-start context shows it, within `max_chars`: whole lines, a note
/// when some did not fit; empty when not even the heading and the note fit.
pub fn fit(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    const NOTE: &str = "(the rest of this handoff did not fit in the session-start cap)\n";
    let budget = max_chars.saturating_sub(NOTE.chars().count());
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        if out.chars().count() + line.chars().count() > budget {
            break;
        }
        out.push_str(line);
    }
    if out.is_empty() {
        return String::new();
    }
    out.push_str(NOTE);
    out
}

impl Memory {
    /// An edit or write tool ran: records the files it named for the session's handoff.
    pub fn tool_use(&self, who: Principal, event: &HookEvent) -> Result<usize, MemoryError> {
        if event.changed.is_empty() || !self.settings.capture.handoffs {
            return Ok(0);
        }
        let project = self.hook_project(who, event)?;
        let mut recorded = 0;
        for path in event.changed.iter().take(crate::hook::tool::MAX_TOOL_FILES) {
            // The endpoint's caller is not the hook client: the same bounds again.
            if path.trim().is_empty()
                || path.len() > crate::hook::tool::MAX_PATH_BYTES
                || path.chars().any(char::is_control)
            {
                continue;
            }
            let path = sanitize(path);
            let at = self.now();
            if self.index().record_file(
                &project,
                &event.session_id,
                who.user_id(),
                &path,
                at,
                MAX_SESSION_FILES,
            )? {
                recorded += 1;
            }
        }
        Ok(recorded)
    }

    /// Writes `session`'s handoff for `project`, dated `at`, unless the session left nothing
    /// to say (an empty session never replaces a useful handoff). Returns whether it was stored.
    pub(crate) fn write_handoff(
        &self,
        who: Principal,
        project: &ProjectRow,
        session: &str,
        harness: &str,
        at: i64,
    ) -> Result<bool, MemoryError> {
        if !self.settings.capture.handoffs
            || !self.index().owns_session(project, who.user_id(), session)?
        {
            return Ok(false);
        }
        let prompts = self.index().session_prompts(project, session)?;
        let files = self.index().session_files(project, session)?;
        let Some(text) = compose(harness, &prompts, &files, self.settings.capture.prompts) else {
            return Ok(false);
        };
        let row = HandoffRow {
            session: session.to_owned(),
            harness: harness.to_owned(),
            text: text.into_string(),
            at,
        };
        Ok(self.index().put_handoff(project, who.user_id(), &row)?)
    }

    /// At a session start: the sessions of harnesses that send no session end, other than
    /// `current`, get their handoff now (each once for the activity it had).
    pub(crate) fn hand_off_open_sessions(
        &self,
        who: Principal,
        project: &ProjectRow,
        current: &str,
    ) -> Result<(), MemoryError> {
        for harness in NO_END_EVENT {
            for s in self.index().open_sessions(project, who.user_id(), harness, current)? {
                self.write_handoff(who, project, &s.id, &s.harness, s.last)?;
                self.index().mark_handed_off(&s.id, s.last)?;
            }
        }
        Ok(())
    }

    /// The project's handoff for the caller, as stored (a read changes nothing); none while
    /// `capture.handoffs` is off.
    pub fn handoff(
        &self,
        who: Principal,
        project: &ProjectRow,
    ) -> Result<Option<String>, MemoryError> {
        if !self.settings.capture.handoffs {
            return Ok(None);
        }
        Ok(self.index().handoff(project, who.user_id())?.map(|h| h.text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_handoff_names_the_prompts_and_the_files() {
        let text = compose(
            "claude-code",
            &strings(&["Fix the login\n  redirect.", "<system-reminder>x</system-reminder>"]),
            &strings(&["src/auth.rs", "tests/auth.rs"]),
            true,
        )
        .unwrap();
        assert_eq!(
            text.as_str(),
            "## Where the last session left off\nThe last session here (claude-code) was asked:\n\
             - Fix the login redirect.\nFiles changed: `src/auth.rs`, `tests/auth.rs`\n"
        );
        assert!(
            compose("codex", &strings(&["<system-reminder>x</system-reminder>"]), &[], true)
                .is_none()
        );
    }

    #[test]
    fn without_captured_prompts_it_says_so_and_holds_the_files() {
        let text = compose("codex", &[], &strings(&["a.rs"]), false).unwrap();
        assert!(text.as_str().contains("prompts are not captured"), "{text}");
        assert!(text.as_str().contains("`a.rs`"), "{text}");
    }

    #[test]
    fn a_handoff_is_bounded_keeping_the_first_and_latest_prompts() {
        let prompts: Vec<String> =
            (0..30).map(|i| format!("prompt {i} {}", "word ".repeat(100))).collect();
        let files: Vec<String> = (0..300).map(|i| format!("src/module_{i}/file.rs")).collect();
        let text = compose("aerix", &prompts, &files, true).unwrap();
        let text = text.as_str();
        assert!(text.len() <= HANDOFF_MAX_BYTES, "{}", text.len());
        assert!(text.contains("- prompt 0 "), "{text}");
        assert!(text.contains("- (24 more prompts)"), "{text}");
        assert!(text.contains("- prompt 29 "), "{text}");
        assert!(!text.contains("- prompt 10 "), "{text}");
        assert!(text.contains("more)\n"), "{text}");
        assert!(text.lines().all(|l| l.len() <= PROMPT_BYTES + 10 || l.starts_with("Files")));
    }

    #[test]
    fn a_secret_in_a_path_is_redacted() {
        let text =
            compose("codex", &[], &strings(&["sk-proj-abcdefghijklmnopqrstuvwx1234.txt"]), true)
                .unwrap();
        assert!(!text.as_str().contains("abcdefghijklmnop"), "{text}");
    }

    #[test]
    fn fit_cuts_whole_lines_with_a_note() {
        let line = format!("- {}\n", "w".repeat(40));
        let text = format!("## H\n{line}{line}{line}");
        assert_eq!(fit(&text, 200), text);
        let cut = fit(&text, 120);
        assert_eq!(cut.matches("- w").count(), 1, "{cut}");
        assert!(cut.starts_with("## H\n- w") && cut.ends_with("cap)\n"), "{cut}");
        assert!(cut.chars().count() <= 120);
        assert_eq!(fit(&text, 10), "");
    }
}
