//! Links between pages: `[[path]]` and `related:` indexed both ways through writes, deletes, a
//! rename and `reindex`; `memory_context`'s neighbourhood within its depth and budget, and only
//! for a caller who may read the page.

use serde_json::{Value, json};

use crate::auth::add_user;
use crate::support::{Server, call, ok, run, runtime, stderr};

fn paths(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|v| v["path"].as_str().unwrap().to_owned()).collect()
}

/// `(path, exists)` of a page's links, as `memory_read_page` lists them.
fn links(read: &Value) -> Vec<(String, bool)> {
    read["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["path"].as_str().unwrap().to_owned(), l["exists"].as_bool().unwrap()))
        .collect()
}

#[test]
fn links_and_backlinks_follow_writes_deletes_a_rename_and_reindex() {
    let server = Server::start("links", &[]);
    let rt = runtime();
    rt.block_on(async {
        let c = server.client(None).await.unwrap();
        let write = |path: &str, body: &str| json!({ "project": "app", "path": path, "body": body });
        let read = |path: &str| json!({ "project": "app", "path": path });
        ok(&c, "memory_write_page", write("notes/a.md", "---\nrelated: [notes/c.md]\n---\n# A\n\nSee [[decisions/b|the decision]]; `[[not/a/link]]`.\n")).await;
        // Dangling: neither target exists yet, and both are kept.
        let a = ok(&c, "memory_read_page", read("notes/a.md")).await;
        assert_eq!(links(&a), [("notes/c.md".into(), false), ("decisions/b.md".into(), false)], "{a}");
        assert_eq!(a["links"][0]["kind"], "related");
        assert_eq!(a["links"][1]["label"], "the decision");
        // The target appears: the link resolves, and the target lists its backlink.
        ok(&c, "memory_write_page", write("decisions/b.md", "# B\n\nWe decided.\n")).await;
        let a = ok(&c, "memory_read_page", read("notes/a.md")).await;
        assert_eq!(links(&a)[1], ("decisions/b.md".into(), true), "{a}");
        let b = ok(&c, "memory_read_page", read("decisions/b.md")).await;
        assert_eq!(paths(&b["backlinks"]), ["notes/a.md"], "{b}");
        assert_eq!((b["backlinks"][0]["title"].as_str(), b["backlinks_total"].as_u64()), (Some("A"), Some(1)));

        // A rename (write under the new path, delete the old): the backlink follows it.
        let text = a["text"].as_str().unwrap().to_owned();
        ok(&c, "memory_write_page", write("notes/a2.md", &text)).await;
        ok(&c, "memory_delete_page", read("notes/a.md")).await;
        let b = ok(&c, "memory_read_page", read("decisions/b.md")).await;
        assert_eq!(paths(&b["backlinks"]), ["notes/a2.md"], "{b}");
        // A rewrite without the link takes it out.
        ok(&c, "memory_write_page", write("notes/a2.md", "# A\n\nNo links.\n")).await;
        let b = ok(&c, "memory_read_page", read("decisions/b.md")).await;
        assert_eq!((b["backlinks"].clone(), b["backlinks_total"].as_u64()), (json!([]), Some(0)), "{b}");
        ok(&c, "memory_write_page", write("notes/a2.md", &text)).await;
        // Deleting the target leaves the link, dangling again.
        ok(&c, "memory_delete_page", read("decisions/b.md")).await;
        let a2 = ok(&c, "memory_read_page", read("notes/a2.md")).await;
        assert_eq!(links(&a2)[1], ("decisions/b.md".into(), false), "{a2}");
        ok(&c, "memory_write_page", write("decisions/b.md", "# B again\n")).await;
        c.cancel().await.unwrap();
    });

    // The index is made again from the wiki alone: the same links, both ways.
    let out = run(
        {
            let mut c = server.cli();
            c.arg("reindex");
            c
        },
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    rt.block_on(async {
        let c = server.client(None).await.unwrap();
        let a2 =
            ok(&c, "memory_read_page", json!({ "project": "app", "path": "notes/a2.md" })).await;
        assert_eq!(
            links(&a2),
            [("notes/c.md".into(), false), ("decisions/b.md".into(), true)],
            "{a2}"
        );
        let b =
            ok(&c, "memory_read_page", json!({ "project": "app", "path": "decisions/b.md" })).await;
        assert_eq!(paths(&b["backlinks"]), ["notes/a2.md"], "{b}");
        c.cancel().await.unwrap();
    });

    // And from the wiki with no index at all.
    let data = server.stop();
    for f in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"] {
        let _ = std::fs::remove_file(data.join(f));
    }
    let server = Server::start_in(&data, &[]);
    rt.block_on(async {
        let c = server.client(None).await.unwrap();
        let b =
            ok(&c, "memory_read_page", json!({ "project": "app", "path": "decisions/b.md" })).await;
        assert_eq!(paths(&b["backlinks"]), ["notes/a2.md"], "{b}");
        c.cancel().await.unwrap();
    });
}

/// A chain hub -> one -> two -> three, and `fan` linking to hub.
async fn write_graph(c: &rmcp::service::RunningService<rmcp::RoleClient, ()>, project: &str) {
    for (path, body) in [
        ("hub.md", "# Hub\n\nThe centre. [[one]]\n"),
        ("one.md", "---\nsummary: First step.\n---\n# One\n\n[[two]] [[missing]]\n"),
        (
            "two.md",
            "# Two\n\nSecond step, told at length so the whole walk needs more than the smallest budget: queues, workers, retries, backoff. [[three]]\n",
        ),
        (
            "three.md",
            "# Three\n\nThird step, also told at length so the whole walk needs more than the smallest budget: leases, heartbeats, timeouts.\n",
        ),
        ("fan.md", "# Fan\n\nPoints at [[hub]].\n"),
    ] {
        ok(c, "memory_write_page", json!({ "project": project, "path": path, "body": body })).await;
    }
}

#[test]
fn memory_context_walks_links_within_depth_and_budget() {
    let server = Server::start("context", &[]);
    runtime().block_on(async {
        let c = server.client(None).await.unwrap();
        write_graph(&c, "app").await;
        let ctx = |extra: Value| {
            let mut args = json!({ "project": "app", "path": "hub.md" });
            for (k, v) in extra.as_object().unwrap() {
                args[k] = v.clone();
            }
            args
        };
        let one = ok(&c, "memory_context", ctx(json!({}))).await;
        assert_eq!(paths(&one["pages"]), ["hub.md", "one.md", "fan.md"], "{one}");
        assert_eq!((one["depth"].as_u64(), one["truncated"].as_bool()), (Some(1), Some(false)));
        let p1 = &one["pages"][1];
        assert_eq!(
            (p1["title"].as_str(), p1["summary"].as_str()),
            (Some("One"), Some("First step."))
        );
        assert_eq!(
            (p1["via"].as_str(), p1["relation"].as_str()),
            (Some("hub.md"), Some("linked from"))
        );
        assert_eq!(one["pages"][2]["relation"], "links to", "fan links to hub: {one}");
        assert_eq!(one["pages"][0]["summary"], "The centre. [[one]]");

        let two = ok(&c, "memory_context", ctx(json!({ "depth": 2 }))).await;
        assert_eq!(paths(&two["pages"]), ["hub.md", "one.md", "fan.md", "two.md"], "{two}");
        let three = ok(&c, "memory_context", ctx(json!({ "depth": 3 }))).await;
        assert_eq!(paths(&three["pages"]), ["hub.md", "one.md", "fan.md", "two.md", "three.md"]);
        assert_eq!(three["pages"][4]["depth"], 3);
        let zero = ok(&c, "memory_context", ctx(json!({ "depth": 0 }))).await;
        assert_eq!(paths(&zero["pages"]), ["hub.md"]);

        // The budget: the smallest one holds the start and what fits after it, breadth-first.
        let small = ok(&c, "memory_context", ctx(json!({ "depth": 3, "max_bytes": 500 }))).await;
        let got = paths(&small["pages"]);
        let bytes: usize =
            small["pages"].as_array().unwrap().iter().map(|p| p.to_string().len()).sum();
        assert!(small["truncated"].as_bool().unwrap(), "{small}");
        assert!(got.len() < 5 && got[0] == "hub.md" && bytes <= 500, "{small}");
        assert_eq!(got, paths(&three["pages"])[..got.len()], "a prefix of the full walk");

        // A digest line's path, as printed (no scope, no project): read from the profile, as
        // memory_read_page reads it.
        ok(&c, "memory_write_page", json!({ "scope": "profile", "path": "tools/pnpm.md", "body": "# Pnpm\n\nUse pnpm. [[profile/tools/npm]]\n" })).await;
        ok(&c, "memory_write_page", json!({ "scope": "profile", "path": "tools/npm.md", "body": "# Npm\n\nNot npm.\n" })).await;
        let printed = ok(&c, "memory_context", json!({ "path": "profile/tools/pnpm.md" })).await;
        assert_eq!(paths(&printed["pages"]), ["profile/tools/pnpm.md", "profile/tools/npm.md"], "{printed}");
        assert_eq!(printed["project"], "_global");

        // Bad input names the value and its bound.
        let cases = [
            (
                ctx(json!({ "depth": 4 })),
                "memory_context: `depth` 4 is out of range: it takes 0 to 3",
            ),
            (
                ctx(json!({ "max_bytes": 100 })),
                "memory_context: `max_bytes` 100 is out of range: it takes 500 to 32000",
            ),
            (
                ctx(json!({ "max_bytes": 40000 })),
                "memory_context: `max_bytes` 40000 is out of range: it takes 500 to 32000",
            ),
            (ctx(json!({ "path": "nowhere.md" })), "no page default/app/nowhere.md"),
            (ctx(json!({ "depth": -1 })), "memory_context: `depth` must be"),
        ];
        for (args, want) in cases {
            let (err, text) = call(&c, "memory_context", args.clone()).await;
            assert!(err && text.starts_with(want), "{args}: {text}");
        }
        c.cancel().await.unwrap();
    });
}

#[test]
fn memory_context_and_links_never_reach_a_page_the_caller_cannot_read() {
    let root_token = "root-secret-token";
    let server = Server::start("context-auth", &[("AI_MEMORY_SERVER__ROOT_TOKEN", root_token)]);
    let (_, alice_key) = add_user(&server, "alice");
    let (_, bob_key) = add_user(&server, "bob");
    runtime().block_on(async {
        let alice = server.client(Some(&alice_key)).await.unwrap();
        let bob = server.client(Some(&bob_key)).await.unwrap();
        ok(&bob, "memory_write_page", json!({ "project": "vault", "path": "hub.md", "body": "# Hub\n", "restricted": true })).await;
        write_graph(&bob, "vault").await;
        // An open project linking to the same paths: links stay in their project, so the
        // restricted pages are not found through them.
        ok(&alice, "memory_write_page", json!({ "project": "open", "path": "start.md", "body": "# Start\n\n[[hub]] [[one]]\n" })).await;

        let own = ok(&bob, "memory_context", json!({ "project": "vault", "path": "hub.md" })).await;
        assert_eq!(paths(&own["pages"]), ["hub.md", "one.md", "fan.md"], "{own}");

        // Alice: the answer a missing page gets, for a page and a project alike.
        let (_, missing) = call(&alice, "memory_context", json!({ "project": "ghost", "path": "hub.md" })).await;
        let (err, text) = call(&alice, "memory_context", json!({ "project": "vault", "path": "hub.md" })).await;
        assert!(err && text == missing.replace("ghost", "vault"), "{text} / {missing}");
        let (err, text) = call(&alice, "memory_context", json!({ "project": "vault", "path": "nope.md" })).await;
        assert!(err && text == "no page default/vault/nope.md", "{text}");
        let start = ok(&alice, "memory_context", json!({ "project": "open", "path": "start.md", "depth": 3 })).await;
        assert_eq!(paths(&start["pages"]), ["start.md"], "{start}");
        let read = ok(&alice, "memory_read_page", json!({ "project": "open", "path": "start.md" })).await;
        assert_eq!(links(&read), [("hub.md".into(), false), ("one.md".into(), false)], "{read}");
        let (err, _) = call(&alice, "memory_read_page", json!({ "project": "vault", "path": "one.md" })).await;
        assert!(err);
        for c in [alice, bob] {
            c.cancel().await.unwrap();
        }
    });
}
