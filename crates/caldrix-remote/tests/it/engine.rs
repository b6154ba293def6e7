//! Against the real engine: llama.cpp's `llama-server` (built by scripts/fetch-engine) serving
//! SmolLM2, one server for the whole binary, its tests one at a time (one slot, so the cached
//! prefix a test reads is its own).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use caldrix_engine::{Model, ModelParams, Special};
use caldrix_remote::{
    ChatMessage, Constraint, Endpoint, Engine, Event, Options, Prompt, Remote, Request, Sampling,
};
use serde_json::Value;
use test_models::server::{Server, ServerConfig};

static SERVER: OnceLock<Server> = OnceLock::new();
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        let (binary, model) = (test_models::llama_server(), test_models::smollm2());
        let config =
            ServerConfig { binary: &binary, model: &model, threads: 2, slots: 1, window: 2048 };
        Server::start_tied(&config).expect("llama-server starts on SmolLM2")
    })
}

/// A probed client of the shared server.
async fn remote() -> Remote {
    let base_url = server().base_url();
    let model = test_models::smollm2().display().to_string();
    let mut remote =
        Remote::new(&Endpoint { base_url, model, api_key_env: None }, Options::default()).unwrap();
    let probe = remote.probe().await.unwrap();
    let found = (probe.engine, probe.tokenize, probe.detokenize, probe.tokenize_chat);
    assert_eq!(found, (Engine::LlamaServer, true, true, true));
    remote
}

fn local() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| Model::load(&test_models::smollm2(), &ModelParams::default()).unwrap())
}

/// A ChatML prompt (SmolLM2's template) as our engine tokenizes it.
fn prompt(question: &str) -> Vec<u32> {
    let text = format!(
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    );
    local().tokenize_prompt(&text).into_iter().map(|t| t.0).collect()
}

fn request<'a>(prompt: &'a [u32], max_tokens: u32, constraint: Constraint<'a>) -> Request<'a> {
    let prompt = Prompt::Tokens(prompt);
    Request { prompt, max_tokens, sampling: Sampling::default(), logprobs: None, constraint }
}

#[tokio::test]
async fn the_engines_tokens_are_our_engines_tokens() {
    let _one = ONE_AT_A_TIME.lock().await;
    let remote = remote().await;
    let text = "<|im_start|>user\nHello, wörld! fn main() { println!(\"{}\", 42); }<|im_end|>\n";
    let ours: Vec<u32> = local().tokenize(text, Special::Parse).into_iter().map(|t| t.0).collect();
    assert_eq!(remote.tokenize(text, false).await.unwrap(), ours);
}

/// What a pool member without a local tokenizer renders and counts with: llama-server's
/// template and special tokens (`/props`), its vocabulary's size and window (`/v1/models`),
/// and `/detokenize`, each the local model's.
#[tokio::test]
async fn the_probe_finds_the_engine_s_template_vocabulary_and_window() {
    let _one = ONE_AT_A_TIME.lock().await;
    let base_url = server().base_url();
    let model = test_models::smollm2().display().to_string();
    let mut remote =
        Remote::new(&Endpoint { base_url, model, api_key_env: None }, Options::default()).unwrap();
    let probe = remote.probe().await.unwrap();
    let template = probe.template.expect("llama-server serves its chat template");
    assert!(template.source.contains("<|im_start|>"), "SmolLM2's ChatML: {}", template.source);
    // Compiled here, it renders a conversation as the local model's own template does.
    let served =
        caldrix_engine::ChatTemplate::new(&template.source, template.bos_token, template.eos_token)
            .unwrap();
    let messages = [
        caldrix_engine::Message::new("system", "You are terse."),
        caldrix_engine::Message::new("user", "Hi"),
        caldrix_engine::Message::new("assistant", "Hello."),
        caldrix_engine::Message::new("user", "Bye"),
    ];
    let add = caldrix_engine::GenerationPrompt::Add;
    assert_eq!(served.render(&messages, add).unwrap(), local().render(&messages, add).unwrap());
    assert_eq!(probe.vocab_size, Some(local().vocab_size()));
    assert_eq!(probe.window, Some(2048), "the slot's window");
    let ids = prompt("Say hi.");
    let text = remote.detokenize(&ids[1..]).await.unwrap();
    let tokens: Vec<_> = ids[1..].iter().map(|&i| caldrix_engine::Token(i)).collect();
    let ours = local().detokenize(&tokens);
    assert_eq!(text.as_bytes(), ours);
}

