//! A profile entry as a wiki page: `summary`, `applies_to`, `enforced_by`, and, on an entry
//! the harvester wrote, what it learned from (`generated_by: profile-harvest`, the statement,
//! the evidence, a hash of the body it wrote so a hand edit is recognised).

use ai_memory_core::{Frontmatter, Page, PageError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Category;

pub const GENERATED_BY: &str = "profile-harvest";
/// Evidence kept on an entry: the most recent five.
pub const MAX_EVIDENCE: usize = 5;

/// One piece of evidence: the user's own words, where and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// `workspace/project`.
    pub project: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    pub words: String,
}

/// What the harvester records on an entry it writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// The user's sentence the entry stands on (the latest ruling).
    pub statement: String,
    /// Stated as general ("in all my projects").
    #[serde(default)]
    pub general: bool,
    /// Distinct projects backing it (a fanned-out message counts once).
    pub projects: usize,
    /// Distinct operators backing it (team profiles need two).
    #[serde(default)]
    pub operators: usize,
    /// `low`, `medium` or `high`.
    pub confidence: String,
    /// Newest first, at most five.
    pub evidence: Vec<Evidence>,
}

/// A profile entry as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// `profile/<category>/<slug>.md`.
    pub path: String,
    /// The digest line.
    pub summary: String,
    pub applies_to: Vec<String>,
    pub enforced_by: Option<String>,
    /// Set when the harvester wrote it and nobody changed its body since.
    pub learned: Option<Learned>,
    /// Written by the harvester, then edited by hand (the harvester leaves it alone).
    pub edited_by_hand: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("{path}: {error}")]
    Page { path: String, error: PageError },
}

/// What is wrong with a page's `applies_to` / `enforced_by` (from arguments or its own
/// frontmatter): the same checks on a write and on a hand edit the watcher imports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyProblem {
    #[error(
        "`applies_to` and `enforced_by` are for profile entries (`profile/` in `_global` or a profile project)"
    )]
    NotAnEntry,
    #[error("unknown stack tag `{0}` in `applies_to`: use one of {tags}", tags = crate::STACK_TAGS.join(", "))]
    UnknownTag(String),
}

/// Checks a page's entry keys: `digest_page` says whether the digest reads the page (a
/// category folder under `profile/` in `_global` or a profile project).
pub fn check_keys(
    digest_page: bool,
    applies_to: &[String],
    enforced_by: Option<&str>,
) -> Result<(), KeyProblem> {
    if !digest_page && (!applies_to.is_empty() || enforced_by.is_some()) {
        return Err(KeyProblem::NotAnEntry);
    }
    match applies_to.iter().find(|t| !crate::is_stack_tag(t)) {
        Some(bad) => Err(KeyProblem::UnknownTag(bad.clone())),
        None => Ok(()),
    }
}

/// A short hex digest of `text` (16 hex digits): enough to tell versions of one page or one
/// sentence apart.
pub fn short_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A hash of what a person might edit: the body and the keys the digest reads.
fn body_hash(fm: &Frontmatter, body: &str) -> String {
    short_hash(&serde_json::json!([fm.summary, fm.applies_to, fm.enforced_by, body]).to_string())
}

impl Entry {
    pub fn category(&self) -> Option<Category> {
        Category::of_path(&self.path)
    }

    /// Reads a stored `profile/` page.
    pub fn parse(path: &str, text: &str) -> Result<Entry, EntryError> {
        let page =
            Page::parse(text).map_err(|error| EntryError::Page { path: path.to_owned(), error })?;
        let fm = &page.frontmatter;
        let generated = fm.extra.get("generated_by").and_then(|v| v.as_str()) == Some(GENERATED_BY);
        let learned: Option<Learned> = if generated {
            fm.extra.get("learned").and_then(|v| serde_yaml_ng::from_value(v.clone()).ok())
        } else {
            None
        };
        let hash_ok = fm.extra.get("body_hash").and_then(|v| v.as_str())
            == Some(body_hash(fm, &page.body).as_str());
        let (learned, edited_by_hand) = match learned {
            Some(l) if hash_ok => (Some(l), false),
            _ => (None, generated),
        };
        let fallback = path.rsplit('/').next().unwrap_or(path).trim_end_matches(".md");
        Ok(Entry {
            path: path.to_owned(),
            summary: page.summary().unwrap_or_else(|| page.title(fallback)),
            applies_to: fm.applies_to.clone(),
            enforced_by: fm.enforced_by.clone(),
            learned,
            edited_by_hand,
        })
    }

