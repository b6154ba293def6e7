//! Through the real engine: SmolLM2 routes and takes turns under the turn schema.

use crate::{World, of_type, smollm2, stderr};

#[test]
fn smollm2_routes_takes_parsing_turns_and_a_later_request_resumes_the_stored_prefix() {
    let world = World::new(
        "smollm2",
        &smollm2().display().to_string(),
        "[context]\nmax_new_tokens = 400\n",
    );
    let out = world.aerix(&["-p", "What does the add function in calc.sh do?", "--max-turns", "2"]);
    let code = out.status.code();
    assert!(matches!(code, Some(0) | Some(2)), "a named outcome: {code:?}\n{}", stderr(&out));
    let events = world.events();
    let route = &of_type(&events, "route")[0];
    assert!(["answer", "edit", "investigate", "plan"].contains(&route["route"].as_str().unwrap()));
    let end = &of_type(&events, "agent.end")[0];
    assert!(end["turns"].as_u64().unwrap() <= 2);
    // Under the constraint every turn parses: no parse-error notes, no failure.
    assert!(
        of_type(&events, "segment")
            .iter()
            .all(|s| !s["text"].as_str().unwrap_or("").starts_with("[parse error]"))
    );
    assert_ne!(end["outcome"], "failed", "{end}");
    let first_turns: Vec<_> = of_type(&events, "segment")
        .into_iter()
        .filter(|s| s["label"] == "turn" && s["op"] == "append")
        .cloned()
        .collect();
    let last_prompt = first_turns.last().unwrap()["prompt_tokens"].as_u64().unwrap();

    // A second request in the same session: its first generation resumes from the rows the
    // first request stored, near the end of that context.
    let out = world.aerix(&["-p", "And what should it do?", "--continue", "--max-turns", "1"]);
    assert!(matches!(out.status.code(), Some(0) | Some(2)), "{}", stderr(&out));
    let events = world.events();
    let turns: Vec<_> = of_type(&events, "segment")
        .into_iter()
        .filter(|s| s["label"] == "turn" && s["op"] == "append")
        .collect();
    let resumed = turns[first_turns.len()];
    let from = resumed["recomputed_from"].as_u64().unwrap();
    let prompt = resumed["prompt_tokens"].as_u64().unwrap();
    eprintln!("first request's last prompt {last_prompt} tokens; resumed at {from} of {prompt}");
    assert!(
        from >= last_prompt,
        "resumed at {from}, the first request's last prompt had {last_prompt} tokens"
    );
    assert!(from <= prompt && from > prompt / 2, "resumed at {from} of {prompt}");
}
