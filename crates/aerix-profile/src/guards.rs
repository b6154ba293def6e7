//! The checks a text must pass before it is committed on a profile branch, by `aerix profile
//! edit` and by `aerix tune`/`sync` alike: it keeps what code depends on (the placeholders of
//! `brief.md` and `verifier.md`, the verifier's verdict shape, every routing shape word), and
//! it is at most twice its embedded text's size (an overlay: twice its source's).

/// The verifier's verdict shape: each must stay in `verifier.md`, as a word.
pub const VERDICT_WORDS: [&str; 4] = ["verdict", "pass", "fail", "reason"];
/// Routing's answers: each must stay in `routing.md`, as a word.
pub const ROUTING_WORDS: [&str; 4] = ["answer", "edit", "investigate", "plan"];
/// The prompts whose `{{placeholders}}` code fills.
pub const PLACEHOLDER_PROMPTS: [&str; 2] = ["brief.md", "verifier.md"];

/// Why a text is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{path} drops the placeholder {{{{{placeholder}}}}}")]
    Placeholder { path: String, placeholder: String },
    #[error("verifier.md drops the verdict shape word \"{word}\"")]
    VerdictWord { word: &'static str },
    #[error("routing.md drops the shape word `{word}`")]
    RoutingWord { word: &'static str },
    #[error("{path} is {size} bytes, over twice its {of}'s {base} bytes")]
    TooLarge { path: String, size: usize, base: usize, of: &'static str },
}

/// The `{{name}}` placeholders of `text`, in order of first appearance.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let name = &after[..end];
        if !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !out.iter().any(|n| n == name)
        {
            out.push(name.to_owned());
        }
        rest = &after[end + 2..];
    }
    out
}

/// Whether `word` appears in `text` as a whole word (not inside a longer one).
fn has_word(text: &str, word: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// What code depends on in `path`'s text: every placeholder its embedded text has (for
/// `brief.md` and `verifier.md`), the verdict words (`verifier.md`), the routing words
/// (`routing.md`). Other paths pass.
pub fn check_shape(path: &str, text: &str, embedded: Option<&str>) -> Result<(), Refusal> {
    if PLACEHOLDER_PROMPTS.contains(&path) {
        for placeholder in placeholders(embedded.unwrap_or_default()) {
            if !text.contains(&format!("{{{{{placeholder}}}}}")) {
                return Err(Refusal::Placeholder { path: path.to_owned(), placeholder });
            }
        }
    }
    if path == "verifier.md"
        && let Some(word) = VERDICT_WORDS.into_iter().find(|w| !has_word(text, w))
    {
        return Err(Refusal::VerdictWord { word });
    }
    if path == "routing.md"
        && let Some(word) = ROUTING_WORDS.into_iter().find(|w| !has_word(text, w))
    {
        return Err(Refusal::RoutingWord { word });
    }
    Ok(())
}

/// The size guard: over twice `base` bytes is refused. `of` names the base: `embedded text`
/// for a built-in prompt, `source` for an overlay.
pub fn check_size(path: &str, text: &str, base: usize, of: &'static str) -> Result<(), Refusal> {
    if text.len() > base.saturating_mul(2) {
        return Err(Refusal::TooLarge { path: path.to_owned(), size: text.len(), base, of });
    }
    Ok(())
}

/// Every guard for a revision of `path`: the shape, then the size against `embedded` (a
/// built-in prompt) or `source` (an overlay: the text of the file it overlays). A path with
/// neither has no size guard.
pub fn check(
    path: &str,
    text: &str,
    embedded: Option<&str>,
    source: Option<&str>,
) -> Result<(), Refusal> {
    check_shape(path, text, embedded)?;
    if let Some(embedded) = embedded {
        check_size(path, text, embedded.len(), "embedded text")?;
    } else if let Some(source) = source {
        check_size(path, text, source.len(), "source")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BRIEF: &str = "{{brief}} / {{check}} / {{done_looks_like}} / {{check_turn}}";
    const VERIFIER: &str =
        "{{brief}} {{check}} {{summary}} {{files}}: \"verdict\": \"fail\" unless pass; \"reason\"";
    const ROUTING: &str = "- answer:\n- edit:\n- investigate:\n- plan:";

    #[test]
    fn placeholders_are_kept() {
        assert_eq!(placeholders(BRIEF), ["brief", "check", "done_looks_like", "check_turn"]);
        assert_eq!(check_shape("brief.md", &format!("{BRIEF} more"), Some(BRIEF)), Ok(()));
        let dropped = check_shape("brief.md", "{{brief}} {{check}} {{check_turn}}", Some(BRIEF));
        assert_eq!(
            dropped.unwrap_err().to_string(),
            "brief.md drops the placeholder {{done_looks_like}}"
        );
        let err =
            check_shape("verifier.md", "\"verdict\" pass fail reason {{brief}}", Some(VERIFIER));
        assert_eq!(err.unwrap_err().to_string(), "verifier.md drops the placeholder {{check}}");
    }

    #[test]
    fn the_verdict_shape_and_routing_words_are_kept() {
        assert_eq!(check_shape("verifier.md", VERIFIER, Some(VERIFIER)), Ok(()));
        let no_pass = VERIFIER.replace("pass", "passes");
        assert_eq!(
            check_shape("verifier.md", &no_pass, Some(VERIFIER)).unwrap_err().to_string(),
            "verifier.md drops the verdict shape word \"pass\""
        );
        assert_eq!(check_shape("routing.md", ROUTING, None), Ok(()));
        let no_plan = ROUTING.replace("plan", "planning");
        assert_eq!(
            check_shape("routing.md", &no_plan, None).unwrap_err().to_string(),
            "routing.md drops the shape word `plan`"
        );
        // Other prompts carry no shape words.
        assert_eq!(check_shape("system.md", "", Some("x")), Ok(()));
    }

    #[test]
    fn a_text_over_twice_its_base_is_refused() {
        assert_eq!(check("system.md", &"x".repeat(20), Some(&"y".repeat(10)), None), Ok(()));
        assert_eq!(
            check("system.md", &"x".repeat(21), Some(&"y".repeat(10)), None)
                .unwrap_err()
                .to_string(),
            "system.md is 21 bytes, over twice its embedded text's 10 bytes"
        );
        let path = "skills/user/r/SKILL.md";
        assert_eq!(
            check(path, "abcde", None, Some("ab")).unwrap_err().to_string(),
            "skills/user/r/SKILL.md is 5 bytes, over twice its source's 2 bytes"
        );
        assert_eq!(check(path, "abcd", None, Some("ab")), Ok(()));
    }
}
