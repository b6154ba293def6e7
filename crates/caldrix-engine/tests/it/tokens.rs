use caldrix_engine::{Special, Token};

use crate::support;

#[test]
fn tokenize_then_detokenize_is_byte_exact() {
    for model in [support::smollm2(), support::gemma3()] {
        let text = "fn main() {\n\tprintln!(\"héllo, 世界 🦀\");\n}  // trailing  spaces ";
        let tokens = model.tokenize(text, Special::Plain);
        assert!(tokens.len() > 10);
        assert_eq!(model.detokenize(&tokens), text.as_bytes(), "{}", model.architecture());
    }
}

#[test]
fn special_tokens_are_parsed_only_when_asked() {
    let model = support::smollm2();
    let marker = "<|im_start|>";
    let parsed = model.tokenize(marker, Special::Parse);
    assert_eq!(parsed.len(), 1, "the marker is one control token");
    assert_eq!(model.token_bytes(parsed[0]), marker.as_bytes());
    let plain = model.tokenize(marker, Special::Plain);
    assert!(plain.len() > 1, "as user text the marker is just characters: {plain:?}");
    assert_eq!(model.detokenize(&plain), marker.as_bytes());
}

#[test]
fn the_vocabulary_is_every_tokens_bytes() {
    let model = support::smollm2();
    let vocab = model.vocabulary();
    assert_eq!(vocab.len(), model.vocab_size());
    assert_eq!(vocab.len(), 49_152);
    let hello = model.tokenize("hello", Special::Plain);
    let joined: Vec<u8> = hello.iter().flat_map(|t| vocab[t.0 as usize].clone()).collect();
    assert_eq!(joined, b"hello");
    assert_eq!(vocab[model.end_of_turn().0 as usize], b"<|im_end|>");
}

#[test]
fn gemma_prompts_start_with_one_bos() {
    let model = support::gemma3();
    let tokens = support::chat(model, "", "hi");
    let bos = model.tokenize("<bos>", Special::Parse);
    assert_eq!(bos.len(), 1);
    assert_eq!(tokens[0], bos[0]);
    assert_ne!(tokens[1], bos[0], "the template wrote <bos> and none was added twice");
    assert_eq!(model.token_bytes(model.end_of_turn()), b"<end_of_turn>");
    let _: Token = tokens[0];
}
