//! Context management end to end: compaction passes, the hard limit and results fitted to the
//! window, on a scripted member with a 4,096-token window (the system segment alone is about
//! 1,500), so a few reads overflow it.

use std::path::Path;

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, of_type, stderr};

const WINDOW: u32 = 4096;
/// The turn's ask in most tests: 256 tokens (a quarter of the window would be 1,024).
const SMALL_TURNS: &str = "[context]\nmax_new_tokens = 256\n";

/// A world whose main member replays `replies` in a window of `WINDOW` tokens.
fn world(name: &str, replies: &[String], extra: &str) -> World {
    world_of(name, replies, WINDOW, extra)
}

fn world_of(name: &str, replies: &[String], window: u32, extra: &str) -> World {
    let world = World::new(name, "", "");
    let model = world.script("replies", replies, true);
    world.write_settings_with(&model, &format!("ctx = {window}\n"), extra);
    world
}

/// `lines` distinct lines of words, about 9 tokens each.
fn text(tag: &str, lines: usize) -> String {
    (1..=lines).map(|i| format!("{tag} line {i} alpha beta gamma delta\n")).collect()
}

/// A thought of about 120 tokens (turns long enough to be worth compacting).
fn thought(n: u32) -> String {
    format!("Step {n}. ") + &"I read the next file and keep going with the task. ".repeat(9)
}

/// The segment events of the root's segment `id`, in order.
fn segment_events<'a>(events: &'a [Value], id: &str) -> Vec<&'a Value> {
    of_type(events, "segment").into_iter().filter(|s| s["agent"] == "a1" && s["id"] == id).collect()
}

/// The segment `id` as first appended.
fn appended<'a>(events: &'a [Value], id: &str) -> &'a Value {
    segment_events(events, id)
        .into_iter()
        .find(|s| s["op"] == "append")
        .unwrap_or_else(|| panic!("no segment {id}"))
}

fn tokens(segment: &Value) -> u32 {
    segment["tokens"].as_u64().unwrap() as u32
}

fn compactions(events: &[Value]) -> Vec<&Value> {
    of_type(events, "compaction")
}

