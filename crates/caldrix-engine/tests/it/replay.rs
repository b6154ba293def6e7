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

/// A reply forced through a session: checked first (a refusal computes nothing), then its rows
/// are held after the prompt's as a real generation's would be, with the model's own
/// log-probabilities; the next prompt extending it resumes from those rows; a OneOf is scored
/// for real but chooses the reply.
#[test]
fn a_reply_replayed_on_a_session_computes_and_holds_its_rows() {
    let model = support::smollm2();
    let _lock = support::lock();
    let mut session = support::session(model);
    let prompt = support::chat(model, "", "Name a colour.");
    let free = GenerateParams { logprobs: Some(2), ..with(Constraint::None) };

    let err =
        session
            .replay_on(0, &prompt, "x", &with(Constraint::OneOf(vec!["y".into()])), &mut |_| true);
    assert!(matches!(err, Err(EngineError::ScriptRefused { .. })), "{err:?}");
    assert!(session.held(0).is_empty(), "a refused reply computes no row");

    let mut streamed = Vec::new();
    let out = session
        .replay_on(0, &prompt, "Blue, like the sky.", &free, &mut |e| {
            if let caldrix_engine::Event::Token { bytes, .. } = e {
                streamed.extend_from_slice(bytes);
            }
            true
        })
        .unwrap();
    let reply = model.tokenize("Blue, like the sky.", Special::Plain);
    assert_eq!(
        (out.text.as_str(), out.stop, out.reused_tokens),
        ("Blue, like the sky.", StopReason::EndOfTurn, 0)
    );
    assert_eq!(String::from_utf8(streamed).unwrap(), out.text);
    assert_eq!(out.tokens, reply);
    assert_eq!(
        session.held(0),
        [prompt.as_slice(), reply.as_slice()].concat(),
        "prompt and reply rows"
    );
    let logprobs = out.logprobs.unwrap();
    assert_eq!(logprobs.len(), reply.len());
    assert!(logprobs.iter().all(|l| l.logprob < 0.0 && l.top.len() == 2), "the model's own scores");

    let mut next = session.held(0).to_vec();
    next.extend(model.tokenize("\nMore?", Special::Plain));
    let again =
        session.replay_on(0, &next, "Red.", &with(Constraint::None), &mut |_| true).unwrap();
    assert_eq!(again.reused_tokens, prompt.len() + reply.len(), "resumed after the first reply");

    let options: Vec<String> = ["red", "green", "blue"].iter().map(|s| s.to_string()).collect();
    let out = session
        .replay_on(0, &prompt, "green", &with(Constraint::OneOf(options)), &mut |_| true)
        .unwrap();
    let scores = out.one_of.unwrap();
    assert_eq!((out.text.as_str(), scores.chosen), ("green", 1));
    assert!(
        scores
            .logprobs
            .iter()
            .all(|&l| l < 0.0 && l > caldrix_engine::SCRIPTED_OTHER_OPTION_LOGPROB),
        "{scores:?}"
    );
}

/// The first token streams once the prompt is filled, before the rest of the reply is forced
/// (a client's time to first token is the fill's, as with a real generation): cancelled on it,
/// the replay holds the prompt's rows and nothing of the reply.
#[test]
fn a_replay_streams_its_first_token_before_forcing_the_rest() {
    let model = support::smollm2();
    let _lock = support::lock();
    let mut session = support::session(model);
    let prompt = support::chat(model, "", "Name a colour.");
    let params = GenerateParams { logprobs: Some(1), ..with(Constraint::None) };
    let mut events = 0;
    let out = session
        .replay_on(0, &prompt, "Blue, like the sky.", &params, &mut |_| {
            events += 1;
            false
        })
        .unwrap();
    let reply = model.tokenize("Blue, like the sky.", Special::Plain);
    assert_eq!((events, out.stop), (1, StopReason::Cancelled));
    assert_eq!(out.tokens, reply[..1]);
    assert_eq!(out.logprobs.map(|l| l.len()), Some(1));
    assert_eq!(session.held(0), prompt.as_slice(), "no reply row was computed");
}
