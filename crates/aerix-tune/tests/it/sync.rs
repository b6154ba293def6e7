//! Sync after a release changed its prompts.

use aerix_profile::Profile;
use aerix_tune::{Store, SyncLine, UPSTREAM_JSON, plan_sync, sha256_hex, sync};
use serde_json::json;

use crate::{EMBEDDED, GUARDS, MODEL, PROFILE, Scripted, artifacts, block_on, profile, release};

const NEXT: [(&str, &str); 5] = [
    ("system.md", "You are a coding agent.\nRead the file before you edit it.\n"),
    ("routing.md", "answer, edit, investigate or plan\n"),
    ("tools/bash.md", "Runs a shell command.\n"),
    ("tune/reflect.md", "Revise the prompt.\n"),
    ("tune/reconcile.md", "Reconcile the prompt.\n"),
];

/// system.md tuned on the model base (its upstream recorded), then the next release.
fn tuned_then_released(data: &std::path::Path) -> (aerix_tune::ProfileStore, String) {
    let (store, branch) = profile(data);
    let head = store.head(&branch).unwrap().unwrap();
    let upstream = format!("{{\"system.md\": \"{}\"}}\n", sha256_hex(EMBEDDED[0].1));
    let files = [
        (
            "system.md".to_owned(),
            "You are a terse coding agent.\nRead before you edit.\n".to_owned(),
        ),
        (UPSTREAM_JSON.to_owned(), upstream),
    ];
    store.commit(&branch, &head, &files, "tuned").unwrap();
    Profile::create_or_open(data, PROFILE, &release(&NEXT)).unwrap();
    (store, branch)
}

#[test]
fn untuned_prompts_take_the_release_and_a_tuned_one_is_reconciled_with_its_why() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, branch) = tuned_then_released(tmp.path());
    let plan = plan_sync(&store, &branch, &artifacts(&NEXT)).unwrap();
    assert!(plan.needs_model());
    let reconciled = "You are a terse coding agent.\nRead the file before you edit it.\n";
    let mut model =
        Scripted::new(&[json!({"text": reconciled, "why": "took the release's wording"})]);
    let report =
        block_on(sync(&store, &branch, &artifacts(&NEXT), &GUARDS, Some(&mut model))).unwrap();
    assert_eq!(
        report.lines,
        [
            SyncLine::Updated("routing.md".into()),
            SyncLine::Reconciled {
                path: "system.md".into(),
                why: "took the release's wording".into()
            },
        ]
    );
    let head = report.commit.unwrap();
    assert_eq!(store.read(&head, "system.md").unwrap().unwrap(), reconciled);
    assert_eq!(store.read(&head, "routing.md").unwrap().unwrap(), NEXT[1].1);
    let upstream = store.read(&head, UPSTREAM_JSON).unwrap().unwrap();
    assert!(upstream.contains(&sha256_hex(NEXT[0].1)), "{upstream}");
    // The old upstream, the diff and the tuned text reached the model.
    assert!(model.asked[0].contains("-Read before you edit.") && model.asked[0].contains("terse"));
    // Nothing is stale any more: a second sync needs no model and writes nothing.
    let plan = plan_sync(&store, &branch, &artifacts(&NEXT)).unwrap();
    assert!(plan.is_empty() && !plan.needs_model());
    let _ = MODEL;
}

#[test]
fn an_answer_equal_to_the_tuned_text_keeps_it_and_records_the_new_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, branch) = tuned_then_released(tmp.path());
    let tuned = "You are a terse coding agent.\nRead before you edit.\n";
    let mut model = Scripted::new(&[json!({"text": tuned, "why": "already there"})]);
    let report =
        block_on(sync(&store, &branch, &artifacts(&NEXT), &GUARDS, Some(&mut model))).unwrap();
    assert_eq!(
        report.lines[1],
        SyncLine::Kept { path: "system.md".into(), why: "already there".into() }
    );
    let head = report.commit.unwrap();
    assert_eq!(store.read(&head, "system.md").unwrap().unwrap(), tuned);
    assert!(store.read(&head, UPSTREAM_JSON).unwrap().unwrap().contains(&sha256_hex(NEXT[0].1)));
}

#[test]
fn a_refused_answer_stays_stale_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, branch) = tuned_then_released(tmp.path());
    let huge = "x".repeat(1000);
    let mut model = Scripted::new(&[json!({"text": huge, "why": "more"})]);
    let report =
        block_on(sync(&store, &branch, &artifacts(&NEXT), &GUARDS, Some(&mut model))).unwrap();
    assert!(
        matches!(&report.lines[1], SyncLine::Stale { path, reason } if path == "system.md" && reason.contains("over twice")),
        "{:?}",
        report.lines
    );
    assert_eq!(report.stale, ["system.md"]);
    let head = report.commit.unwrap();
    assert!(store.read(&head, "system.md").unwrap().unwrap().contains("terse"));
}

#[test]
fn an_embedded_file_the_branch_lacks_is_added_without_the_model() {
    const MORE: [(&str, &str); 6] = [
        EMBEDDED[0],
        EMBEDDED[1],
        EMBEDDED[2],
        EMBEDDED[3],
        EMBEDDED[4],
        ("tools/new.md", "A new tool.\n"),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let (store, branch) = profile(tmp.path());
    Profile::create_or_open(tmp.path(), PROFILE, &release(&MORE)).unwrap();
    let plan = plan_sync(&store, &branch, &artifacts(&MORE)).unwrap();
    assert!(!plan.needs_model());
    let report =
        block_on(sync::<Scripted<'_>>(&store, &branch, &artifacts(&MORE), &GUARDS, None)).unwrap();
    assert_eq!(report.lines, [SyncLine::Added("tools/new.md".into())]);
    let head = report.commit.unwrap();
    assert_eq!(store.read(&head, "tools/new.md").unwrap().as_deref(), Some("A new tool.\n"));
}
