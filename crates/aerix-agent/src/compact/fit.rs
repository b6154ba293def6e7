//! Results fitted to the window: after the `context.tool_caps` cut, a result must fit the room
//! the window leaves (the next turn's ask kept free), taken at 3 bytes a token. Three appends
//! at most: fitted; fitted after one compaction pass; the pointer line alone.

use crate::runtime::{Context, CoreError, Label, Runtime, Segment};

use crate::compact::pass::pass;
use crate::compact::select::{Budget, Why};

/// How many bytes a token is taken to hold when fitting.
pub(crate) const BYTES_PER_TOKEN: usize = 3;
/// Less room than this (the smallest `tool_caps` entry) does not fit a cut result.
pub(crate) const MIN_FIT_BYTES: usize = 256;

/// A result's text taken apart: its `[<tool> <id>]` header line, the part kept so far, and
/// what the cap already cut (its byte count and the spool's path).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Parts<'a> {
    header: &'a str,
    kept: &'a str,
    more: usize,
    path: Option<&'a str>,
}

/// How a result goes in.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fit {
    Whole,
    /// Cut to its first `keep` bytes of `kept`, with a pointer line.
    Cut {
        keep: usize,
    },
    /// Not enough room for a cut result.
    NoRoom,
}

/// Appends a turn's results in call order (one request), each fitted to the room left. A
/// result that does not fit gets one compaction pass, then the pointer line alone.
pub(crate) async fn append_results(
    budget: Budget,
    context: &mut Context,
    rt: &mut Runtime<'_>,
    results: Vec<Segment>,
) -> Result<(), CoreError> {
    // Tokens of the results fitted so far, not yet in the pool's count.
    let mut pending = 0usize;
    let mut fitted = Vec::with_capacity(results.len());
    for mut segment in results {
        if segment.label != Label::Result {
            fitted.push(segment);
            continue;
        }
        let room = |context: &Context, pending: usize| {
            (budget.room(context.total_tokens) as usize).saturating_sub(pending) * BYTES_PER_TOKEN
        };
        let mut attempt = fit(&segment.text, room(context, pending));
        if attempt == Fit::NoRoom {
            // One pass for this result; whatever it freed, the next fit is the last.
            pass(budget, context, rt, Why::Result).await?;
            attempt = fit(&segment.text, room(context, pending));
        }
        segment.text = apply(rt, &segment.id, &segment.text, &attempt);
        pending += segment.text.len().div_ceil(BYTES_PER_TOKEN);
        fitted.push(segment);
    }
    context.append_all(rt.client, rt.sink, fitted).await
}

/// The text that goes in for `fit`: whole, cut with its pointer line, or the pointer alone.
fn apply(rt: &mut Runtime<'_>, id: &str, text: &str, fit: &Fit) -> String {
    let parts = parts(text);
    let keep = match *fit {
        Fit::Whole => return text.to_owned(),
        Fit::Cut { keep } => keep,
        Fit::NoRoom => 0,
    };
    let path = match parts.path {
        Some(path) => Some(path.to_owned()),
        // Not cut by the cap: the whole of it goes to the spool now.
        None => {
            let tool = parts.header.trim_start_matches('[').split_whitespace().next();
            let name = format!("{id}-{}.txt", tool.unwrap_or("tool"));
            rt.sink.spool(&name, parts.kept).map(|p| p.display().to_string())
        }
    };
    let more = parts.kept.len() - keep + parts.more;
    let kept = &parts.kept[..keep];
    let sep = if kept.is_empty() { "" } else { "\n" };
    format!("{}{kept}{sep}{}", parts.header, pointer(more, path.as_deref()))
}

/// The spool's pointer line (the cap's format).
fn pointer(more: usize, path: Option<&str>) -> String {
    match path {
        Some(path) => {
            format!("[truncated: {more} more bytes; read with read(path=\"{path}\", offset=1)]")
        }
        None => format!("[truncated: {more} more bytes]"),
    }
}

fn parts(text: &str) -> Parts<'_> {
    let (header, body) = match text.find('\n') {
        Some(i) => text.split_at(i + 1),
        None => (text, ""),
    };
    let (kept, last) = match body.rfind('\n') {
        Some(i) => (&body[..i], &body[i + 1..]),
        None => ("", body),
    };
    let capped = last
        .strip_prefix("[truncated: ")
        .and_then(|rest| rest.split_once(" more bytes"))
        .and_then(|(n, rest)| Some((n.parse().ok()?, rest)));
    match capped {
        Some((more, rest)) => {
            let path = rest
                .strip_prefix("; read with read(path=\"")
                .and_then(|p| p.strip_suffix("\", offset=1)]"));
            Parts { header, kept, more, path }
        }
        None => Parts { header, kept: body, more: 0, path: None },
    }
}

/// Whether `text` fits `room` bytes, whole or cut (header and pointer line included).
fn fit(text: &str, room: usize) -> Fit {
    if text.len() <= room {
        return Fit::Whole;
    }
    if room < MIN_FIT_BYTES {
        return Fit::NoRoom;
    }
    let parts = parts(text);
    // The pointer line's longest form: every byte of `kept` counted as cut.
    let pointer = pointer(parts.kept.len() + parts.more, Some(parts.path.unwrap_or(SPOOL_PATH)));
    let Some(mut keep) = room.checked_sub(parts.header.len() + 1 + pointer.len()) else {
        return Fit::NoRoom;
    };
    keep = keep.min(parts.kept.len());
    while !parts.kept.is_char_boundary(keep) {
        keep -= 1;
    }
    if keep == 0 { Fit::NoRoom } else { Fit::Cut { keep } }
}

/// A spool path's length as fitting reserves it before the path exists.
const SPOOL_PATH: &str = "/a/path/of/the/spool/in/the/data/directory/of/the/session/c999-tool.txt";

#[cfg(test)]
mod tests {
    use super::{Fit, MIN_FIT_BYTES, Parts, fit, parts};

    const CAPPED: &str = "[read c3]\nline one\nline two\n[truncated: 500 more bytes; read with read(path=\"/s/c3-read.txt\", offset=1)]";

    #[test]
    fn a_capped_result_is_taken_apart() {
        assert_eq!(
            parts(CAPPED),
            Parts {
                header: "[read c3]\n",
                kept: "line one\nline two",
                more: 500,
                path: Some("/s/c3-read.txt")
            }
        );
        let plain = "[bash c1]\nok\n[exit 0]";
        assert_eq!(
            parts(plain),
            Parts { header: "[bash c1]\n", kept: "ok\n[exit 0]", more: 0, path: None }
        );
    }

    #[test]
    fn whole_cut_or_no_room() {
        let text = format!("[read c1]\n{}", "x".repeat(2000));
        assert_eq!(fit(&text, 3000), Fit::Whole);
        assert_eq!(fit(&text, text.len()), Fit::Whole);
        match fit(&text, 600) {
            Fit::Cut { keep } => assert!(keep > 0 && keep < 600 - 10, "{keep}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(fit(&text, MIN_FIT_BYTES - 1), Fit::NoRoom);
        assert!(matches!(fit(&text, MIN_FIT_BYTES), Fit::Cut { .. }));
    }
}
