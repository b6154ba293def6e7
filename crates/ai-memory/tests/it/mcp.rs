//! The tools over both transports: round trips, history, refusals that store nothing.

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use crate::support::{Server, call, command, ok, repo, runtime};

#[test]
fn pages_round_trip_over_http_with_history_and_global_hits() {
    let server = Server::start("roundtrip", &[]);
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        let info = client.peer_info().unwrap();
        assert_eq!(info.server_info.as_ref().unwrap().name, "ai-memory");
        let tools: Vec<String> = client.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
        for tool in ["memory_write_page", "memory_read_page", "memory_query", "memory_delete_page"] {
            assert!(tools.contains(&tool.to_owned()), "{tools:?}");
        }

        let page = |body: &str| json!({ "project": "app", "path": "decisions/queue.md", "body": body });
        let w = ok(&client, "memory_write_page", page("---\nsummary: One queue per member.\n---\n# Queue\n\nJobs wait in one FIFO queue per member.\n")).await;
        assert_eq!((w["workspace"].as_str(), w["project"].as_str(), w["created"].as_bool()), (Some("default"), Some("app"), Some(true)));
        ok(&client, "memory_write_page", page("# Queue\n\nJobs wait in a priority queue per member.\n")).await;
        ok(&client, "memory_write_page", json!({ "scope": "global", "path": "style.md", "body": "# Style\n\nPrefer small queue types.\n" })).await;

        let read = ok(&client, "memory_read_page", json!({ "project": "app", "path": "decisions/queue.md" })).await;
        assert!(read["text"].as_str().unwrap().contains("priority queue"), "{read}");
        assert!(!read["text"].as_str().unwrap().contains("summary:"), "a rewrite replaces the whole page");
        assert_eq!(read["history"].as_array().unwrap().len(), 2, "both versions are in git: {read}");

        let q = ok(&client, "memory_query", json!({ "project": "app", "query": "what queue does a member use?" })).await;
        assert_eq!(q["hits"][0]["path"], "decisions/queue.md", "{q}");
        assert!(q["hits"][0]["snippet"].as_str().unwrap().contains("[queue]"), "{q}");
        assert_eq!(q["global_scope_hits"][0]["path"], "style.md", "{q}");
        assert_eq!(q["global_scope_hits"][0]["project"], "_global", "{q}");

        let d = ok(&client, "memory_delete_page", json!({ "project": "app", "path": "decisions/queue.md" })).await;
        assert!(d["commit"].as_str().unwrap().len() == 40);
        let (err, text) = call(&client, "memory_read_page", json!({ "project": "app", "path": "decisions/queue.md" })).await;
        assert!(err && text.contains("no page default/app/decisions/queue.md"), "{text}");
        let q = ok(&client, "memory_query", json!({ "project": "app", "query": "queue" })).await;
        assert_eq!(q["hits"], json!([]), "a deleted page is out of the index");
        let (err, text) = call(&client, "memory_delete_page", json!({ "project": "app", "path": "decisions/queue.md" })).await;
        assert!(err && text.contains("no page"), "{text}");
        client.cancel().await.unwrap();
    });
    // Git keeps the deleted page's history, and the mirror follows the branch.
    let log = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(server.data.join("wiki.git"))
        .args(["log", "--format=%s", "--", "default/app/decisions/queue.md"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 3, "two writes and a delete");
    assert!(!server.data.join("wiki/default/app/decisions/queue.md").exists());
    assert!(server.data.join("wiki/default/_global/style.md").exists());
}

/// `ai-memory mcp` over stdio, started in a checkout: the project is the checkout's, and the
/// pages are the same store the HTTP server serves.
#[test]
fn stdio_mcp_works_in_the_callers_project() {
    let server = Server::start("stdio", &[]);
    let checkout = repo("shop");
    runtime().block_on(async {
        let mut c = tokio::process::Command::from(command(&server.data, &server.home));
        c.arg("mcp").current_dir(&checkout);
        let stdio = ().serve(TokioChildProcess::new(c).unwrap()).await.unwrap();
        let w = ok(
            &stdio,
            "memory_write_page",
            json!({ "path": "gotchas/tz.md", "body": "Store times in UTC.\n" }),
        )
        .await;
        assert_eq!(w["project"], "shop", "the caller's project: {w}");
        let (err, text) = call(
            &stdio,
            "memory_write_page",
            json!({ "scope": "team", "path": "a.md", "body": "x" }),
        )
        .await;
        assert!(err && text.contains("unknown scope `team`"), "{text}");
        stdio.cancel().await.unwrap();

        let http = server.client(None).await.unwrap();
        let read =
            ok(&http, "memory_read_page", json!({ "project": "shop", "path": "gotchas/tz.md" }))
                .await;
        assert_eq!(read["text"], "Store times in UTC.\n");
        http.cancel().await.unwrap();
    });
}

