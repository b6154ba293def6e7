//! Links between pages of one project: `[[path]]` in a page's body and `related:` in its
//! frontmatter.
//!
//! Forms, all relative to the page's project (never to the page's folder):
//! - `[[decisions/queue]]` or `[[decisions/queue.md]]`: `.md` is added when missing;
//! - `[[decisions/queue|the queue]]`: the text after `|` is a label;
//! - `[[decisions/queue#why]]`: the heading is dropped (the link is to the page);
//! - `related: [decisions/queue.md, notes/x]` (or one path as a string) in the frontmatter.
//!
//! A target that is not a valid page path (`..`, an absolute path, a hidden file) is no link.
//! `[[` inside an inline code span or a fenced block is text, not a link. At most
//! `MAX_LINKS_PER_PAGE` distinct targets count, in order of appearance (`related:` first).

use crate::{Page, PagePath};

/// The most distinct targets one page links to; the rest are not indexed.
pub const MAX_LINKS_PER_PAGE: usize = 200;

/// The longest label kept, in bytes (cut on a character boundary).
const MAX_LABEL: usize = 200;

/// Where a link was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// `[[path]]` in the body.
    Body,
    /// `related:` in the frontmatter.
    Related,
}

impl LinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Body => "body",
            LinkKind::Related => "related",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub target: PagePath,
    pub label: Option<String>,
    pub kind: LinkKind,
}

/// A page's links: `related:` entries, then body links, each target once, at most
/// `MAX_LINKS_PER_PAGE`. A link to the page itself (`own`) is left out.
pub fn page_links(page: &Page, own: Option<&PagePath>) -> Vec<Link> {
    let mut out: Vec<Link> = Vec::new();
    let mut push = |target: &str, label: Option<String>, kind: LinkKind| {
        if out.len() >= MAX_LINKS_PER_PAGE {
            return;
        }
        let Some(target) = normalize(target) else { return };
        if own == Some(&target) || out.iter().any(|l| l.target == target) {
            return;
        }
        out.push(Link { target, label, kind });
    };
    for target in related(page) {
        push(&target, None, LinkKind::Related);
    }
    for (target, label) in body_links(&page.body) {
        push(target, label.map(cut_label), LinkKind::Body);
    }
    out
}

/// `related:` in the frontmatter: a list of paths, or one path.
fn related(page: &Page) -> Vec<String> {
    use serde_yaml_ng::Value;
    match page.frontmatter.extra.get("related") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Sequence(items)) => {
            items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()
        }
        _ => Vec::new(),
    }
}

/// A written target as a page path: trimmed, heading dropped, `.md` added; `None` when it is
/// not a valid page path.
pub fn normalize(target: &str) -> Option<PagePath> {
    let target = target.split('#').next().unwrap_or_default().trim();
    let target = target.strip_prefix("./").unwrap_or(target);
    if target.is_empty() {
        return None;
    }
    let with_md = if target.ends_with(".md") { target.to_owned() } else { format!("{target}.md") };
    PagePath::new(&with_md).ok()
}

fn cut_label(label: &str) -> String {
    let label = label.trim();
    let mut end = label.len().min(MAX_LABEL);
    while !label.is_char_boundary(end) {
        end -= 1;
    }
    label[..end].to_owned()
}

/// `[[target]]` and `[[target|label]]` in markdown, outside code spans and fenced blocks.
fn body_links(body: &str) -> Vec<(&str, Option<&str>)> {
    let mut out = Vec::new();
    // The fence that opened the current block: its character and length.
    let mut fence: Option<(char, usize)> = None;
    for line in body.lines() {
        let trimmed = line.trim_start();
        if let Some((c, n)) = fence_marker(trimmed) {
            match fence {
                None => fence = Some((c, n)),
                Some((open, len)) if open == c && n >= len && trimmed[n..].trim().is_empty() => {
                    fence = None
                }
                Some(_) => {}
            }
            continue;
        }
        if fence.is_none() {
            line_links(line, &mut out);
        }
    }
    out
}

/// A line opening or closing a fence: three or more backticks or tildes.
fn fence_marker(line: &str) -> Option<(char, usize)> {
    let c = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = line.chars().take_while(|x| *x == c).count();
    (n >= 3).then_some((c, n))
}

