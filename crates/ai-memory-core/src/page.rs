//! A page: optional YAML frontmatter between `---` lines, then a markdown body.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// Folders of a project's curated knowledge: listed first at session start, and what the
/// profile harvests beside the user's prompts.
pub const CURATED_FOLDERS: &[&str] = &["_rules/", "decisions/", "gotchas/", "procedures/"];

/// The most a page (frontmatter and body) may hold.
pub const MAX_PAGE_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error("the page is {bytes} bytes; a page holds at most {max} (split it)")]
    TooLarge { bytes: usize, max: usize },
    #[error("the frontmatter is not valid: {0}")]
    Frontmatter(String),
}

/// The keys ai-memory reads; other keys are kept as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Frontmatter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The line a digest or a brief shows for the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Stack tags the page is scoped to.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "one_or_many")]
    pub applies_to: Vec<String>,
    /// What already enforces the page's rule (it then stays out of the digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforced_by: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_yaml_ng::Value>,
}

impl Frontmatter {
    pub fn is_empty(&self) -> bool {
        *self == Frontmatter::default()
    }
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    pub frontmatter: Frontmatter,
    pub body: String,
}

impl Page {
    /// Reads a page as stored: a frontmatter block is optional, but one that is opened must be
    /// closed and hold a YAML mapping.
    pub fn parse(text: &str) -> Result<Page, PageError> {
        check_size(text.len())?;
        let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
            return Ok(Page { frontmatter: Frontmatter::default(), body: text.to_owned() });
        };
        let (yaml, body) = split_closing(rest).ok_or_else(|| {
            PageError::Frontmatter("it opens with `---` but no line `---` closes it".into())
        })?;
        let frontmatter: Frontmatter = if yaml.trim().is_empty() {
            Frontmatter::default()
        } else {
            serde_yaml_ng::from_str(yaml).map_err(|e| {
                let at =
                    e.location().map(|l| format!("line {}: ", l.line() + 1)).unwrap_or_default();
                PageError::Frontmatter(format!("{at}{e}"))
            })?
        };
        Ok(Page { frontmatter, body: body.to_owned() })
    }

    /// The page as stored; `parse` of it gives the page back.
    pub fn render(&self) -> Result<String, PageError> {
        let text = if self.frontmatter.is_empty() {
            self.body.clone()
        } else {
            let yaml = serde_yaml_ng::to_string(&self.frontmatter)
                .map_err(|e| PageError::Frontmatter(e.to_string()))?;
            format!("---\n{yaml}---\n{}", self.body)
        };
        check_size(text.len())?;
        Ok(text)
    }

    /// The title: the frontmatter's, else the first `# ` heading, else `fallback`.
    pub fn title(&self, fallback: &str) -> String {
        self.frontmatter
            .title
            .clone()
            .or_else(|| {
                self.body.lines().find_map(|l| l.strip_prefix("# ").map(|t| t.trim().to_owned()))
            })
            .unwrap_or_else(|| fallback.to_owned())
    }

    /// The summary: the frontmatter's, else the first line of prose (headings, metadata lines
    /// such as `**Status:** Accepted`, fences and list markers skipped).
    pub fn summary(&self) -> Option<String> {
        if let Some(s) = &self.frontmatter.summary {
            return Some(s.trim().to_owned());
        }
        let mut in_fence = false;
        for line in self.body.lines() {
            let line = line.trim();
            if line.starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            if in_fence || line.is_empty() || line.starts_with('#') || is_metadata(line) {
                continue;
            }
            return Some(line.to_owned());
        }
        None
    }
}

/// `**Status:** Accepted`, `Date: 2026-01-01`: an ADR's fields, not prose.
fn is_metadata(line: &str) -> bool {
    let bare = line.trim_start_matches(['-', '*', ' ']);
    let Some((key, _)) = bare.split_once(':') else { return false };
    let key = key.trim_matches('*').trim();
    !key.is_empty()
        && key.len() <= 24
        && key.chars().all(|c| c.is_alphanumeric() || c == ' ' || c == '-')
        && key.split_whitespace().count() <= 3
        && (line.starts_with("**") || line.starts_with("- **") || !line.contains(". "))
        && key.chars().next().is_some_and(char::is_uppercase)
}