fn ids(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

fn hook_file(world: &World, hooks: Value) {
    let path = world.home.join("config/aerix/hooks.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, json!({"hooks": hooks}).to_string()).unwrap();
}

fn command(c: &str) -> Value {
    json!({"type": "command", "command": c, "timeout": 30})
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Two turns of reads put the context over the soft limit: the pass before the third
/// replaces unpinned tool results oldest first, then assistant turns, each by its marker,
/// skipping the small result and the pinned one, and never the system, instructions, hook
/// context, prompt, scratchpad or summary. PreCompact and ContextCompact fire around it.
/// The second turn summarizes and pins results of the first (a context call names segments the
/// model has seen: the turn schema offers only those there are when the turn is asked for).
#[test]
fn compact_results_oldest_first_then_turns_with_markers() {
    let replies = vec![
        "answer".to_owned(),
        calls(
            &thought(1),
            vec![
                call("read", json!({"path": "big1.txt"})),
                call("read", json!({"path": "tiny.txt"})),
                call("read", json!({"path": "small.txt"})),
                call("read", json!({"path": "big3.txt"})),
            ],
        ),
        calls(
            &thought(2),
            vec![
                call("context", json!({"op": "note", "text": "big files are read in turn"})),
                call(
                    "context",
                    json!({"op": "summarize", "ids": ["c3"], "text": "small.txt holds words"}),
                ),
                call("context", json!({"op": "pin", "ids": ["c4"]})),
                call("read", json!({"path": "big2.txt"})),
            ],
        ),
        final_turn("Done.", "read them all"),
    ];
    let world = world("compact-order", &replies, SMALL_TURNS);
    world.write("big1.txt", &text("one", 45));
    world.write("big2.txt", &text("two", 45));
    world.write("big3.txt", &text("three", 10));
    world.write("small.txt", &text("small", 6));
    world.write("tiny.txt", "ok\n");
    world.write("AGENTS.md", "Read every file before you answer.\n");
    let (pre, post) = (world.home.join("pre.json"), world.home.join("post.json"));
    let post_compact = world.home.join("post-compact.json");
    hook_file(
        &world,
        json!({
            "SessionStart": [{"hooks": [command("echo 'Hook context here.'")]}],
            "PreCompact": [{"matcher": "auto", "hooks": [command(&format!("cat > {}", pre.display()))]}],
            "ContextCompact": [{"hooks": [command(&format!("cat > {}", post.display()))]}],
            "PostCompact": [{"matcher": "auto", "hooks": [command(&format!("cat > {}", post_compact.display()))]}],
        }),
    );
    let out = world.aerix(&["-p", "Read the big files."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();

    let passes = compactions(&events);
    assert_eq!(passes.len(), 1, "{passes:?}");
    let pass = passes[0];
    let (before, after, target) =
        (pass["before"].as_u64().unwrap(), pass["after"].as_u64().unwrap(), &pass["target"]);
    assert_eq!(
        (pass["reason"].as_str(), target.as_u64(), pass["window"].as_u64()),
        (Some("soft_limit"), Some(2048), Some(4096))
    );
    assert!(before > 2867 && after <= 2048, "{pass}");
    let compacted = ids(&pass["compacted"]);
    // Results oldest first (c1, c8; c2 is 24 tokens or fewer, c3 is a summary, c4 pinned),
    // then turns oldest first, until the target.
    assert!(tokens(appended(&events, "c2")) <= 24);
    let results = compacted.iter().take_while(|id| id.starts_with('c')).count();
    let (results, turns) = compacted.split_at(results);
    let small = |id: &str| tokens(appended(&events, id)) <= 24;
    let expected: Vec<String> = ["c1", "c5", "c6", "c7", "c8"]
        .into_iter()
        .filter(|id| ["c1", "c8"].contains(id) || !small(id))
        .map(String::from)
        .collect();
    assert_eq!(results, expected, "{compacted:?}");
    assert!(
        !turns.is_empty() && turns.iter().zip(["t1", "t2", "t3"]).all(|(a, b)| a == b),
        "{compacted:?}"
    );
    // It stopped at the target: without its last marker the plan was still over it.
    let freed = |id: &str| tokens(appended(&events, id)).saturating_sub(20) as u64;
    let but_last: u64 = compacted[..compacted.len() - 1].iter().map(|id| freed(id)).sum();
    assert!(before - but_last > 2048, "{compacted:?} {pass}");

    // Each compacted segment is its marker, with the tokens it had.
    for id in &compacted {
        let original = tokens(appended(&events, id));
        let replaced =
            segment_events(&events, id).into_iter().rfind(|s| s["op"] == "replace").unwrap();
        let expected = if id.starts_with('c') {
            let tool =
                of_type(&events, "message").into_iter().find(|m| m["call"] == id.as_str()).unwrap()
                    ["tool"]
                    .as_str()
                    .unwrap()
                    .to_owned();
            format!("[compacted tool result of call {id} ({tool}, {original} tokens)]")
        } else {
            format!("[compacted assistant turn {id} ({original} tokens)]")
        };
        assert_eq!(replaced["text"], expected.as_str());
    }
    // Never compacted: system, instructions, hook context, prompt, scratchpad, summary,
    // the pinned result and the small one.
    for id in ["system", "instructions", "hooks", "p1", "scratchpad", "c3", "c4", "c2"] {
        assert!(!compacted.contains(&id.to_owned()), "{id} in {compacted:?}");
        let texts: Vec<_> = segment_events(&events, id).iter().map(|s| s["text"].clone()).collect();
        assert!(
            !texts.iter().any(|t| t.as_str().is_some_and(|t| t.starts_with("[compacted"))),
            "{id}: {texts:?}"
        );
    }
    assert!(
        segment_events(&events, "instructions").len() == 1
            && segment_events(&events, "hooks").len() == 1
    );

    // The model is told, before its next turn.
    let note = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["label"] == "note" && s["text"].as_str().unwrap().starts_with("[compaction]"))
        .expect("a compaction note");
    assert!(note["text"].as_str().unwrap().contains(&compacted.join(", ")), "{note}");
    // The hooks: PreCompact (trigger auto) before the markers, ContextCompact after, both
    // `hook` events of a1.
    let pre_in = read_json(&pre);
    assert_eq!((&pre_in["trigger"], &pre_in["custom_instructions"]), (&json!("auto"), &json!("")));
    let post_in = read_json(&post);
    assert_eq!(
        (&post_in["before_tokens"], &post_in["after_tokens"], &post_in["compacted"]),
        (&json!(before), &json!(after), &json!(compacted.len()))
    );
    let hooks: Vec<_> = of_type(&events, "hook")
        .into_iter()
        .filter(|h| h["agent"] == "a1")
        .map(|h| h["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(hooks, ["PreCompact", "ContextCompact", "PostCompact"]);
    let post_compact = read_json(&post_compact);
    assert_eq!(
        (&post_compact["hook_event_name"], &post_compact["trigger"], &post_compact["agent_id"]),
        (&json!("PostCompact"), &json!("auto"), &json!("a1"))
    );
    let position = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let pre_at = position(&|e| e["type"] == "hook" && e["event"] == "PreCompact");
    let first_marker =
        position(&|e| e["type"] == "segment" && e["op"] == "replace" && e["id"] == "c1");
    let post_at = position(&|e| e["type"] == "hook" && e["event"] == "ContextCompact");
    assert!(pre_at < first_marker && first_marker < post_at);
}

/// A PreCompact hook that exits 2 skips the pass: the `compaction` event says why, nothing is
/// replaced, and the run goes on.
#[test]
fn compact_blocked_by_pre_compact_skips_the_pass() {
    let replies = vec![
        "answer".to_owned(),
        calls(&thought(1), vec![call("read", json!({"path": "big1.txt"}))]),
        calls(&thought(2), vec![call("read", json!({"path": "big2.txt"}))]),
        final_turn("Done.", "read them"),
    ];
    let world = world("compact-blocked", &replies, SMALL_TURNS);
    world.write("big1.txt", &text("one", 80));
    world.write("big2.txt", &text("two", 80));
    hook_file(
        &world,
        json!({"PreCompact": [{"matcher": "auto", "hooks": [command("echo 'not now' >&2; exit 2")]}]}),
    );
    let out = world.aerix(&["-p", "Read both."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let passes = compactions(&events);
    assert!(!passes.is_empty());
    for pass in &passes {
        assert_eq!(pass["blocked"], "not now", "{pass}");
        assert_eq!(pass["before"], pass["after"]);
        assert!(pass.get("compacted").is_none());
    }
    assert!(of_type(&events, "segment").iter().all(|s| s["op"] != "replace"));
    let hook = of_type(&events, "hook").into_iter().find(|h| h["event"] == "PreCompact").unwrap();
    assert_eq!(
        (&hook["agent"], &hook["blocked"], &hook["exit_code"]),
        (&json!("a1"), &json!(true), &json!(2))
    );
    assert!(!of_type(&events, "segment").iter().any(|s| s["label"] == "note"));
}

/// A prompt that leaves less than a turn's ask and nothing to compact: the first hit cuts the
/// turn to the room left (the scripted reply is cut there), the re-ask is the second hit and
/// kills the agent at the context floor.
#[test]
fn compact_hard_limit_cuts_then_kills() {
    let long_final = "word ".repeat(1500);
    let replies =
        vec!["answer".to_owned(), final_turn("Answer.", &long_final), final_turn("Again.", "x")];
    // A quarter of the window (1,024) is the ask; the prompt leaves a few hundred tokens.
    let world = world("compact-floor", &replies, "");
    let prompt = format!("Summarize this:\n{}", text("prompt", 190));
    let out = world.aerix(&["-p", &prompt]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let events = world.events();
    let turn = of_type(&events, "message").into_iter().find(|m| m["role"] == "assistant").unwrap();
    let prompt_tokens = turn["usage"]["prompt_tokens"].as_u64().unwrap() as u32;
    let room = WINDOW - prompt_tokens;
    assert!((64..1024).contains(&room), "room {room}: adjust the prompt");
    assert_eq!(turn["stop"], "max_tokens");
    assert_eq!(turn["usage"]["completion_tokens"], room, "{turn}");
    let end = of_type(&events, "agent.end")[0];
    assert_eq!(end["outcome"], "killed");
    let reason = end["reason"].as_str().unwrap();
    assert!(reason.starts_with("context floor: no room"), "{reason}");
    assert!(stderr(&out).contains("context floor: no room"), "{}", stderr(&out));
    assert!(compactions(&events).is_empty(), "nothing could be compacted");
}

/// One turn's three results against the room the window leaves: the first cut to fit (the
/// whole of it spooled), the second fitted after a compaction pass, the third, with the
/// context already at its target (a pass replaces nothing), its pointer line alone.
#[test]
fn compact_results_fitted_then_after_compaction_then_pointer_alone() {
    let bash = |lines: usize, tag: &str| {
        call(
            "bash",
            json!({"command": format!("for i in $(seq {lines}); do echo \"{tag} $i alpha beta gamma delta\"; done")}),
        )
    };
    let replies = vec![
        "answer".to_owned(),
        calls(&thought(1), vec![call("read", json!({"path": "big1.txt"}))]),
        calls(&thought(2), vec![bash(400, "a"), bash(120, "b"), bash(120, "c")]),
        final_turn("Done.", "ran them"),
    ];
    // c2 (about 12 KB) is cut by its cap first, then fitted: one spool file, one pointer.
    let world =
        world("compact-fit", &replies, &format!("{SMALL_TURNS}[context.tool_caps]\nbash = 9000\n"));
    world.write("big1.txt", &text("one", 50));
    let out = world.aerix(&["-p", "Run them."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let original = |id: &str| -> String {
        of_type(&events, "message").into_iter().find(|m| m["call"] == id).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let pointer = |text: &str| -> (usize, String) {
        let last = text.lines().last().unwrap();
        let rest = last.strip_prefix("[truncated: ").unwrap_or_else(|| panic!("{text}"));
        let (n, rest) = rest.split_once(" more bytes; read with read(path=\"").unwrap();
        (n.parse().unwrap(), rest.strip_suffix("\", offset=1)]").unwrap().to_owned())
    };
    // Fitted: the cap's cut (9,000 bytes) cut again to the room, its pointer counting both
    // cuts and naming the cap's spool file, which holds the whole output.
    let capped = original("c2");
    let (capped_more, capped_path) = pointer(&capped);
    let c2 = appended(&events, "c2")["text"].as_str().unwrap().to_owned();
    let (more, path) = pointer(&c2);
    assert_eq!(path, capped_path);
    let whole = std::fs::read_to_string(&path).unwrap();
    assert_eq!(capped_more, whole.len() - 9000);
    let kept = c2.strip_prefix("[bash c2]\n").unwrap().rsplit_once('\n').unwrap().0;
    assert!(kept.len() < 9000 && more > capped_more, "{c2}");
    assert!(!kept.is_empty() && whole.starts_with(kept) && kept.len() + more == whole.len());
    // Fitted after compacting: the pass (reason `result`) replaced c1, then c3 was cut.
    let passes = compactions(&events);
    let by_result: Vec<_> = passes.iter().filter(|p| p["reason"] == "result").collect();
    assert_eq!(by_result.len(), 1, "{passes:?}");
    assert_eq!(ids(&by_result[0]["compacted"])[0], "c1");
    let c3 = appended(&events, "c3")["text"].as_str().unwrap().to_owned();
    let (more, path) = pointer(&c3);
    let kept = c3.strip_prefix("[bash c3]\n").unwrap().rsplit_once('\n').unwrap().0;
    assert!(!kept.is_empty() && kept.len() + more == original("c3").len(), "{c3}");
    assert_eq!(std::fs::read_to_string(path).unwrap(), original("c3"));
    // Pointer alone: no room, and the second pass had nothing left to replace.
    let c4 = appended(&events, "c4")["text"].as_str().unwrap().to_owned();
    let (more, path) = pointer(&c4);
    assert_eq!(c4.lines().count(), 2, "{c4}");
    assert_eq!(more, original("c4").len());
    assert_eq!(std::fs::read_to_string(path).unwrap(), original("c4"));
}

/// A long task: 18 reads that together need more than three windows (of 8,192 tokens).
/// Compaction keeps every turn within the window and the agent ends done.
#[test]
fn compact_long_task_three_windows_ends_done() {
    const WINDOW: u32 = 8192;
    let files = 18;
    let mut replies = vec!["answer".to_owned()];
    for i in 1..=files {
        replies
            .push(calls(&thought(i), vec![call("read", json!({"path": format!("part{i}.txt")}))]));
    }
    replies.push(final_turn("All read.", "done with every part"));
    let world = world_of("compact-long", &replies, WINDOW, SMALL_TURNS);
    for i in 1..=files {
        world.write(&format!("part{i}.txt"), &text(&format!("part{i}"), 100));
    }
    let out = world.aerix(&["-p", "Read every part in order."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let end = of_type(&events, "agent.end")[0];
    assert_eq!(
        (&end["outcome"], &end["final_text"]),
        (&json!("done"), &json!("done with every part"))
    );
    // Without compaction: every segment ever appended, at its first count.
    let appended_total: u64 = of_type(&events, "segment")
        .iter()
        .filter(|s| s["op"] == "append")
        .map(|s| s["tokens"].as_u64().unwrap())
        .sum();
    assert!(appended_total >= 3 * u64::from(WINDOW), "{appended_total}");
    // Every turn had its 256 tokens of room.
    for m in of_type(&events, "message").into_iter().filter(|m| m["role"] == "assistant") {
        let prompt = m["usage"]["prompt_tokens"].as_u64().unwrap();
        assert!(prompt + 256 <= u64::from(WINDOW), "{m}");
    }
    let passes = compactions(&events);
    assert!(passes.len() >= 3, "{}", passes.len());
    assert!(passes.iter().all(|p| p["after"].as_u64().unwrap() <= 4096), "{passes:?}");
    // Only the latest pass's note is in the context.
    let notes = of_type(&events, "segment")
        .into_iter()
        .filter(|s| {
            s["op"] == "append" && s["text"].as_str().is_some_and(|t| t.starts_with("[compaction]"))
        })
        .count();
    let removed = of_type(&events, "segment").into_iter().filter(|s| s["op"] == "remove").count();
    assert_eq!((notes, removed), (passes.len(), passes.len() - 1));
    eprintln!(
        "long task: {appended_total} tokens appended in all, {} passes, max prompt {}",
        passes.len(),
        of_type(&events, "message")
            .iter()
            .filter_map(|m| m["usage"]["prompt_tokens"].as_u64())
            .max()
            .unwrap()
    );
}
