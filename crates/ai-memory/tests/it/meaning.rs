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

#[test]
fn the_session_start_lists_the_pages_nearest_to_where_the_last_session_left_off() {
    use std::path::Path;
    let data = temp("meaning-start");
    let home = temp("meaning-start-home");
    let mut c = command(&data, &home);
    c.args(["models", "fetch", "--from"]).arg(test_models::minilm_dir());
    assert!(run(c, None).status.success());
    let shop = crate::support::repo("shop");
    let fixture = |name: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures").join(name);
        std::fs::read_to_string(path).unwrap().replace("CWD", shop.to_str().unwrap())
    };
    let server = Server::start_in(&data, &[]);
    let hook = |event: &str, harness: &str, stdin: &str| {
        let mut c = server.cli();
        c.args(["hook", event, "--harness", harness]);
        let o = run(c, Some(stdin));
        assert!(o.status.success(), "{event}: {}", stderr(&o));
        stdout(&o)
    };
    let write = |path: &str, body: &str| {
        let mut c = server.cli();
        c.current_dir(&*shop).args(["write-page", "--path", path, "--body", body]);
        let o = run(c, None);
        assert!(o.status.success(), "{}", stderr(&o));
    };
    write("notes/style.md", "# Style\n\nRust code is formatted with rustfmt before each commit.\n");
    write("notes/market.md", "# Market\n\nWe bought bananas and apples at the Saturday market.\n");
    hook("session-start", "claude-code", &fixture("claude-code-session-start.json"));
    hook("prompt-submit", "claude-code", &fixture("claude-code-prompt-submit.json"));
    hook("session-end", "claude-code", &fixture("claude-code-session-end.json"));
    let printed = hook("session-start", "codex", &fixture("codex-session-start.json"));
    let v: Value = serde_json::from_str(&printed).unwrap();
    let context = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or_default();
    let at = context.find("### Pages related to it").unwrap_or_else(|| panic!("{context}"));
    let related = &context[at..context[at..].find("\n\n").map_or(context.len(), |e| at + e)];
    assert!(related.contains("`notes/style.md`"), "{related}");
    assert!(!related.contains("market"), "an unrelated page is not listed: {related}");
    assert!(context.find("## Where the last session left off").unwrap() < at, "{context}");
}
