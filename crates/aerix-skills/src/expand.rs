//! A skill's body with its substitutions, as Claude Code makes them: `$ARGUMENTS` (the whole
//! argument text), `$ARGUMENTS[N]` and `$N` (the Nth argument, from 0, split as a shell would
//! split words with quotes), `${CLAUDE_SKILL_DIR}` and `${CLAUDE_SESSION_ID}`. When the body
//! consumes none of the arguments, `ARGUMENTS: <value>` is appended so they are not lost.

use std::path::Path;

/// What a body's placeholders are replaced with.
pub struct Values<'a> {
    pub arguments: &'a str,
    pub skill_dir: &'a Path,
    pub session_id: &'a str,
}

pub fn expand(body: &str, values: &Values<'_>) -> String {
    let words = split_words(values.arguments);
    let word = |n: usize| words.get(n).map(String::as_str).unwrap_or_default();
    let mut out = String::with_capacity(body.len());
    let mut consumed = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            consumed = true;
            if let Some((n, len)) = index(tail) {
                out.push_str(word(n));
                rest = &tail[len..];
            } else {
                out.push_str(values.arguments);
                rest = tail;
            }
        } else if let Some(tail) = after.strip_prefix("{CLAUDE_SKILL_DIR}") {
            out.push_str(&values.skill_dir.display().to_string());
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("{CLAUDE_SESSION_ID}") {
            out.push_str(values.session_id);
            rest = tail;
        } else if let Some(digits) = leading_digits(after) {
            consumed = true;
            out.push_str(digits.parse().map(word).unwrap_or_default());
            rest = &after[digits.len()..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !consumed && !values.arguments.trim().is_empty() {
        if !out.ends_with('\n') && !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("\nARGUMENTS: {}\n", values.arguments.trim()));
    }
    out
}

/// `[N]` at the start of `text`: N and the length taken.
fn index(text: &str) -> Option<(usize, usize)> {
    let inner = text.strip_prefix('[')?;
    let digits = leading_digits(inner)?;
    if !inner[digits.len()..].starts_with(']') {
        return None;
    }
    Some((digits.parse().ok()?, digits.len() + 2))
}

fn leading_digits(text: &str) -> Option<&str> {
    let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
}

/// Words as a shell splits them: whitespace separates, single and double quotes group (and are
/// dropped), a backslash outside single quotes takes the next character as it is.
pub fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut started = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                started = true;
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (None, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn run(body: &str, arguments: &str) -> String {
        let values =
            Values { arguments, skill_dir: Path::new("/skills/review"), session_id: "s-1" };
        expand(body, &values)
    }

    #[test]
    fn arguments_whole_and_by_index() {
        assert_eq!(run("Fix $ARGUMENTS now.", "issue 12"), "Fix issue 12 now.");
        assert_eq!(
            run("From $ARGUMENTS[0] to $1; $ARGUMENTS[5] and $9 are empty.", r#"a "b c""#),
            "From a to b c;  and  are empty."
        );
        assert_eq!(run("$0$0", "x"), "xx");
    }

    #[test]
    fn unconsumed_arguments_are_appended() {
        assert_eq!(run("Review the diff.", "src/"), "Review the diff.\n\nARGUMENTS: src/\n");
        assert_eq!(run("Review the diff.\n", ""), "Review the diff.\n", "none: nothing added");
    }

    #[test]
    fn the_skill_dir_and_session_id_and_other_dollars() {
        assert_eq!(
            run("sh ${CLAUDE_SKILL_DIR}/run.sh ${CLAUDE_SESSION_ID} $HOME $ $", ""),
            "sh /skills/review/run.sh s-1 $HOME $ $"
        );
        assert_eq!(run("${CLAUDE_SKILL_DIR}", "x"), "/skills/review\n\nARGUMENTS: x\n");
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            split_words(r#" a  'b c' "d \"e\"" f\ g "" "#),
            ["a", "b c", "d \"e\"", "f g", ""]
        );
        assert!(split_words("   ").is_empty());
    }
}
