use caldrix_proto::{Constraint, ToolChoice, TopLogprob};

use super::*;

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn outcome(text: &str, calls: Vec<ToolCall>, finish: Finish) -> Outcome {
    Outcome {
        text: text.into(),
        tool_calls: calls,
        finish,
        usage: Usage { prompt: 20, completion: 4, cached: 16 },
        logprobs: None,
    }
}

fn frames(events: Vec<SseEvent>) -> Vec<Value> {
    events.into_iter().map(|e| serde_json::from_str(&e.data).unwrap_or(json!(e.data))).collect()
}

#[test]
fn a_conversation_with_tools_becomes_segments_tools_and_a_constraint() {
    let body = map(json!({
        "model": "smol",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
            {"role": "user", "content": "Read a.rs"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.rs\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"},
        ],
        "tools": [{"type": "function", "function": {"name": "read", "description": "Reads a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "max_tokens": 50,
        "max_completion_tokens": 40,
        "temperature": 0,
        "stop": ["\n\n"],
        "logprobs": true,
        "top_logprobs": 3,
        "stream": true,
        "stream_options": {"include_usage": true},
    }));
    let (spec, shape) = chat_spec(&body, 100).unwrap();
    let roles: Vec<_> = spec.segments.iter().map(|s| (s.role, s.text.as_str())).collect();
    assert_eq!(roles[0], (Role::System, "Be brief."));
    assert_eq!(roles[1], (Role::System, "Use tools."));
    assert_eq!(roles[2], (Role::User, "Read a.rs"));
    assert_eq!(roles[3].0, Role::Assistant);
    assert_eq!(
        roles[3].1,
        caldrix_proto::write_tool_calls(&[ToolCall {
            name: "read".into(),
            arguments: r#"{"path":"a.rs"}"#.into()
        }])
    );
    assert_eq!(roles[4], (Role::Tool, "fn main() {}"));
    assert_eq!(spec.tools.len(), 1);
    assert_eq!(spec.tools[0].description, "Reads a file");
    assert_eq!(
        spec.constraint,
        Constraint::Tools { choice: ToolChoice::Required {}, parallel: false }
    );
    assert_eq!(spec.max_tokens, Some(40), "max_completion_tokens wins");
    assert_eq!((spec.sampling.temperature, spec.logprobs), (0.0, Some(3)));
    assert_eq!(spec.stop, ["\n\n"]);
    assert!(spec.stream && spec.may_call());
    assert_eq!(shape, Shape { include_usage: true, logprobs: true });
}

#[test]
fn bad_chat_requests_name_what_is_wrong() {
    let cases = [
        (json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 2}), "n"),
        (json!({"messages": [{"role": "user", "content": "hi"}]}), "model"),
        (json!({"model": "m"}), "messages"),
        (json!({"model": "m", "messages": []}), "messages"),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
            "messages[0].content[0]",
        ),
        (
            json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "custom", "custom": {"name": "x"}}]}),
            "tools[0].type",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "bad name"}}]}),
            "tools[0].name",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                "logprobs": true, "top_logprobs": 21}),
            "top_logprobs",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 3}),
            "temperature",
        ),
    ];
    for (body, param) in cases {
        let e = chat_spec(&map(body.clone()), 100).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
    }
    let many = json!({"model": "m", "messages": vec![json!({"role": "user", "content": "x"}); 5]});
    let e = chat_spec(&map(many), 4).unwrap_err();
    assert!(e.message.contains("5 messages, more than the limit of 4"), "{}", e.message);
}

