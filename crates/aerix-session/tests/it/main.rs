//! Session logs on disk: appending, reading back after a crash, the index, rebuilding.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::io::Write;
use std::path::PathBuf;

use aerix_session::{
    Event, Label, Outcome, Role, SegmentOp, SessionError, Store, project_key, read_log, rebuild,
};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("aerix-session-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn segment(id: &str, op: SegmentOp, text: Option<&str>) -> Event {
    Event::Segment {
        agent: "a1".into(),
        op,
        id: id.into(),
        role: Some(Role::User),
        label: Some(Label::Result),
        text: text.map(String::from),
        tokens: text.map(|t| t.len() as u32),
        pinned: Some(false),
        recomputed_from: None,
        prompt_tokens: None,
    }
}

#[test]
fn a_cut_last_line_is_skipped_and_the_next_run_appends_after_it() {
    let dir = temp("cut");
    let store = Store::new(&dir);
    let mut log = store.create("proj-1", &dir, "m.gguf", "fix it\nplease").unwrap();
    let id = log.id().to_owned();
    log.append(&segment("system", SegmentOp::Append, Some("sys"))).unwrap();
    log.append(&segment("p1", SegmentOp::Append, Some("fix it"))).unwrap();
    log.append(&Event::Plan { agent: "a1".into(), text: "1. look".into() }).unwrap();
    drop(log);
    // A crash in the middle of a line.
    let path = store.log_path("proj-1", &id);
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"type":"segment","agent":"a1","op":"app"#).unwrap();
    drop(file);

    let read = read_log(&path).unwrap();
    assert_eq!(read.events.len(), 3);
    assert_eq!(read.skipped, [4]);
    let rebuilt = rebuild(&read.events, "a1").unwrap();
    let ids: Vec<&str> = rebuilt.segments.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["system", "p1"]);
    assert_eq!(rebuilt.plan.as_deref(), Some("1. look"));

    // Resuming appends on a line of its own: every complete event still reads.
    let mut log = store.open("proj-1", &id).unwrap();
    log.append(&segment("p1", SegmentOp::Replace, Some("fix it now"))).unwrap();
    log.append(&segment("system", SegmentOp::Remove, None)).unwrap();
    drop(log);
    let read = read_log(&path).unwrap();
    assert_eq!((read.events.len(), read.skipped.as_slice()), (5, &[4][..]));
    let rebuilt = rebuild(&read.events, "a1").unwrap();
    assert_eq!(rebuilt.segments.len(), 1);
    assert_eq!(rebuilt.segments[0].text, "fix it now");
    assert_eq!(store.list("proj-1").unwrap()[0].requests, 2);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn continue_takes_the_session_used_last_not_the_one_created_last() {
    let dir = temp("used-last");
    let store = Store::new(&dir);
    let first = store.create("p", &dir, "m", "first request").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = store.create("p", &dir, "m", "second request").unwrap();
    store.finish("p", second.id(), Outcome::Done.as_str()).unwrap();
    assert_eq!(store.latest("p").unwrap().as_deref(), Some(second.id()));
    // The first session is resumed after the second was made: it is the one used last.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let resumed = store.open("p", first.id()).unwrap();
    assert_eq!(store.latest("p").unwrap().as_deref(), Some(resumed.id()));
    std::thread::sleep(std::time::Duration::from_millis(5));
    store.finish("p", second.id(), Outcome::Done.as_str()).unwrap();
    assert_eq!(store.latest("p").unwrap().as_deref(), Some(second.id()));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn index_lists_latest_and_removes_with_the_spool() {
    let dir = temp("index");
    let store = Store::new(&dir);
    let first = store.create("p", &dir, "m", "first request").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = store.create("p", &dir, "m", "second request").unwrap();
    let spooled = second.spool("c1.txt", "long output").unwrap();
    assert!(spooled.starts_with(second.spool_dir()));
    store.finish("p", second.id(), Outcome::Done.as_str()).unwrap();
    let list = store.list("p").unwrap();
    assert_eq!(
        list.iter().map(|e| e.title.as_str()).collect::<Vec<_>>(),
        ["first request", "second request"]
    );
    assert_eq!(list[1].outcome.as_deref(), Some("done"));
    assert_eq!(store.latest("p").unwrap().as_deref(), Some(second.id()));
    store.remove("p", second.id()).unwrap();
    assert!(!spooled.exists() && !second.path().exists());
    assert_eq!(store.latest("p").unwrap().as_deref(), Some(first.id()));
    let error = store.remove("p", "../../etc").unwrap_err().to_string();
    assert!(error.contains("not a session id"), "{error}");
    let error = store.open("p", "20990101-000000-0000").unwrap_err().to_string();
    assert!(error.contains("no session `20990101-000000-0000`"), "{error}");
    // A broken index is rebuilt from the logs.
    std::fs::write(store.project_dir("p").join("index.json"), "{oops").unwrap();
    assert_eq!(store.list("p").unwrap().len(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_project_key_is_stable_per_repository() {
    let dir = temp("key");
    let t = gitstore::GIT_TIMEOUT;
    for clone in ["one", "two"] {
        let path = dir.join(clone).join("My Repo");
        std::fs::create_dir_all(&path).unwrap();
        let git = gitstore::Repo::at(&path);
        git.run(&["init", "-q"], t).unwrap();
        git.run(&["remote", "add", "origin", "git@github.com:o/r.git"], t).unwrap();
    }
    let a = project_key(&dir.join("one/My Repo"));
    let b = project_key(&dir.join("two/My Repo"));
    assert_eq!(a, b);
    assert!(a.starts_with("my-repo-") && a.len() == "my-repo-".len() + 12, "{a}");
    let lone = dir.join("lone");
    std::fs::create_dir_all(&lone).unwrap();
    assert_eq!(project_key(&lone), project_key(&lone));
    assert_ne!(project_key(&lone), a);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn concurrent_sessions_all_reach_the_index() {
    let dir = temp("concurrent");
    let store = Store::new(&dir);
    std::fs::create_dir_all(store.project_dir("p")).unwrap();
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let (store, dir) = (store.clone(), dir.clone());
            std::thread::spawn(move || {
                let log = store.create("p", &dir, "m", &format!("request {i}")).unwrap();
                store.finish("p", log.id(), "done").unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let list = store.list("p").unwrap();
    assert_eq!(list.len(), 16, "{list:?}");
    assert!(list.iter().all(|e| e.outcome.as_deref() == Some("done")));
    let mut ids: Vec<&str> = list.iter().map(|e| e.id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 16, "every session has its own id and log");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_cloned_log_handle_appends_whole_lines_beside_the_first() {
    let dir = temp("clone");
    let store = Store::new(&dir);
    let log = store.create("proj-1", &dir, "m.gguf", "go").unwrap();
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let mut log = log.try_clone().unwrap();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let text = "x".repeat(i * 50);
                    log.append(&segment(&format!("{name}{i}"), SegmentOp::Append, Some(&text)))
                        .unwrap();
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    let read = read_log(log.path()).unwrap();
    assert!(read.skipped.is_empty(), "{:?}", read.skipped);
    assert_eq!(read.events.len(), 400);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_import_keeps_its_times_is_replaced_not_duplicated_and_is_not_continued() {
    let dir = temp("import");
    let store = Store::new(&dir);
    let own = store.create("proj-1", &dir, "m.gguf", "mine").unwrap().id().to_owned();
    let entry = aerix_session::IndexEntry {
        id: String::new(),
        created: "2026-03-01T10:00:00.000Z".into(),
        updated: "2026-03-01T10:05:00.000Z".into(),
        cwd: "/work/app".into(),
        model: "claude-sonnet-4-5".into(),
        title: "Fix it".into(),
        requests: 1,
        outcome: None,
        tag: Some("claude-code".into()),
        origin: Some("1111-aaaa".into()),
    };
    let plan = |text: &'static str| {
        move |id: &str| {
            vec![(
                Event::Plan { agent: "a1".into(), text: format!("{id}: {text}") },
                Some("2026-03-01T10:00:01.000Z".to_owned()),
            )]
        }
    };
    let files = vec![(".claude.jsonl".to_owned(), b"{}\n".to_vec())];
    let first = store.import("proj-1", entry.clone(), plan("one"), &files).unwrap();
    assert!(first.id.starts_with("20260301-100000-") && !first.replaced, "{first:?}");
    let log = store.log_path("proj-1", &first.id);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text,
        format!(
            "{{\"type\":\"plan\",\"agent\":\"a1\",\"text\":\"{}: one\",\"ts\":\"2026-03-01T10:00:01.000Z\"}}\n",
            first.id
        )
    );
    let again = store.import("proj-1", entry.clone(), plan("one"), &files).unwrap();
    assert_eq!(
        (again.id.as_str(), again.replaced, again.unchanged),
        (first.id.as_str(), true, true)
    );
    let changed = store.import("proj-1", entry, plan("two"), &files).unwrap();
    assert_eq!((changed.replaced, changed.unchanged), (true, false));
    let list = store.list("proj-1").unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].tag.as_deref(), Some("claude-code"));
    // `--continue` takes the project's own session, not the imported one.
    assert_eq!(store.latest("proj-1").unwrap().as_deref(), Some(own.as_str()));
    // Removing it removes its copy too.
    store.remove("proj-1", &first.id).unwrap();
    assert!(!log.exists() && !log.with_extension("claude.jsonl").exists());
}

#[test]
fn an_unknown_label_or_a_segment_without_one_is_an_error_naming_it() {
    let dir = temp("unknown-label");
    let path = dir.join("log.jsonl");
    let good = serde_json::to_string(&segment("p1", SegmentOp::Append, Some("fix it"))).unwrap();
    let memo = good.replace("\"result\"", "\"memo\"");
    std::fs::write(&path, format!("{good}\n{memo}\n")).unwrap();
    let err = read_log(&path).unwrap_err();
    assert!(matches!(err, SessionError::Corrupt { line: 2, .. }), "{err}");
    assert!(err.to_string().contains("unknown variant `memo`"), "{err}");
    // Every word written reads back as itself.
    std::fs::write(&path, format!("{good}\n")).unwrap();
    let read = read_log(&path).unwrap();
    let rebuilt = rebuild(&read.events, "a1").unwrap();
    assert_eq!((rebuilt.segments[0].role, rebuilt.segments[0].label), (Role::User, Label::Result));
    // An append that lost its label is not read as some default.
    let bare = Event::Segment {
        agent: "a1".into(),
        op: SegmentOp::Append,
        id: "p2".into(),
        role: Some(Role::User),
        label: None,
        text: Some("x".into()),
        tokens: None,
        pinned: None,
        recomputed_from: None,
        prompt_tokens: None,
    };
    let err = rebuild(&[bare], "a1").unwrap_err().to_string();
    assert_eq!(err, "the log appends segment `p2` of a1 without its label");
    std::fs::remove_dir_all(dir).unwrap();
}