#[test]
fn bad_input_is_named_and_stores_nothing() {
    let server = Server::start("bad", &[]);
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        ok(&client, "memory_write_page", json!({ "project": "app", "path": "keep.md", "body": "# Keep\n" })).await;
        let head = server.head();
        let files = server.files();
        let big = "x".repeat(300 * 1024);
        let cases = [
            (json!({ "project": "app", "path": "a.md", "body": "---\nsummary: [unclosed\n---\nbody" }), "frontmatter is not valid"),
            (json!({ "project": "app", "path": "a.md", "body": "---\nsummary: x\nno end" }), "no line `---` closes it"),
            (json!({ "project": "app", "path": "a.md", "body": big }), "a page holds at most 262144"),
            (json!({ "project": "app", "path": "../other/a.md", "body": "x" }), "must not leave its project"),
            (json!({ "project": "app", "path": "notes/../../a.md", "body": "x" }), "must not leave its project"),
            (json!({ "project": "../etc", "path": "a.md", "body": "x" }), "is not a valid name"),
            (json!({ "project": "app", "path": "/abs.md", "body": "x" }), "relative"),
            (json!({ "scope": "team", "path": "a.md", "body": "x" }), "unknown scope `team`"),
            (json!({ "project": "app", "path": "a.md", "body": "x", "applies_to": ["rust"] }), "are for profile entries"),
            (json!({ "scope": "profile", "path": "tools/x.md", "body": "x", "applies_to": ["rustacean"] }), "unknown stack tag `rustacean`"),
        ];
        for (args, want) in cases {
            let (err, text) = call(&client, "memory_write_page", args.clone()).await;
            assert!(err && text.contains(want), "{args}: {text}");
        }
        assert_eq!(server.head(), head, "no refused write committed anything");
        assert_eq!(server.files(), files);
        let read = ok(&client, "memory_read_page", json!({ "project": "app", "path": "keep.md" })).await;
        assert_eq!(read["text"], "# Keep\n", "what was stored is intact");
        client.cancel().await.unwrap();
    });
}

#[test]
fn secrets_are_redacted_before_they_are_stored() {
    let server = Server::start("secrets", &[]);
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        let body = "Deploy with DATABASE_URL=postgres://app:hunter2pw@db/prod and token ghp_abcdefghijklmnopqrstuvwxyz0123456789.\n";
        ok(&client, "memory_write_page", json!({ "project": "app", "path": "deploy.md", "body": body })).await;
        let read = ok(&client, "memory_read_page", json!({ "project": "app", "path": "deploy.md" })).await;
        let text = read["text"].as_str().unwrap();
        assert!(!text.contains("hunter2pw") && !text.contains("ghp_"), "{text}");
        assert!(text.contains("postgres://app:[REDACTED]@db/prod"), "{text}");
        client.cancel().await.unwrap();
    });
    let stored = std::fs::read_to_string(server.data.join("wiki/default/app/deploy.md")).unwrap();
    assert!(!stored.contains("hunter2pw"));
}

#[test]
fn fifty_concurrent_writers_lose_no_write() {
    let server = Server::start("concurrent", &[]);
    let rt = runtime();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..50 {
            let client = server.client(None).await.unwrap();
            tasks.push(tokio::spawn(async move {
                let args = json!({ "project": "busy", "path": format!("notes/n{i}.md"), "body": format!("# Note {i}\n\nwriter {i}\n") });
                let result = ok(&client, "memory_write_page", args).await;
                client.cancel().await.unwrap();
                result
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let client = server.client(None).await.unwrap();
        for i in 0..50 {
            let read = ok(&client, "memory_read_page", json!({ "project": "busy", "path": format!("notes/n{i}.md") })).await;
            assert!(read["text"].as_str().unwrap().contains(&format!("writer {i}")));
        }
        let q = ok(&client, "memory_query", json!({ "project": "busy", "query": "writer", "limit": 100 })).await;
        assert_eq!(q["hits"].as_array().unwrap().len(), 50, "all fifty are indexed");
        client.cancel().await.unwrap();
    });
    assert_eq!(server.files().len(), 50);
    let count = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(server.data.join("wiki.git"))
        .args(["rev-list", "--count", "main"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "50", "one commit per write");
}
