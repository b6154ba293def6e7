//! The turn loop's rules (the spec's "The turn"), each on a scripted member.

use std::sync::Arc;

use aerix_agent::runtime::{Delegation, NoHooks, STOP_CONTINUES};
use aerix_session::{Event, Outcome, SegmentOp};
use caldrix_proto::{Edit, StopReason};
use serde_json::json;

use crate::fake::{Hooks, Member, Pieces, Record, lines, run, schema_of};

fn turn(calls: serde_json::Value) -> String {
    json!({"thought": "go on", "calls": calls}).to_string()
}

fn final_turn(text: &str) -> String {
    json!({"thought": "done", "final": text}).to_string()
}

fn plan_read() -> serde_json::Value {
    json!({"tool": "plan", "input": {"op": "read"}})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_final_ends_the_agent_and_a_normalized_turn_replaces_the_generated_text() {
    // Fenced and without a thought: read, then stored as the turn it means.
    let mut member = Member::new(&["```json\n{\"final\": \"hello\"}\n```"]);
    let run = run(&mut member, &["plan"], "say hello", Arc::new(NoHooks), None).await;
    assert_eq!(run.end.outcome, Outcome::Done);
    assert_eq!(run.end.final_text.as_deref(), Some("hello"));
    assert_eq!(run.end.turns, 1);
    assert_eq!(
        member.text(run.context, "t1").as_deref(),
        Some(r#"{"thought":"","final":"hello"}"#)
    );
    // Generated under the turn schema, into the segment the agent names.
    let generate = &member.generations[0];
    assert_eq!(generate.append_as.as_deref(), Some("t1"));
    let schema: serde_json::Value = serde_json::from_str(schema_of(generate).unwrap()).unwrap();
    assert!(schema["oneOf"].is_array(), "{schema}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_turn_takes_its_counts_from_done_without_a_counts_request() {
    let mut member = Member::new(&[&turn(json!([plan_read()])), &final_turn("done")]);
    let run = run(&mut member, &["plan"], "read the plan", Arc::new(NoHooks), None).await;
    assert_eq!(run.end.outcome, Outcome::Done);
    assert_eq!(member.counts_asked, 0, "a counts request followed a generation");
    // Each turn's logged count is the pool's, as `done` carried it.
    let logged: Vec<(String, u32)> = run
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Segment {
                op: SegmentOp::Append,
                label: Some(label),
                text: Some(text),
                tokens: Some(tokens),
                ..
            } if *label == aerix_agent::runtime::Label::Turn => Some((text.clone(), *tokens)),
            _ => None,
        })
        .collect();
    assert_eq!(logged.len(), 2, "{:?}", run.events);
    for (text, tokens) in logged {
        assert_eq!(tokens, crate::fake::tokens(&text), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_that_does_not_parse_is_asked_again_twice_then_the_agent_fails() {
    let good = final_turn("at last");
    let mut member = Member::new(&["not json", r#"{"thought": 7, "final": "x"}"#, &good]);
    let ran = run(&mut member, &["plan"], "p", Arc::new(NoHooks), None).await;
    assert_eq!(ran.end.outcome, Outcome::Done);
    assert_eq!(ran.end.final_text.as_deref(), Some("at last"));
    assert_eq!(member.generations.len(), 3);
    let notes: Vec<String> =
        ["n1", "n2"].iter().map(|id| member.text(ran.context, id).unwrap_or_default()).collect();
    assert!(notes[0].starts_with("[parse error] Your turn is not valid JSON"), "{notes:?}");
    assert!(notes[1].starts_with("[parse error] `thought` must be a string"), "{notes:?}");

    let mut member = Member::new(&["no", "still no", "never"]);
    let ran = run(&mut member, &["plan"], "p", Arc::new(NoHooks), None).await;
    assert_eq!(ran.end.outcome, Outcome::Failed);
    let reason = ran.end.reason.unwrap_or_default();
    assert!(reason.starts_with("the turn did not parse after 2 retries"), "{reason}");
    assert_eq!(member.generations.len(), 3, "one turn and two re-asks, no more");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_cut_by_the_token_limit_leaves_the_context_and_is_asked_again_shorter() {
    let mut member = Member::default();
    member.then(r#"{"thought": "a very long thou"#, StopReason::MaxTokens);
    member.then(&final_turn("short"), StopReason::EndOfTurn);
    let ran = run(&mut member, &["plan"], "p", Arc::new(NoHooks), None).await;
    assert_eq!(ran.end.final_text.as_deref(), Some("short"));
    // The cut turn `t1` went; the note says why; the next turn reuses its id.
    assert_eq!(member.ids(ran.context), ["system", "p1", "n1", "t1"]);
    assert_eq!(member.text(ran.context, "t1"), Some(final_turn("short")));
    let note = member.text(ran.context, "n1").unwrap_or_default();
    assert!(note.starts_with("Your last turn reached the limit of 256 tokens"), "{note}");
    assert!(member.edits.contains(&vec![Edit::Remove { id: "t1".into() }]));
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_calls_become_eight_with_a_note_and_ids_go_on_from_the_kept_ones() {
    let calls: Vec<serde_json::Value> = (0..10).map(|_| plan_read()).collect();
    let next = turn(json!([plan_read()]));
    let mut member = Member::new(&[&turn(json!(calls)), &next, &final_turn("ok")]);
    let ran = run(&mut member, &["plan"], "p", Arc::new(NoHooks), None).await;
    assert_eq!(ran.end.outcome, Outcome::Done);
    let results: Vec<String> =
        ran.mirror.iter().filter(|id| id.starts_with('c')).cloned().collect();
    assert_eq!(results, ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"]);
    let note = member.text(ran.context, "n1").unwrap_or_default();
    assert_eq!(
        note,
        "Only 8 calls run per turn: 2 more were dropped (plan, plan). Call them again next turn if you still need them."
    );
    // The stored turn holds the eight calls it ran.
    let stored: serde_json::Value =
        serde_json::from_str(&member.text(ran.context, "t1").unwrap_or_default()).unwrap();
    assert_eq!(stored["calls"].as_array().map(Vec::len), Some(8));
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_run_in_order_and_their_results_go_in_together_in_call_order() {
    let calls = json!([
        {"tool": "plan", "input": {"op": "write", "text": "step one"}},
        plan_read(),
        {"tool": "web_fetch", "input": {"url": "x"}},
    ]);
    let mut member = Member::new(&[&turn(calls), &final_turn("ok")]);
    let record = Record::default();
    let hooks = Hooks { record: record.clone(), stop_block: None };
    let ran = run(&mut member, &["plan"], "p", Arc::new(hooks), None).await;
    assert_eq!(ran.end.outcome, Outcome::Done);
    // The read sees the write before it; an error is a result, not the end of the loop.
    assert_eq!(member.text(ran.context, "c1").as_deref(), Some("[plan c1]\nplan saved"));
    assert_eq!(member.text(ran.context, "c2").as_deref(), Some("[plan c2]\nstep one"));
    let refused = member.text(ran.context, "c3").unwrap_or_default();
    assert!(refused.starts_with("[web_fetch c3]\nerror: `web_fetch` is a reserved name"));
    assert_eq!(
        lines(&record),
        [
            "PreToolUse plan c1",
            "PostToolUse plan c1",
            "PreToolUse plan c2",
            "PostToolUse plan c2",
            "PreToolUse web_fetch c3",
            "PostToolUse web_fetch c3",
            // The final's.
            "Stop active=false",
        ]
    );
    // One edit request holds the three results, in call order.
    let appended: Vec<Vec<String>> = member
        .edits
        .iter()
        .map(|edits| {
            edits
                .iter()
                .filter_map(|e| match e {
                    Edit::Append { segment } => Some(segment.id.clone()),
                    _ => None,
                })
                .collect()
        })
        .collect();
    assert!(appended.contains(&vec!["c1".to_owned(), "c2".into(), "c3".into()]), "{appended:?}");
    let plans: Vec<&str> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Plan { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(plans, ["step one"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_calls_run_after_the_others_together_and_their_results_keep_call_order() {
    let agent = |brief: &str| json!({"tool": "agent", "input": {"brief": brief, "check": "true"}});
    let calls = json!([
        agent("first piece"),
        {"tool": "plan", "input": {"op": "write", "text": "the plan"}},
        agent("second piece"),
        plan_read(),
    ]);
    let mut member = Member::new(&[&turn(calls), &final_turn("ok")]);
    let record = Record::default();
    let hooks = Hooks { record: record.clone(), stop_block: None };
    let pieces: Arc<dyn Delegation> = Arc::new(Pieces { record: record.clone() });
    let ran = run(&mut member, &["plan", "agent"], "p", Arc::new(hooks), Some(pieces)).await;
    assert_eq!(ran.end.outcome, Outcome::Done);
    assert_eq!(
        lines(&record),
        [
            "PreToolUse plan c2",
            "PostToolUse plan c2",
            "PreToolUse plan c4",
            "PostToolUse plan c4",
            // Every piece through PreToolUse before they run together.
            "PreToolUse agent c1",
            "PreToolUse agent c3",
            "delegation of a1 runs c1 c3",
            "PostToolUse agent c1",
            "PostToolUse agent c3",
            "Stop active=false",
        ]
    );
    let results: Vec<String> =
        ran.mirror.iter().filter(|id| id.starts_with('c')).cloned().collect();
    assert_eq!(results, ["c1", "c2", "c3", "c4"]);
    assert_eq!(member.text(ran.context, "c1").as_deref(), Some("[agent c1]\npiece c1 done"));
    assert_eq!(member.text(ran.context, "c3").as_deref(), Some("[agent c3]\npiece c3 done"));
    assert_eq!(member.text(ran.context, "c4").as_deref(), Some("[plan c4]\nthe plan"));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_delegation_an_agent_call_is_refused_as_a_tool_the_agent_lacks() {
    let calls = json!([{"tool": "agent", "input": {"brief": "b", "check": "c"}}]);
    let mut member = Member::new(&[&turn(calls), &final_turn("ok")]);
    let ran = run(&mut member, &["plan"], "p", Arc::new(NoHooks), None).await;
    assert_eq!(ran.end.outcome, Outcome::Done);
    let result = member.text(ran.context, "c1").unwrap_or_default();
    assert!(result.starts_with("[agent c1]\nerror: refused: `agent` is not one of your tools"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_hook_continues_the_agent_at_most_five_times() {
    let finals: Vec<String> = (1..=7).map(|n| final_turn(&format!("answer {n}"))).collect();
    let finals: Vec<&str> = finals.iter().map(String::as_str).collect();
    let mut member = Member::new(&finals);
    let record = Record::default();
    let hooks = Hooks { record: record.clone(), stop_block: Some("check the tests".into()) };
    let ran = run(&mut member, &["plan"], "p", Arc::new(hooks), None).await;
    assert_eq!(ran.end.outcome, Outcome::Done);
    assert_eq!(ran.end.final_text.as_deref(), Some("answer 6"));
    assert_eq!(STOP_CONTINUES, 5);
    assert_eq!(member.generations.len(), 6);
    let fired = lines(&record);
    assert_eq!(fired.len(), 6);
    assert_eq!(fired[0], "Stop active=false");
    assert!(fired[1..].iter().all(|f| f == "Stop active=true"), "{fired:?}");
    for n in 1..=5 {
        let note = member.text(ran.context, &format!("n{n}"));
        assert_eq!(note.as_deref(), Some("[Stop hook] check the tests"));
    }
    assert_eq!(member.text(ran.context, "n6"), None);
}

/// A tool runs on a blocking thread of the runtime's pool, never in place: so on a
/// current-thread runtime too (where `block_in_place` would panic), and without stalling
/// whatever else the runtime runs.
#[tokio::test(flavor = "current_thread")]
async fn a_command_runs_on_a_current_thread_runtime() {
    let bash = json!({"tool": "bash", "input": {"command": "echo from-bash"}});
    let mut member = Member::new(&[&turn(json!([bash])), &final_turn("ran it")]);
    let run = run(&mut member, &["bash"], "run it", Arc::new(NoHooks), None).await;
    assert_eq!(run.end.outcome, Outcome::Done, "{:?}", run.end);
    let result = run
        .events
        .iter()
        .find_map(|e| match e {
            Event::Message { role: aerix_session::Role::Tool, text, .. } => Some(text.clone()),
            _ => None,
        })
        .expect("the call's result");
    assert!(result.contains("from-bash"), "{result}");
}