fn line_links<'a>(line: &'a str, out: &mut Vec<(&'a str, Option<&'a str>)>) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            // A code span: a run of backticks closed by a run of the same length.
            let run = bytes[i..].iter().take_while(|b| **b == b'`').count();
            let ticks = &line[i..i + run];
            match line[i + run..].find(ticks) {
                Some(at) => i += run + at + run,
                None => i += run,
            }
            continue;
        }
        // Bytes, not `str` slices: `i` steps over the bytes of multi-byte characters.
        if bytes[i..].starts_with(b"[[")
            && let Some(end) = line[i + 2..].find("]]")
        {
            let inner = &line[i + 2..i + 2 + end];
            if !inner.contains("[[") {
                let (target, label) = match inner.split_once('|') {
                    Some((t, l)) => (t, Some(l)),
                    None => (inner, None),
                };
                out.push((target, label));
                i += 2 + end + 2;
                continue;
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(text: &str) -> Vec<String> {
        let page = Page::parse(text).unwrap();
        page_links(&page, None).into_iter().map(|l| l.target.as_str().to_owned()).collect()
    }

    #[test]
    fn the_forms_become_page_paths() {
        let page = Page::parse(
            "See [[decisions/queue]], [[notes/a.md|the notes]] and [[gotchas/tz#utc]].\n",
        )
        .unwrap();
        let links = page_links(&page, None);
        let got: Vec<(&str, Option<&str>, LinkKind)> =
            links.iter().map(|l| (l.target.as_str(), l.label.as_deref(), l.kind)).collect();
        assert_eq!(
            got,
            [
                ("decisions/queue.md", None, LinkKind::Body),
                ("notes/a.md", Some("the notes"), LinkKind::Body),
                ("gotchas/tz.md", None, LinkKind::Body),
            ]
        );
    }

    #[test]
    fn related_comes_first_and_a_target_counts_once() {
        let text = "---\nrelated: [b.md, notes/c]\n---\nSee [[b]] and [[d]] and [[d|again]].\n";
        assert_eq!(targets(text), ["b.md", "notes/c.md", "d.md"]);
        let page = Page::parse(text).unwrap();
        assert_eq!(page_links(&page, None)[0].kind, LinkKind::Related);
        assert_eq!(targets("---\nrelated: one.md\n---\nx"), ["one.md"]);
        assert_eq!(targets("---\nrelated: {a: 1}\n---\nx"), Vec::<String>::new());
    }

    #[test]
    fn text_with_multi_byte_characters_is_read_without_a_panic() {
        assert_eq!(
            targets(
                "# Prefiro usar tabs em vez de espaços\n\nVer [[decisões/estilo]] e ç[[a]]ç.\n"
            ),
            vec!["decisões/estilo.md", "a.md"]
        );
        assert!(targets("espaços ç ã [[").is_empty());
    }

    #[test]
    fn code_spans_and_fences_hold_no_links() {
        let text = "Real [[a]].\n`[[not-b]]` and ``x [[not-c]] ` y`` then [[e]]\n\
                    ```rust\nlet v = x[[0]];\n[[not-d]]\n```\n~~~\n[[not-f]]\n~~~\n[[g]]\n";
        assert_eq!(targets(text), ["a.md", "e.md", "g.md"]);
        // An unclosed backtick is text: the link after it counts.
        assert_eq!(targets("a ` b [[h]]"), ["h.md"]);
    }

    #[test]
    fn invalid_targets_and_self_links_are_no_links() {
        assert_eq!(
            targets("[[../other/x]] [[/abs]] [[.hidden]] [[]] [[ |label]] [[ok]]"),
            ["ok.md"]
        );
        let page = Page::parse("[[me]] [[you]]").unwrap();
        let own = PagePath::new("me.md").unwrap();
        let links = page_links(&page, Some(&own));
        assert_eq!(links.len(), 1);
        assert_eq!(links[0].target.as_str(), "you.md");
    }

    #[test]
    fn links_are_bounded_per_page() {
        let body: String = (0..MAX_LINKS_PER_PAGE + 50).map(|i| format!("[[p{i}]] ")).collect();
        let links = targets(&body);
        assert_eq!(links.len(), MAX_LINKS_PER_PAGE);
        assert_eq!(links[0], "p0.md");
        assert_eq!(links[MAX_LINKS_PER_PAGE - 1], format!("p{}.md", MAX_LINKS_PER_PAGE - 1));
    }

    #[test]
    fn labels_are_cut_on_a_character_boundary() {
        let long = "é".repeat(300);
        let page = Page::parse(&format!("[[x|{long}]]")).unwrap();
        let label = page_links(&page, None)[0].label.clone().unwrap();
        assert!(label.len() <= MAX_LABEL && label.chars().all(|c| c == 'é'), "{label}");
    }
}