#[tokio::test]
async fn a_completion_of_token_ids_streams_its_text_and_counts() {
    let _one = ONE_AT_A_TIME.lock().await;
    let remote = remote().await;
    let ids = prompt("Name a colour.");
    let mut deltas = String::new();
    let finished = remote
        .complete(&request(&ids, 12, Constraint::None), &mut |e| {
            if let Event::Text(d) = e {
                deltas.push_str(&d.text);
            }
        })
        .await
        .unwrap();
    assert!(!finished.text.is_empty());
    assert_eq!(deltas, finished.text);
    assert_eq!(finished.usage.prompt_tokens, Some(ids.len() as u64));
    assert!(
        finished.usage.completion_tokens.is_some_and(|n| (1..=12).contains(&n)),
        "{:?}",
        finished.usage
    );
}

#[tokio::test]
async fn a_json_schema_constrains_the_output() {
    let _one = ONE_AT_A_TIME.lock().await;
    let remote = remote().await;
    let schema = r#"{"type":"object","properties":{"colour":{"type":"string","maxLength":12},"n":{"type":"integer"}},"required":["colour","n"],"additionalProperties":false}"#;
    let ids = prompt("Give a colour and a number as JSON.");
    let finished =
        remote.complete(&request(&ids, 64, Constraint::Json(schema)), &mut |_| {}).await.unwrap();
    let value: Value = serde_json::from_str(&finished.text).unwrap();
    let object = value.as_object().unwrap();
    assert_eq!(object.len(), 2, "{value}");
    assert!(
        value["colour"].as_str().is_some_and(|c| c.chars().count() <= 12) && value["n"].is_i64(),
        "{value}"
    );
}

#[tokio::test]
async fn a_choice_picks_one_option_with_logprobs() {
    let _one = ONE_AT_A_TIME.lock().await;
    let remote = remote().await;
    let options = ["yes".to_owned(), "no".to_owned(), "maybe".to_owned()];
    let ids = prompt("Is the sky blue? Answer yes, no or maybe.");
    let mut tokens = Vec::new();
    let req = Request { logprobs: Some(3), ..request(&ids, 8, Constraint::Choice(&options)) };
    let finished = remote
        .complete(&req, &mut |e| {
            if let Event::Text(d) = e {
                tokens.extend(d.tokens);
            }
        })
        .await
        .unwrap();
    assert!(options.contains(&finished.text), "{:?}", finished.text);
    assert!(!tokens.is_empty());
    for t in &tokens {
        assert!(
            t.token.is_some() && t.logprob <= 0.0 && !t.top.is_empty() && t.top.len() <= 3,
            "{t:?}"
        );
    }
}

#[tokio::test]
async fn a_repeated_prompt_reports_its_cached_tokens() {
    let _one = ONE_AT_A_TIME.lock().await;
    let remote = remote().await;
    let ids = prompt("Say something about caching prompts, in one short sentence please.");
    let req = request(&ids, 2, Constraint::None);
    remote.complete(&req, &mut |_| {}).await.unwrap();
    let second = remote.complete(&req, &mut |_| {}).await.unwrap();
    let cached = second.usage.cached_tokens.unwrap();
    assert!(
        cached + 1 >= ids.len() as u64 && cached <= ids.len() as u64,
        "{cached} of {}",
        ids.len()
    );
}

