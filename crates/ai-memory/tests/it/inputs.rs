//! Strict inputs: an argument key a tool does not take, a missing one or one of the wrong type
//! is refused by name, on every tool and both transports, and nothing is stored; the hook
//! endpoint refuses unknown keys the same way.

use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::support::{Server, call, command, ok, post_hook, repo, runtime};

/// Valid arguments for each tool, in the project `app` (written first, so read and delete
/// have a page to act on).
fn valid_args(tool: &str) -> Value {
    match tool {
        "memory_write_page" => json!({ "project": "app", "path": "new.md", "body": "# New\n" }),
        "memory_read_page" | "memory_delete_page" | "memory_context" => {
            json!({ "project": "app", "path": "keep.md" })
        }
        "memory_query" => json!({ "project": "app", "query": "keep" }),
        "memory_forget" => json!({ "path": "profile/tools/none.md" }),
        other => panic!("a tool this test does not know: {other} (add it to valid_args)"),
    }
}

/// Every listed tool, called with one misspelt key beside valid arguments: a tool error that
/// names the key and the keys the tool takes; no debug text.
async fn check_unknown_keys(client: &RunningService<RoleClient, ()>, transport: &str) {
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 6, "{transport}: {tools:?}");
    for tool in tools {
        let name = tool.name.as_ref();
        assert_eq!(
            tool.input_schema.get("additionalProperties"),
            Some(&Value::Bool(false)),
            "{transport}: {name} advertises that it takes no other keys"
        );
        let properties = tool.input_schema["properties"].as_object().unwrap();
        let takes: Vec<String> = properties.keys().map(|k| format!("`{k}`")).collect();
        let mut args = valid_args(name);
        args["scop"] = json!("global");
        let (err, text) = call(client, name, args).await;
        assert!(err, "{transport}: {name} accepted an unknown key: {text}");
        assert_eq!(
            text,
            format!("{name} has no argument `scop`: it takes {}", takes.join(", ")),
            "{transport}"
        );
    }
}

#[test]
fn unknown_argument_keys_are_refused_by_name_on_every_tool_over_http_and_stdio() {
    let server = Server::start("unknown-keys", &[]);
    let checkout = repo("app");
    runtime().block_on(async {
        let http = server.client(None).await.unwrap();
        ok(
            &http,
            "memory_write_page",
            json!({ "project": "app", "path": "keep.md", "body": "# Keep\n" }),
        )
        .await;
        let head = server.head();
        let files = server.files();
        check_unknown_keys(&http, "http").await;

        let mut c = tokio::process::Command::from(command(&server.data, &server.home));
        c.arg("mcp").current_dir(&checkout);
        let stdio = ().serve(TokioChildProcess::new(c).unwrap()).await.unwrap();
        check_unknown_keys(&stdio, "stdio").await;
        stdio.cancel().await.unwrap();

        // The bug this guards: `scop` was dropped, and the page went to the caller's project.
        assert_eq!(server.head(), head, "no refused call committed anything");
        assert_eq!(server.files(), files);
        let read =
            ok(&http, "memory_read_page", json!({ "project": "app", "path": "keep.md" })).await;
        assert_eq!(read["text"], "# Keep\n", "the refused delete deleted nothing");
        http.cancel().await.unwrap();
    });
}

#[test]
fn missing_and_mistyped_arguments_are_named() {
    let server = Server::start("mistyped", &[]);
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        let cases = [
            (
                "memory_write_page",
                json!({ "project": "app", "path": "a.md" }),
                "memory_write_page needs the argument `body`",
            ),
            (
                "memory_write_page",
                json!({ "project": "app", "path": "a.md", "body": "x", "restricted": "yes" }),
                "memory_write_page: `restricted` must be true or false (not a string)",
            ),
            (
                "memory_write_page",
                json!({ "project": "app", "path": "a.md", "body": ["x"] }),
                "memory_write_page: `body` must be a string (not a list)",
            ),
            (
                "memory_query",
                json!({ "project": "app", "query": "x", "limit": "5" }),
                "memory_query: `limit` must be a whole number (not a string)",
            ),
            (
                "memory_read_page",
                json!({ "project": "app" }),
                "memory_read_page needs the argument `path`",
            ),
            ("memory_delete_page", json!({}), "memory_delete_page needs the argument `path`"),
        ];
        for (tool, args, want) in cases {
            let (err, text) = call(&client, tool, args.clone()).await;
            assert!(err, "{tool} {args}: {text}");
            assert_eq!(text, want, "{tool} {args}");
        }
        assert_eq!(server.head(), "", "nothing was committed");
        client.cancel().await.unwrap();
    });
}

#[test]
fn the_hook_endpoint_refuses_unknown_keys_by_name() {
    let server = Server::start("hook-keys", &[]);
    let event = |extra: (&str, Value)| {
        let mut e = json!({ "harness": "codex", "session_id": "s1", "workspace": "default", "project": "app" });
        e[extra.0] = extra.1;
        e
    };
    let (status, body) =
        post_hook(&server, "prompt-submit", None, &event(("promt", json!("always use pnpm"))));
    assert_eq!(status, 400, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.starts_with("the hook event is not valid: unknown field `promt`, expected one of "),
        "{error}"
    );
    assert!(!error.contains(" at line "), "no parser position: {error}");
    let (status, body) =
        post_hook(&server, "prompt-submit", None, &event(("prompt", json!("always use pnpm"))));
    assert_eq!((status, &body["captured"]), (200, &json!(true)), "{body}");
}
