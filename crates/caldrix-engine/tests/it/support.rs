use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use caldrix_engine::{
    GenerationPrompt, Message, Model, ModelParams, Session, SessionParams, Token,
};

pub use test_models::{GEMMA3, SMOLLM2, path as model_path};

fn load(file: &str) -> Model {
    // On the CPU in every build: the GPU build's own tests (gpu.rs) load theirs on the device.
    let params = ModelParams { gpu_layers: Some(0), ..ModelParams::default() };
    Model::load(&model_path(file), &params).expect("the test model loads")
}

pub fn smollm2() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| load(SMOLLM2))
}

pub fn gemma3() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| load(GEMMA3))
}

/// One model computation at a time: two cores, and llama.cpp uses both.
pub fn lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn session(model: &Model) -> Session<'_> {
    model
        .session(&SessionParams { n_ctx: Some(2048), threads: Some(2), ..SessionParams::default() })
        .expect("a 2048-token session opens")
}

/// A rendered and tokenized chat prompt ending with the assistant's header.
pub fn chat(model: &Model, system: &str, user: &str) -> Vec<Token> {
    let mut messages = Vec::new();
    if !system.is_empty() {
        messages.push(Message::new("system", system));
    }
    messages.push(Message::new("user", user));
    let text = model.render(&messages, GenerationPrompt::Add).expect("the template renders");
    model.tokenize_prompt(&text)
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}
