//! A group's `matcher`: `*`, `""` or none match everything; letters, digits, `_`, `-`, spaces,
//! `,` and `|` alone are exact names; anything else is an unanchored regular expression.

use regex::Regex;

#[derive(Clone, Debug)]
pub enum Matcher {
    All,
    Names(Vec<String>),
    Regex(Regex),
}

impl Matcher {
    /// The matcher a group's `matcher` value makes; an invalid regular expression is an error
    /// with regex's own message.
    pub fn parse(text: Option<&str>) -> Result<Matcher, String> {
        let text = text.unwrap_or("").trim();
        if text.is_empty() || text == "*" {
            return Ok(Matcher::All);
        }
        let plain = text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' ' | ',' | '|'));
        if plain {
            let names = text
                .split([',', '|'])
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>();
            return Ok(if names.is_empty() { Matcher::All } else { Matcher::Names(names) });
        }
        Regex::new(text).map(Matcher::Regex).map_err(|e| {
            let first = e.to_string().lines().last().unwrap_or_default().trim().to_owned();
            format!("`{text}` is not a valid regular expression ({first})")
        })
    }

    /// As a file would write it (`""` for every value).
    pub fn text(&self) -> String {
        match self {
            Matcher::All => String::new(),
            Matcher::Names(names) => names.join("|"),
            Matcher::Regex(regex) => regex.as_str().to_owned(),
        }
    }

    pub fn matches(&self, value: &str) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Names(names) => names.iter().any(|n| n == value),
            Matcher::Regex(regex) => regex.is_match(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Matcher;

    fn check(matcher: Option<&str>, value: &str, expected: bool) {
        let m = Matcher::parse(matcher).unwrap();
        assert_eq!(m.matches(value), expected, "{matcher:?} against {value:?}");
    }

    #[test]
    fn everything_exact_names_and_regexes() {
        check(None, "startup", true);
        check(Some(""), "resume", true);
        check(Some("*"), "resume", true);
        check(Some("startup"), "startup", true);
        check(Some("startup"), "resume", false);
        check(Some("startup|resume"), "resume", true);
        check(Some("startup, compact"), "compact", true);
        check(Some("start"), "startup", false);
        // Not plain: an unanchored regular expression.
        check(Some("start.*"), "startup", true);
        check(Some("sum.?"), "resume", true);
        check(Some("^res"), "startup", false);
    }

    #[test]
    fn an_invalid_regex_is_named() {
        let e = Matcher::parse(Some("start(")).unwrap_err();
        assert!(e.starts_with("`start(` is not a valid regular expression"), "{e}");
    }
}
