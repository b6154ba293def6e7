use caldrix_proto::{Constraint, ToolChoice};

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

/// What Codex CLI sends (measured).
#[test]
fn codex_s_request_becomes_segments_and_tools() {
    let body = map(json!({
        "model": "smol",
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandbox: none"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell",
             "arguments": "{\"command\":[\"ls\"]}", "status": "completed"},
            {"type": "function_call", "call_id": "call_2", "name": "shell", "arguments": "{\"command\":[\"pwd\"]}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.rs"},
            {"type": "function_call_output", "call_id": "call_2", "output": "/w"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
        ],
        "tools": [
            {"type": "function", "name": "shell", "description": "Runs", "strict": false,
             "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}}},
            {"type": "web_search"}],
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "medium"},
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "k",
    }));
    let (spec, echo) = spec(&body, 100).unwrap();
    let seg: Vec<_> = spec.segments.iter().map(|s| (s.role, s.text.as_str())).collect();
    assert_eq!(seg[0], (Role::System, "You are Codex."));
    assert_eq!(seg[1], (Role::System, "Sandbox: none"));
    assert_eq!(seg[2], (Role::User, "List files"));
    let calls = [
        ToolCall { name: "shell".into(), arguments: r#"{"command":["ls"]}"#.into() },
        ToolCall { name: "shell".into(), arguments: r#"{"command":["pwd"]}"#.into() },
    ];
    assert_eq!(seg[3], (Role::Assistant, caldrix_proto::write_tool_calls(&calls).as_str()));
    assert_eq!(seg[4], (Role::Tool, "a.rs"));
    assert_eq!(seg[5], (Role::Tool, "/w"));
    assert_eq!(seg[6], (Role::Assistant, "Done."));
    assert_eq!(seg.len(), 7);
    assert_eq!(spec.tools.len(), 1, "web_search is left out");
    assert_eq!(spec.constraint, Constraint::Tools { choice: ToolChoice::Auto {}, parallel: false });
    assert!(spec.stream);
    assert!(!echo.parallel_tool_calls);
}

#[test]
fn bad_responses_requests_name_what_is_wrong() {
    let cases = [
        (json!({"model": "m"}), "input"),
        (json!({"model": "m", "input": "x", "previous_response_id": "r"}), "previous_response_id"),
        (json!({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}), "input[0]"),
        (
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image"}]}]}),
            "input[0].content[0]",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "custom", "name": "apply_patch"}]}),
            "tools[0].type",
        ),
    ];
    for (body, param) in cases {
        let e = spec(&map(body.clone()), 100).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
    }
    let (s, _) = spec(
        &map(json!({"model": "m", "input": "hi", "max_output_tokens": 9,
        "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}})),
        10,
    )
    .unwrap();
    assert_eq!(s.constraint, Constraint::Json { schema: r#"{"type":"object"}"#.into() });
    assert_eq!(s.max_tokens, Some(9));
}

#[test]
fn the_response_object_has_message_and_call_items() {
    let echo = Echo::default();
    let call = ToolCall { name: "shell".into(), arguments: r#"{"command":["ls"]}"#.into() };
    let r = response("resp_1", "smol", 5, &echo, Some(&outcome("", vec![call], Finish::ToolCalls)));
    assert_eq!((r["object"].clone(), r["status"].clone()), (json!("response"), json!("completed")));
    let item = &r["output"][0];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["arguments"], r#"{"command":["ls"]}"#);
    assert!(item["call_id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(r["usage"]["input_tokens_details"]["cached_tokens"], 16);
    assert_eq!(r["usage"]["total_tokens"], 24);
    let r = response("resp_1", "smol", 5, &echo, Some(&outcome("Hi", vec![], Finish::Length)));
    assert_eq!(r["status"], "incomplete");
    assert_eq!(
        r["output"][0]["content"][0],
        json!({"type": "output_text", "text": "Hi", "annotations": []})
    );
}

#[test]
fn the_stream_is_the_response_events_in_order() {
    let mut s = Stream::new("smol", 5, Echo::default());
    let mut events = s.start(&Started { prompt_tokens: 20 });
    events.extend(s.text("Hi"));
    let call = ToolCall { name: "shell".into(), arguments: "{}".into() };
    events.extend(s.finish(&outcome("Hi", vec![call], Finish::ToolCalls)));
    let f: Vec<Value> = events.iter().map(|e| serde_json::from_str(&e.data).unwrap()).collect();
    let names: Vec<&str> = f.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let numbers: Vec<u64> = f.iter().map(|v| v["sequence_number"].as_u64().unwrap()).collect();
    assert_eq!(numbers, (0..13).collect::<Vec<_>>());
    assert_eq!(f[4]["delta"], "Hi");
    assert_eq!(f[5]["text"], "Hi");
    assert_eq!(f[8]["output_index"], 1);
    assert_eq!(f[11]["item"]["status"], "completed");
    let done = &f[12]["response"];
    assert_eq!(done["output"].as_array().unwrap().len(), 2);
    assert_eq!(done["output"][1]["id"], f[11]["item"]["id"], "the same item ids");
    assert_eq!(done["id"], f[0]["response"]["id"]);
    assert!(events.iter().zip(&names).all(|(e, n)| e.event == Some(*n)));

    let failed = s.fail(&ApiError::bad("broke"));
    let v: Value = serde_json::from_str(&failed[0].data).unwrap();
    assert_eq!(
        (v["type"].clone(), v["response"]["error"]["message"].clone()),
        (json!("response.failed"), json!("broke"))
    );
}
