//! `ai-memory export` and `ai-memory import`: everything a data directory holds, in one JSON
//! Lines file, and back; and basic-memory's JSON memories (the MCP memory server's knowledge
//! graph) as pages.
//!
//! The file: a header line (`format`, `version`), then one record a line, each with a `kind`:
//! `project`, `page` (the page as stored, frontmatter included), `operator` (API keys as
//! SHA-256 hashes, never the keys), `grant`, `session`, `prompt`, `candidate`, `cursor`,
//! `forgotten` (the profile's forget ledger), `stack` and `handoff` (each project's latest).
//! An import reads and checks every line before it writes anything.

mod basic;
mod export;
mod import;

use std::io::{BufRead, Read};
use std::path::Path;

use ai_memory_index::{
    CandidateRecord, CursorRecord, ForgottenRecord, GrantRecord, HandoffRecord, OperatorRecord,
    ProjectRecord, PromptRecord, SessionRecord, StackRecord,
};
use serde::{Deserialize, Serialize};

use crate::error::MemoryError;

pub use export::Exported;
pub use import::{ImportOptions, Imported};

/// The header's `format`.
pub const FORMAT: &str = "ai-memory-export";
/// The version this build writes and reads.
pub const VERSION: u32 = 1;
/// The most an import file may hold.
pub const MAX_IMPORT_BYTES: u64 = 1 << 30;
/// The longest line (a page is at most 256 KiB, JSON escaping can grow it several times).
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// The first line of an export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// Unix seconds.
    pub created: i64,
    /// The wiki commit the pages were read at (`None`: an empty wiki).
    pub wiki_commit: Option<String>,
    pub note: String,
}

pub(crate) const NOTE: &str = "pages as stored (frontmatter included) at wiki_commit; the rest \
    is what lives only in index.sqlite. Operators' API keys appear only as SHA-256 hashes: the \
    keys are never exported. Captured prompts are the user's own words: keep this file private.";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageRecord {
    pub workspace: String,
    pub project: String,
    pub path: String,
    /// The page as stored: frontmatter and body.
    pub text: String,
}

/// One line after the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    Project(ProjectRecord),
    Page(PageRecord),
    Operator(OperatorRecord),
    Grant(GrantRecord),
    Session(SessionRecord),
    Prompt(PromptRecord),
    Candidate(CandidateRecord),
    Cursor(CursorRecord),
    Forgotten(ForgottenRecord),
    Stack(StackRecord),
    Handoff(HandoffRecord),
}

/// The lines of a file, numbered from 1, each within `MAX_LINE_BYTES`; blank lines skipped.
pub(crate) fn read_lines(path: &Path) -> Result<Vec<(usize, String)>, MemoryError> {
    let shown = path.display();
    let file = std::fs::File::open(path)
        .map_err(|e| MemoryError::Invalid(format!("cannot read {shown}: {e}")))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > MAX_IMPORT_BYTES {
        return Err(MemoryError::Invalid(format!(
            "{shown} is {len} bytes; an import reads at most {MAX_IMPORT_BYTES}"
        )));
    }
    let mut reader = std::io::BufReader::new(file.take(MAX_IMPORT_BYTES + 1));
    let mut lines = Vec::new();
    let mut number = 0;
    loop {
        number += 1;
        let mut buf = Vec::new();
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| MemoryError::Invalid(format!("cannot read {shown}: {e}")))?;
        if n == 0 {
            break;
        }
        if buf.len() > MAX_LINE_BYTES {
            return Err(MemoryError::Invalid(format!(
                "{shown}, line {number}: longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        let text = String::from_utf8(buf)
            .map_err(|_| MemoryError::Invalid(format!("{shown}, line {number}: not UTF-8 text")))?;
        if !text.trim().is_empty() {
            lines.push((number, text));
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;

    #[test]
    fn records_carry_their_kind_and_refuse_unknown_fields() {
        let page = Record::Page(PageRecord {
            workspace: "default".into(),
            project: "app".into(),
            path: "a.md".into(),
            text: "# A\n".into(),
        });
        let line = serde_json::to_string(&page).unwrap();
        assert!(line.starts_with(r#"{"kind":"page","#), "{line}");
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), page);
        let extra = line.replace(r#""path""#, r#""pth":1,"path""#);
        let e = serde_json::from_str::<Record>(&extra).unwrap_err().to_string();
        assert!(e.contains("unknown field `pth`"), "{e}");
        let e = serde_json::from_str::<Record>(r#"{"kind":"pages"}"#).unwrap_err().to_string();
        assert!(e.contains("unknown variant `pages`"), "{e}");
    }

    #[test]
    fn lines_are_numbered_bounded_and_blank_ones_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.jsonl");
        std::fs::write(&file, "a\n\nb").unwrap();
        let lines = read_lines(&file).unwrap();
        assert_eq!(lines, vec![(1, "a\n".to_owned()), (3, "b".to_owned())]);
        std::fs::write(&file, format!("a\n{}\n", "x".repeat(MAX_LINE_BYTES + 1))).unwrap();
        let e = read_lines(&file).unwrap_err().to_string();
        assert!(e.contains("line 2: longer than"), "{e}");
        std::fs::write(&file, b"ok\n\xff\xfe\n").unwrap();
        let e = read_lines(&file).unwrap_err().to_string();
        assert!(e.contains("line 2: not UTF-8"), "{e}");
    }
}
