//! Several sequences in one session: a prefix copied from another sequence shares its cells
//! and resumes exactly; events report progress and tokens, and a callback can cancel.

use caldrix_engine::{Event, GenerateParams, SessionParams, StopReason};

use crate::support;

#[test]
fn a_copied_prefix_resumes_like_its_source() {
    let model = support::smollm2();
    let prompt = support::chat(model, "You are terse.", "List three primary colours.");
    let params = GenerateParams { max_new_tokens: 8, ..GenerateParams::default() };
    let _guard = support::lock();
    let mut session = model
        .session(&SessionParams {
            n_ctx: Some(1024),
            threads: Some(2),
            sequences: 3,
            ..SessionParams::default()
        })
        .unwrap();
    let first = session.generate_on(0, &prompt, &params, &mut |_| true).unwrap();
    assert_eq!(first.reused_tokens, 0);

    let cut = prompt.len() - 5;
    session.copy_prefix(0, 2, cut).unwrap();
    assert_eq!(session.held(2), &prompt[..cut]);
    let second = session.generate_on(2, &prompt, &params, &mut |_| true).unwrap();
    assert_eq!(second.reused_tokens, cut, "only the 5 rows after the copied prefix are computed");
    assert_eq!(second.text, first.text);

    // Dropping the source leaves the copy's rows (shared cells) intact.
    session.drop_sequence(0).unwrap();
    assert!(session.held(0).is_empty());
    let third = session.generate_on(2, &prompt, &params, &mut |_| true).unwrap();
    assert_eq!(third.reused_tokens, prompt.len() - 1);
    assert_eq!(third.text, first.text);

    let err = session.copy_prefix(0, 9, 1).unwrap_err();
    assert!(err.to_string().contains("sequence 9 does not exist"), "{err}");
}

/// Rows parked in host memory leave the cells (another sequence can take them) and, put back,
/// resume exactly as if they had never left; the rows before the parked ones never moved.
#[test]
fn parked_rows_leave_the_cells_and_resume_exactly() {
    let model = support::smollm2();
    let prompt = support::chat(model, "You are terse.", "Name the largest planet and one moon.");
    let params = GenerateParams { max_new_tokens: 8, ..GenerateParams::default() };
    let _guard = support::lock();
    let mut session = model
        .session(&SessionParams {
            n_ctx: Some(256),
            threads: Some(2),
            sequences: 3,
            ..SessionParams::default()
        })
        .unwrap();
    let first = session.generate_on(0, &prompt, &params, &mut |_| true).unwrap();
    let held = session.held(0).to_vec();
    let from = 10;
    session.copy_prefix(0, 1, from).unwrap();

    let parked = session.park(0, from).unwrap();
    assert_eq!((parked.start(), parked.tokens()), (from, &held[from..]));
    assert_eq!(session.held(0), &held[..from], "the rows before `from` stay");
    // The freed cells take another prompt that leaves too few for the parked rows (256 cells:
    // 10 shared, 8 fewer than the parked rows left free once it and its output are in).
    let room = 256 - from - (held.len() - from) + 8;
    let text = "one two three four five six seven eight nine ten ".repeat(60);
    let other = model.tokenize(&text, caldrix_engine::Special::Plain)[..room].to_vec();
    session.generate_on(2, &other, &params, &mut |_| true).unwrap();
    assert_eq!(
        session.unpark(0, &parked).unwrap_err().to_string(),
        caldrix_engine::EngineError::CellsFull.to_string(),
        "no room while the other prompt holds the cells"
    );
    assert_eq!(session.held(0), &held[..from], "a failed unpark changes nothing");
    session.drop_sequence(2).unwrap();

    session.unpark(0, &parked).unwrap();
    assert_eq!(session.held(0), &held[..]);
    let again = session.generate_on(0, &prompt, &params, &mut |_| true).unwrap();
    assert_eq!(again.reused_tokens, prompt.len() - 1, "every parked row came back");
    assert_eq!(again.text, first.text);

    let err = session.unpark(2, &parked).unwrap_err();
    assert!(err.to_string().contains("cannot follow"), "{err}");
    let err = session.park(0, held.len() + 5).unwrap_err();
    assert!(err.to_string().contains("cannot park"), "{err}");
}

#[test]
fn events_report_progress_and_tokens_and_a_callback_cancels() {
    let model = support::smollm2();
    let prompt =
        support::chat(model, "You are a poet who writes long poems.", "Write a poem about rivers.");
    let _guard = support::lock();
    let mut session = model
        .session(&SessionParams {
            n_ctx: Some(1024),
            threads: Some(2),
            batch: 8,
            ..SessionParams::default()
        })
        .unwrap();
    let params = GenerateParams { max_new_tokens: 50, ..GenerateParams::default() };
    let (mut progress, mut tokens) = (Vec::new(), Vec::new());
    let out = session
        .generate_on(0, &prompt, &params, &mut |event| {
            match event {
                Event::Progress { done, total } => progress.push((done, total)),
                Event::Token { bytes, .. } => tokens.push(bytes.to_vec()),
            }
            tokens.len() < 3
        })
        .unwrap();
    assert!(progress.len() >= 2, "one event per 8-token batch but the last: {progress:?}");
    assert!(progress.iter().all(|&(done, total)| done < total && total == prompt.len()));
    assert_eq!(out.stop, StopReason::Cancelled);
    assert_eq!(out.tokens.len(), 3);
    assert_eq!(tokens.concat(), out.text.as_bytes());

    // Cancelled during the prefill: nothing generated, the session still serves.
    session.clear();
    let out = session.generate_on(0, &prompt, &params, &mut |_| false).unwrap();
    assert!(out.stop == StopReason::Cancelled && out.tokens.is_empty());
    let after = session.generate(&prompt, &GenerateParams { max_new_tokens: 2, ..params }).unwrap();
    assert!(!after.tokens.is_empty());
}
