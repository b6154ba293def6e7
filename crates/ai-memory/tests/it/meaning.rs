//! Retrieval by meaning through the real binary: `models fetch --from` converts the cached
//! all-MiniLM-L6-v2, a running server embeds what is written in the background, and a query
//! finds a page by a word it does not contain; without the model, the same query is the
//! full-text search it always was.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, command, ok, run, runtime, stderr, stdout, temp};

fn query(c: std::process::Command) -> Value {
    let o = run(c, None);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn paths(v: &Value) -> Vec<String> {
    v["hits"].as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_page_is_found_by_meaning_once_the_model_is_installed() {
    let data = temp("meaning-data");
    let home = temp("meaning-home");
    let write = |path: &str, body: &str| {
        let mut c = command(&data, &home);
        c.args(["write-page", "--project", "garage", "--path", path, "--body", body]);
        let o = run(c, None);
        assert!(o.status.success(), "{}", stderr(&o));
    };
    write(
        "notes/tyres.md",
        "# Winter\n\nThe automobile needs new tyres before the mountain trip.\n",
    );
    write("notes/market.md", "# Market\n\nWe bought bananas and apples at the Saturday market.\n");
    write("notes/tax.md", "# Taxes\n\nThe accountant files the quarterly return in April.\n");
    let ask = |text: &str| {
        let mut c = command(&data, &home);
        c.args(["query", "--project", "garage", text]);
        query(c)
    };

    // No model: "car" is in no page, so nothing is found, and `models` says why.
    assert_eq!(paths(&ask("my car")), Vec::<String>::new());
    let mut c = command(&data, &home);
    c.arg("models");
    let status = stdout(&run(c, None));
    assert!(status.contains("retrieval by meaning: off (no model at"), "{status}");
    assert!(status.contains("ai-memory models fetch"), "{status}");

    let mut c = command(&data, &home);
    c.args(["models", "fetch", "--from"]).arg(test_models::minilm_dir());
    let o = run(c, None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("384 dimensions"), "{}", stdout(&o));
    assert!(stdout(&o).contains("embedded 3 pages"), "{}", stdout(&o));
    assert!(data.join("models/all-MiniLM-L6-v2.gguf").is_file());

    let found = ask("my car");
    assert_eq!(paths(&found), vec!["notes/tyres.md"], "only the page near in meaning: {found}");
    // A page found by meaning only shows its lead, not a matched word.
    assert!(found["hits"][0]["snippet"].as_str().unwrap().contains("automobile"), "{found}");
    // Words still count: a word match and a near meaning both rank.
    let fruit = ask("bananas");
    assert_eq!(paths(&fruit)[0], "notes/market.md", "{fruit}");

    // Switched off in settings: full-text only again.
    std::fs::write(data.join("config.toml"), "[embedding]\nenabled = false\n").unwrap();
    assert_eq!(paths(&ask("my car")), Vec::<String>::new());
    let mut c = command(&data, &home);
    c.arg("models");
    assert!(stdout(&run(c, None)).contains("off ([embedding] enabled = false)"));
}

#[test]
fn a_running_server_embeds_a_write_in_the_background() {
    let data = temp("meaning-bg");
    let home = temp("meaning-bg-home");
    let mut c = command(&data, &home);
    c.args(["models", "fetch", "--from"]).arg(test_models::minilm_dir());
    let o = run(c, None);
    assert!(o.status.success(), "{}", stderr(&o));
    let server = Server::start_in(&data, &[]);
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        let page = json!({ "project": "home", "path": "pets.md",
            "body": "# Pets\n\nOur puppy sleeps in a basket by the stove.\n" });
        let started = Instant::now();
        ok(&client, "memory_write_page", page).await;
        // The write returns at once; the embedder catches up shortly after.
        loop {
            let q = ok(&client, "memory_query", json!({ "project": "home", "query": "young dog" }))
                .await;
            if paths(&q) == vec!["pets.md"] {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "never found by meaning: {q}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_broken_model_file_is_named_and_queries_fall_back_to_words() {
    let data = temp("meaning-bad");
    let home = temp("meaning-bad-home");
    std::fs::create_dir_all(data.join("models")).unwrap();
    std::fs::write(data.join("models/all-MiniLM-L6-v2.gguf"), b"GGUF but not really").unwrap();
    let mut c = command(&data, &home);
    c.args([
        "write-page",
        "--project",
        "p",
        "--path",
        "a.md",
        "--body",
        "# A\n\nThe automobile.\n",
    ]);
    assert!(run(c, None).status.success());
    let mut c = command(&data, &home);
    c.args(["query", "--project", "p", "automobile"]);
    assert_eq!(paths(&query(c)), vec!["a.md"], "the word still finds it");
    let mut c = command(&data, &home);
    c.arg("models");
    let status = stdout(&run(c, None));
    assert!(status.contains("off (") && status.contains("all-MiniLM-L6-v2.gguf"), "{status}");
}
