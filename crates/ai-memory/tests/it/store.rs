//! The index is a cache of the wiki: `reindex` rebuilds it identically; pages copied into the
//! wiki by hand are picked up while the server runs.

use std::time::{Duration, Instant};

use ai_memory_index::Index;
use serde_json::json;

use crate::support::{Server, ok, run, runtime, stderr, stdout};

type Dump = Vec<ai_memory_index::DumpRow>;

fn dump(server: &Server) -> Dump {
    Index::open(&server.data.join("index.sqlite")).unwrap().dump().unwrap()
}

#[test]
fn reindex_rebuilds_an_identical_index_from_the_wiki() {
    let server = Server::start("reindex", &[]);
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        for (project, path, body) in [
            ("app", "decisions/adr-1.md", "# ADR 1\n\n**Status:** Accepted\n\nWe keep one queue.\n"),
            ("app", "notes/n.md", "---\nsummary: A note.\nowner: me\n---\nText.\n"),
            ("web", "_rules/style.md", "# Style\n\nTabs, never spaces.\n"),
        ] {
            ok(&client, "memory_write_page", json!({ "project": project, "path": path, "body": body })).await;
        }
        ok(&client, "memory_write_page", json!({ "project": "vault", "path": "k.md", "body": "secret plans", "restricted": true })).await;
        client.cancel().await.unwrap();
    });
    let before = dump(&server);
    assert_eq!(before.len(), 4);
    let out = run(
        {
            let mut c = server.cli();
            c.arg("reindex");
            c
        },
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("indexed 4 pages"), "{}", stdout(&out));
    assert_eq!(dump(&server), before);
}

#[test]
fn an_index_made_from_the_wiki_alone_equals_the_first_and_keeps_access() {
    let server = Server::start("fromwiki", &[]);
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        ok(
            &client,
            "memory_write_page",
            json!({ "project": "app", "path": "a.md", "body": "# A\n\nalpha\n" }),
        )
        .await;
        ok(
            &client,
            "memory_write_page",
            json!({ "project": "vault", "path": "k.md", "body": "kappa", "restricted": true }),
        )
        .await;
        client.cancel().await.unwrap();
    });
    let before = dump(&server);
    let data = server.stop();
    for f in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"] {
        let _ = std::fs::remove_file(data.join(f));
    }
    let server = Server::start_in(&data, &[]);
    assert_eq!(dump(&server), before, "opening a data directory without an index builds it");
    let index = Index::open(&data.join("index.sqlite")).unwrap();
    let vault = index
        .project(
            &ai_memory_core::WorkspaceName::new("default").unwrap(),
            &ai_memory_core::ProjectName::new("vault").unwrap(),
        )
        .unwrap()
        .unwrap();
    assert!(vault.restricted, "a restricted project stays restricted: its mode is in the wiki");
}

#[test]
fn pages_copied_into_the_wiki_by_hand_are_picked_up() {
    let server = Server::start("watch", &[]);
    let dir = server.data.join("wiki/default/app/notes");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("by-hand.md"),
        "# By hand\n\nCopied while the server runs: zeppelin.\n",
    )
    .unwrap();
    std::fs::write(dir.join("broken.md"), "---\nsummary: [oops\n---\nzeppelin too\n").unwrap();
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let q =
                ok(&client, "memory_query", json!({ "project": "app", "query": "zeppelin" })).await;
            let paths: Vec<&str> =
                q["hits"].as_array().unwrap().iter().filter_map(|h| h["path"].as_str()).collect();
            if !paths.is_empty() {
                assert_eq!(paths, ["notes/by-hand.md"], "the broken page is left out");
                break;
            }
            assert!(Instant::now() < deadline, "the watcher did not pick the page up");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        client.cancel().await.unwrap();
    });
    assert!(
        server.files().contains(&"default/app/notes/by-hand.md".to_owned()),
        "committed to git"
    );
    assert!(!server.files().contains(&"default/app/notes/broken.md".to_owned()));
    assert!(
        server.data.join("wiki/default/app/notes/broken.md").exists(),
        "a broken file is left alone"
    );
}
