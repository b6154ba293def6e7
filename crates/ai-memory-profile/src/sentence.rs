//! Harvest: the preference statements in a user's own prompt, zero-LLM. Text the user did not
//! write (harness tags, pasted ai-memory snippets, code) is cut out first; a sentence then counts
//! when it carries a preference marker ("always", "prefiro", "instead of", ...) and names an
//! action or a comparison, so "the build always fails" is not mistaken for a rule.

mod blocks;
mod split;

use serde::{Deserialize, Serialize};

use crate::topic::Topic;
use crate::topic::verbs;
use crate::topic::words::{self, Token};
use blocks::Part;

/// Longer sentences are skipped rather than cut: a cut rule would say something else.
pub const MAX_STATEMENT_BYTES: usize = 300;

/// A preference-shaped sentence from the user's own words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    /// The user's sentence, verbatim (trimmed, whitespace runs inside kept as written, at most
    /// 300 bytes; longer sentences are skipped, not cut). A closing `.`/`!` is kept, a `;` not.
    pub text: String,
    /// Explicitly scoped beyond the project ("in all my projects", ...).
    pub general: bool,
    /// The topic description (see topic.rs).
    pub topic: Topic,
    /// The line an LLM classifier restated it as (the digest shows it); `None` on the zero-LLM
    /// path, where the line is the sentence itself without its scope phrases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// The existing entry an LLM classifier said it is about (its path); the merge step then
    /// decides whether it changes the entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
}

impl Statement {
    /// The line an entry standing on this statement shows.
    pub fn line(&self) -> String {
        match &self.line {
            Some(l) => l.clone(),
            None => crate::topic::digest_line(&self.text),
        }
    }
}

/// Why a sentence or block was skipped (for tests and `profile review`-style diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    Question,
    Code,
    AgentText,
    Injected,
    NoMarker,
    NoAction,
    TooLong,
}

/// Every preference statement of a prompt, in order.
pub fn statements(prompt: &str) -> Vec<Statement> {
    scan(prompt).into_iter().filter_map(Result::ok).collect()
}

/// The same, with each skipped sentence (or removed block) and its reason, in prompt order.
pub fn scan(prompt: &str) -> Vec<Result<Statement, (String, Skip)>> {
    let mut out = Vec::new();
    for part in blocks::parts(prompt) {
        match part {
            Part::Removed(text, why) => out.push(Err((text, why))),
            Part::Text(text) => {
                for s in split::sentences(&text) {
                    out.push(classify(&s, true).map_err(|why| (s, why)));
                }
            }
        }
    }
    out
}

/// The looser filter that feeds an LLM classifier: every sentence of the user's own text that is
/// not a question, code, agent text or too long, and names an action or is a comparison, with or
/// without a preference marker (the model catches phrasing the word lists miss).
pub fn loose(prompt: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in blocks::parts(prompt) {
        if let Part::Text(text) = part {
            out.extend(split::sentences(&text).into_iter().filter(|s| classify(s, false).is_ok()));
        }
    }
    out
}

/// The user's own text of a prompt: harness-injected blocks, instruction files and
/// ai-memory's pasted blocks removed (what a handoff repeats of the prompt).
pub fn user_text(prompt: &str) -> String {
    let mut out = String::new();
    for part in blocks::parts(prompt) {
        if let Part::Text(text) = part {
            out.push_str(&text);
        }
    }
    out
}

/// Whether `sentence` is explicitly scoped beyond its project ("in all my projects",
/// "everywhere", "em todos os meus projetos", ...): the only thing that lets a statement skip
/// `min_projects`, whoever classified it (a model's "general" alone does not).
pub fn scoped_beyond_project(sentence: &str) -> bool {
    words::has_phrase(&words::tokens(sentence), words::GENERAL)
}

/// A curated page's rule line (a page summary or first prose line from `_rules/`,
/// `decisions/`, ...): a statement without needing a preference marker, but still refused when
/// it is a question, code or agent text, too long, or names no action and is no comparison.
/// `general` is false: a page's scope is the page's business.
pub fn rule_statement(line: &str) -> Option<Statement> {
    let line = line.trim().trim_start_matches('#').trim();
    let line = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")).unwrap_or(line).trim();
    if line.is_empty() {
        return None;
    }
    classify(line, false).ok()
}

fn is_question(s: &str) -> bool {
    s.trim_end().chars().rev().take_while(|c| matches!(c, '?' | '!' | '.')).any(|c| c == '?')
}

/// The checks in order: the sentence's shape, then marker, action, length (too long is reported
/// only for what would otherwise have counted).
fn classify(s: &str, need_marker: bool) -> Result<Statement, Skip> {
    if is_question(s) {
        return Err(Skip::Question);
    }
    if split::is_code(s) {
        return Err(Skip::Code);
    }
    if split::is_agent_text(s) {
        return Err(Skip::AgentText);
    }
    let toks = words::tokens(s);
    if need_marker && !has_marker(&toks) {
        return Err(Skip::NoMarker);
    }
    if !has_action(&toks) && !is_comparison(&toks) {
        return Err(Skip::NoAction);
    }
    if s.len() > MAX_STATEMENT_BYTES {
        return Err(Skip::TooLong);
    }
    Ok(Statement {
        text: s.to_owned(),
        general: need_marker && words::has_phrase(&toks, words::GENERAL),
        topic: Topic::of(s),
        line: None,
        entry: None,
    })
}

