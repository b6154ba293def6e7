//! Topics: what a statement is about (its action, content terms, negation, category and stack),
//! so statements said in different words group together without a model.

mod classify;
pub(crate) mod verbs;
pub(crate) mod words;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::Category;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topic {
    /// The leading action verb in its base form ("use" for uses/using/used/usar/...), when the
    /// sentence has one. `prefer` and `avoid` only frame another verb: "prefer to use X" is
    /// about using X, "avoid mocks" forbids mocks (see `negated`).
    pub action: Option<String>,
    /// The content words in order, normalized (see `words::normalize_term`).
    pub terms: Vec<String>,
    /// The statement forbids rather than prescribes; a ", not Y" comparison does not count.
    pub negated: bool,
    #[serde(with = "category_name")]
    pub category: Category,
    /// A stack tag (one of `STACK_TAGS`) the sentence's tools or languages imply.
    pub stack: Option<String>,
    /// A comparison ("X instead of Y", "X, not Y", "prefer X over Y"): its terms are the
    /// choices compared, so a later statement about either is on its topic.
    #[serde(default)]
    pub comparison: bool,
}

/// `Category` is stored by its folder name (the type itself has no serde impls).
mod category_name {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::Category;

    pub(super) fn serialize<S: Serializer>(c: &Category, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Category, D::Error> {
        let name = String::deserialize(d)?;
        Category::parse(&name).ok_or_else(|| D::Error::custom(format!("unknown category `{name}`")))
    }
}

impl Topic {
    /// From one sentence (used by sentence.rs).
    pub fn of(sentence: &str) -> Topic {
        let toks = words::tokens(sentence);
        let mut framed =
            words::phrase_mask(&toks, &[words::GENERAL, words::FRAME_PHRASES].concat());
        let mut action = (0..toks.len()).filter(|&i| !framed[i]).find_map(|i| {
            let base = verbs::verb_at(&toks, i)?;
            (!matches!(base, "prefer" | "avoid")).then_some((i, base))
        });
        // "faça push", "fazer commit": the verb after a Portuguese "fazer" is the action.
        if let Some((i, "make")) = action
            && toks[i].text.starts_with("fa")
            && let Some(next) = verbs::verb_at(&toks, i + 1)
        {
            framed[i] = true;
            action = Some((i + 1, next));
        }
        let terms = toks
            .iter()
            .enumerate()
            .filter(|&(i, t)| {
                !framed[i]
                    && action.is_none_or(|(a, _)| a != i)
                    && (t.code
                        || !words::is_noise(&t.text)
                        || (t.text == "just" && classify::tool_word_counts(&toks, i)))
            })
            .map(|(_, t)| words::normalize_term(&t.text))
            .collect();
        Topic {
            action: action.map(|(_, b)| b.to_owned()),
            terms,
            negated: words::negated(&toks, &framed),
            category: classify::category(&toks, &framed),
            stack: classify::stack(&toks),
            comparison: crate::sentence::is_comparison(&toks),
        }
    }

    /// "The same thing": same action, same terms in the same order, same negation.
    pub fn same_thing(&self, other: &Topic) -> bool {
        self.action == other.action && self.terms == other.terms && self.negated == other.negated
    }

    /// "The same topic" (a later ruling on it replaces the earlier): same action (or either has
    /// none) and term sets with Jaccard similarity >= 0.5, or a comparison naming the other's
    /// first term among its choices ("use bun instead of pnpm" rules on "use pnpm, not npm").
    pub fn same_topic(&self, other: &Topic) -> bool {
        if self.action.is_some() && other.action.is_some() && self.action != other.action {
            return false;
        }
        let compares = |x: &Topic, y: &Topic| {
            x.comparison && y.terms.first().is_some_and(|first| x.terms.contains(first))
        };
        if compares(self, other) || compares(other, self) {
            return true;
        }
        let a: BTreeSet<&str> = self.terms.iter().map(String::as_str).collect();
        let b: BTreeSet<&str> = other.terms.iter().map(String::as_str).collect();
        let union = a.union(&b).count();
        if union == 0 {
            // Nothing to compare but the verb: only an explicit, equal one makes a topic.
            return self.action.is_some() && self.action == other.action;
        }
        a.intersection(&b).count() * 2 >= union
    }

    /// A stable key of `same_thing`: `[!]action term term...`, `-` standing for no action (so
    /// "use pnpm" with no action, terms `use pnpm`, cannot collide with action `use`).
    pub fn key(&self) -> String {
        let mut key = String::new();
        if self.negated {
            key.push('!');
        }
        key.push_str(self.action.as_deref().unwrap_or("-"));
        for t in &self.terms {
            key.push(' ');
            key.push_str(t);
        }
        key
    }

