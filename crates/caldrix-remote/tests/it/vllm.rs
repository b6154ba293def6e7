//! What the client says to an engine shaped as vLLM, which serves no chat template: the probe
//! finds its chat tokenization and window, and a conversation goes to `/v1/chat/completions`
//! in vLLM's fields, its logprobs read as vLLM sends them (`token_id:N`, bytes). Against the
//! scripted server on loopback (vLLM itself needs a GPU or a long CPU build); the same route
//! runs against the real llama-server in `engine.rs`.

use caldrix_remote::{ChatMessage, Constraint, Engine, Event, Prompt, Request, Sampling};
use serde_json::{Value, json};

use crate::fake::{Act, options, remote, reply, serve, stream_head};

fn vllm(seen: &crate::fake::Seen) -> Vec<Act> {
    let body: Value = serde_json::from_str(&seen.body).unwrap_or(Value::Null);
    match seen.path.as_str() {
        "/v1/models" => vec![reply(
            "200 OK",
            "",
            r#"{"object":"list","data":[{"id":"m","object":"model","max_model_len":32768}]}"#,
        )],
        "/version" => vec![reply("200 OK", "", r#"{"version":"0.11.2"}"#)],
        // Chat messages get the template's tokens; a prompt its plain ones.
        "/tokenize" if body["messages"].is_array() => {
            let n = body["messages"].as_array().unwrap().len();
            let tokens: Vec<u32> =
                (0..n as u32 * 3 + u32::from(body["add_generation_prompt"] == true)).collect();
            vec![reply("200 OK", "", &json!({"count": tokens.len(), "tokens": tokens}).to_string())]
        }
        "/tokenize" => vec![reply("200 OK", "", r#"{"count":1,"tokens":[64]}"#)],
        "/detokenize" => vec![reply("200 OK", "", r#"{"prompt":"a"}"#)],
        "/v1/chat/completions" => {
            let chunk = |delta: Value, logprobs: Value, finish: Value| {
                let event = json!({"choices": [{"index": 0, "delta": delta, "logprobs": logprobs,
                                                "finish_reason": finish}]});
                format!("data: {event}\n\n")
            };
            let token = json!({"token": "token_id:9", "logprob": -0.5, "bytes": [121, 101, 115],
                               "top_logprobs": [{"token": "token_id:9", "logprob": -0.5, "bytes": [121, 101, 115]},
                                                {"token": "token_id:4", "logprob": -1.5, "bytes": [110, 111]}]});
            let usage = json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 1,
                               "prompt_tokens_details": {"cached_tokens": 4}}});
            vec![
                stream_head(),
                Act::Write(chunk(
                    json!({"role": "assistant", "content": ""}),
                    Value::Null,
                    Value::Null,
                )),
                Act::Write(chunk(
                    json!({"content": "yes"}),
                    json!({"content": [token]}),
                    Value::Null,
                )),
                Act::Write(chunk(json!({}), Value::Null, json!("stop"))),
                Act::Write(format!("data: {usage}\n\ndata: [DONE]\n\n")),
            ]
        }
        _ => vec![reply("404 Not Found", "", r#"{"detail":"Not Found"}"#)],
    }
}

#[tokio::test]
async fn the_probe_finds_vllm_s_chat_tokenization_and_window() {
    let fake = serve(|seen, _| vllm(seen)).await;
    let mut remote = remote(&fake, options());
    let probe = remote.probe().await.unwrap();
    assert_eq!(probe.engine, Engine::Vllm { version: Some("0.11.2".into()) });
    assert!(probe.tokenize && probe.tokenize_chat && probe.template.is_none());
    assert_eq!((probe.window, probe.vocab_size), (Some(32768), None));
    let conversation = [ChatMessage::new("system", "s"), ChatMessage::new("user", "u")];
    assert_eq!(remote.tokenize_chat(&conversation, true).await.unwrap().len(), 7);
    assert_eq!(remote.tokenize_chat(&conversation, false).await.unwrap().len(), 6);
    let seen = fake.seen.lock().unwrap();
    let asked: Value = serde_json::from_str(&seen.last().unwrap().body).unwrap();
    assert_eq!(
        asked,
        json!({"model": "m", "messages": [{"role": "system", "content": "s"},
                                          {"role": "user", "content": "u"}],
               "add_generation_prompt": false, "add_special_tokens": false})
    );
}

#[tokio::test]
async fn a_conversation_goes_to_vllm_s_chat_endpoint_in_its_fields() {
    let fake = serve(|seen, _| vllm(seen)).await;
    let mut remote = remote(&fake, options());
    remote.probe().await.unwrap();
    let conversation = [ChatMessage::new("user", "Is water wet?")];
    let options = ["yes".to_owned(), "no".to_owned()];
    let request = Request {
        prompt: Prompt::Chat(&conversation),
        max_tokens: 4,
        sampling: Sampling::default(),
        logprobs: Some(2),
        constraint: Constraint::Choice(&options),
    };
    let mut tokens = Vec::new();
    let finished = remote
        .complete(&request, &mut |e| {
            if let Event::Text(d) = e {
                tokens.extend(d.tokens);
            }
        })
        .await
        .unwrap();
    assert_eq!(finished.text, "yes");
    assert_eq!((finished.usage.prompt_tokens, finished.usage.cached_tokens), (Some(7), Some(4)));
    let [token] = &tokens[..] else { panic!("one token: {tokens:?}") };
    assert_eq!((token.token, token.bytes.as_deref()), (Some(9), Some(&b"yes"[..])));
    assert_eq!(token.top.iter().map(|t| t.token).collect::<Vec<_>>(), [Some(9), Some(4)]);
    let seen = fake.seen.lock().unwrap();
    let sent = seen.iter().find(|s| s.path == "/v1/chat/completions").unwrap();
    let body: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body["messages"], json!([{"role": "user", "content": "Is water wet?"}]));
    assert_eq!((body["logprobs"].clone(), body["top_logprobs"].clone()), (json!(true), json!(2)));
    assert_eq!(body["return_tokens_as_token_ids"], true);
    assert_eq!(body["structured_outputs"], json!({"choice": ["yes", "no"]}));
    assert!(body.get("prompt").is_none(), "{body}");
}
