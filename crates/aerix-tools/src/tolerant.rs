//! Where `edit` finds an `old` that is not in the file exactly (as Aider does): small models
//! copy a block with its trailing spaces dropped, its indentation shifted, or its spaces
//! retyped. Tried in order, each on whole lines: (a) trailing whitespace per line ignored,
//! (b) the indentation differing uniformly (`new` re-indented by the same shift), (c) as (b),
//! with runs of whitespace inside a line collapsed (the indentation of each line relative to
//! the block's stays as it is: in Python it is the code). The first tolerance that finds anything decides: one
//! place is the match, several is ambiguous (never a guess). A match spans exactly as many
//! lines as `old`, whose blank first and last lines may be left out (tried after `old` whole).

use std::ops::Range;

/// A place found for `old`, and what replaces it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// The bytes of the file replaced: whole lines, with their line endings.
    pub range: Range<usize>,
    pub replacement: String,
    /// The first line replaced, from 1.
    pub line: usize,
    /// How `old` matched, a clause for the result: "`old` matched ignoring ...".
    pub how: String,
}

impl Found {
    /// `text` with the place replaced.
    pub(crate) fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        out.replace_range(self.range.clone(), &self.replacement);
        out
    }
}

/// Why no place was found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Miss {
    NotFound,
    /// Several places under the first tolerance that finds any: their first lines, and the
    /// tolerance ("ignoring trailing whitespace").
    Ambiguous {
        lines: Vec<usize>,
        tolerance: &'static str,
    },
}

/// Finds `old` in `text` under the tolerances, for an `old` not found exactly.
pub(crate) fn find(text: &str, old: &str, new: &str) -> Result<Found, Miss> {
    let file = lines(text);
    let old_lines = text_lines(old);
    let (lead, trail) = blank_ends(&old_lines);
    let mut shapes = vec![(0, 0)];
    if lead + trail > 0 && lead < old_lines.len() {
        shapes.push((lead, trail));
    }
    let mut spaced: Option<Vec<String>> = None;
    for (lead, trail) in shapes {
        let old = &old_lines[lead..old_lines.len() - trail];
        if old.is_empty() || old.len() > file.len() || old.iter().all(|l| is_blank(l)) {
            continue;
        }
        let old_min = common_indent(old.iter().copied());
        for level in LEVELS {
            let at: Vec<usize> = match level {
                Level::Trailing => windows(&file, old.len(), |i| trailing(old, &file[i..])),
                Level::Indent => windows(&file, old.len(), |i| indented(old, old_min, &file[i..])),
                Level::Spaces => {
                    let spaced = spaced.get_or_insert_with(|| {
                        file.iter().map(|l| collapsed(l.text)).collect::<Vec<String>>()
                    });
                    let old_spaced: Vec<String> = old.iter().map(|l| collapsed(l)).collect();
                    windows(&file, old.len(), |i| {
                        spaced[i..].iter().zip(&old_spaced).all(|(f, o)| f == o)
                            && indented_alike(old, old_min, &file[i..], |o, f| {
                                indent(o) == indent(f) && collapsed(o) == collapsed(f)
                            })
                    })
                }
            };
            match at[..] {
                [] => continue,
                [i] => {
                    let window = &file[i..i + old.len()];
                    return Ok(replace(window, old_min, new, (lead, trail), level, &file));
                }
                _ => {
                    let lines = at.iter().map(|i| i + 1).collect();
                    return Err(Miss::Ambiguous { lines, tolerance: level.tolerance() });
                }
            }
        }
    }
    Err(Miss::NotFound)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Trailing,
    Indent,
    Spaces,
}

/// Strictest first: each finds every place the one before it finds.
const LEVELS: [Level; 3] = [Level::Trailing, Level::Indent, Level::Spaces];

impl Level {
    fn tolerance(self) -> &'static str {
        match self {
            Level::Trailing => "ignoring trailing whitespace",
            Level::Indent => "at another indentation",
            Level::Spaces => "with runs of whitespace collapsed",
        }
    }
}

/// A line of the file: its text without the line ending, and its bytes with it.
struct Line<'a> {
    text: &'a str,
    start: usize,
    end: usize,
    eol: &'a str,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for piece in text.split_inclusive('\n') {
        let end = start + piece.len();
        let (text, eol) = match piece.strip_suffix("\r\n") {
            Some(body) => (body, "\r\n"),
            None => match piece.strip_suffix('\n') {
                Some(body) => (body, "\n"),
                None => (piece, ""),
            },
        };
        out.push(Line { text, start, end, eol });
        start = end;
    }
    out
}

