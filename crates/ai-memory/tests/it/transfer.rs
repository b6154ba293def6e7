//! `ai-memory export` and `ai-memory import` through the real binary: a populated data
//! directory exported and imported into a fresh one reproduces its pages, profile, prompts,
//! operators, grants and forget ledger; conflicts; bad input refused by line with nothing
//! written; basic-memory's JSON memories as pages.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{command, git, repo, run, stderr, stdout, temp};

/// `ai-memory ARGS` on `data`, run in `cwd`, no server listening (hooks write to the data
/// directory themselves); (success, stdout, stderr).
fn aim(
    data: &Path,
    home: &Path,
    cwd: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    let mut c = command(data, home);
    c.env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9").current_dir(cwd).args(args);
    let out = run(c, stdin);
    (out.status.success(), stdout(&out), stderr(&out))
}

fn must(data: &Path, home: &Path, cwd: &Path, args: &[&str]) -> String {
    let (ok, out, err) = aim(data, home, cwd, args, None);
    assert!(ok, "ai-memory {args:?}: {out}{err}");
    out
}

fn hook(data: &Path, home: &Path, app: &Path, event: &str, body: Value) {
    let (ok, _, err) =
        aim(data, home, app, &["hook", event, "--harness", "claude-code"], Some(&body.to_string()));
    assert!(ok && err.is_empty(), "{err}");
}

fn session(data: &Path, home: &Path, app: &Path, id: &str, prompts: &[&str]) {
    let cwd = app.to_str().unwrap();
    hook(
        data,
        home,
        app,
        "session-start",
        json!({"session_id": id, "cwd": cwd, "hook_event_name": "SessionStart"}),
    );
    for p in prompts {
        hook(
            data,
            home,
            app,
            "prompt-submit",
            json!({"session_id": id, "cwd": cwd, "hook_event_name": "UserPromptSubmit", "prompt": p}),
        );
    }
}

/// An export's records, without the header (its time and commit differ between exports).
fn records(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = lines.next().unwrap();
    assert_eq!(header["format"], "ai-memory-export");
    assert_eq!(header["version"], 1);
    lines.collect()
}

