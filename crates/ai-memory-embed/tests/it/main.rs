//! all-MiniLM-L6-v2 converted and run through llama.cpp, against a reference computed without
//! llama.cpp (`scripts/embed-reference`: Hugging Face's tokenizer and a NumPy forward pass).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::path::PathBuf;
use std::sync::OnceLock;

use ai_memory_embed::{Encoder, convert, dot};

fn encoder() -> &'static Encoder {
    static ENCODER: OnceLock<(tempfile::TempDir, Encoder)> = OnceLock::new();
    &ENCODER
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let gguf = dir.path().join("minilm.gguf");
            convert::convert(&test_models::minilm_dir(), &gguf).unwrap();
            let encoder = Encoder::load(&gguf, None).unwrap();
            (dir, encoder)
        })
        .1
}

#[derive(serde::Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
    vector: Vec<f32>,
}

fn reference() -> Reference {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/reference.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn the_converted_model_matches_the_reference_encoder() {
    let e = encoder();
    assert_eq!(e.dimension(), 384);
    for case in reference().cases.iter().filter(|c| c.ids.len() <= ai_memory_embed::QUERY_TOKENS) {
        let v = e.query(&case.text).unwrap();
        let cos = dot(&v, &case.vector);
        // Q8_0 matrices against the reference's f64: near, never equal.
        assert!(cos > 0.999, "{:?}: cosine {cos} with the reference", case.text);
    }
}

#[test]
fn a_long_page_is_several_unit_windows_and_an_empty_one_none() {
    let e = encoder();
    let long = reference().cases.into_iter().find(|c| c.ids.len() == 256).unwrap();
    let windows = e.page(&long.text).unwrap();
    // 256 reference tokens hold 254 of the text, and the text has more: windows of 126
    // with 16 shared, at least two.
    assert!(windows.len() >= 2, "{} windows", windows.len());
    for w in &windows {
        assert!((dot(w, w) - 1.0).abs() < 1e-4);
    }
    assert!(e.page("").unwrap().is_empty());
}

#[test]
fn meaning_not_words_decides_nearness() {
    let e = encoder();
    let car = e.query("I need to get my car repaired").unwrap();
    let auto = e.query("The automobile mechanic fixed the engine").unwrap();
    let fruit = e.query("Bananas and apples are sold at the market").unwrap();
    assert!(
        dot(&car, &auto) > dot(&car, &fruit) + 0.2,
        "{} vs {}",
        dot(&car, &auto),
        dot(&car, &fruit)
    );
}

#[test]
fn a_file_that_is_no_model_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("x.gguf");
    std::fs::write(&bad, b"not a model").unwrap();
    let err = Encoder::load(&bad, Some(1)).unwrap_err().to_string();
    assert!(err.contains("x.gguf"), "{err}");
    let err = convert::convert(dir.path(), &dir.path().join("y.gguf")).unwrap_err().to_string();
    assert!(err.contains("config.json"), "{err}");
}
