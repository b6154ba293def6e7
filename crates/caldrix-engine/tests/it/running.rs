//! Speed without a change of output: fast-forward (forced tokens in one batch), prompt-lookup
//! drafts, and several generations stepped together each give what the step-by-step loop gives
//! alone (up to the near ties llama.cpp's batched kernels may break the other way: `agree`);
//! one cancelled among them leaves the others running; a prompt filled while others decode goes
//! chunk by chunk between their tokens.

use caldrix_engine::{
    Constraint, Event, GenerateParams, Generation, Model, Sampling, SessionParams, StopReason,
};
use serde_json::Value;

use crate::support::{self, fixture};

fn turn_schema() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("turn-schema.json")).unwrap()).unwrap()
}

/// A prompt whose answer copies text from it (what an `edit`'s `old` does with a `read`).
fn copy_prompt(model: &Model) -> Vec<caldrix_engine::Token> {
    let file = "fn parse(input: &str) -> Result<Config, Error> {\n    let mut config = \
                Config::default();\n    for line in input.lines() {\n        let (key, value) = \
                line.split_once('=').ok_or(Error::NoEquals)?;\n        config.set(key.trim(), \
                value.trim())?;\n    }\n    Ok(config)\n}\n";
    support::chat(
        model,
        "You are a coding agent. Answer with the JSON turn only.",
        &format!(
            "Here is src/parse.rs:\n{file}\nRepeat the whole function exactly, then say done."
        ),
    )
}

fn same(a: &Generation, b: &Generation, what: &str) {
    assert_eq!(a.text, b.text, "{what}: text");
    assert_eq!(a.tokens, b.tokens, "{what}: tokens");
    assert_eq!(a.stop, b.stop, "{what}: stop");
}

/// The margin between two tokens' log-probabilities within which llama.cpp may rank them
/// differently in a batch of another size: its CPU kernels round sums in other orders past a
/// few tokens per batch (measured: a token's log-probability moves by up to about 0.2 between a
/// generation alone and the same generation batched with 2 or 3 others, on SmolLM2 and Gemma 3,
/// so two tokens 0.25 apart can swap).
const TIE: f32 = 0.5;

/// `b` (computed in batches of other sizes) is `a` up to a near tie: identical, or the first
/// token they differ at was, in `a`'s own distribution (or in `b`'s, for a token outside `a`'s
/// ten best), within `TIE` of `a`'s choice (a wrong row or a leak between sequences shows as a
/// confident choice overturned). Both need logprobs
/// with 10 alternatives. Greedy only: a seeded draw near a boundary of
/// its distribution lands elsewhere after any rounding, so seeded runs are not compared.
fn agree(a: &Generation, b: &Generation, what: &str) {
    if a.tokens == b.tokens {
        return same(a, b, what);
    }
    let (la, lb) = (a.logprobs.as_ref().unwrap(), b.logprobs.as_ref().unwrap());
    let k = la.iter().zip(lb).position(|(x, y)| x.token != y.token);
    let k = k.unwrap_or_else(|| panic!("{what}: same choices, another end: {a:?} {b:?}"));
    let chosen = &la[k];
    let alt = lb[k].token;
    let tie = TIE;
    // Under a constraint the mask may leave only tokens outside `a`'s ten best (`"calls"` or
    // `"final"` after `{"thought":"..."`), the choice then being between two improbable
    // tokens: `b`'s own log-probability of its choice (same tokens before, so the same
    // distribution up to rounding) stands in for `a`'s, and must be within the margin on
    // either side (a wrong row moves it far).
    let near = match chosen.top.iter().find(|t| t.0 == alt) {
        Some(t) => chosen.logprob - t.2 < tie,
        None => (chosen.logprob - lb[k].logprob).abs() < tie,
    };
    assert!(
        near,
        "{what}: token {k} differs at a confident choice: {chosen:?} against {alt:?}\n{:?}\n{:?}",
        a.text, b.text
    );
}

