//! `kill -9` of `ai-memory serve` while fifty writes are in flight: after a restart every
//! acknowledged write is in git, in the index and in the mirror; the index agrees with the wiki
//! (`reindex` changes nothing); and no write is half-applied.

use std::collections::BTreeMap;
use std::time::Duration;

use ai_memory_core::{ProjectName, WorkspaceName};
use ai_memory_index::Index;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::{Server, git, ok, run, runtime, stderr, stdout, temp};

const WRITES: usize = 50;
/// The first this many rewrite pages written before the crash; the rest are new pages.
const REWRITES: usize = 10;
/// The server is killed when this many writes have been acknowledged.
const KILL_AFTER: usize = 10;
/// The most a call may take before the kill.
const CALL_BOUND: Duration = Duration::from_secs(20);
/// How long after the kill answers still count (ones the server sent before it died).
const AFTER_KILL: Duration = Duration::from_secs(2);

/// One write of the crash round: project, path, body, and the body it replaces (rewrites).
struct Write {
    project: String,
    path: String,
    body: String,
    before: Option<String>,
    restricted: bool,
}

fn write(i: usize) -> Write {
    let filler = "Every write carries a body long enough to take a moment. ".repeat(40);
    if i < REWRITES {
        return Write {
            project: "base".into(),
            path: format!("pages/p{i}.md"),
            body: format!("---\nsummary: Version two of {i}.\n---\n# P{i}\n\nvtwo{i} {filler}\n"),
            before: Some(format!("# P{i}\n\nvone{i}\n")),
            restricted: false,
        };
    }
    // Every fifth new page opens a restricted project: its settings and its page are one write.
    let restricted = i.is_multiple_of(5);
    Write {
        project: if restricted { format!("vault{i}") } else { "busy".into() },
        path: format!("notes/n{i}.md"),
        body: format!("# Note {i}\n\nznote{i} {filler}\n"),
        before: None,
        restricted,
    }
}

impl Write {
    fn git_path(&self) -> String {
        format!("default/{}/{}", self.project, self.path)
    }

    /// A word only the version written by write `i` (or, not `applied`, the one it replaces)
    /// holds.
    fn marker(&self, i: usize, applied: bool) -> String {
        match (&self.before, applied) {
            (None, _) => format!("znote{i} "),
            (Some(_), true) => format!("vtwo{i} "),
            (Some(_), false) => format!("vone{i}"),
        }
    }

    fn args(&self) -> Value {
        let mut a = json!({ "project": self.project, "path": self.path, "body": self.body });
        if self.restricted {
            a["restricted"] = json!(true);
        }
        a
    }
}

