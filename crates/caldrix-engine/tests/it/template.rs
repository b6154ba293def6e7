use caldrix_engine::{GenerationPrompt, Message, Model};

use crate::support::{self, fixture};

/// Keep in step with CONVERSATION in tests/fixtures/make_reference.py.
fn conversation() -> Vec<Message> {
    vec![
        Message::new("system", "You are a careful assistant. Answer in one line."),
        Message::new("user", "What's 2 + 2? Use <b>bold</b> & \"quotes\"."),
        Message::new("assistant", "2 + 2 = **4** — «four»."),
        Message::new("user", "And 3 + 3?"),
    ]
}

/// The rendering equals Jinja2's, rendered the way transformers does, with and without the
/// generation prompt.
fn check(model: &Model, name: &str) {
    for (prompt, suffix) in
        [(GenerationPrompt::Add, "generation"), (GenerationPrompt::Omit, "plain")]
    {
        let expected = std::fs::read_to_string(fixture(&format!("{name}.{suffix}.txt"))).unwrap();
        let rendered = model.render(&conversation(), prompt).unwrap();
        assert_eq!(rendered, expected, "{name} {suffix}");
    }
}

#[test]
fn smollm2_renders_like_the_reference() {
    check(support::smollm2(), "smollm2");
}

#[test]
fn gemma3_renders_like_the_reference() {
    check(support::gemma3(), "gemma3");
}

#[test]
fn a_template_error_is_reported_not_panicked() {
    // Gemma's turns must alternate: a system message after the first turn is its own refusal
    // (two user messages in a row are rendered as one, `ChatTemplate`).
    let messages =
        [Message::new("user", "a"), Message::new("assistant", "b"), Message::new("system", "c")];
    let err = support::gemma3().render(&messages, GenerationPrompt::Add).unwrap_err();
    assert!(err.to_string().contains("must alternate"), "{err}");
}