/// The lines of `old` or `new`: a last line ending is not a line of its own.
fn text_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect()
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// The blank lines at the start and at the end of `lines`.
fn blank_ends(lines: &[&str]) -> (usize, usize) {
    let lead = lines.iter().take_while(|l| is_blank(l)).count();
    let trail = lines[lead..].iter().rev().take_while(|l| is_blank(l)).count();
    (lead, trail)
}

fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// The leading whitespace every non-blank line starts with.
fn common_indent<'a>(lines: impl Iterator<Item = &'a str>) -> &'a str {
    let mut common: Option<&str> = None;
    for line in lines.filter(|l| !is_blank(l)) {
        let own = indent(line);
        common = Some(match common {
            None => own,
            Some(c) => &c[..shared_prefix(c, own)],
        });
    }
    common.unwrap_or("")
}

/// The length in bytes of the prefix `a` and `b` share, on a character boundary.
fn shared_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((at, _), _)| at)
}

fn collapsed(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first lines of the windows of `n` lines that `matches`.
fn windows(file: &[Line<'_>], n: usize, matches: impl Fn(usize) -> bool) -> Vec<usize> {
    (0..=file.len() - n).filter(|&i| matches(i)).collect()
}

fn trailing(old: &[&str], window: &[Line<'_>]) -> bool {
    old.iter().zip(window).all(|(o, f)| o.trim_end() == f.text.trim_end())
}

/// Every line the same past the least indentation of `old` and of the window: the window is
/// `old` shifted.
fn indented(old: &[&str], old_min: &str, window: &[Line<'_>]) -> bool {
    // Cheap first: the first lines' text.
    old[0].trim() == window[0].text.trim()
        && indented_alike(old, old_min, window, |o, f| o.trim_end() == f.trim_end())
}

/// Whether each line of `old` past its least indentation `old_min` is `same` as the window's
/// line past the window's least indentation, blank lines matching blank lines.
fn indented_alike(
    old: &[&str],
    old_min: &str,
    window: &[Line<'_>],
    same: impl Fn(&str, &str) -> bool,
) -> bool {
    let window = &window[..old.len()];
    let file_min = common_indent(window.iter().map(|l| l.text));
    old.iter().zip(window).all(|(o, f)| match (is_blank(o), is_blank(f.text)) {
        (true, true) => true,
        (false, false) => same(&o[old_min.len()..], &f.text[file_min.len()..]),
        _ => false,
    })
}

/// The replacement of `window` by `new`: `new`'s blank ends left out as `old`'s were, shifted
/// as the window is shifted from `old`, with the file's line ending.
fn replace(
    window: &[Line<'_>],
    old_min: &str,
    new: &str,
    (lead, trail): (usize, usize),
    level: Level,
    file: &[Line<'_>],
) -> Found {
    let mut new_lines = text_lines(new);
    let (new_lead, new_trail) = blank_ends(&new_lines);
    let keep_from = lead.min(new_lead);
    let keep_to = new_lines.len() - trail.min(new_trail).min(new_lines.len() - keep_from);
    new_lines = new_lines[keep_from..keep_to].to_vec();
    let file_min = common_indent(window.iter().map(|l| l.text));
    let shifted = level != Level::Trailing && file_min != old_min;
    let eol = file.iter().map(|l| l.eol).find(|e| !e.is_empty()).unwrap_or("\n");
    let body: Vec<String> = new_lines
        .iter()
        .map(|l| if shifted { reindent(l, old_min, file_min) } else { (*l).to_owned() })
        .collect();
    let (first, last) = (&window[0], &window[window.len() - 1]);
    let replacement =
        if body.is_empty() { String::new() } else { format!("{}{}", body.join(eol), last.eol) };
    let mut how = format!("`old` matched {}", level.tolerance());
    if shifted {
        how.push_str(", `new` re-indented alike");
    }
    if lead + trail > 0 {
        how.push_str(", without its blank first or last lines");
    }
    let line = file.iter().take_while(|l| l.start < first.start).count() + 1;
    Found { range: first.start..last.end, replacement, line, how }
}

/// A line of `new` moved from `old`'s indentation `from` to the file's `to`. A line indented
/// less than `from` is shifted by the difference when one indentation extends the other.
fn reindent(line: &str, from: &str, to: &str) -> String {
    if is_blank(line) {
        return line.to_owned();
    }
    if let Some(rest) = line.strip_prefix(from) {
        return format!("{to}{rest}");
    }
    if let Some(extra) = to.strip_prefix(from) {
        return format!("{extra}{line}");
    }
    if let Some(extra) = from.strip_prefix(to) {
        return line[shared_prefix(indent(line), extra)..].to_owned();
    }
    line.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file after replacing `old` by `new` in `text` under the tolerances, and how.
    fn edited(text: &str, old: &str, new: &str) -> Result<(String, String), Miss> {
        let found = find(text, old, new)?;
        Ok((found.apply(text), found.how))
    }

    #[test]
    fn trailing_whitespace_is_ignored_per_line() {
        let text = "fn add(a, b) {   \n    a - b\t\n}\n";
        let (out, how) =
            edited(text, "fn add(a, b) {\n    a - b\n}", "fn add(a, b) {\n    a + b\n}").unwrap();
        assert_eq!(out, "fn add(a, b) {\n    a + b\n}\n");
        assert_eq!(how, "`old` matched ignoring trailing whitespace");
        // The model's trailing spaces, the file without.
        let (out, _) = edited("x = 1\ny = 2\n", "x = 1  \ny = 2 ", "x = 1\ny = 3").unwrap();
        assert_eq!(out, "x = 1\ny = 3\n");
    }

    #[test]
    fn a_uniform_indentation_shift_re_indents_new_alike() {
        let text = "def f(x):\n    if x:\n        return x - 1\n    return 0\n";
        // `old` given without the file's indentation: `new` gets it.
        let (out, how) =
            edited(text, "if x:\n    return x - 1", "if x:\n    return x + 1\nprint(x)").unwrap();
        assert_eq!(out, "def f(x):\n    if x:\n        return x + 1\n    print(x)\n    return 0\n");
        assert_eq!(how, "`old` matched at another indentation, `new` re-indented alike");
        // `old` indented more than the file: `new` shifted back by as much.
        let (out, _) = edited(
            text,
            "            if x:\n                return x - 1",
            "            if x:\n                return x + 2",
        )
        .unwrap();
        assert_eq!(out, "def f(x):\n    if x:\n        return x + 2\n    return 0\n");
        // The relative indentation must be the same: a shift, not a reshaping.
        assert_eq!(find(text, "if x:\nreturn x - 1", "y"), Err(Miss::NotFound));
        // A line of `new` less indented than all of `old` moves by the same shift.
        let (out, _) = edited(text, "    return x - 1", "    return x - 1\nreturn 9").unwrap();
        assert_eq!(out, "def f(x):\n    if x:\n        return x - 1\n    return 9\n    return 0\n");
    }

    #[test]
    fn runs_of_whitespace_inside_a_line_are_collapsed() {
        let text = "if [ \"$a\"  -gt  \"$b\" ]; then\n  echo  big\nfi\n";
        let (out, how) = edited(
            text,
            "if [ \"$a\" -gt \"$b\" ]; then\n  echo big",
            "if [ \"$a\" -lt \"$b\" ]; then\n  echo big",
        )
        .unwrap();
        assert_eq!(out, "if [ \"$a\" -lt \"$b\" ]; then\n  echo big\nfi\n");
        assert_eq!(how, "`old` matched with runs of whitespace collapsed");
        // Collapsing never adds a space where there was none.
        assert_eq!(find("f(a,b)\n", "f(a, b)", "g"), Err(Miss::NotFound));
    }

    #[test]
    fn two_places_are_ambiguous_under_the_first_tolerance_that_finds_any() {
        let text = "a = 1  \nb = 2\na = 1\t\nc = 3\n";
        assert_eq!(
            find(text, "a = 1", "a = 9"),
            Err(Miss::Ambiguous { lines: vec![1, 3], tolerance: "ignoring trailing whitespace" })
        );
        let text = "x  = 1\nx =  1\n";
        assert_eq!(
            find(text, "x = 1", "x = 2"),
            Err(Miss::Ambiguous {
                lines: vec![1, 2],
                tolerance: "with runs of whitespace collapsed"
            })
        );
        // A stricter tolerance that finds one place wins over a looser one that finds two.
        let text = "  y = 1\ny  =  1\n";
        let (out, how) = edited(text, "y = 1", "y = 2").unwrap();
        assert_eq!(out, "  y = 2\ny  =  1\n");
        assert!(how.contains("another indentation"), "{how}");
    }

    #[test]
    fn a_match_spans_as_many_lines_as_old_save_its_blank_ends() {
        let text = "a()\nb()\n\nc()\n";
        // Never across another number of lines: the blank line in the file is not skipped.
        assert_eq!(find(text, "b()\nc()", "x"), Err(Miss::NotFound));
        // `old`'s blank first and last lines may be left out, and `new`'s alike.
        let (out, how) = edited(text, "\n\nb() \n\n", "\n\nB()\n\n").unwrap();
        assert_eq!(out, "a()\nB()\n\nc()\n");
        assert!(how.ends_with(", without its blank first or last lines"), "{how}");
        // Kept when they match.
        let (out, how) = edited(text, "b()  \n\nc()", "b()\nc()").unwrap();
        assert_eq!(out, "a()\nb()\nc()\n");
        assert_eq!(how, "`old` matched ignoring trailing whitespace");
        assert_eq!(find(text, "\n  \n", "x"), Err(Miss::NotFound), "blank lines only");
        assert_eq!(find("a\n", "a\nb\nc", "x"), Err(Miss::NotFound), "longer than the file");
    }

    #[test]
    fn the_file_s_line_endings_and_last_line_are_kept() {
        let text = "one \r\ntwo\r\nthree";
        let (out, _) = edited(text, "one\ntwo", "1\n2\n2.5").unwrap();
        assert_eq!(out, "1\r\n2\r\n2.5\r\nthree");
        let (out, _) = edited(text, "three ", "3").unwrap();
        assert_eq!(out, "one \r\ntwo\r\n3", "no newline added at the end");
        // An empty `new` removes the lines.
        let (out, _) = edited("a\nb \nc\n", "b", "").unwrap();
        assert_eq!(out, "a\nc\n");
        let found = find("a\nb \nc\n", "b", "B").unwrap();
        assert_eq!(found.line, 2);
    }

    /// A small model's ways of copying `lines` (of a block indented by `indent`).
    fn mangled(how: &str, lines: &[String], indent: &str) -> String {
        let line = |l: &String| match how {
            "trailing" => format!("{l}  "),
            // As a block: the lines' relative indentation kept.
            "dedented" => l.strip_prefix(indent).unwrap_or(l).to_owned(),
            "indented" => format!("    {l}"),
            _ => l.replace(" + ", "  +  ").replace(" * ", " *  "),
        };
        lines.iter().map(line).collect::<Vec<_>>().join("\n")
    }

    /// Generated cases: a block of a generated file, copied as a small model mangles it, with
    /// one line changed; the edit gives the file with that line changed and nothing else (with
    /// `new` as the model wrote it where no shift applies: its spaces are its own).
    #[test]
    fn generated_mangled_blocks_land_where_they_came_from() {
        let mut cases = 0;
        for (functions, ind) in [(3, "    "), (5, "\t"), (4, "  ")] {
            let mut file = String::new();
            for f in 0..functions {
                file.push_str(&format!(
                    "def f{f}(x):\n{ind}if x > {f}:\n{ind}{ind}return x * {f} + 1\n\
                     {ind}return {f}\n\n"
                ));
            }
            for f in 0..functions {
                let block = [format!("{ind}if x > {f}:"), format!("{ind}{ind}return x * {f} + 1")];
                let fixed = [block[0].clone(), format!("{ind}{ind}return x * {f} - 1")];
                let expected = file.replace(&block.join("\n"), &fixed.join("\n"));
                assert_ne!(expected, file);
                for how in ["trailing", "dedented", "indented", "respaced"] {
                    let (old, new) = (mangled(how, &block, ind), mangled(how, &fixed, ind));
                    assert!(!file.contains(&old), "{how}: the mangled block is not exact");
                    let (out, _) =
                        edited(&file, &old, &new).unwrap_or_else(|e| panic!("{how} f{f}: {e:?}"));
                    let as_written = |t: &str| -> Vec<String> {
                        t.lines().map(|l| format!("{}{}", indent(l), collapsed(l))).collect()
                    };
                    if how == "dedented" || how == "indented" {
                        assert_eq!(out, expected, "{how} f{f}");
                    } else {
                        assert_eq!(as_written(&out), as_written(&expected), "{how} f{f}");
                    }
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 48);
    }
}