    /// A file slug: the first three terms joined with `-`, only `[a-z0-9-]`, at most 48 bytes;
    /// "entry" when nothing is left.
    pub fn slug(&self) -> String {
        let joined = self.terms.iter().take(3).map(String::as_str).collect::<Vec<_>>().join("-");
        let mut slug = String::new();
        for c in joined.chars() {
            let c = if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' };
            if c != '-' || !(slug.is_empty() || slug.ends_with('-')) {
                slug.push(c);
            }
        }
        slug.truncate(48);
        let slug = slug.trim_matches('-');
        if slug.is_empty() { "entry".to_owned() } else { slug.to_owned() }
    }
}

/// Phrases that only scope a statement, dropped from either end of its digest line.
const SCOPE: &[&str] = &[
    "from now on",
    "going forward",
    "in all my projects",
    "in all of my projects",
    "across all my projects",
    "across all projects",
    "across projects",
    "in every project",
    "in every repo",
    "in all my repos",
    "in all my repositories",
    "everywhere",
    "by default",
    "please",
    "a partir de agora",
    "de agora em diante",
    "em todos os meus projetos",
    "em todos os projetos",
    "em qualquer projeto",
    "em todo projeto",
    "em todo lugar",
    "por padrao",
    "por favor",
];

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '\'' || c == '\u{2019}'
}

/// `s` without `phrase` at its start (whole words, case- and accent-insensitive); `None` when it
/// is not there or nothing would be left.
fn strip_lead<'a>(s: &'a str, phrase: &str) -> Option<&'a str> {
    let mut rest = s;
    for w in phrase.split(' ') {
        rest = rest.trim_start();
        let end = rest.find(|c: char| !is_word_char(c)).unwrap_or(rest.len());
        if end == 0 || words::fold(&rest[..end]) != w {
            return None;
        }
        rest = &rest[end..];
    }
    (!rest.trim().is_empty()).then_some(rest)
}

