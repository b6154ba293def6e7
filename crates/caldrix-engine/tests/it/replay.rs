//! Scripted replies: the model's tokenizer, the request's constraint, no KV work.

use caldrix_engine::{Constraint, EngineError, GenerateParams, Special, StopReason};

use crate::support::{self, fixture};

fn with(constraint: Constraint) -> GenerateParams {
    GenerateParams { max_new_tokens: 100, constraint, ..GenerateParams::default() }
}

#[test]
fn a_reply_is_checked_against_the_constraint() {
    let model = support::smollm2();
    let prompt = support::chat(model, "", "hi");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("turn-schema.json")).unwrap())
            .unwrap();
    let turn = r#"{"thought":"Read it.","calls":[{"tool":"read","input":{"path":"src/lib.rs"}}]}"#;
    let out = model.replay(&prompt, turn, &with(Constraint::Json(schema.clone()))).unwrap();
    assert_eq!(out.text, turn);
    assert_eq!(out.stop, StopReason::Complete);
    assert_eq!(out.tokens, model.tokenize(turn, Special::Plain));
    assert_eq!(out.prompt_tokens, prompt.len());

    for bad in [
        r#"{"thought":"x","calls":[{"tool":"rm","input":{}}]}"#,
        r#"{"thought":"x","final":"done"} "#,
        r#"{"thought":"x""#,
        "not json",
    ] {
        let err = model.replay(&prompt, bad, &with(Constraint::Json(schema.clone()))).unwrap_err();
        assert!(matches!(err, EngineError::ScriptRefused { .. }), "{bad}: {err}");
    }

    let options: Vec<String> = ["answer", "edit"].iter().map(|s| s.to_string()).collect();
    let out = model.replay(&prompt, "edit", &with(Constraint::OneOf(options.clone()))).unwrap();
    let scores = out.one_of.unwrap();
    assert_eq!(scores.chosen, 1);
    assert_eq!(scores.logprobs, [caldrix_engine::SCRIPTED_OTHER_OPTION_LOGPROB, 0.0]);
    let err = model.replay(&prompt, "plan", &with(Constraint::OneOf(options))).unwrap_err();
    assert!(err.to_string().contains("none of the options"), "{err}");

    let long = model
        .replay(
            &prompt,
            "one two three four five",
            &GenerateParams { max_new_tokens: 2, ..with(Constraint::None) },
        )
        .unwrap();
    assert_eq!((long.tokens.len(), long.stop), (2, StopReason::MaxTokens));
}