/// A ", not Y" (", não Y") comparison at token `i`.
fn comma_not(toks: &[Token], i: usize) -> bool {
    let t = &toks[i];
    !t.code && t.after_comma && matches!(t.text.as_str(), "not" | "nao")
}

/// "don't"/"do not"/"não" followed by a verb (an optional "ever" between): a prohibition, where a
/// bare "don't know" is not.
fn forbids_a_verb(toks: &[Token], i: usize) -> bool {
    let after = match toks[i].text.as_str() {
        "don't" | "dont" | "nao" => i + 1,
        "do" if toks.get(i + 1).is_some_and(|n| n.text == "not") => i + 2,
        _ => return false,
    };
    let after = if toks.get(after).is_some_and(|t| t.text == "ever") { after + 1 } else { after };
    !toks[i].code && verbs::verb_at(toks, after).is_some()
}

fn has_marker(toks: &[Token]) -> bool {
    words::has_phrase(toks, words::MARKER_WORDS)
        || words::has_phrase(toks, words::MARKER_PHRASES)
        || words::has_phrase(toks, words::GENERAL)
        || (0..toks.len()).any(|i| forbids_a_verb(toks, i) || comma_not(toks, i))
}

fn has_action(toks: &[Token]) -> bool {
    (0..toks.len()).any(|i| verbs::verb_at(toks, i).is_some())
}

const PREFER_WORDS: &[&str] =
    &["prefer", "prefers", "preferred", "preferring", "prefiro", "preferimos", "prefira"];