#[test]
fn json_formats_constrain_and_tool_choice_none_keeps_the_tools() {
    let body = map(json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}}}));
    let (spec, _) = chat_spec(&body, 10).unwrap();
    assert_eq!(spec.constraint, Constraint::Json { schema: r#"{"type":"object"}"#.into() });
    assert_eq!(spec.sampling.temperature, 1.0, "the API's default temperature");
    let body = map(json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"}));
    let (spec, _) = chat_spec(&body, 10).unwrap();
    assert_eq!(spec.constraint, Constraint::Tools { choice: ToolChoice::None {}, parallel: true });
    assert_eq!(spec.tools[0].parameters, r#"{"type":"object"}"#);
    assert!(!spec.may_call());
}

#[test]
fn completions_take_one_prompt_string() {
    let (spec, shape) = completion_spec(&map(
        json!({"model": "m", "prompt": "Once", "logprobs": 2, "max_tokens": 5}),
    ))
    .unwrap();
    assert_eq!(spec.segments.len(), 1);
    assert_eq!((spec.segments[0].role, spec.segments[0].text.as_str()), (Role::User, "Once"));
    assert_eq!((spec.logprobs, spec.max_tokens, shape.logprobs), (Some(2), Some(5), true));
    let e = completion_spec(&map(json!({"model": "m", "prompt": ["a", "b"]}))).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("prompt"));
    let e = completion_spec(&map(json!({"model": "m", "prompt": "a", "echo": true}))).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("echo"));
    completion_spec(&map(
        json!({"model": "m", "prompt": "a", "echo": false, "best_of": 1, "suffix": null}),
    ))
    .unwrap();
}

#[test]
fn a_chat_answer_and_a_call_in_the_response_object() {
    let r = chat_response("smol", 7, &outcome("Hi", vec![], Finish::EndTurn), Shape::default());
    assert_eq!(r["object"], "chat.completion");
    assert_eq!(r["choices"][0]["message"]["content"], "Hi");
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    assert_eq!(r["usage"]["prompt_tokens_details"]["cached_tokens"], 16);
    assert_eq!(r["usage"]["total_tokens"], 24);
    assert!(r["id"].as_str().unwrap().starts_with("chatcmpl-"));

    let call = ToolCall { name: "read".into(), arguments: r#"{"path":"a"}"#.into() };
    let r = chat_response("smol", 7, &outcome("", vec![call], Finish::ToolCalls), Shape::default());
    let message = &r["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(message["tool_calls"][0]["function"]["name"], "read");
    assert_eq!(message["tool_calls"][0]["function"]["arguments"], r#"{"path":"a"}"#);
    assert!(message["tool_calls"][0]["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(r["choices"][0]["finish_reason"], "tool_calls");

    let r = chat_response(
        "smol",
        7,
        &outcome("x", vec![], Finish::Stop("\n".into())),
        Shape::default(),
    );
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    let r = chat_response("smol", 7, &outcome("x", vec![], Finish::Length), Shape::default());
    assert_eq!(r["choices"][0]["finish_reason"], "length");
}

#[test]
fn logprobs_take_openai_s_shapes() {
    let lp = TokenLogprob {
        token: 1,
        text: "Hi".into(),
        logprob: -0.25,
        top: vec![TopLogprob { token: 2, text: "Ho".into(), logprob: -2.0 }],
    };
    let mut o = outcome("Hi", vec![], Finish::EndTurn);
    o.logprobs = Some(vec![lp]);
    let shape = Shape { include_usage: false, logprobs: true };
    let r = chat_response("m", 0, &o, shape);
    let first = &r["choices"][0]["logprobs"]["content"][0];
    assert_eq!((first["token"].clone(), first["logprob"].clone()), (json!("Hi"), json!(-0.25)));
    assert_eq!(first["bytes"], json!([72, 105]));
    assert_eq!(first["top_logprobs"][0]["token"], "Ho");
    let r = completion_response("m", 0, &o, shape);
    let lps = &r["choices"][0]["logprobs"];
    assert_eq!(lps["tokens"], json!(["Hi"]));
    assert_eq!(lps["top_logprobs"][0]["Ho"], json!(-2.0));
    assert_eq!(lps["text_offset"], json!([0]));
    assert_eq!(chat_response("m", 0, &o, Shape::default())["choices"][0]["logprobs"], Value::Null);
}

#[test]
fn a_chat_stream_is_role_text_calls_finish_usage_done() {
    let shape = Shape { include_usage: true, logprobs: false };
    let mut s = ChatStream::chat("smol", 1, shape);
    let mut events = s.start(&Started { prompt_tokens: 20 });
    events.extend(s.text("Hel"));
    events.extend(s.text("lo"));
    let call = ToolCall { name: "read".into(), arguments: "{}".into() };
    events.extend(s.finish(&outcome("Hello", vec![call], Finish::ToolCalls)));
    let f = frames(events);
    assert_eq!(f[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    assert_eq!(f[0]["object"], "chat.completion.chunk");
    assert_eq!(f[0]["usage"], Value::Null);
    assert_eq!(f[1]["choices"][0]["delta"]["content"], "Hel");
    assert_eq!(f[2]["choices"][0]["delta"]["content"], "lo");
    let call = &f[3]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!((call["index"].clone(), call["type"].clone()), (json!(0), json!("function")));
    assert_eq!(call["function"], json!({"name": "read", "arguments": "{}"}));
    assert_eq!(f[4]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(f[5]["choices"], json!([]));
    assert_eq!(f[5]["usage"]["completion_tokens"], 4);
    assert_eq!(f[6], json!("[DONE]"));
    assert_eq!(f.len(), 7);
    assert!(f[..6].iter().all(|c| c["id"] == f[0]["id"]), "one id for the stream");

    let e = s.fail(&ApiError::bad("broke"));
    assert_eq!(frames(e)[0]["error"]["message"], "broke");
}

#[test]
fn a_completion_stream_has_text_chunks() {
    let mut s = ChatStream::completion("smol", 1, Shape::default());
    assert!(s.start(&Started { prompt_tokens: 3 }).is_empty());
    let mut events = s.text("Once");
    events.extend(s.finish(&outcome("Once", vec![], Finish::Length)));
    let f = frames(events);
    assert_eq!(f[0]["object"], "text_completion");
    assert_eq!(f[0]["choices"][0]["text"], "Once");
    assert_eq!(f[1]["choices"][0]["finish_reason"], "length");
    assert_eq!(f[2], json!("[DONE]"));
    assert!(f[0].get("usage").is_none(), "no usage key unless asked");
}
