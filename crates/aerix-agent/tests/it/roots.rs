//! The file tools' roots as the runtime sets them: the working tree, and the sink's spool read
//! only, so a capped result's pointer can be followed and nothing else outside is reached.

use std::path::PathBuf;

use std::sync::Arc;

use aerix_agent::runtime::NoHooks;
use aerix_session::Event;
use serde_json::json;

use crate::fake::{At, Member, Spooled, options, run_in};

fn turn(calls: serde_json::Value) -> String {
    json!({"thought": "go on", "calls": calls}).to_string()
}

fn results(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Message { role: aerix_session::Role::Tool, call: Some(call), text, .. } => {
                Some((call.clone(), text.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_capped_result_is_read_back_from_the_spool_and_nothing_else_outside_is() {
    let base = std::env::temp_dir().join(format!("aerix-agent-roots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (tree, spool) = (base.join("tree"), base.join("spool"));
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::create_dir_all(&spool).unwrap();
    std::fs::write(base.join("secret.txt"), "secret\n").unwrap();
    let spooled: PathBuf = spool.join("c1-bash.txt");
    let mut member = Member::new(&[
        // 28,893 bytes: over the 2,000-byte cap, so the whole goes to the spool.
        &turn(json!([{"tool": "bash", "input": {"command": "seq 1 6000"}}])),
        &turn(json!([
            {"tool": "read", "input": {"path": spooled, "offset": 5999, "limit": 5}},
            {"tool": "write", "input": {"path": spooled, "content": "x"}},
            {"tool": "read", "input": {"path": base.join("secret.txt")}},
        ])),
        &json!({"thought": "done", "final": "read it"}).to_string(),
    ]);
    let mut sink = Spooled { events: Vec::new(), dir: Some(spool.clone()) };
    let mut options = options();
    options.tool_caps.insert("bash".to_owned(), 2_000);
    let at = At { cwd: &tree, options };
    let tools = ["bash", "read", "write"];
    let ran = run_in(&mut member, &tools, "p", Arc::new(NoHooks), None, at, &mut sink).await;
    let results = results(&ran.events);
    let text = |id: &str| results.iter().find(|(c, _)| c == id).unwrap().1.clone();
    assert!(text("c1").contains(&format!("read with read(path=\"{}\"", spooled.display())));
    assert_eq!(text("c2"), "5999\t5999\n6000\t6000\n6001\t[exit 0]\n");
    assert!(text("c3").contains("which the tools may read but not change"), "{}", text("c3"));
    assert!(text("c4").contains("is outside the working tree"), "{}", text("c4"));
    std::fs::remove_dir_all(&base).unwrap();
}
