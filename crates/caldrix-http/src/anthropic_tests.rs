use caldrix_proto::Tool;

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

fn frames(events: &[SseEvent]) -> Vec<(&'static str, Value)> {
    events
        .iter()
        .map(|e| (e.event.unwrap_or(""), serde_json::from_str(&e.data).unwrap_or(Value::Null)))
        .collect()
}

/// What Claude Code sends (measured): system blocks with cache_control, a system message
/// inside messages, tool results with is_error and cache_control, a schema with `$schema`.
#[test]
fn claude_code_s_request_becomes_segments_and_tools() {
    let body = map(json!({
        "model": "smol",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "You are Claude Code."},
                   {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "List files"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "Listing."},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pwd"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.rs", "cache_control": {}},
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                 "content": [{"type": "text", "text": "no such dir"}]},
                {"type": "text", "text": "Go on."}]},
            {"role": "system", "content": "Reminder."},
        ],
        "tools": [
            {"name": "Bash", "description": "Runs a command", "input_schema": {
                "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": {"command": {"type": "string"}}, "required": ["command"]}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "stop_sequences": ["</done>"],
        "temperature": 0.5,
        "stream": true,
        "metadata": {"user_id": "u"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }));
    let spec = spec(&body, 100, true).unwrap();
    let seg: Vec<_> = spec.segments.iter().map(|s| (s.role, s.text.as_str())).collect();
    assert_eq!(seg[0], (Role::System, "You are Claude Code.\nBe brief."));
    assert_eq!(seg[1], (Role::User, "List files"));
    assert_eq!(seg[2].0, Role::Assistant);
    let calls = [
        ToolCall { name: "Bash".into(), arguments: r#"{"command":"ls"}"#.into() },
        ToolCall { name: "Bash".into(), arguments: r#"{"command":"pwd"}"#.into() },
    ];
    assert_eq!(seg[2].1, format!("Listing.\n{}", caldrix_proto::write_tool_calls(&calls)));
    assert_eq!(seg[3], (Role::Tool, "a.rs"));
    assert_eq!(seg[4], (Role::Tool, "Error: no such dir"));
    assert_eq!(seg[5], (Role::User, "Go on."));
    assert_eq!(seg[6], (Role::System, "Reminder."));
    assert_eq!(spec.tools.len(), 1, "the typed server tool is left out");
    let Tool { name, parameters, .. } = &spec.tools[0];
    assert_eq!(name, "Bash");
    assert!(parameters.contains("\"$schema\""), "{parameters}");
    assert_eq!(
        spec.constraint,
        Constraint::Tools { choice: ToolChoice::Required {}, parallel: false }
    );
    assert_eq!((spec.max_tokens, spec.stop.clone()), (Some(64), vec!["</done>".to_owned()]));
    assert_eq!(spec.sampling.temperature, 0.5);
    assert!(spec.stream);
}

#[test]
fn bad_messages_requests_name_what_is_wrong() {
    let user = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        (json!({"model": "m", "messages": user}), "max_tokens"),
        (json!({"model": "m", "max_tokens": 5, "messages": user, "top_k": 3}), "top_k"),
        (
            json!({"model": "m", "max_tokens": 5, "messages": user, "temperature": 1.5}),
            "temperature",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {}}]}]}),
            "messages[0].content[0]",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": user,
                "tools": [{"name": "a", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "b"}}),
            "tool_choice",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": user, "tool_choice": {"type": "some"}}),
            "tool_choice.type",
        ),
    ];
    for (body, param) in cases {
        let e = spec(&map(body.clone()), 100, true).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
    }
    // count_tokens needs no max_tokens.
    spec(&map(json!({"model": "m", "messages": user})), 100, false).unwrap();
}

#[test]
fn the_message_object_carries_text_calls_and_usage() {
    let r = response("smol", &outcome("Hi", vec![], Finish::Stop("</done>".into())));
    assert_eq!(r["content"], json!([{"type": "text", "text": "Hi"}]));
    assert_eq!(
        (r["stop_reason"].clone(), r["stop_sequence"].clone()),
        (json!("stop_sequence"), json!("</done>"))
    );
    assert_eq!(
        r["usage"],
        json!({"input_tokens": 4, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 16, "output_tokens": 4})
    );
    assert!(r["id"].as_str().unwrap().starts_with("msg_"));
    let call = ToolCall { name: "Bash".into(), arguments: r#"{"command":"ls"}"#.into() };
    let r = response("smol", &outcome("", vec![call], Finish::ToolCalls));
    assert_eq!(r["content"].as_array().unwrap().len(), 1);
    assert_eq!(r["content"][0]["type"], "tool_use");
    assert_eq!(r["content"][0]["input"], json!({"command": "ls"}));
    assert!(r["content"][0]["id"].as_str().unwrap().starts_with("toolu_"));
    assert_eq!(r["stop_reason"], "tool_use");
    assert_eq!(response("m", &outcome("x", vec![], Finish::Length))["stop_reason"], "max_tokens");
    assert_eq!(response("m", &outcome("x", vec![], Finish::EndTurn))["stop_reason"], "end_turn");
}

#[test]
fn the_stream_is_anthropic_s_event_sequence() {
    let mut s = Stream::new("smol");
    let mut events = s.start(&Started { prompt_tokens: 20 });
    events.extend(s.text("Hel"));
    events.extend(s.text("lo"));
    let call = ToolCall { name: "Bash".into(), arguments: r#"{"command":"ls"}"#.into() };
    events.extend(s.finish(&outcome("Hello", vec![call], Finish::ToolCalls)));
    let f = frames(&events);
    let names: Vec<&str> = f.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert!(f.iter().all(|(n, v)| v["type"] == *n), "each data's type is its event's name");
    assert_eq!(f[0].1["message"]["usage"]["input_tokens"], 20);
    assert_eq!(f[2].1["content_block"], json!({"type": "text", "text": ""}));
    assert_eq!(f[3].1["delta"], json!({"type": "text_delta", "text": "Hel"}));
    assert_eq!(f[6].1["index"], 1);
    assert_eq!(f[6].1["content_block"]["type"], "tool_use");
    assert_eq!(f[6].1["content_block"]["name"], "Bash");
    assert_eq!(
        f[7].1["delta"],
        json!({"type": "input_json_delta", "partial_json": r#"{"command":"ls"}"#})
    );
    assert_eq!(f[9].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(f[9].1["usage"]["output_tokens"], 4);

    let mut s = Stream::new("smol");
    let _ = s.start(&Started { prompt_tokens: 1 });
    let f = frames(&s.finish(&outcome("", vec![], Finish::EndTurn)));
    let names: Vec<&str> = f.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        ["content_block_start", "content_block_stop", "message_delta", "message_stop"]
    );

    let f = frames(&s.fail(&ApiError::bad("broke")));
    assert_eq!(f[0].0, "error");
    assert_eq!(f[0].1["error"], json!({"type": "invalid_request_error", "message": "broke"}));
}
