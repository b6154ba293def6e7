//! Who reaches what: operator A against B's restricted project, root, no token; every tool and
//! the hook endpoint. Each check here fails when its guard is removed.

use serde_json::{Value, json};

use crate::support::{Server, call, ok, post_hook, run, runtime, stderr, stdout};

const ROOT: &str = "root-secret-token";

/// Adds an operator through the CLI; their id and API key.
pub(crate) fn add_user(server: &Server, name: &str) -> (i64, String) {
    let out = run(
        {
            let mut c = server.cli();
            c.args(["user", "add", name]);
            c
        },
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let id = text.split("(id ").nth(1).and_then(|s| s.split(')').next()).unwrap().parse().unwrap();
    let token = text.lines().last().unwrap().trim().to_owned();
    assert!(token.starts_with("aim_"), "{text}");
    (id, token)
}

fn grant(server: &Server, user: &str, project: &str, level: &str) {
    let out = run(
        {
            let mut c = server.cli();
            c.args([
                "user",
                "grant",
                "--user",
                user,
                "--workspace",
                "default",
                "--project",
                project,
                "--level",
                level,
            ]);
            c
        },
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

fn hook_event(project: &str, session: &str) -> Value {
    json!({ "harness": "claude-code", "session_id": session, "workspace": "default", "project": project })
}

#[test]
fn operators_see_only_what_they_may_and_restricted_projects_leak_nothing() {
    let server = Server::start("auth", &[("AI_MEMORY_SERVER__ROOT_TOKEN", ROOT)]);
    let (_alice_id, alice_key) = add_user(&server, "alice");
    let (bob_id, bob_key) = add_user(&server, "bob");
    runtime().block_on(async {
        // No token, or a wrong one: refused at the door, for MCP and for hooks.
        assert!(server.client(None).await.is_err(), "MCP without a token");
        assert!(server.client(Some("aim_wrong")).await.is_err(), "MCP with a wrong token");
        assert_eq!(post_hook(&server, "session-start", None, &hook_event("shared", "s0")).0, 401);
        assert_eq!(post_hook(&server, "session-start", Some("nope"), &hook_event("shared", "s0")).0, 401);

        let alice = server.client(Some(&alice_key)).await.unwrap();
        let bob = server.client(Some(&bob_key)).await.unwrap();
        let root = server.client(Some(ROOT)).await.unwrap();

        ok(&bob, "memory_write_page", json!({ "project": "shared", "path": "s.md", "body": "open zebra notes" })).await;
        ok(&bob, "memory_write_page", json!({ "project": "bob-private", "path": "p.md", "body": "private zebra plans", "restricted": true })).await;

        // An open project: every operator reads and writes.
        ok(&alice, "memory_read_page", json!({ "project": "shared", "path": "s.md" })).await;
        ok(&alice, "memory_write_page", json!({ "project": "shared", "path": "a.md", "body": "alice was here" })).await;

        // B's restricted project: A gets the answer a missing page gets, for every tool.
        let (_, missing) = call(&alice, "memory_read_page", json!({ "project": "ghost", "path": "p.md" })).await;
        let (err, text) = call(&alice, "memory_read_page", json!({ "project": "bob-private", "path": "p.md" })).await;
        assert!(err && text == missing.replace("ghost", "bob-private"), "{text} / {missing}");
        let (err, text) = call(&alice, "memory_write_page", json!({ "project": "bob-private", "path": "x.md", "body": "x" })).await;
        assert!(err && text.contains("no project default/bob-private"), "{text}");
        let (err, text) = call(&alice, "memory_delete_page", json!({ "project": "bob-private", "path": "p.md" })).await;
        assert!(err && text.contains("no page"), "{text}");
        let q = ok(&alice, "memory_query", json!({ "project": "bob-private", "query": "zebra" })).await;
        assert_eq!(q["hits"], json!([]), "not even a count: {q}");
        let q = ok(&alice, "memory_query", json!({ "project": "shared", "query": "zebra", "limit": 100 })).await;
        let paths: Vec<&str> = q["hits"].as_array().unwrap().iter().filter_map(|h| h["path"].as_str()).collect();
        assert_eq!(paths, ["s.md"], "{q}");
        let (status, body) = post_hook(&server, "session-start", Some(&alice_key), &hook_event("bob-private", "sa"));
        assert_eq!(status, 404, "{body}");
        let (status, body) = post_hook(&server, "prompt-submit", Some(&alice_key), &json!({ "harness": "codex", "session_id": "sa", "workspace": "default", "project": "bob-private", "prompt": "hi" }));
        assert_eq!(status, 404, "{body}");

        // B and root see it all.
        let q = ok(&bob, "memory_query", json!({ "project": "bob-private", "query": "zebra" })).await;
        assert_eq!(q["hits"][0]["path"], "p.md");
        let (status, body) = post_hook(&server, "session-start", Some(&bob_key), &hook_event("bob-private", "sb"));
        assert_eq!(status, 200, "{body}");
        assert!(body["context"].as_str().unwrap().contains("p.md"), "{body}");
        // A session id is its operator's: nobody else reopens or ends it.
        let (status, body) = post_hook(&server, "session-start", Some(&alice_key), &hook_event("shared", "sb"));
        assert_eq!(status, 403, "{body}");
        let (status, body) = post_hook(&server, "session-end", Some(&alice_key), &hook_event("shared", "sb"));
        assert_eq!((status, body["ended"].as_bool()), (200, Some(false)), "{body}");
        let (status, body) = post_hook(&server, "session-end", Some(&bob_key), &hook_event("bob-private", "sb"));
        assert_eq!((status, body["ended"].as_bool()), (200, Some(true)), "{body}");
        ok(&root, "memory_read_page", json!({ "project": "bob-private", "path": "p.md" })).await;
        let (err, text) = call(&root, "memory_write_page", json!({ "project": "bob-private", "path": "p.md", "body": "x", "restricted": false })).await;
        assert!(err && text.contains("access mode is fixed"), "{text}");

        // Grants: read lets A read, not write; write lets A write.
        grant(&server, "alice", "bob-private", "read");
        ok(&alice, "memory_read_page", json!({ "project": "bob-private", "path": "p.md" })).await;
        let (err, text) = call(&alice, "memory_write_page", json!({ "project": "bob-private", "path": "x.md", "body": "x" })).await;
        assert!(err && text.contains("no write access"), "{text}");
        let (err, text) = call(&alice, "memory_delete_page", json!({ "project": "bob-private", "path": "p.md" })).await;
        assert!(err && text.contains("no write access"), "{text}");
        grant(&server, "alice", "bob-private", "write");
        ok(&alice, "memory_write_page", json!({ "project": "bob-private", "path": "x.md", "body": "x" })).await;

        // Reserved projects: the global scope is written by root or a write grant; nobody
        // makes another operator's private profile.
        let (err, text) = call(&alice, "memory_write_page", json!({ "scope": "global", "path": "g.md", "body": "x" })).await;
        assert!(err && text.contains("`_global` is reserved"), "{text}");
        ok(&root, "memory_write_page", json!({ "scope": "global", "path": "g.md", "body": "global zebra" })).await;
        let (err, text) = call(&alice, "memory_write_page", json!({ "scope": "global", "path": "g2.md", "body": "x" })).await;
        assert!(err && text.contains("no write access to default/_global"), "{text}");
        let q = ok(&alice, "memory_query", json!({ "project": "shared", "query": "zebra" })).await;
        assert_eq!(q["global_scope_hits"][0]["path"], "g.md", "the global scope is readable by all: {q}");
        let (err, text) = call(&alice, "memory_write_page", json!({ "project": format!("_profile.{bob_id}"), "path": "profile/tools/x.md", "body": "x" })).await;
        assert!(err && text.contains("is reserved"), "{text}");
        ok(&bob, "memory_write_page", json!({ "project": format!("_profile.{bob_id}"), "path": "profile/tools/x.md", "body": "bob's own" })).await;
        let (err, _) = call(&alice, "memory_read_page", json!({ "project": format!("_profile.{bob_id}"), "path": "profile/tools/x.md" })).await;
        assert!(err, "a private profile is restricted to its operator");

        for c in [alice, bob, root] {
            c.cancel().await.unwrap();
        }
    });
}

#[test]
fn a_server_off_loopback_refuses_to_start_without_a_token() {
    let data = crate::support::temp("open");
    let home = crate::support::temp("home");
    let mut c = crate::support::command(&data, &home);
    c.args(["serve", "--bind", "0.0.0.0:0"]);
    let out = run(c, None);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("refusing to listen on 0.0.0.0:0 without a root token"),
        "{}",
        stderr(&out)
    );
}

/// A loopback server answers only requests addressed to a loopback name (a page that rebinds
/// its own domain to 127.0.0.1 gets 403).
#[test]
fn a_loopback_server_refuses_other_host_names() {
    use std::io::{Read, Write};
    let server = Server::start("host", &[]);
    let status = |host: &str| {
        let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
        write!(s, "GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        reply.lines().next().unwrap_or_default().to_owned()
    };
    assert!(status(&server.addr).contains(" 200 "), "{}", status(&server.addr));
    assert!(status("localhost:7434").contains(" 200 "));
    assert!(status("evil.example").contains(" 403 "), "{}", status("evil.example"));
    assert!(status("evil.example:7434").contains(" 403 "));
}
