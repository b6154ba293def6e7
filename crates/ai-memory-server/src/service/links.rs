//! Links in reads, and `memory_context`: a page's neighbourhood through its links and
//! backlinks, breadth-first, within a depth and a byte budget.
//!
//! Links never leave their project, so the read check on the starting page (the same one
//! `memory_read_page` makes) covers every page the neighbourhood reaches.

use std::collections::{HashSet, VecDeque};

use ai_memory_index::{Backlink, LinkOut, MAX_BACKLINKS_LISTED, ProjectRow};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Caller, Memory, PageRef};
use crate::error::MemoryError;

/// `memory_context`'s depth when none is given, and the most it takes.
pub const CONTEXT_DEPTH: usize = 1;
pub const MAX_CONTEXT_DEPTH: usize = 3;
/// `memory_context`'s budget (bytes of the pages' JSON) when none is given, and its bounds.
pub const CONTEXT_BYTES: usize = 4_000;
pub const MIN_CONTEXT_BYTES: usize = 500;
pub const MAX_CONTEXT_BYTES: usize = 32_000;
/// The longest summary one page of a neighbourhood shows, in bytes.
const SUMMARY_BYTES: usize = 300;

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextReq {
    /// The page to start from.
    pub path: String,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub workspace: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    /// How many links away to go (default 1, at most 3; 0 is the page alone).
    #[serde(default)]
    pub depth: Option<usize>,
    /// The most bytes of pages to return (default 4000, 500 to 32000).
    #[serde(default)]
    pub max_bytes: Option<usize>,
}

/// One page of a neighbourhood.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextPage {
    pub path: String,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Links away from the starting page.
    pub depth: usize,
    /// The page it was reached from, and how: `links to` (that page links here) or
    /// `linked from` (this page links there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextOut {
    pub workspace: String,
    pub project: String,
    pub path: String,
    pub depth: usize,
    pub max_bytes: usize,
    /// Breadth-first: the starting page, then the pages one link away, and so on.
    pub pages: Vec<ContextPage>,
    /// Pages within the depth did not fit in the budget (ask again with a larger one, or
    /// start from one of the pages listed).
    pub truncated: bool,
}