/// `s` without `phrase` at its end (see `strip_lead`).
fn strip_trail<'a>(s: &'a str, phrase: &str) -> Option<&'a str> {
    let mut rest = s;
    for w in phrase.split(' ').rev() {
        rest = rest.trim_end();
        let start = rest
            .char_indices()
            .rev()
            .find(|&(_, c)| !is_word_char(c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        if start == rest.len() || words::fold(&rest[start..]) != w {
            return None;
        }
        rest = &rest[..start];
    }
    (!rest.trim().is_empty()).then_some(rest)
}

/// The line the digest shows for a statement: scope-only phrases dropped from either end, the
/// first letter capitalized, one closing `.` (a `!` or `;` becomes `.`).
pub fn digest_line(sentence: &str) -> String {
    let mut s = sentence.trim();
    loop {
        let before = s.len();
        s = s.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':'));
        s = s.trim_end_matches(|c: char| {
            c.is_whitespace() || matches!(c, ',' | ';' | ':' | '.' | '!' | '?')
        });
        for p in SCOPE {
            if let Some(rest) = strip_lead(s, p) {
                s = rest;
            }
            if let Some(rest) = strip_trail(s, p) {
                s = rest;
            }
        }
        if s.len() == before {
            break;
        }
    }
    let mut chars = s.chars();
    let mut line: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    line.push('.');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Topic {
        Topic::of(s)
    }

    #[test]
    fn of_takes_the_leading_verb_and_normalized_terms() {
        let topic = t("I always use pnpm.");
        assert_eq!(topic.action.as_deref(), Some("use"));
        assert_eq!(topic.terms, ["pnpm"]);
        assert!(!topic.negated);
        let topic = t("Keep integration tests in tests/suite");
        assert_eq!(topic.action.as_deref(), Some("keep"));
        assert_eq!(topic.terms, ["integration", "test", "tests/suite"]);
        let topic = t("Prefiro usar tabs em vez de espaços");
        assert_eq!(topic.action.as_deref(), Some("use"));
        assert_eq!(topic.terms, ["tab", "espaco"]);
        let topic = t("From now on, always run cargo fmt before committing");
        assert_eq!(topic.action.as_deref(), Some("run"));
        assert_eq!(topic.terms, ["cargo", "fmt", "committing"]);
        let topic = t("Nunca faça push direto na main!");
        assert_eq!(topic.action.as_deref(), Some("push"));
        assert_eq!(topic.terms, ["direto", "main"]);
        let topic = t("In all my projects, prefer node.js over deno and c++ over c");
        assert_eq!(topic.action, None);
        assert_eq!(topic.terms, ["node.js", "deno", "c++", "c"]);
    }

    #[test]
    fn negation_is_the_sentence_forbidding_not_a_comparison() {
        assert!(t("never use pnpm").negated);
        assert!(t("Don't add comments").negated);
        assert!(t("Avoid mocks").negated);
        assert_eq!(t("Avoid mocks").action, None);
        assert!(t("Nunca use npm").negated);
        assert!(!t("Use pnpm, not npm.").negated);
        assert!(!t("Use bun instead of pnpm").negated);
    }

    #[test]
    fn same_thing_needs_the_same_words_and_negation() {
        assert!(t("use pnpm").same_thing(&t("I always use pnpm")));
        assert!(t("use pnpm").same_thing(&t("Using pnpm everywhere.")));
        assert!(!t("use pnpm").same_thing(&t("never use pnpm")));
        assert!(!t("use pnpm").same_thing(&t("run pnpm")));
    }

    #[test]
    fn same_topic_groups_rulings_on_one_subject() {
        let pnpm = t("use pnpm");
        assert!(pnpm.same_topic(&t("use bun instead of pnpm")));
        assert!(pnpm.same_topic(&t("never use pnpm")));
        assert!(t("Avoid mocks").same_topic(&t("use mocks")));
        assert!(
            !t("keep integration tests in tests/suite")
                .same_topic(&t("keep unit tests next to the code"))
        );
        assert!(!pnpm.same_topic(&t("run pnpm")));
    }

    #[test]
    fn key_is_equal_exactly_when_same_thing() {
        let all = [
            "use pnpm",
            "I always use pnpm",
            "never use pnpm",
            "use bun instead of pnpm",
            "Prefer pnpm",
            "run pnpm",
            "Avoid pnpm",
        ]
        .map(t);
        assert_eq!(all[0].key(), "use pnpm");
        assert_eq!(all[2].key(), "!use pnpm");
        for a in &all {
            for b in &all {
                assert_eq!(a.key() == b.key(), a.same_thing(b), "{} / {}", a.key(), b.key());
            }
        }
        let bare =
            Topic { action: None, terms: vec!["use".into(), "pnpm".into()], ..all[0].clone() };
        assert_ne!(bare.key(), all[0].key());
    }

    #[test]
    fn slug_is_three_terms_in_safe_characters() {
        assert_eq!(t("Use pnpm, not npm.").slug(), "pnpm-npm");
        assert_eq!(
            t("Keep integration tests in tests/suite").slug(),
            "integration-test-tests-suite"
        );
        assert_eq!(t("Always use it").slug(), "entry");
        let long = Topic { terms: vec!["a".repeat(60)], ..t("x") };
        assert_eq!(long.slug().len(), 48);
    }

    #[test]
    fn digest_line_drops_scope_phrases_and_ends_with_a_period() {
        assert_eq!(
            digest_line("in all my projects, use pnpm instead of npm"),
            "Use pnpm instead of npm."
        );
        assert_eq!(
            digest_line("From now on, always run cargo fmt before committing"),
            "Always run cargo fmt before committing."
        );
        assert_eq!(digest_line("please use tabs by default!"), "Use tabs.");
        assert_eq!(
            digest_line("A partir de agora, use pnpm em todos os meus projetos."),
            "Use pnpm."
        );
        assert_eq!(digest_line("Use pnpm, not npm."), "Use pnpm, not npm.");
        assert_eq!(digest_line("Everywhere."), "Everywhere.");
        for s in [
            "From now on, never use npm",
            "use pnpm in all my projects",
            "por favor, rode os testes",
        ] {
            assert!(t(&digest_line(s)).same_thing(&t(s)), "{s}");
        }
    }

    #[test]
    fn category_and_stack_of_examples() {
        let pnpm = t("Use pnpm, not npm.");
        assert_eq!(pnpm.category, Category::Tools);
        assert_eq!(pnpm.stack.as_deref(), Some("javascript"));
        assert_eq!(t("Keep integration tests in tests/suite").category, Category::Testing);
        assert_eq!(t("Prefiro usar tabs em vez de espaços").category, Category::Style);
        assert_eq!(t("Always answer briefly").stack, None);
    }

    #[test]
    fn topics_round_trip_through_json_with_the_category_name() {
        let topic = t("Use pnpm, not npm.");
        let json = serde_json::to_string(&topic).unwrap();
        assert!(json.contains("\"category\":\"tools\""), "{json}");
        assert_eq!(serde_json::from_str::<Topic>(&json).unwrap(), topic);
    }
}
