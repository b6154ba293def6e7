//! Splitting the user's text into sentences, and the shapes that show a sentence is code or an
//! agent's text rather than the user's own words.

/// Abbreviations a `.` does not end a sentence after ("e.g. pnpm" stays one sentence).
const ABBREVIATIONS: &[&str] = &["e.g", "i.e", "vs", "cf"];

/// The sentences of the text: one line at a time, list markers dropped, split after `.`, `!`,
/// `?` (kept) and `;` (dropped) when whitespace or the line's end follows, never inside inline
/// code.
pub(super) fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = strip_list_marker(line.trim());
        split_line(line, &mut out);
    }
    out
}

/// `- x`, `* x`, `+ x`, `1. x`, `1) x` -> `x`.
fn strip_list_marker(line: &str) -> &str {
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return rest.trim_start();
        }
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=3).contains(&digits) {
        let rest = &line[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return rest.trim_start();
        }
    }
    line
}

fn ends_with_abbreviation(piece: &str) -> bool {
    let lower = piece.to_ascii_lowercase();
    ABBREVIATIONS.iter().any(|a| {
        lower
            .strip_suffix(a)
            .is_some_and(|before| before.chars().next_back().is_none_or(|c| !c.is_alphanumeric()))
    })
}

fn push(out: &mut Vec<String>, piece: &str) {
    let piece = piece.trim();
    if !piece.is_empty() {
        out.push(piece.to_owned());
    }
}

fn split_line(line: &str, out: &mut Vec<String>) {
    let mut start = 0;
    // The length of the backtick run that opened the inline code we are in.
    let mut code: Option<usize> = None;
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '`' {
            let mut run = 1;
            while chars.next_if(|&(_, c)| c == '`').is_some() {
                run += 1;
            }
            code = match code {
                None => Some(run),
                Some(open) if open == run => None,
                still => still,
            };
            continue;
        }
        if code.is_some() || !matches!(c, '.' | '!' | '?' | ';') {
            continue;
        }
        let next = chars.peek().map(|&(_, n)| n);
        if !next.is_none_or(char::is_whitespace) {
            continue;
        }
        if c == '.' && ends_with_abbreviation(&line[start..i]) {
            continue;
        }
        let end = if c == ';' { i } else { i + 1 };
        push(out, &line[start..end]);
        start = i + 1;
    }
    push(out, &line[start..]);
}

/// The sentence with inline code spans blanked out (what the user wrote as prose).
fn prose(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_code = false;
    for c in s.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// Code written as a sentence: a shell prompt, code punctuation outside inline code, or nothing
/// but inline code and symbols.
pub(super) fn is_code(s: &str) -> bool {
    let t = s.trim();
    if ["$ ", ">>> ", "#include", "#!"].iter().any(|p| t.starts_with(p)) {
        return true;
    }
    let prose = prose(t);
    let p = prose.trim();
    !p.chars().any(char::is_alphabetic)
        || ["=>", "();", "==", "!=", "&&", "||", " = "].iter().any(|m| p.contains(m))
        || p.ends_with('{')
        || p.starts_with('}')
}

/// `**x**` or `__x__` outside inline code: the agent's markdown, not something a user types.
fn has_bold(p: &str) -> bool {
    ["**", "__"].iter().any(|m| {
        let mut from = 0;
        while let Some(off) = p[from..].find(m) {
            let open = from + off;
            let inner = &p[open + 2..];
            let opens =
                inner.chars().next().is_some_and(|c| !c.is_whitespace() && c != '*' && c != '_')
                    && p[..open].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
            if opens && let Some(close) = inner.find(m) {
                let before = inner[..close].chars().next_back();
                let after = &inner[close + 2..];
                let ends =
                    after.chars().next().is_none_or(|c| c.is_whitespace() || ",;:!?)".contains(c))
                        || (after.starts_with('.')
                            && after[1..].chars().next().is_none_or(char::is_whitespace));
                if before.is_some_and(|c| !c.is_whitespace()) && ends {
                    return true;
                }
            }
            from = open + 2;
        }
        false
    })
}

/// A `file.ext:LINE` reference (`src/main.rs:42`, `lib.rs:7:3`), as agents cite code.
fn is_file_line(token: &str) -> bool {
    let t = token.trim_matches(|c: char| "()[]`'\",;.:".contains(c));
    if t.contains("://") {
        return false;
    }
    let Some((path, lines)) = t.split_once(':') else {
        return false;
    };
    let Some((name, ext)) = path.rsplit_once('.') else {
        return false;
    };
    let numbers =
        lines.split([':', '-']).all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let host = ["com", "org", "net", "io", "dev", "local"].contains(&ext);
    !name.is_empty()
        && (1..=5).contains(&ext.len())
        && ext.bytes().all(|b| b.is_ascii_alphanumeric())
        && ext.bytes().any(|b| b.is_ascii_alphabetic())
        && !host
        && numbers
}

/// Text an agent wrote (pasted back by the user): markdown bold, a `file.ext:LINE` reference, or
/// a line starting with a transcript bullet.
pub(super) fn is_agent_text(s: &str) -> bool {
    let t = s.trim_start();
    t.starts_with(['⏺', '⎿', '●']) || has_bold(&prose(s)) || s.split_whitespace().any(is_file_line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_terminators_and_lines_but_not_inside_code_paths_or_versions() {
        let text = "- Always use pnpm. Never npm!\n2. Keep `a.b. c` in tests/suite; pin v1.2 of node.js\nWhy?";
        assert_eq!(
            sentences(text),
            [
                "Always use pnpm.",
                "Never npm!",
                "Keep `a.b. c` in tests/suite",
                "pin v1.2 of node.js",
                "Why?"
            ]
        );
    }

    #[test]
    fn e_g_does_not_end_a_sentence_but_ellipses_and_bangs_do() {
        assert_eq!(
            sentences("Prefer small tools, e.g. ripgrep. Done"),
            ["Prefer small tools, e.g. ripgrep.", "Done"]
        );
        assert_eq!(sentences("Wait... really?! Ok"), ["Wait...", "really?!", "Ok"]);
        assert_eq!(sentences("* keep   two  spaces "), ["keep   two  spaces"]);
    }

    #[test]
    fn code_shapes_are_code() {
        for s in [
            "$ npm install",
            "let x = 1",
            "if a == b",
            "fn main() {",
            "`cargo fmt --all`",
            "foo();",
        ] {
            assert!(is_code(s), "{s}");
        }
        for s in ["Always use `x == y` checks", "Use pnpm, not npm.", "Prefer a -> b arrows"] {
            assert!(!is_code(s), "{s}");
        }
    }

    #[test]
    fn agent_shapes_are_agent_text() {
        for s in [
            "**Always** use pnpm",
            "I __always__ use pnpm",
            "Always use pnpm (see src/main.rs:42)",
            "Fixed in lib.rs:7:3.",
            "⏺ Always use pnpm",
        ] {
            assert!(is_agent_text(s), "{s}");
        }
        for s in [
            "Never edit __init__.py",
            "Never commit **/*.log files",
            "Always use `**bold**` sparingly",
            "Always bind to localhost:8080",
            "Always use example.com:443",
            "Use https://x.dev:8080/a",
        ] {
            assert!(!is_agent_text(s), "{s}");
        }
    }
}