    /// The page text of a learned entry (`learned` set). Deterministic: the same entry gives
    /// the same bytes, so an unchanged entry is never committed again.
    pub fn render(&self) -> Result<String, EntryError> {
        let body = format!("# {}\n\n{}\n", self.summary.trim_end_matches('.'), self.summary);
        let mut frontmatter = Frontmatter {
            summary: Some(self.summary.clone()),
            applies_to: self.applies_to.clone(),
            enforced_by: self.enforced_by.clone(),
            ..Frontmatter::default()
        };
        if let Some(learned) = &self.learned {
            let extra = &mut frontmatter.extra;
            extra.insert("generated_by".into(), GENERATED_BY.into());
            extra.insert(
                "learned".into(),
                serde_yaml_ng::to_value(learned).unwrap_or(serde_yaml_ng::Value::Null),
            );
            let hash = body_hash(&frontmatter, &body);
            let extra = &mut frontmatter.extra;
            extra.insert("body_hash".into(), hash.into());
        }
        Page { frontmatter, body }
            .render()
            .map_err(|error| EntryError::Page { path: self.path.clone(), error })
    }
}

/// A stored entry's page with the evidence from projects `drop` names taken out of its
/// `learned:` block, everything else as it was (a hand-edited entry stays the user's: only the
/// harvester's own record changes). `None` when nothing is dropped.
pub fn scrub_evidence(
    path: &str,
    text: &str,
    drop: &dyn Fn(&str) -> bool,
) -> Result<Option<String>, EntryError> {
    let page_err = |error| EntryError::Page { path: path.to_owned(), error };
    let mut page = Page::parse(text).map_err(page_err)?;
    let Some(value) = page.frontmatter.extra.get("learned") else { return Ok(None) };
    let Ok(mut learned) = serde_yaml_ng::from_value::<Learned>(value.clone()) else {
        return Ok(None);
    };
    let before = learned.evidence.len();
    learned.evidence.retain(|e| !drop(&e.project));
    if learned.evidence.len() == before {
        return Ok(None);
    }
    let value = serde_yaml_ng::to_value(&learned).unwrap_or(serde_yaml_ng::Value::Null);
    page.frontmatter.extra.insert("learned".into(), value);
    page.render().map(Some).map_err(page_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_keys_are_checked_like_arguments() {
        let tags = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(check_keys(true, &tags(&["rust"]), Some("hook")), Ok(()));
        assert_eq!(check_keys(false, &[], None), Ok(()));
        assert_eq!(check_keys(false, &tags(&["rust"]), None), Err(KeyProblem::NotAnEntry));
        assert_eq!(check_keys(false, &[], Some("ci")), Err(KeyProblem::NotAnEntry));
        let bad = check_keys(true, &tags(&["rust", "cobol"]), None).unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("unknown stack tag `cobol` in `applies_to`: use one of c, cpp"),
            "{bad}"
        );
    }

    fn learned() -> Entry {
        Entry {
            path: "profile/tools/pnpm-npm.md".into(),
            summary: "Use pnpm, not npm.".into(),
            applies_to: vec!["javascript".into()],
            enforced_by: None,
            learned: Some(Learned {
                statement: "Always use pnpm, not npm.".into(),
                general: false,
                projects: 2,
                operators: 1,
                confidence: "medium".into(),
                evidence: vec![Evidence {
                    project: "default/app".into(),
                    date: "2026-11-30".into(),
                    words: "Always use pnpm, not npm.".into(),
                }],
            }),
            edited_by_hand: false,
        }
    }

    #[test]
    fn a_learned_entry_round_trips() {
        let entry = learned();
        let text = entry.render().unwrap();
        assert!(text.contains("generated_by: profile-harvest"), "{text}");
        assert_eq!(Entry::parse(&entry.path, &text).unwrap(), entry);
        assert_eq!(entry.category(), Some(Category::Tools));
    }

    #[test]
    fn scrubbing_a_hand_edited_entry_keeps_it_the_users() {
        let entry = learned();
        let text = entry.render().unwrap().replace("\n\nUse pnpm, not npm.\n", "\n\nMine.\n");
        let scrubbed =
            scrub_evidence(&entry.path, &text, &|p| p == "default/app").unwrap().unwrap();
        assert!(!scrubbed.contains("default/app"), "{scrubbed}");
        assert!(scrubbed.contains("Mine."));
        assert!(Entry::parse(&entry.path, &scrubbed).unwrap().edited_by_hand);
        assert_eq!(scrub_evidence(&entry.path, &text, &|_| false).unwrap(), None);
    }

    #[test]
    fn an_edited_body_makes_the_entry_the_users() {
        let entry = learned();
        let text = entry.render().unwrap().replace("Use pnpm, not npm.\n", "Use pnpm or bun.\n");
        let edited = Entry::parse(&entry.path, &text).unwrap();
        assert!(edited.edited_by_hand && edited.learned.is_none());
        let by_hand =
            Entry::parse("profile/style/tabs.md", "# Tabs\n\nIndent with tabs.\n").unwrap();
        assert!(!by_hand.edited_by_hand && by_hand.learned.is_none());
        assert_eq!(by_hand.summary, "Indent with tabs.");
    }
}
