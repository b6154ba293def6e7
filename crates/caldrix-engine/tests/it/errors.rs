//! Bad input is a named error, never a panic or an abort, and leaves the session usable.

use std::path::{Path, PathBuf};

use caldrix_engine::{
    Constraint, EngineError, GenerateParams, Model, ModelParams, SessionParams, Special,
};

use crate::support;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("caldrix-engine-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn load(path: &Path) -> EngineError {
    Model::load(path, &ModelParams::default()).unwrap_err()
}

/// A minimal GGUF v3 header: no tensors, the given architecture.
fn tiny_gguf(architecture: &str) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(0u64.to_le_bytes()); // tensors
    out.extend(1u64.to_le_bytes()); // keys
    let key = b"general.architecture";
    out.extend((key.len() as u64).to_le_bytes());
    out.extend(key);
    out.extend(8u32.to_le_bytes()); // string
    out.extend((architecture.len() as u64).to_le_bytes());
    out.extend(architecture.as_bytes());
    out
}

#[test]
fn model_files_that_cannot_load_say_why() {
    let dir = temp_dir("files");
    let missing = load(&dir.join("nope.gguf"));
    assert!(matches!(missing, EngineError::ModelNotFound { .. }), "{missing}");

    let zip = dir.join("model.gguf");
    std::fs::write(&zip, b"PK\x03\x04not a model at all").unwrap();
    let err = load(&zip);
    assert!(err.to_string().contains("not a GGUF file"), "{err}");

    let arch = dir.join("arch.gguf");
    std::fs::write(&arch, tiny_gguf("made-up-arch")).unwrap();
    let err = load(&arch);
    assert!(
        matches!(&err, EngineError::UnsupportedArchitecture { architecture, .. } if architecture == "made-up-arch"),
        "{err}"
    );

    // A real model cut in half: the header parses, the tensor data is missing.
    let real = std::fs::read(support::model_path(support::SMOLLM2)).unwrap();
    let half = dir.join("half.gguf");
    std::fs::write(&half, &real[..real.len() / 2]).unwrap();
    let err = load(&half);
    assert!(matches!(err, EngineError::Truncated { .. }), "{err}");
    assert!(err.to_string().contains("truncated"), "{err}");

    // Cut inside the metadata (the vocabulary comes early in the file).
    let head = dir.join("head.gguf");
    std::fs::write(&head, &real[..4096]).unwrap();
    let err = load(&head);
    assert!(err.to_string().contains("truncated"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_model_without_a_chat_template_says_so_when_asked_to_render() {
    // SmolLM2 with its `tokenizer.chat_template` key renamed (same length, so every offset of
    // the file stays valid): llama architecture, which has no fallback template.
    let mut bytes = std::fs::read(support::model_path(support::SMOLLM2)).unwrap();
    let key = b"tokenizer.chat_template";
    let at = bytes.windows(key.len()).position(|w| w == key).expect("the key is in the header");
    bytes[at + key.len() - 1] = b'X';
    let dir = temp_dir("template");
    let path = dir.join("no-template.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let model = Model::load(&path, &ModelParams::default()).unwrap();
    let err = model
        .render(
            &[caldrix_engine::Message::new("user", "hi")],
            caldrix_engine::GenerationPrompt::Add,
        )
        .unwrap_err();
    assert!(err.to_string().contains("no chat template"), "{err}");
    // Tokens and raw prompts still work without one.
    assert!(!model.tokenize("hi", Special::Plain).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_window_larger_than_the_models_is_refused() {
    let model = support::smollm2();
    let err = model
        .session(&SessionParams { n_ctx: Some(1 << 20), ..SessionParams::default() })
        .unwrap_err();
    assert!(
        matches!(err, EngineError::ContextTooLarge { requested: 1_048_576, trained: 8192 }),
        "{err}"
    );
}

#[test]
fn bad_constraints_and_prompts_are_refused_and_the_session_goes_on() {
    let model = support::smollm2();
    let prompt = support::chat(model, "", "Hi");
    let _guard = support::lock();
    let mut session = model
        .session(&SessionParams { n_ctx: Some(64), threads: Some(2), ..SessionParams::default() })
        .unwrap();
    let with =
        |constraint| GenerateParams { max_new_tokens: 4, constraint, ..GenerateParams::default() };

    let err = session
        .generate(&prompt, &with(Constraint::Json(serde_json::json!({"type": "strnig"}))))
        .unwrap_err();
    assert!(matches!(err, EngineError::BadSchema(_)), "{err}");
    let err =
        session.generate(&prompt, &with(Constraint::Json(serde_json::json!([1, 2])))).unwrap_err();
    assert!(matches!(err, EngineError::BadSchema(_)), "{err}");
    let err = session
        .generate(
            &prompt,
            &with(Constraint::Json(serde_json::json!({"type": "object", "required": 5}))),
        )
        .unwrap_err();
    assert!(matches!(err, EngineError::BadSchema(_)), "{err}");

    let err = session.generate(&prompt, &with(Constraint::OneOf(vec![]))).unwrap_err();
    assert!(matches!(err, EngineError::EmptyOneOf), "{err}");
    let err = session
        .generate(&prompt, &with(Constraint::OneOf(vec!["a".into(), "a".into()])))
        .unwrap_err();
    assert!(err.to_string().contains("listed twice"), "{err}");

    let long = model.tokenize(&"word ".repeat(100), Special::Plain);
    let err = session.generate(&long, &with(Constraint::None)).unwrap_err();
    assert!(long.len() > 64);
    assert!(
        matches!(err, EngineError::PromptTooLong { prompt, window: 64 } if prompt == long.len()),
        "{err}"
    );
    let err = session.evaluate(&long).unwrap_err();
    assert!(matches!(err, EngineError::PromptTooLong { .. }), "{err}");
    let err = session.generate(&[], &with(Constraint::None)).unwrap_err();
    assert!(matches!(err, EngineError::EmptyPrompt), "{err}");

    // After every refusal the session still generates.
    let ok = session
        .generate(&prompt, &with(Constraint::OneOf(vec!["yes".into(), "no".into()])))
        .unwrap();
    assert!(ok.text == "yes" || ok.text == "no");
    // A generation that reaches the window stops there instead of failing.
    let out = session
        .generate(&prompt, &GenerateParams { max_new_tokens: 1000, ..GenerateParams::default() })
        .unwrap();
    assert!(prompt.len() + out.tokens.len() <= 64);
}

#[test]
fn a_batch_smaller_than_the_sequences_is_refused_not_aborted() {
    let model = support::smollm2();
    let params =
        SessionParams { n_ctx: Some(256), batch: 8, sequences: 8, ..SessionParams::default() };
    let err = model.session(&params).unwrap_err();
    assert!(err.to_string().contains("smaller than the session's 12 sequences"), "{err}");
}