/// What `memory_read_page` adds about links.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageLinks {
    /// Links out of the page, as written (`exists`: whether the target page is there).
    pub links: Vec<LinkOutRow>,
    /// Pages linking to it, by path (at most 200).
    pub backlinks: Vec<BacklinkRow>,
    /// How many pages link to it.
    pub backlinks_total: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkOutRow {
    pub path: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub exists: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BacklinkRow {
    pub path: String,
    pub title: String,
    pub kind: String,
}

impl From<LinkOut> for LinkOutRow {
    fn from(l: LinkOut) -> Self {
        LinkOutRow { path: l.path, kind: l.kind, label: l.label, exists: l.exists }
    }
}

impl From<Backlink> for BacklinkRow {
    fn from(b: Backlink) -> Self {
        BacklinkRow { path: b.path, title: b.title, kind: b.kind }
    }
}

fn check_range(what: &str, value: usize, min: usize, max: usize) -> Result<usize, MemoryError> {
    if (min..=max).contains(&value) {
        return Ok(value);
    }
    Err(MemoryError::Invalid(format!(
        "memory_context: `{what}` {value} is out of range: it takes {min} to {max}"
    )))
}

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl Memory {
    /// The links and backlinks of a page of `project` the caller may read.
    pub(crate) fn page_links(
        &self,
        project: &ProjectRow,
        path: &str,
    ) -> Result<PageLinks, MemoryError> {
        let links = self.index().links_of(project, path)?.into_iter().map(Into::into).collect();
        let (backlinks, total) = self.index().backlinks_of(project, path, MAX_BACKLINKS_LISTED)?;
        Ok(PageLinks {
            links,
            backlinks: backlinks.into_iter().map(Into::into).collect(),
            backlinks_total: total,
        })
    }

    /// `memory_context`: the page and the pages around it, breadth-first (links out in the
    /// order written, then backlinks by path), each once, until the depth or the budget ends.
    /// A digest line's path given as printed is found as `memory_read_page` finds it.
    pub fn context(&self, caller: &Caller, req: &ContextReq) -> Result<ContextOut, MemoryError> {
        let page = PageRef {
            scope: req.scope.clone(),
            path: req.path.clone(),
            workspace: req.workspace.clone(),
            project: req.project.clone(),
        };
        self.as_printed(caller, &page, |r| {
            self.context_located(caller, &ContextReq { scope: r.scope.clone(), ..req.clone() })
        })
    }

    fn context_located(
        &self,
        caller: &Caller,
        req: &ContextReq,
    ) -> Result<ContextOut, MemoryError> {
        let depth = check_range("depth", req.depth.unwrap_or(CONTEXT_DEPTH), 0, MAX_CONTEXT_DEPTH)?;
        let max_bytes = check_range(
            "max_bytes",
            req.max_bytes.unwrap_or(CONTEXT_BYTES),
            MIN_CONTEXT_BYTES,
            MAX_CONTEXT_BYTES,
        )?;
        let (at, _) = self.locate(
            caller,
            req.scope.as_deref(),
            req.workspace.as_deref(),
            req.project.as_deref(),
            &req.path,
        )?;
        let project = self.readable(caller.who, &at)?;
        let start = at.path.to_string();
        let Some(brief) = self.index().brief(&project, &start)? else {
            return Err(MemoryError::NotFound(format!("no page {at}")));
        };
        let page = |path: String, brief: ai_memory_index::Brief, d, via: Option<(&str, &str)>| {
            ContextPage {
                path,
                title: brief.title,
                summary: brief.summary.map(|s| cut(&s, SUMMARY_BYTES)),
                depth: d,
                via: via.map(|v| v.0.to_owned()),
                relation: via.map(|v| v.1.to_owned()),
            }
        };
        let first = page(start.clone(), brief, 0, None);
        // The starting page is always shown, whatever the budget.
        let mut used = serde_json::to_string(&first).map_or(0, |s| s.len());
        let mut pages = vec![first];
        let mut seen: HashSet<String> = HashSet::from([start.clone()]);
        let mut queue: VecDeque<(String, usize)> = VecDeque::from([(start, 0)]);
        let mut truncated = false;
        'walk: while let Some((from, d)) = queue.pop_front() {
            if d >= depth {
                continue;
            }
            let out = self.index().links_of(&project, &from)?;
            let (back, _) = self.index().backlinks_of(&project, &from, MAX_BACKLINKS_LISTED)?;
            let next = out
                .into_iter()
                .filter(|l| l.exists)
                .map(|l| (l.path, "linked from"))
                .chain(back.into_iter().map(|b| (b.path, "links to")));
            for (path, relation) in next {
                if seen.contains(&path) {
                    continue;
                }
                // Gone since the links were read (a delete in between): skipped.
                let Some(brief) = self.index().brief(&project, &path)? else { continue };
                let entry = page(path.clone(), brief, d + 1, Some((&from, relation)));
                let size = serde_json::to_string(&entry).map_or(0, |s| s.len());
                if used + size > max_bytes {
                    truncated = true;
                    break 'walk;
                }
                used += size;
                seen.insert(path.clone());
                pages.push(entry);
                queue.push_back((path, d + 1));
            }
        }
        Ok(ContextOut {
            workspace: at.workspace.to_string(),
            project: at.project.to_string(),
            path: at.path.to_string(),
            depth,
            max_bytes,
            pages,
            truncated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_values_are_named_with_their_bounds() {
        let e = check_range("depth", 7, 0, MAX_CONTEXT_DEPTH).unwrap_err().to_string();
        assert_eq!(e, "memory_context: `depth` 7 is out of range: it takes 0 to 3");
        assert_eq!(check_range("depth", 3, 0, 3).unwrap(), 3);
    }

    #[test]
    fn summaries_are_cut_on_a_character_boundary() {
        let s = cut(&"é".repeat(200), SUMMARY_BYTES);
        assert!(s.ends_with('…') && s.len() <= SUMMARY_BYTES + '…'.len_utf8(), "{s}");
        assert_eq!(cut("short", 10), "short");
    }
}
