//! Every failure the client names, each against the scripted server.

use std::time::{Duration, Instant};

use caldrix_remote::{
    Bound, Constraint, Endpoint, Event, Finish, Limits, Options, Prompt, RemoteError, Request,
    Sampling,
};

use crate::fake::{Act, finish_events, options, remote, reply, serve, stream_head, text_event};

const PROMPT: &[u32] = &[1, 2, 3];

fn request() -> Request<'static> {
    Request {
        prompt: Prompt::Tokens(PROMPT),
        max_tokens: 8,
        sampling: Sampling::default(),
        logprobs: None,
        constraint: Constraint::None,
    }
}

/// Runs one completion, collecting its events.
async fn complete(
    remote: &caldrix_remote::Remote,
) -> (Result<caldrix_remote::Finished, RemoteError>, Vec<Event>) {
    let mut events = Vec::new();
    let result = remote.complete(&request(), &mut |e| events.push(e)).await;
    (result, events)
}

#[tokio::test]
async fn a_401_names_the_keys_variable_and_never_its_value() {
    let fake =
        serve(|_, _| vec![reply("401 Unauthorized", "", r#"{"error":{"message":"bad key"}}"#)])
            .await;
    // Edition 2024 makes setting a variable unsafe (denied here): HOME is one every test has.
    let endpoint = Endpoint {
        base_url: fake.base_url.clone(),
        model: "m".into(),
        api_key_env: Some("HOME".into()),
    };
    let mut remote = caldrix_remote::Remote::new(&endpoint, options()).unwrap();
    let error = remote.probe().await.unwrap_err();
    let key = std::env::var("HOME").unwrap();
    assert!(matches!(error, RemoteError::Unauthorized { status: 401, .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.contains("environment variable HOME") && !text.contains(&key), "{text}");
    let head = fake.seen.lock().unwrap()[0].head.clone();
    assert!(head.contains(&format!("authorization: Bearer {key}")), "{head}");
}

#[tokio::test]
async fn a_403_on_a_generation_is_unauthorized() {
    let fake = serve(|_, _| vec![reply("403 Forbidden", "", "{}")]).await;
    let (result, _) = complete(&remote(&fake, options())).await;
    assert!(
        matches!(result, Err(RemoteError::Unauthorized { status: 403, key_env: None, .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_model_the_engine_does_not_serve_is_named_with_what_it_lists() {
    let fake = serve(|seen, _| match seen.path.as_str() {
        "/v1/models" => vec![reply("200 OK", "", r#"{"data":[{"id":"other"}]}"#)],
        _ => vec![reply("404 Not Found", "", r#"{"message":"The model `m` does not exist."}"#)],
    })
    .await;
    let mut remote = remote(&fake, options());
    let error = remote.probe().await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{}/v1/models does not serve the model \"m\" (it lists other)", fake.base_url)
    );
    let (result, _) = complete(&remote).await;
    assert!(matches!(result, Err(RemoteError::ModelNotFound { .. })), "{result:?}");
}

#[tokio::test]
async fn a_429_is_waited_out_for_its_retry_after_then_the_generation_runs() {
    let fake = serve(|_, n| match n {
        0 => vec![reply("429 Too Many Requests", "Retry-After: 1\r\n", "{}")],
        _ => vec![stream_head(), text_event("hi"), finish_events(3, 1, 0)],
    })
    .await;
    let started = Instant::now();
    let (result, events) = complete(&remote(&fake, options())).await;
    assert_eq!(result.unwrap().text, "hi");
    assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After was not honoured");
    assert_eq!(fake.seen.lock().unwrap().len(), 2);
    let waiting = events.iter().filter(|e| matches!(e, Event::Waiting { .. })).count();
    assert!(waiting >= 5, "Waiting while the 429 is waited out: {events:?}");
}

#[tokio::test]
async fn a_429_past_the_deadline_is_rate_limited() {
    let fake = serve(|_, _| vec![reply("429 Too Many Requests", "", "{}")]).await;
    let options = Options { retry_deadline: Duration::from_secs(1), ..options() };
    let (result, _) = complete(&remote(&fake, options)).await;
    // Backoff 0.5 s, then 1 s would pass the 1 s deadline.
    let error = result.unwrap_err();
    assert!(matches!(error, RemoteError::RateLimited { attempts: 2, .. }), "{error:?}");
    assert!(error.to_string().contains("rate limited"), "{error}");
}

#[tokio::test]
async fn a_500_carries_the_engines_message() {
    let fake = serve(|_, _| {
        vec![reply("500 Internal Server Error", "", r#"{"error":{"message":"out of memory"}}"#)]
    })
    .await;
    let (result, _) = complete(&remote(&fake, options())).await;
    let error = result.unwrap_err();
    assert!(matches!(error, RemoteError::Server { status: 500, .. }), "{error:?}");
    assert!(error.to_string().ends_with("failed (500): out of memory"), "{error}");
}

#[tokio::test]
async fn a_400_about_the_grammar_is_a_bad_constraint() {
    let fake = serve(|_, _| {
        vec![reply("400 Bad Request", "", r#"{"error":{"message":"failed to parse grammar"}}"#)]
    })
    .await;
    let (result, _) = complete(&remote(&fake, options())).await;
    assert!(
        matches!(result, Err(RemoteError::BadConstraint { ref message, .. }) if message == "failed to parse grammar"),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_stream_cut_mid_generation_is_named_after_the_text_it_sent() {
    let fake = serve(|_, _| {
        let event = "data: {\"choices\":[{\"text\":\"par\",\"finish_reason\":null}]}\n\n";
        vec![Act::Write(format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n\
             {:x}\r\n{event}\r\n",
            event.len()
        ))]
    })
    .await;
    let (result, events) = complete(&remote(&fake, options())).await;
    assert!(matches!(result, Err(RemoteError::StreamCut { events: 1, .. })), "{result:?}");
    assert!(matches!(&events[..], [Event::Text(d)] if d.text == "par"), "{events:?}");
}

#[tokio::test]
async fn malformed_events_are_quoted() {
    let fake = serve(|_, _| vec![stream_head(), Act::Write("data: {not json\n\n".into())]).await;
    let (result, _) = complete(&remote(&fake, options())).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, RemoteError::Malformed { what: "an event", ref excerpt, .. } if excerpt == "{not json"),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_oversized_line_is_refused_by_its_bound() {
    let fake = serve(|_, _| vec![stream_head(), Act::Write("x".repeat(4096))]).await;
    let limits = Limits { line_bytes: 1024, ..Limits::default() };
    let (result, _) = complete(&remote(&fake, Options { limits, ..options() })).await;
    let error = result.unwrap_err();
    assert!(matches!(error, RemoteError::TooLarge { bound: Bound::Line(1024), .. }), "{error:?}");
    assert!(
        error.to_string().ends_with("a line of the event stream longer than 1024 bytes"),
        "{error}"
    );
}

#[tokio::test]
async fn a_slow_first_token_sends_waiting_then_the_text_and_usage() {
    let fake = serve(|_, _| {
        vec![
            stream_head(),
            Act::Sleep(Duration::from_millis(450)),
            text_event("ok"),
            finish_events(3, 1, 2),
        ]
    })
    .await;
    let (result, events) = complete(&remote(&fake, options())).await;
    let finished = result.unwrap();
    assert_eq!(finished.finish, Finish::Stop);
    assert_eq!(
        (
            finished.usage.prompt_tokens,
            finished.usage.completion_tokens,
            finished.usage.cached_tokens
        ),
        (Some(3), Some(1), Some(2))
    );
    let body: serde_json::Value = serde_json::from_str(&fake.seen.lock().unwrap()[0].body).unwrap();
    assert_eq!(
        (&body["prompt"], &body["stream"]),
        (&serde_json::json!(PROMPT), &serde_json::json!(true))
    );
    let first_text = events.iter().position(|e| matches!(e, Event::Text(_))).unwrap();
    assert!(first_text >= 3, "Waiting before the first token: {events:?}");
    assert!(events[..first_text].iter().all(|e| matches!(e, Event::Waiting { .. })));
}

#[tokio::test]
async fn dropping_a_generation_closes_its_connection() {
    let mut fake = serve(|_, _| vec![stream_head(), text_event("a"), Act::AwaitClose]).await;
    let remote = remote(&fake, options());
    let (first_tx, mut first_rx) = tokio::sync::mpsc::unbounded_channel();
    let request = request();
    let mut on_event = |e| {
        if matches!(e, Event::Text(_)) {
            let _ = first_tx.send(());
        }
    };
    let generation = remote.complete(&request, &mut on_event);
    tokio::select! {
        result = generation => panic!("the generation ended by itself: {result:?}"),
        _ = first_rx.recv() => {}
    }
    // The generation's future is dropped here: the server must see its connection close.
    let closed = tokio::time::timeout(Duration::from_secs(5), fake.closed.recv()).await;
    assert_eq!(closed, Ok(Some(())));
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = Endpoint {
        base_url: format!("http://127.0.0.1:{port}"),
        model: "m".into(),
        api_key_env: None,
    };
    let mut remote = caldrix_remote::Remote::new(&endpoint, options()).unwrap();
    let error = remote.probe().await.unwrap_err();
    assert!(matches!(error, RemoteError::Unreachable { .. }), "{error:?}");
    assert!(
        error.to_string().starts_with(&format!("http://127.0.0.1:{port}/v1/models is unreachable")),
        "{error}"
    );
}

#[tokio::test]
async fn a_connection_closed_before_the_reply_is_sent_once_more_for_an_endpoint_only() {
    // The first connection closes with no reply, as a server closing a kept-alive one does.
    let fake =
        serve(
            |_, n| {
                if n == 0 { vec![] } else { vec![reply("200 OK", "", r#"{"tokens":[5,6]}"#)] }
            },
        )
        .await;
    let tokens = remote(&fake, options()).tokenize("hi", false).await.unwrap();
    assert_eq!(tokens, vec![5, 6]);
    assert_eq!(fake.seen.lock().unwrap().len(), 2, "sent once more on a new connection");

    // A generation is never sent twice: its error names the cut.
    let fake = serve(|_, _| vec![]).await;
    let (result, _) = complete(&remote(&fake, options())).await;
    assert!(matches!(result, Err(RemoteError::Unreachable { .. })), "{result:?}");
    assert_eq!(fake.seen.lock().unwrap().len(), 1, "a generation is sent once");
}