#[tokio::test]
async fn dropping_a_generation_stops_the_engine() {
    let _one = ONE_AT_A_TIME.lock().await;
    let remote = remote().await;
    // At least 400 items: the constraint keeps the model from stopping on its own.
    let schema = r#"{"type":"array","items":{"type":"integer"},"minItems":400}"#;
    let ids = prompt("List numbers.");
    let req = request(&ids, 1900, Constraint::Json(schema));
    let mut texts = 0;
    let mut on_event = |e| texts += usize::from(matches!(e, Event::Text(_)));
    let generation = remote.complete(&req, &mut on_event);
    let cut = tokio::time::timeout(Duration::from_secs(2), generation).await;
    assert!(cut.is_err(), "the generation ended by itself: {cut:?}");
    assert!(texts > 0, "no token came in 2 s");
    // Dropped: the slot must stop processing soon (it had at least 800 tokens to go).
    let started = Instant::now();
    loop {
        let slots = slots(&server().base_url()).await;
        if !slots.is_empty() && slots.iter().all(|s| s["is_processing"] == false) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(3), "still processing: {slots:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn slots(base_url: &str) -> Vec<Value> {
    let reply = reqwest::get(format!("{base_url}/slots")).await.unwrap();
    serde_json::from_str(&reply.text().await.unwrap()).unwrap()
}

/// A conversation the engine renders (the route of engines that serve no template): its
/// tokens are the local model's render of it, and what the engine's chat endpoint counts.
#[tokio::test]
async fn a_conversation_the_engine_renders_counts_as_ours_and_as_its_chat_endpoint_does() {
    let _one = ONE_AT_A_TIME.lock().await;
    let remote = remote().await;
    let conversation = [
        ChatMessage::new("system", "You are terse."),
        ChatMessage::new("user", "Name a colour, caf\u{e9} \u{2014} one word."),
    ];
    let messages: Vec<_> =
        conversation.iter().map(|m| caldrix_engine::Message::new(&m.role, &m.content)).collect();
    for (add, prompt) in [
        (true, caldrix_engine::GenerationPrompt::Add),
        (false, caldrix_engine::GenerationPrompt::Omit),
    ] {
        let ours: Vec<u32> = local()
            .tokenize_prompt(&local().render(&messages, prompt).unwrap())
            .into_iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(remote.tokenize_chat(&conversation, add).await.unwrap(), ours, "{prompt:?}");
    }
    let counted = remote.tokenize_chat(&conversation, true).await.unwrap();
    let req = Request {
        prompt: Prompt::Chat(&conversation),
        logprobs: Some(2),
        ..request(&[], 6, Constraint::None)
    };
    let (mut deltas, mut tokens) = (String::new(), Vec::new());
    let finished = remote
        .complete(&req, &mut |e| {
            if let Event::Text(d) = e {
                deltas.push_str(&d.text);
                tokens.extend(d.tokens);
            }
        })
        .await
        .unwrap();
    assert!(!finished.text.is_empty());
    assert_eq!(deltas, finished.text);
    assert_eq!(finished.usage.prompt_tokens, Some(counted.len() as u64));
    let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.bytes.clone().unwrap()).collect();
    assert_eq!(bytes, finished.text.as_bytes(), "each token's bytes, in order");
    assert!(tokens.iter().all(|t| t.token.is_some() && (1..=2).contains(&t.top.len())));
}

#[tokio::test]
async fn a_conversation_takes_the_json_and_choice_constraints() {
    let _one = ONE_AT_A_TIME.lock().await;
    let remote = remote().await;
    let ask = |q: &str| [ChatMessage::new("user", q)];
    let schema = r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}"#;
    let conversation = ask("Give a number as JSON.");
    let req = Request {
        prompt: Prompt::Chat(&conversation),
        ..request(&[], 32, Constraint::Json(schema))
    };
    let finished = remote.complete(&req, &mut |_| {}).await.unwrap();
    let value: Value = serde_json::from_str(&finished.text).unwrap();
    assert!(value["n"].is_i64() && value.as_object().unwrap().len() == 1, "{value}");
    let options = ["yes".to_owned(), "no".to_owned()];
    let conversation = ask("Is water wet? Answer yes or no.");
    let req = Request {
        prompt: Prompt::Chat(&conversation),
        logprobs: Some(3),
        ..request(&[], 8, Constraint::Choice(&options))
    };
    let finished = remote.complete(&req, &mut |_| {}).await.unwrap();
    assert!(options.contains(&finished.text), "{:?}", finished.text);
}