/// Greedy, constrained and not, on both models: fast-forward, drafting and both give the
/// step-by-step output.
fn identical_with_each_feature(model: &Model) {
    let arch = model.architecture();
    let prompts = [
        copy_prompt(model),
        support::chat(model, "You are terse.", "The test in tests/math.rs fails. Find out why."),
    ];
    let constraints = [Constraint::None, Constraint::Json(turn_schema())];
    let samplings = [Sampling::Greedy];
    let _guard = support::lock();
    let mut session = support::session(model);
    for prompt in &prompts {
        for constraint in &constraints {
            for sampling in samplings {
                let params = |(fast_forward, draft)| GenerateParams {
                    max_new_tokens: 40,
                    sampling,
                    constraint: constraint.clone(),
                    logprobs: Some(10),
                    fast_forward,
                    draft,
                    ..GenerateParams::default()
                };
                session.clear();
                let plain = session.generate(prompt, &params((false, false))).unwrap();
                assert!(plain.tokens.len() > 10, "{arch}: {:?}", plain.text);
                let speeds: &[(bool, bool)] = if sampling == Sampling::Greedy {
                    &[(true, false), (false, true), (true, true)]
                } else {
                    &[(true, true)]
                };
                for &speed in speeds {
                    session.clear();
                    let fast = session.generate(prompt, &params(speed)).unwrap();
                    let what = format!("{arch} {speed:?} {sampling:?} {constraint:?}");
                    agree(&plain, &fast, &what);
                    // Each token's log-probability is the model's own at its position, forced or
                    // drafted alike (computed in a bigger batch: equal up to the rounding of
                    // llama.cpp's batched kernels, which moves one by up to about 0.2 on these
                    // models, docs/protocol.md; 0.13 was seen on Gemma 3, and 0.31 on an unlikely
                    // token of Gemma 3 on an AVX-512 BF16/FP16 CPU. A wrong row moves it by far
                    // more).
                    if plain.tokens == fast.tokens {
                        let (a, b) = (plain.logprobs.as_ref(), fast.logprobs.as_ref());
                        for (x, y) in a.unwrap().iter().zip(b.unwrap()) {
                            assert!((x.logprob - y.logprob).abs() < 0.5, "{what}: {x:?} {y:?}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn each_speed_feature_gives_the_same_output_smollm2() {
    identical_with_each_feature(support::smollm2());
}

#[test]
fn each_speed_feature_gives_the_same_output_gemma3() {
    identical_with_each_feature(support::gemma3());
}

fn four_prompts(model: &Model) -> Vec<Vec<caldrix_engine::Token>> {
    ["List three primary colours.", "Name the largest planet.", "What is 12 times 12?"]
        .iter()
        .map(|q| support::chat(model, "You are terse.", q))
        .chain([copy_prompt(model)])
        .collect()
}

/// Four greedy generations stepped together, each on its own sequence (one constrained),
/// each equal to its run alone; one of them cancelled after 3 tokens stops there while the
/// others run to their own end.
#[test]
fn batched_generations_equal_their_single_runs_and_cancel_alone() {
    for model in [support::smollm2(), support::gemma3()] {
        let arch = model.architecture();
        let prompts = four_prompts(model);
        let params: Vec<GenerateParams> = (0..4)
            .map(|i| GenerateParams {
                max_new_tokens: 40,
                constraint: if i == 3 { Constraint::Json(turn_schema()) } else { Constraint::None },
                logprobs: Some(10),
                ..GenerateParams::default()
            })
            .collect();
        let _guard = support::lock();
        let mut session = model
            .session(&SessionParams {
                n_ctx: Some(1024),
                threads: Some(2),
                sequences: 4,
                ..SessionParams::default()
            })
            .unwrap();
        let alone: Vec<Generation> = (0..4)
            .map(|i| {
                session.clear();
                session.generate_on(i as u32, &prompts[i], &params[i], &mut |_| true).unwrap()
            })
            .collect();
        session.clear();

        for cancel in [None, Some(2usize)] {
            session.clear();
            let mut running: Vec<_> =
                (0..4).map(|i| session.begin(i as u32, &prompts[i], &params[i]).unwrap()).collect();
            let mut counts = [0usize; 4];
            let mut done: Vec<Option<Generation>> = vec![None, None, None, None];
            let mut steps = 0;
            while done.iter().any(Option::is_none) {
                let mut refs: Vec<_> = running.iter_mut().collect();
                session
                    .step(&mut refs, &mut |i, e| {
                        if let Event::Token { .. } = e {
                            counts[i] += 1;
                        }
                        Some(i) != cancel || counts[i] < 3
                    })
                    .unwrap();
                for (i, r) in running.iter_mut().enumerate() {
                    if let Some(g) = r.take_finished() {
                        done[i] = Some(g.unwrap());
                    }
                }
                steps += 1;
            }
            let longest = alone.iter().map(|g| g.tokens.len()).max().unwrap();
            assert!(steps <= longest + 2, "{arch}: {steps} steps for at most {longest} tokens");
            for (i, g) in done.into_iter().enumerate() {
                let g = g.unwrap();
                if Some(i) == cancel {
                    assert_eq!(g.stop, StopReason::Cancelled, "{arch} {i}");
                    assert_eq!(g.tokens.len(), 3, "{arch} {i}");
                    let what = format!("{arch} cancelled generation {i}");
                    let mut expected = truncated(&alone[i], 3);
                    expected.text.clone_from(&g.text);
                    agree(&expected, &g, &what);
                } else {
                    agree(&alone[i], &g, &format!("{arch} generation {i} of 4, {cancel:?}"));
                }
            }
        }
    }
}

/// `g` cut after its first `n` tokens, as a cancel there leaves it.
fn truncated(g: &Generation, n: usize) -> Generation {
    let mut g = g.clone();
    g.tokens.truncate(n);
    if let Some(l) = g.logprobs.as_mut() {
        l.truncate(n);
    }
    g.stop = StopReason::Cancelled;
    g.text = String::new();
    g
}

/// A long prompt joining a running generation is filled one chunk per step, and the running
/// one takes a token in every one of those steps: the order of events shows it. Both outputs
/// equal their runs alone.
#[test]
fn a_prompt_filled_while_another_decodes_goes_chunk_by_chunk() {
    let model = support::smollm2();
    let short = support::chat(model, "", "Write a short story about a lighthouse keeper.");
    let long_text = "The quick brown fox jumps over the lazy dog. ".repeat(40);
    let long = support::chat(model, "You are terse.", &format!("{long_text}\nSummarise that."));
    let params =
        GenerateParams { max_new_tokens: 80, logprobs: Some(10), ..GenerateParams::default() };
    let _guard = support::lock();
    let mut session = model
        .session(&SessionParams {
            n_ctx: Some(1024),
            threads: Some(2),
            batch: 64,
            sequences: 2,
            ..SessionParams::default()
        })
        .unwrap();
    let alone_short = session.generate_on(0, &short, &params, &mut |_| true).unwrap();
    session.clear();
    let alone_long = session.generate_on(1, &long, &params, &mut |_| true).unwrap();
    session.clear();
    assert!(long.len() > 64 * 4, "the long prompt takes several chunks: {}", long.len());
    assert!(alone_short.tokens.len() > 30, "{:?}", alone_short.text);

    let mut a = session.begin(0, &short, &params).unwrap();
    let mut events: Vec<(usize, &'static str)> = Vec::new();
    let mut record = |i: usize, e: Event<'_>| {
        events.push((i, if matches!(e, Event::Token { .. }) { "token" } else { "progress" }));
        true
    };
    // `a` fills and takes its first tokens alone.
    for _ in 0..3 {
        session.step(&mut [&mut a], &mut record).unwrap();
    }
    let mut b = session.begin(1, &long, &params).unwrap();
    let (mut ga, mut gb) = (None, None);
    while ga.is_none() || gb.is_none() {
        session.step(&mut [&mut a, &mut b], &mut record).unwrap();
        ga = ga.or_else(|| a.take_finished());
        gb = gb.or_else(|| b.take_finished());
    }
    agree(&alone_short, &ga.unwrap().unwrap(), "the running generation");
    agree(&alone_long, &gb.unwrap().unwrap(), "the joining one");
    // While `b` was being filled (its progress events) and `a` still ran, `a` took a token
    // between every two of them.
    let a_last = events.iter().rposition(|e| *e == (0, "token")).unwrap();
    let window = &events[..a_last];
    let fills: Vec<usize> = (0..window.len()).filter(|&k| window[k] == (1, "progress")).collect();
    assert!(fills.len() >= 3, "b was filled in several chunks while a ran: {events:?}");
    for pair in fills.windows(2) {
        assert!(
            window[pair[0]..pair[1]].contains(&(0, "token")),
            "a stalled while b filled: {events:?}"
        );
    }
}
