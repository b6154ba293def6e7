//! The sanitizer: secrets are redacted from everything ai-memory stores or sends to a model.
//!
//! `Clean` is the typed boundary: storage and model calls take `Clean`, and the only way to
//! make one is `sanitize`, so unsanitized text cannot reach them.

use std::sync::LazyLock;

use regex::Regex;

/// Text the sanitizer has passed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Clean(String);

impl Clean {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// The first `max` bytes (at a character boundary) of clean text: still clean.
    pub fn truncated(mut self, max: usize) -> Clean {
        if self.0.len() > max {
            let mut end = max;
            while !self.0.is_char_boundary(end) {
                end -= 1;
            }
            self.0.truncate(end);
        }
        self
    }
}

impl std::fmt::Display for Clean {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

struct Rule {
    re: Regex,
    /// The replacement: `REDACTED`, or a template keeping the non-secret parts.
    with: &'static str,
}

#[allow(clippy::expect_used, reason = "the patterns are constants, checked by the tests")]
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |re: &str, with: &'static str| Rule { re: Regex::new(re).expect("pattern"), with };
    vec![
        // Private keys, whole blocks.
        rule(
            r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY( BLOCK)?-----",
            "[REDACTED PRIVATE KEY]",
        ),
        // Passwords in URLs: keep scheme, user and host.
        rule(
            r"(?P<pre>[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(?P<at>@)",
            "${pre}[REDACTED]${at}",
        ),
        // Provider keys and tokens with a recognisable shape.
        rule(r"\bsk-ant-[A-Za-z0-9_-]{20,}", REDACTED),
        rule(r"\bsk-(proj-)?[A-Za-z0-9_-]{20,}", REDACTED),
        rule(r"\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}", REDACTED),
        rule(r"\bgithub_pat_[A-Za-z0-9_]{30,}", REDACTED),
        rule(r"\bglpat-[A-Za-z0-9_-]{20,}", REDACTED),
        rule(r"\bxox[abprs]-[A-Za-z0-9-]{10,}", REDACTED),
        rule(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", REDACTED),
        rule(r"\bAIza[0-9A-Za-z_-]{35}\b", REDACTED),
        rule(r"\bhf_[A-Za-z0-9]{30,}", REDACTED),
        rule(r"\bnpm_[A-Za-z0-9]{36}\b", REDACTED),
        rule(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", REDACTED),
        // `Authorization: Bearer …`
        rule(r"(?i)(?P<pre>\bbearer\s+)[A-Za-z0-9._~+/-]{12,}=*", "${pre}[REDACTED]"),
        // `password = …`, `API_KEY: …`, `"secret": "…"`: keep the key, drop the value.
        rule(
            r#"(?i)(?P<pre>\b[A-Za-z0-9_]*(password|passwd|secret|token|api[_-]?key|access[_-]?key)[A-Za-z0-9_]*["']?\s*[:=]\s*)(?P<q>["']?)[^\s"',;]{6,}"#,
            "${pre}${q}[REDACTED]",
        ),
    ]
});

/// Redacts secrets: API keys and tokens, private keys, passwords in URLs and in assignments.
pub fn sanitize(text: &str) -> Clean {
    let mut out = text.to_owned();
    for rule in RULES.iter() {
        if rule.re.is_match(&out) {
            out = rule.re.replace_all(&out, rule.with).into_owned();
        }
    }
    Clean(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_prose_is_kept() {
        let cases = [
            ("key sk-proj-abcdefghijklmnopqrstuvwx1234 here", "key [REDACTED] here"),
            ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "[REDACTED]"),
            ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "token [REDACTED]"),
            ("AKIAIOSFODNN7EXAMPLE is aws", "[REDACTED] is aws"),
            ("postgres://app:hunter2pass@db:5432/x", "postgres://app:[REDACTED]@db:5432/x"),
            ("Authorization: Bearer abc.def.ghijklmnop", "Authorization: Bearer [REDACTED]"),
            ("PASSWORD=correcthorse", "PASSWORD=[REDACTED]"),
            (r#"{"api_key": "0123456789abcdef"}"#, r#"{"api_key": "[REDACTED]"}"#),
            ("xoxb-1234567890-abcdef", "[REDACTED]"),
            ("use pnpm, not npm; the token is short", "use pnpm, not npm; the token is short"),
            ("password: hunter2", "password: [REDACTED]"),
            ("the password: see vault", "the password: see vault"),
        ];
        for (input, want) in cases {
            assert_eq!(sanitize(input).as_str(), want, "{input}");
        }
        let key = "a\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\nz";
        assert_eq!(sanitize(key).as_str(), "a\n[REDACTED PRIVATE KEY]\nz");
    }

    #[test]
    fn sanitizing_twice_changes_nothing_more() {
        let once = sanitize("PASSWORD=correcthorse and sk-proj-abcdefghijklmnopqrstuvwx1234");
        assert_eq!(sanitize(once.as_str()), once);
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        assert_eq!(sanitize("ééé").truncated(3).as_str(), "é");
    }
}
