use caldrix_engine::Model;

use crate::support;

fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Rows of the first N tokens taken out, put back into a fresh session, and the rest of the
/// prompt prefilled in a batch:
/// - equal to the same two-step prefill without a snapshot (the snapshot itself loses
///   nothing), and
/// - within `tolerance` of a cold prefill of the whole prompt, with the same argmax: the
///   suffix's batch has another shape, which changes the arithmetic of some kernels
///   (measured: 0 on SmolLM2 Q4_1, 0.28 on Gemma 3 Q4_K_M, whose logits span about 40).
fn check(model: &Model, tolerance: f32) {
    let system = "You are a coding agent working in a Rust repository. Read files before you edit them, \
        run the tests after every change, and keep answers short. Never invent file names.";
    let prompt = support::chat(model, system, "Why does `cargo test` fail in crates/engine?");
    let cut = prompt.len() * 2 / 3;
    let _guard = support::lock();

    let cold = support::session(model).evaluate(&prompt).unwrap();
    let mut two_step = support::session(model);
    two_step.evaluate(&prompt[..cut]).unwrap();
    let two_step = two_step.evaluate(&prompt).unwrap();

    let mut first = support::session(model);
    first.evaluate(&prompt[..cut]).unwrap();
    let snapshot = first.snapshot(cut).unwrap();
    assert_eq!(snapshot.tokens(), &prompt[..cut]);
    drop(first);

    let mut resumed = support::session(model);
    resumed.restore(&snapshot).unwrap();
    assert_eq!(resumed.cached_tokens(), &prompt[..cut]);
    let got = resumed.evaluate(&prompt).unwrap();
    let arch = model.architecture();
    eprintln!(
        "{arch}: {cut} of {} tokens restored ({} bytes, {} a row); vs cold prefill {}, vs two-step {}",
        prompt.len(),
        snapshot.byte_len(),
        snapshot.byte_len() / cut,
        max_diff(&cold, &got),
        max_diff(&two_step, &got),
    );
    assert_eq!(max_diff(&two_step, &got), 0.0, "{arch}: the snapshot changed the rows");
    assert_eq!(argmax(&got), argmax(&cold), "{arch}");
    assert!(max_diff(&cold, &got) <= tolerance, "{arch}: {}", max_diff(&cold, &got));

    // A snapshot of a prefix of what a session holds, restored in the same session.
    let part = resumed.snapshot(cut / 2).unwrap();
    assert_eq!(part.tokens(), &prompt[..cut / 2]);
    resumed.restore(&part).unwrap();
    let again = resumed.evaluate(&prompt).unwrap();
    assert_eq!(argmax(&again), argmax(&cold), "{arch}");
    assert!(max_diff(&cold, &again) <= tolerance, "{arch}: {}", max_diff(&cold, &again));
}

#[test]
fn snapshot_and_suffix_equal_a_cold_prefill_smollm2() {
    check(support::smollm2(), 1e-3);
}

#[test]
fn snapshot_and_suffix_equal_a_cold_prefill_gemma3() {
    check(support::gemma3(), 0.5);
}