/// Every page on the branch (`default/...` path → text).
fn git_pages(server_data: &std::path::Path) -> BTreeMap<String, String> {
    git(server_data, &["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .filter(|p| p.ends_with(".md"))
        .map(|p| (p.to_owned(), git(server_data, &["show", &format!("main:{p}")])))
        .collect()
}

/// Every page row of the index (`default/...` path → body).
fn index_pages(data: &std::path::Path) -> BTreeMap<String, String> {
    let index = Index::open(&data.join("index.sqlite")).unwrap();
    index
        .dump()
        .unwrap()
        .into_iter()
        .map(|r| (format!("{}/{}/{}", r.workspace, r.project, r.path), r.body))
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Acked,
    /// The call failed or timed out: the kill cut it off.
    Lost,
}

#[test]
fn a_server_killed_during_fifty_writes_restarts_with_every_acknowledged_write_and_no_half_write() {
    let data = temp("crash-data");
    let mut server = Server::start_in(&data, &[]);
    let rt = runtime();
    let (outcomes, in_flight) = rt.block_on(async {
        let client = server.client(None).await.unwrap();
        for i in 0..REWRITES {
            let w = write(i);
            let before = w.before.clone().unwrap();
            ok(
                &client,
                "memory_write_page",
                json!({ "project": w.project, "path": w.path, "body": before }),
            )
            .await;
        }
        client.cancel().await.unwrap();
        // Every client is connected first, so the fifty writes start together.
        let mut clients = Vec::new();
        for _ in 0..WRITES {
            clients.push(server.client(None).await.unwrap());
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for (i, client) in clients.into_iter().enumerate() {
            let tx = tx.clone();
            tasks.push(tokio::spawn(async move {
                let Value::Object(args) = write(i).args() else { unreachable!() };
                let call = client.call_tool(
                    CallToolRequestParams::new("memory_write_page").with_arguments(args),
                );
                let outcome = match tokio::time::timeout(CALL_BOUND, call).await {
                    Ok(Ok(result)) => {
                        let text = format!("{:?}", result.content);
                        assert_ne!(result.is_error, Some(true), "write {i} was refused: {text}");
                        Outcome::Acked
                    }
                    _ => Outcome::Lost,
                };
                let _ = tx.send((i, outcome));
                drop(client);
            }));
        }
        drop(tx);
        let mut outcomes = BTreeMap::new();
        let mut acked = 0;
        while acked < KILL_AFTER {
            let (i, o) = tokio::time::timeout(CALL_BOUND, rx.recv())
                .await
                .expect("writes are acknowledged")
                .unwrap();
            acked += usize::from(o == Outcome::Acked);
            outcomes.insert(i, o);
        }
        server.kill();
        let in_flight = WRITES - outcomes.len();
        // Answers already on their way arrive at once; the other calls are cut off (the client
        // would keep trying to reach the dead server until CALL_BOUND).
        let _ = tokio::time::timeout(AFTER_KILL, async {
            while let Some((i, o)) = rx.recv().await {
                outcomes.insert(i, o);
            }
        })
        .await;
        for task in tasks {
            task.abort();
        }
        for i in 0..WRITES {
            outcomes.entry(i).or_insert(Outcome::Lost);
        }
        (outcomes, in_flight)
    });
    assert_eq!(outcomes.len(), WRITES);

    // What the kill left, before anything repairs it.
    let (git_before, index_before) = (git_pages(&data), index_pages(&data));
    let index_behind = (0..WRITES)
        .filter(|i| {
            let w = write(*i);
            git_before.get(&w.git_path()) == Some(&w.body)
                && !index_before.get(&w.git_path()).is_some_and(|b| b.contains(&w.marker(*i, true)))
        })
        .count();
    let mirror_behind = (0..WRITES)
        .filter(|i| {
            let w = write(*i);
            let file = std::fs::read_to_string(data.join("wiki").join(w.git_path())).ok();
            git_before.get(&w.git_path()) == Some(&w.body) && file.as_ref() != Some(&w.body)
        })
        .count();
    let lock_left = data.join("wiki.git/refs/heads/main.lock").exists();

    let server = Server::start_in(&data, &[]);
    let pages = git_pages(&data);
    let index = index_pages(&data);
    let acked = outcomes.values().filter(|o| **o == Outcome::Acked).count();
    let mut completed = 0;
    for (i, outcome) in &outcomes {
        let w = write(*i);
        let path = w.git_path();
        let in_git = pages.get(&path);
        if *outcome == Outcome::Acked {
            assert_eq!(in_git, Some(&w.body), "acknowledged write {i} is in git");
        }
        // Whole or not at all: git holds this write's text or what it replaced, nothing else.
        let applied = in_git == Some(&w.body);
        completed += usize::from(applied && *outcome == Outcome::Lost);
        if !applied {
            assert_eq!(in_git, w.before.as_ref(), "write {i} is either applied or absent");
        }
        let marker = w.marker(*i, applied);
        assert_eq!(
            index.get(&path).map(|body| body.contains(&marker)),
            in_git.map(|_| true),
            "the index holds write {i} exactly when git does, in the same version"
        );
        let mirror = std::fs::read_to_string(data.join("wiki").join(&path)).ok();
        assert_eq!(mirror.as_ref(), in_git, "the mirror holds write {i} as git does");
        if w.restricted && applied {
            let meta = git(&data, &["show", &format!("main:default/{}/.project.toml", w.project)]);
            assert!(meta.contains("restricted = true"), "write {i}'s project settings: {meta}");
            let row = Index::open(&data.join("index.sqlite"))
                .unwrap()
                .project(
                    &WorkspaceName::new("default").unwrap(),
                    &ProjectName::new(&w.project).unwrap(),
                )
                .unwrap()
                .unwrap();
            assert!(row.restricted, "write {i}'s project is restricted in the index too");
        }
    }
    assert_eq!(
        pages.keys().collect::<Vec<_>>(),
        index.keys().collect::<Vec<_>>(),
        "the index has exactly the wiki's pages"
    );
    eprintln!(
        "crash: {acked} of {WRITES} writes acknowledged, {in_flight} in flight at the kill, {completed} unacknowledged ones completed; \
         at the kill the index lacked {index_behind} and the mirror {mirror_behind} of the writes in git; branch lock left: {lock_left}"
    );

    // The index agrees with the wiki: made again from it, it is the same.
    let before = Index::open(&data.join("index.sqlite")).unwrap().dump().unwrap();
    let out = run(
        {
            let mut c = server.cli();
            c.arg("reindex");
            c
        },
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&format!("indexed {} pages", pages.len())), "{}", stdout(&out));
    assert_eq!(
        Index::open(&data.join("index.sqlite")).unwrap().dump().unwrap(),
        before,
        "reindex changes nothing"
    );

    // The store is sound and takes writes again.
    let fsck = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(data.join("wiki.git"))
        .args(["fsck", "--no-progress"])
        .output()
        .unwrap();
    assert!(fsck.status.success(), "{}", String::from_utf8_lossy(&fsck.stderr));
    rt.block_on(async {
        let client = server.client(None).await.unwrap();
        ok(
            &client,
            "memory_write_page",
            json!({ "project": "busy", "path": "after.md", "body": "# After\n" }),
        )
        .await;
        let q = ok(
            &client,
            "memory_query",
            json!({ "project": "busy", "query": "after", "limit": 100 }),
        )
        .await;
        assert_eq!(q["hits"][0]["path"], "after.md", "{q}");
        client.cancel().await.unwrap();
    });
}

/// Commits `changes` (path → text, `None` deletes) on the wiki's branch with git alone, as a
/// process killed before it indexed (or mirrored) its commit leaves the wiki.
fn commit_behind_the_servers_back(data: &std::path::Path, changes: &[(&str, Option<&str>)]) {
    let tmp = temp("git-index");
    let git_env = |args: &[&str], stdin: Option<&str>| {
        let mut c = std::process::Command::new("git");
        c.arg("--git-dir").arg(data.join("wiki.git")).args(args);
        c.env("GIT_INDEX_FILE", tmp.join("index"));
        c.env("GIT_AUTHOR_NAME", "x")
            .env("GIT_AUTHOR_EMAIL", "x@x")
            .env("GIT_COMMITTER_NAME", "x")
            .env("GIT_COMMITTER_EMAIL", "x@x");
        let out = run(c, stdin);
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
        stdout(&out).trim().to_owned()
    };
    git_env(&["read-tree", "main"], None);
    for (path, text) in changes {
        match text {
            Some(text) => {
                let blob = git_env(&["hash-object", "-w", "--stdin"], Some(text));
                git_env(
                    &["update-index", "--add", "--cacheinfo", &format!("100644,{blob},{path}")],
                    None,
                );
            }
            None => {
                let zero = "0".repeat(40);
                git_env(&["update-index", "--index-info"], Some(&format!("0 {zero}\t{path}\n")));
            }
        }
    }
    let tree = git_env(&["write-tree"], None);
    let commit =
        git_env(&["commit-tree", &tree, "-p", "main", "-m", "behind the server's back"], None);
    git_env(&["update-ref", "refs/heads/main", &commit], None);
}

/// The same state the kill leaves, made on purpose: git ahead of the index and the mirror by a
/// commit that writes, rewrites and deletes pages, and a branch lock left behind. A restart
/// catches up on exactly those paths and takes writes again.
#[test]
fn a_restart_catches_the_index_and_mirror_up_with_commits_they_missed() {
    let data = temp("behind-data");
    let server = Server::start_in(&data, &[]);
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        for (path, body) in [
            ("keep.md", "# Keep\n\nkeepme\n"),
            ("old.md", "# Old\n\nbefore\n"),
            ("gone.md", "# Gone\n\nbyebye\n"),
        ] {
            ok(
                &client,
                "memory_write_page",
                json!({ "project": "app", "path": path, "body": body }),
            )
            .await;
        }
        client.cancel().await.unwrap();
    });
    drop(server);
    commit_behind_the_servers_back(
        &data,
        &[
            ("default/app/new.md", Some("# New\n\nfreshword\n")),
            ("default/app/old.md", Some("# Old\n\nafterword\n")),
            ("default/app/gone.md", None),
            ("default/vault/.project.toml", Some("restricted = true\n")),
            ("default/vault/k.md", Some("# K\n\nkappa\n")),
        ],
    );
    let lock = data.join("wiki.git/refs/heads/main.lock");
    let stale = std::time::SystemTime::now() - Duration::from_secs(60);
    std::fs::File::create(&lock).unwrap().set_modified(stale).unwrap();

    let server = Server::start_in(&data, &[]);
    assert!(!lock.exists(), "the stale branch lock is gone");
    let index = index_pages(&data);
    let bodies: Vec<(&str, &str)> =
        index.iter().map(|(p, b)| (p.as_str(), b.trim().rsplit('\n').next().unwrap())).collect();
    assert_eq!(
        bodies,
        [
            ("default/app/keep.md", "keepme"),
            ("default/app/new.md", "freshword"),
            ("default/app/old.md", "afterword"),
            ("default/vault/k.md", "kappa"),
        ]
    );
    let vault = Index::open(&data.join("index.sqlite"))
        .unwrap()
        .project(&WorkspaceName::new("default").unwrap(), &ProjectName::new("vault").unwrap())
        .unwrap()
        .unwrap();
    assert!(vault.restricted, "the project's settings came with it");
    let mirror = |p: &str| std::fs::read_to_string(data.join("wiki/default/app").join(p)).ok();
    assert_eq!(mirror("new.md").as_deref(), Some("# New\n\nfreshword\n"));
    assert_eq!(mirror("old.md").as_deref(), Some("# Old\n\nafterword\n"));
    assert_eq!(mirror("gone.md"), None);
    runtime().block_on(async {
        let client = server.client(None).await.unwrap();
        ok(
            &client,
            "memory_write_page",
            json!({ "project": "app", "path": "after.md", "body": "# After\n" }),
        )
        .await;
        let q = ok(
            &client,
            "memory_query",
            json!({ "project": "app", "query": "freshword afterword byebye" }),
        )
        .await;
        let hits: Vec<&str> =
            q["hits"].as_array().unwrap().iter().filter_map(|h| h["path"].as_str()).collect();
        assert_eq!(hits.len(), 2, "{q}");
        assert!(!hits.contains(&"gone.md"), "{q}");
        client.cancel().await.unwrap();
    });
}