#[test]
fn export_then_import_into_an_empty_data_directory_reproduces_pages_profile_prompts_and_ledger() {
    let (data, home, out) = (temp("export-src"), temp("home"), temp("export-out"));
    let (shop, blog) = (repo("shop"), repo("blog"));
    std::fs::write(shop.join("Cargo.toml"), "[package]\n").unwrap();
    session(
        &data,
        &home,
        &shop,
        "s1",
        &[
            "In all my projects, keep integration tests in tests/suite.",
            "In all my projects, use pnpm, not npm.",
        ],
    );
    let shop_cwd = shop.to_str().unwrap();
    hook(
        &data,
        &home,
        &shop,
        "session-end",
        json!({"session_id": "s1", "cwd": shop_cwd, "hook_event_name": "SessionEnd"}),
    );
    session(&data, &home, &blog, "s2", &["What does this function do?"]);
    must(
        &data,
        &home,
        &shop,
        &[
            "write-page",
            "--path",
            "decisions/queue.md",
            "--body",
            "---\nsummary: One FIFO queue per member.\nowner: me\n---\n# Queue\n\nOne FIFO queue per member.\n",
        ],
    );
    must(&data, &home, &shop, &["profile", "pass"]);
    let list = must(&data, &home, &shop, &["profile", "list"]);
    let entry = |list: &str, what: &str| {
        list.lines().find(|l| l.contains(what)).map(|l| l.split('\t').next().unwrap().to_owned())
    };
    let pnpm = entry(&list, "pnpm").unwrap_or_else(|| panic!("no pnpm entry: {list}"));
    assert!(entry(&list, "tests/suite").is_some(), "{list}");
    must(&data, &home, &shop, &["profile", "forget", &pnpm]);
    let list = must(&data, &home, &shop, &["profile", "list"]);
    assert!(entry(&list, "pnpm").is_none(), "{list}");

    let file = out.join("memory.jsonl");
    let said = must(&data, &home, &shop, &["export", file.to_str().unwrap()]);
    assert!(said.contains("3 prompts") && said.contains("1 forgotten entries"), "{said}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let exported = records(&file);
    let kinds = |k: &str| exported.iter().filter(|r| r["kind"] == k).count();
    assert_eq!(kinds("prompt"), 3);
    assert_eq!(kinds("forgotten"), 1);
    assert_eq!(kinds("handoff"), 1, "shop's session s1 ended: {exported:?}");
    assert!(
        kinds("candidate") >= 2 && kinds("cursor") == 1 && kinds("session") == 2,
        "{exported:?}"
    );
    assert!(exported.iter().any(|r| r["kind"] == "page"
        && r["path"] == "decisions/queue.md"
        && r["text"].as_str().unwrap().starts_with("---\nsummary: One FIFO")));
    // A second export to the same file is refused; --force replaces it.
    let (ok, _, err) = aim(&data, &home, &shop, &["export", file.to_str().unwrap()], None);
    assert!(!ok && err.contains("exists: pass --force"), "{err}");
    must(&data, &home, &shop, &["export", "--force", file.to_str().unwrap()]);

    let fresh = temp("export-dst");
    let said = must(&fresh, &home, &shop, &["import", file.to_str().unwrap()]);
    assert!(said.contains("pages: 2 new, 0 replaced, 0 unchanged"), "{said}");
    // The same pages, profile, prompts, candidates, cursor and ledger: exporting the new data
    // directory gives the same records.
    // (`reindex` makes the page tables again from the wiki and keeps the rest.)
    must(&fresh, &home, &shop, &["reindex"]);
    let again = out.join("again.jsonl");
    must(&fresh, &home, &shop, &["export", again.to_str().unwrap()]);
    assert_eq!(records(&again), exported);
    for args in [
        &["profile", "list"][..],
        &["profile", "status"],
        &["read-page", "--path", "decisions/queue.md"],
    ] {
        assert_eq!(must(&fresh, &home, &shop, args), must(&data, &home, &shop, args), "{args:?}");
    }
    // The forgotten entry stays forgotten: a pass from the start over the imported prompts
    // does not bring it back, the other entry is kept.
    must(&fresh, &home, &shop, &["profile", "rebuild"]);
    let list = must(&fresh, &home, &shop, &["profile", "list"]);
    assert!(entry(&list, "pnpm").is_none(), "the forgotten entry came back: {list}");
    assert!(entry(&list, "tests/suite").is_some(), "{list}");
    // Without its ledger line the same prompts do bring it back: the ledger is what holds it.
    let text = std::fs::read_to_string(&file).unwrap();
    let stripped: Vec<&str> =
        text.lines().filter(|l| !l.contains(r#""kind":"forgotten""#)).collect();
    let no_ledger = out.join("no-ledger.jsonl");
    std::fs::write(&no_ledger, stripped.join("\n")).unwrap();
    let control = temp("export-control");
    must(&control, &home, &shop, &["import", no_ledger.to_str().unwrap()]);
    // The imported handoff reaches the next session of shop.
    let (ok, printed, err) = aim(
        &fresh,
        &home,
        &shop,
        &["hook", "session-start", "--harness", "claude-code"],
        Some(
            &json!({"session_id": "s3", "cwd": shop_cwd, "hook_event_name": "SessionStart"})
                .to_string(),
        ),
    );
    assert!(ok, "{err}");
    // The handoff's own lines: the profile's digest also names tests/suite, but never the
    // forgotten pnpm entry, which only the handoff's list of prompts holds.
    assert!(printed.contains("The last session here (claude-code) was asked:"), "{printed}");
    assert!(printed.contains("use pnpm, not npm"), "{printed}");
    must(&control, &home, &shop, &["profile", "rebuild"]);
    let list = must(&control, &home, &shop, &["profile", "list"]);
    assert!(entry(&list, "pnpm").is_some(), "{list}");
}

#[test]
fn operators_grants_and_access_modes_travel_and_conflicts_are_kept_or_refused() {
    let (data, home, out) = (temp("ops-src"), temp("home"), temp("ops-out"));
    let app = repo("app");
    must(
        &data,
        &home,
        &app,
        &["write-page", "--path", "notes/a.md", "--body", "# A\n\nfrom the export\n"],
    );
    must(
        &data,
        &home,
        &app,
        &[
            "write-page",
            "--workspace",
            "default",
            "--project",
            "vault",
            "--restricted",
            "--path",
            "keys.md",
            "--body",
            "# Vault\n",
        ],
    );
    let added = must(&data, &home, &app, &["user", "add", "alice"]);
    let token = added.lines().last().unwrap().trim().to_owned();
    assert!(token.starts_with("aim_"), "{added}");
    must(
        &data,
        &home,
        &app,
        &[
            "user",
            "grant",
            "--user",
            "alice",
            "--workspace",
            "default",
            "--project",
            "vault",
            "--level",
            "read",
        ],
    );
    let file = out.join("ops.jsonl");
    must(&data, &home, &app, &["export", file.to_str().unwrap()]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&token), "the raw API key is in the export");
    let exported = records(&file);
    assert!(exported.iter().any(|r| r["kind"] == "grant"
        && r["operator"] == 1
        && r["project"] == "vault"
        && r["level"] == "read"));
    assert!(
        exported
            .iter()
            .any(|r| r["kind"] == "project" && r["name"] == "vault" && r["restricted"] == true)
    );

    // Into an empty data directory: the operator (whose key still works), the grant, the
    // restricted project.
    let fresh = temp("ops-dst");
    must(&fresh, &home, &app, &["import", file.to_str().unwrap()]);
    assert_eq!(must(&fresh, &home, &app, &["user", "list"]), "1\talice\n");
    let index = ai_memory_index::Index::open(&fresh.join("index.sqlite")).unwrap();
    assert_eq!(index.user_by_token(&token).unwrap(), Some(1));
    let again = out.join("again.jsonl");
    must(&fresh, &home, &app, &["export", again.to_str().unwrap()]);
    assert_eq!(records(&again), exported);
    assert!(
        git(&fresh, &["show", "main:default/vault/.project.toml"]).contains("restricted = true")
    );

    // Into a data directory with its own page at that path: kept and named; --replace writes
    // the export's (git keeps the old).
    let other = temp("ops-other");
    must(&other, &home, &app, &["write-page", "--path", "notes/a.md", "--body", "# A\n\nmine\n"]);
    let said = must(&other, &home, &app, &["import", file.to_str().unwrap()]);
    assert!(said.contains("kept: default/app/notes/a.md"), "{said}");
    assert!(must(&other, &home, &app, &["read-page", "--path", "notes/a.md"]).contains("mine"));
    let said = must(&other, &home, &app, &["import", "--replace", file.to_str().unwrap()]);
    assert!(said.contains("1 replaced"), "{said}");
    assert!(
        must(&other, &home, &app, &["read-page", "--path", "notes/a.md"])
            .contains("from the export")
    );
    assert!(git(&other, &["log", "-p", "main", "--", "default/app/notes/a.md"]).contains("mine"));

    // Into one whose operator holds alice's id: refused, nothing written.
    let taken = temp("ops-taken");
    must(&taken, &home, &app, &["user", "add", "bob"]);
    must(&taken, &home, &app, &["write-page", "--path", "x.md", "--body", "x"]);
    let head = git(&taken, &["rev-parse", "main"]);
    let (ok, _, err) = aim(&taken, &home, &app, &["import", file.to_str().unwrap()], None);
    assert!(!ok && err.contains("operator `alice` (id 1)") && err.contains("`bob`"), "{err}");
    assert_eq!(git(&taken, &["rev-parse", "main"]), head);
    assert_eq!(must(&taken, &home, &app, &["user", "list"]), "1\tbob\n");
}

#[test]
fn bad_input_is_refused_naming_the_line_and_nothing_is_written() {
    let (data, home, out) = (temp("bad-src"), temp("home"), temp("bad-out"));
    let app = repo("app");
    must(&data, &home, &app, &["write-page", "--path", "kept.md", "--body", "# Kept\n"]);
    let head = git(&data, &["rev-parse", "main"]);
    let header =
        r#"{"format":"ai-memory-export","version":1,"created":0,"wiki_commit":null,"note":""}"#;
    let good = r##"{"kind":"page","workspace":"default","project":"app","path":"new.md","text":"# New\n"}"##;
    let big = json!({"kind": "page", "workspace": "default", "project": "app", "path": "big.md",
        "text": "x".repeat(300 * 1024)})
    .to_string();
    let cases: Vec<(&str, String, &str)> = vec![
        ("not JSON", "hello\n".into(), "line 1: not JSON"),
        ("another format", r#"{"name":"x"}"#.into(), "line 1: neither an ai-memory export"),
        (
            "a newer version",
            header.replace(r#""version":1"#, r#""version":2"#),
            "line 1: an export of version 2; this ai-memory reads version 1",
        ),
        (
            "bad frontmatter",
            format!(
                "{header}\n{good}\n{}",
                r#"{"kind":"page","workspace":"default","project":"app","path":"b.md","text":"---\nsummary: [unclosed\n---\nbody"}"#
            ),
            "line 3: page default/app/b.md: the frontmatter is not valid",
        ),
        (
            "a path out of its project",
            format!(
                "{header}\n{good}\n{}",
                r#"{"kind":"page","workspace":"default","project":"app","path":"../../etc/x.md","text":"x"}"#
            ),
            "line 3: page default/app/../../etc/x.md: page path `../../etc/x.md` is not valid",
        ),
        (
            "an oversize page",
            format!("{header}\n{good}\n{big}"),
            "line 3: page default/app/big.md: the page is 307200 bytes",
        ),
        ("a broken line", format!("{header}\n{good}\n{{\"kind\":\"page\""), "line 3: not JSON"),
        (
            "an unknown record",
            format!("{header}\n{good}\n{}", r#"{"kind":"secret","x":1}"#),
            "line 3: not a valid record: unknown variant `secret`",
        ),
        (
            "a prompt in a profile",
            format!(
                "{header}\n{}",
                r#"{"kind":"prompt","id":1,"session":"s","workspace":"default","project":"_global","operator":null,"text":"hi","at":0}"#
            ),
            "line 2: sessions and prompts are not recorded in `_global`",
        ),
        (
            "a bad grant",
            format!(
                "{header}\n{}",
                r#"{"kind":"grant","operator":1,"workspace":"default","project":"app","level":"admin"}"#
            ),
            "line 2: unknown level `admin`",
        ),
    ];
    for (what, text, expect) in cases {
        let file = out.join("bad.jsonl");
        std::fs::write(&file, text).unwrap();
        let (ok, said, err) = aim(&data, &home, &app, &["import", file.to_str().unwrap()], None);
        assert!(!ok, "{what}: imported: {said}");
        assert!(err.contains(expect), "{what}: {err}");
        assert_eq!(git(&data, &["rev-parse", "main"]), head, "{what}: the wiki changed");
    }
    let (ok, out, _) = aim(&data, &home, &app, &["read-page", "--path", "new.md"], None);
    assert!(!ok, "a good page before the bad line was written: {out}");
}

#[test]
fn basic_memory_json_memories_become_pages_with_their_observations_and_links() {
    let (data, home, out) = (temp("basic"), temp("home"), temp("basic-out"));
    let notes = repo("notes");
    let file = out.join("memory.json");
    let lines = [
        json!({"type": "entity", "name": "Alice Smith", "entityType": "person",
               "observations": ["Prefers pnpm over npm", "Maintains the checkout service"]}),
        json!({"type": "entity", "name": "Checkout", "entityType": "service", "observations": ["Written in Rust"]}),
        json!({"type": "relation", "from": "Alice Smith", "to": "Checkout", "relationType": "maintains"}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&file, text.join("\n")).unwrap();
    let said = must(&data, &home, &notes, &["import", file.to_str().unwrap()]);
    assert!(
        said.contains("basic-memory JSON")
            && said.contains("2 new")
            && said.contains("2 entities, 1 relations"),
        "{said}"
    );
    let page = must(&data, &home, &notes, &["read-page", "--path", "person/alice-smith.md"]);
    assert!(page.starts_with("---\ntitle: Alice Smith\n"), "{page}");
    assert!(
        page.contains("type: person") && page.contains("related:\n- service/checkout.md"),
        "{page}"
    );
    assert!(
        page.contains("- Prefers pnpm over npm\n")
            && page.contains("- maintains [[service/checkout.md]]"),
        "{page}"
    );
    let hits = must(&data, &home, &notes, &["query", "pnpm"]);
    assert!(hits.contains("person/alice-smith.md"), "{hits}");
    // Elsewhere with --workspace/--project; running it again changes nothing.
    must(
        &data,
        &home,
        &notes,
        &["import", "--workspace", "work", "--project", "crm", file.to_str().unwrap()],
    );
    must(
        &data,
        &home,
        &notes,
        &["read-page", "--workspace", "work", "--project", "crm", "--path", "service/checkout.md"],
    );
    let said = must(&data, &home, &notes, &["import", file.to_str().unwrap()]);
    assert!(said.contains("0 new") && said.contains("2 unchanged"), "{said}");
    // A bad entity names its line, and nothing is written.
    std::fs::write(&file, format!("{}\n{}", text[0], r#"{"type":"entity","entityType":"x"}"#))
        .unwrap();
    let head = git(&data, &["rev-parse", "main"]);
    let (ok, _, err) =
        aim(&data, &home, &notes, &["import", "--project", "other", file.to_str().unwrap()], None);
    assert!(!ok && err.contains("line 2: an entity without a `name`"), "{err}");
    assert_eq!(git(&data, &["rev-parse", "main"]), head);
}

/// The export waits for a running profile pass (it takes the pass's lock), so it never holds
/// half of a pass's writes.
#[test]
fn an_export_waits_for_the_profile_pass_lock() {
    let (data, home, out) = (temp("lock-src"), temp("home"), temp("lock-out"));
    let app = repo("app");
    must(&data, &home, &app, &["write-page", "--path", "a.md", "--body", "# A\n"]);
    // What a pass in another process holds.
    let lock = std::fs::File::create(data.join("profile-pass.lock")).unwrap();
    lock.lock().unwrap();
    let file = out.join("x.jsonl");
    let mut c = command(&data, &home);
    c.current_dir(&*app).args(["export", file.to_str().unwrap()]);
    let mut child = c.stdout(std::process::Stdio::null()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    assert!(child.try_wait().unwrap().is_none(), "the export did not wait for the pass");
    assert!(!file.exists());
    lock.unlock().unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(records(&file).iter().filter(|r| r["kind"] == "page").count(), 1);
}
