//! The corpus and the evidence drawn from it.

use aerix_tune::{Source, gather, read_corpus};
use serde_json::json;

use crate::{EMBEDDED, artifacts, session, tool_error};

#[test]
fn the_corpus_is_the_newest_sessions_of_the_profile_and_model_without_imports() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    let first = session(data, "one", &[]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let second = session(data, "two", &[]);
    let imported = session(data, "three", &[]);
    // Another model's session, and an imported one (its index entry tagged).
    let store = aerix_session::Store::new(data);
    let other = store.create("proj", std::path::Path::new("/w"), "other.gguf", "four").unwrap();
    let index = store.project_dir("proj").join("index.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index).unwrap()).unwrap();
    for entry in value["sessions"].as_array_mut().unwrap() {
        if entry["id"] == imported.as_str() {
            entry["tag"] = json!("claude-code");
        }
    }
    std::fs::write(&index, value.to_string()).unwrap();
    let corpus = read_corpus(&store, "proj", crate::PROFILE, crate::MODEL, 20).unwrap();
    assert_eq!(corpus.sessions, [second.clone(), first.clone()]);
    assert!(!corpus.sessions.contains(&other.id().to_owned()));
    let newest = read_corpus(&store, "proj", crate::PROFILE, crate::MODEL, 1).unwrap();
    assert_eq!(newest.sessions, [second]);
    let elsewhere = read_corpus(&store, "proj", "another-profile", crate::MODEL, 20).unwrap();
    assert!(elsewhere.sessions.is_empty());
}

#[test]
fn evidence_per_artifact_from_one_session() {
    let tmp = tempfile::tempdir().unwrap();
    let events = [
        json!({"type": "route", "agent": "a1", "route": "edit", "scores": {}, "member": "main"}),
        json!({"type": "segment", "agent": "a1", "op": "append", "id": "n1", "role": "user", "label": "note", "text": "[parse error] expected `calls` or `final`"}),
        json!({"type": "compaction", "agent": "a1", "reason": "soft_limit", "before": 3000, "after": 1500, "target": 1500, "window": 4096}),
        tool_error("bash", "refused: not one of your tools"),
        json!({"type": "agent.spawn", "agent": "a1.c1.v1", "parent": "a1.c1", "kind": "verifier", "route": "edit", "member": "main", "tools": [], "max_turns": 4}),
        json!({"type": "agent.end", "agent": "a1.c1.v1", "outcome": "done", "final_text": "{\"verdict\":\"fail\",\"reason\":\"test.sh still prints FAIL\"}", "turns": 2}),
        json!({"type": "agent.end", "agent": "a1", "outcome": "failed", "reason": "stuck", "turns": 3}),
    ];
    session(tmp.path(), "Fix calc.sh", &events);
    let store = aerix_session::Store::new(tmp.path());
    let corpus = read_corpus(&store, "proj", crate::PROFILE, crate::MODEL, 20).unwrap();
    let mut with_verifier = artifacts(&EMBEDDED);
    with_verifier.upstream.insert("verifier.md".into(), "{{brief}}".into());
    let evidence = gather(&corpus, &with_verifier);
    let texts = |path: &str| -> Vec<String> {
        evidence.by_artifact[path].iter().map(|i| i.text.clone()).collect()
    };
    assert_eq!(
        texts("system.md"),
        [
            "request \"Fix calc.sh\": routed edit, ended done: stuck after 3 turn(s)",
            "a turn of a1 was dropped: parse error: expected `calls` or `final`",
            "compaction of a1 (soft_limit): 3000 → 1500 tokens of a 4096-token window",
        ]
    );
    assert_eq!(texts("tools/bash.md"), ["bash call a1.c1 refused: not one of your tools"]);
    assert_eq!(texts("verifier.md"), ["verifier a1.c1.v1: fail: test.sh still prints FAIL"]);
    assert_eq!(evidence.by_artifact["verifier.md"][0].source, Source::VerifierReason);
    assert!(
        !evidence.by_artifact.contains_key("tune/reflect.md"),
        "tune's own prompts are not tuned"
    );
    assert_eq!(evidence.prompts, ["Fix calc.sh"]);
    assert!(evidence.untrusted.iter().any(|i| i.text == "test.sh still prints FAIL"));
}