/// "instead of", "rather than", "em vez de", "ao invés de", ", not Y", or "over" after prefer.
pub(crate) fn is_comparison(toks: &[Token]) -> bool {
    let prefer_at = toks.iter().position(|t| !t.code && PREFER_WORDS.contains(&t.text.as_str()));
    words::has_phrase(toks, words::COMPARISONS)
        || (0..toks.len()).any(|i| comma_not(toks, i))
        || prefer_at.is_some_and(|p| toks.iter().skip(p + 1).any(|t| t.text == "over"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(prompt: &str) -> Vec<String> {
        statements(prompt).into_iter().map(|s| s.text).collect()
    }

    fn skip(sentence: &str) -> Option<Skip> {
        match scan(sentence).as_slice() {
            [Err((_, why))] => Some(*why),
            _ => None,
        }
    }

    #[test]
    fn user_text_drops_what_a_harness_injected() {
        let prompt =
            "<system-reminder>\nalways use npm\n</system-reminder>\nFix the login redirect.";
        assert_eq!(user_text(prompt).trim(), "Fix the login redirect.");
        assert_eq!(user_text("# AGENTS.md instructions for /w\n\nUse npm.").trim(), "");
    }

    #[test]
    fn every_skip_reason() {
        assert_eq!(skip("Why do you always use npm?"), Some(Skip::Question));
        assert_eq!(skip("$ always use npm install"), Some(Skip::Code));
        assert_eq!(skip("```\nalways use npm\n```"), Some(Skip::Code));
        assert_eq!(skip("**Always** use pnpm."), Some(Skip::AgentText));
        assert_eq!(skip("Always use pnpm (src/main.rs:42)."), Some(Skip::AgentText));
        assert_eq!(skip("<system-reminder>always use npm</system-reminder>"), Some(Skip::Injected));
        assert_eq!(skip("Use pnpm here."), Some(Skip::NoMarker));
        assert_eq!(skip("the build always fails"), Some(Skip::NoAction));
        let long = format!("Always use pnpm {}.", "and keep it tidy ".repeat(20));
        assert_eq!(skip(&long), Some(Skip::TooLong));
        let exactly = format!("Always use {}", "x".repeat(MAX_STATEMENT_BYTES - 11));
        assert_eq!(exactly.len(), MAX_STATEMENT_BYTES);
        assert_eq!(texts(&exactly), [exactly.as_str()]);
    }

    #[test]
    fn statements_are_the_preference_sentences_in_order() {
        let prompt = "Fix the login bug. Always use pnpm!\n- Use pnpm, not npm.\nWhy is it slow?";
        assert_eq!(texts(prompt), ["Always use pnpm!", "Use pnpm, not npm."]);
        let s = &statements("Use pnpm, not npm.")[0];
        assert_eq!(s.topic, Topic::of("Use pnpm, not npm."));
        assert!(!s.general);
    }

    #[test]
    fn injected_blocks_do_not_count_but_the_users_words_around_them_do() {
        let digest =
            "> 🧭 ai-memory: your profile\n> - Always use npm.\n\nFrom now on, always use pnpm.";
        assert_eq!(texts(digest), ["From now on, always use pnpm."]);
        let heading = "# ai-memory: profile\n- Always use npm.\n\nAlways use pnpm.";
        assert_eq!(texts(heading), ["Always use pnpm."]);
        let markers = "<!-- ai-memory:profile:start -->\n- Always use npm.\n<!-- ai-memory:profile:end -->\nAlways use pnpm.";
        assert_eq!(texts(markers), ["Always use pnpm."]);
        let tags = "<ai-memory-context>\nAlways use npm.\n</ai-memory-context>\n<command-name>/x</command-name>Always use pnpm.";
        assert_eq!(texts(tags), ["Always use pnpm."]);
        assert_eq!(
            texts("Always use pnpm.\n<system-reminder>\nAlways use npm."),
            ["Always use pnpm."]
        );
        assert!(texts("# AGENTS.md instructions for /repo\n\nAlways use pnpm.").is_empty());
        assert!(
            texts("<user_instructions>\nAlways use pnpm.\n</user_instructions>\nAlways use bun.")
                .is_empty()
        );
        assert!(texts("Like this:\n\n    always use npm\n").is_empty());
    }

    #[test]
    fn english_markers() {
        for s in [
            "Always use pnpm.",
            "Never commit to main.",
            "I prefer tabs over spaces.",
            "Use bun instead of npm.",
            "Write tests rather than prints.",
            "Don't use npm.",
            "Do not add comments.",
            "Dont push on Fridays.",
            "From now on, run the linter.",
            "By default, use tabs.",
            "I usually squash commits.",
            "I normally rebase.",
            "Use pnpm in all my projects.",
            "Use pnpm in every project.",
            "Pin versions across projects.",
            "Use tabs everywhere.",
            "Use pnpm in all my repos.",
            "Use pnpm, not npm.",
        ] {
            assert_eq!(texts(s), [s], "{s}");
        }
        assert_eq!(skip("I don't know the answer."), Some(Skip::NoMarker));
        assert_eq!(skip("Use the preferences page."), Some(Skip::NoMarker));
    }

    #[test]
    fn portuguese_markers() {
        for s in [
            "Sempre use pnpm.",
            "Nunca faça commit na main.",
            "Prefiro usar tabs em vez de espaços.",
            "Preferimos rodar os testes antes.",
            "Prefira pnpm ao invés de npm.",
            "Não use npm.",
            "Nao usar yarn.",
            "A partir de agora, rode o linter.",
            "Por padrão, use tabs.",
            "Eu costumo usar pnpm.",
            "Use pnpm em todos os meus projetos.",
            "Use pnpm em qualquer projeto.",
            "Use tabs em todo lugar.",
        ] {
            assert_eq!(texts(s), [s], "{s}");
        }
    }

    #[test]
    fn general_only_when_explicitly_scoped_beyond_the_project() {
        let general = |s: &str| statements(s).first().map(|st| st.general);
        for s in [
            "In all my projects, use pnpm.",
            "Use pnpm in all of my projects.",
            "Use pnpm across all projects.",
            "Use tabs everywhere.",
            "Use pnpm in all my repositories.",
            "Use pnpm in every repo.",
            "Use pnpm em todos os projetos.",
            "Use tabs em todo projeto.",
        ] {
            assert_eq!(general(s), Some(true), "{s}");
        }
        for s in
            ["Always use pnpm.", "Never use npm.", "By default, use tabs.", "From now on, use bun."]
        {
            assert_eq!(general(s), Some(false), "{s}");
            assert!(!scoped_beyond_project(s), "{s}");
        }
        assert!(scoped_beyond_project("We should lint with ruff in all my projects."));
    }

    #[test]
    fn an_action_or_a_comparison_is_needed() {
        assert_eq!(skip("the build always fails"), Some(Skip::NoAction));
        assert_eq!(skip("Tests always pass."), Some(Skip::NoAction));
        assert_eq!(texts("Always use pnpm"), ["Always use pnpm"]);
        assert_eq!(texts("pnpm, not npm."), ["pnpm, not npm."]);
        assert_eq!(texts("Tabs em vez de espaços."), ["Tabs em vez de espaços."]);
        assert_eq!(skip("Why do you always use npm?"), Some(Skip::Question));
    }

    #[test]
    fn rule_statements_need_no_marker_but_still_an_action() {
        let rule = rule_statement("We deploy from main only.");
        assert_eq!(rule.as_ref().map(|r| r.text.as_str()), Some("We deploy from main only."));
        assert!(rule.is_some_and(|r| !r.general && r.topic.action.as_deref() == Some("deploy")));
        assert_eq!(
            rule_statement("- Squash commits before merging"),
            rule_statement("Squash commits before merging")
        );
        assert!(rule_statement("Status: Accepted").is_none());
        assert!(rule_statement("Should we deploy from main?").is_none());
        assert!(rule_statement("**Decision:** deploy from main").is_none());
        assert!(rule_statement("npm install && npm test").is_none());
        assert!(rule_statement("").is_none());
    }
}