fn split_closing(rest: &str) -> Option<(&str, &str)> {
    if let Some(body) = rest.strip_prefix("---\n").or_else(|| rest.strip_prefix("---\r\n")) {
        return Some(("", body));
    }
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        at += line.len();
        if line.trim_end_matches(['\n', '\r']) == "---" {
            return Some((&rest[..at - line.len()], &rest[at..]));
        }
    }
    None
}

fn check_size(bytes: usize) -> Result<(), PageError> {
    if bytes > MAX_PAGE_BYTES {
        return Err(PageError::TooLarge { bytes, max: MAX_PAGE_BYTES });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_round_trips_and_keeps_unknown_keys() {
        let text = "---\nsummary: Use pnpm, not npm.\napplies_to: javascript\nowner: me\n---\n# Pnpm\n\nWhy: workspaces.\n";
        let page = Page::parse(text).unwrap();
        assert_eq!(page.frontmatter.summary.as_deref(), Some("Use pnpm, not npm."));
        assert_eq!(page.frontmatter.applies_to, vec!["javascript"]);
        assert_eq!(page.frontmatter.extra["owner"], serde_yaml_ng::Value::from("me"));
        assert_eq!(page.body, "# Pnpm\n\nWhy: workspaces.\n");
        let again = Page::parse(&page.render().unwrap()).unwrap();
        assert_eq!(again, page);
        assert_eq!(page.title("x"), "Pnpm");
    }

    #[test]
    fn a_page_without_frontmatter_is_all_body() {
        let page = Page::parse("# Notes\n\nplain").unwrap();
        assert!(page.frontmatter.is_empty());
        assert_eq!(page.render().unwrap(), "# Notes\n\nplain");
        assert_eq!(Page::parse("---\n---\nbody").unwrap().body, "body");
    }

    #[test]
    fn broken_frontmatter_is_named() {
        let unclosed = Page::parse("---\nsummary: x\n# body").unwrap_err().to_string();
        assert!(unclosed.contains("no line `---` closes it"), "{unclosed}");
        let bad_yaml = Page::parse("---\nsummary: [unclosed\n---\nbody").unwrap_err().to_string();
        assert!(bad_yaml.starts_with("the frontmatter is not valid"), "{bad_yaml}");
        let not_a_map = Page::parse("---\n- a\n- b\n---\nbody").unwrap_err().to_string();
        assert!(not_a_map.starts_with("the frontmatter is not valid"), "{not_a_map}");
        let wrong_type = Page::parse("---\napplies_to: {a: 1}\n---\n").unwrap_err().to_string();
        assert!(
            wrong_type.contains("applies_to") || wrong_type.contains("not valid"),
            "{wrong_type}"
        );
    }

    #[test]
    fn size_is_bounded() {
        let big = "x".repeat(MAX_PAGE_BYTES + 1);
        assert_eq!(
            Page::parse(&big).unwrap_err(),
            PageError::TooLarge { bytes: MAX_PAGE_BYTES + 1, max: MAX_PAGE_BYTES }
        );
    }

    #[test]
    fn summary_skips_headings_and_adr_fields() {
        let adr = "# ADR 7: Queue\n\n**Status:** Accepted\n**Date:** 2026-01-02\n\nWe use one queue per member.\n";
        assert_eq!(
            Page::parse(adr).unwrap().summary().as_deref(),
            Some("We use one queue per member.")
        );
        let fm = "---\nsummary: Short.\n---\nLong prose.";
        assert_eq!(Page::parse(fm).unwrap().summary().as_deref(), Some("Short."));
    }
}
