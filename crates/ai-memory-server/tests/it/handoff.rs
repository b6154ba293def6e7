//! Handoffs through `Memory`: per operator, and never made of another operator's session.

use ai_memory_core::Settings;
use ai_memory_index::Principal;
use ai_memory_server::HookEvent;

use crate::support::Lab;

fn event(session: &str, prompt: Option<&str>) -> HookEvent {
    HookEvent {
        harness: "claude-code".into(),
        session_id: session.into(),
        workspace: "default".into(),
        project: "shared".into(),
        prompt: prompt.map(str::to_owned),
        ..HookEvent::default()
    }
}

#[test]
fn an_operator_never_gets_a_handoff_of_another_operators_session() {
    let lab = Lab::new("handoff-users", Settings::default());
    let (a, _) = lab.memory.index().add_user("alice").unwrap();
    let (b, _) = lab.memory.index().add_user("bob").unwrap();
    let (alice, bob) = (Principal::User(a), Principal::User(b));
    let m = &lab.memory;
    m.session_start(alice, &event("a1", None)).unwrap();
    assert!(m.prompt_submit(alice, &event("a1", Some("Rotate the staging keys."))).unwrap());
    // Bob ends Alice's session by its id: it stays open, and he gets no handoff of it.
    m.session_end(bob, &event("a1", None)).unwrap();
    assert_eq!(m.index().session_ended("a1").unwrap(), Some(false));
    let bobs = m.session_start(bob, &event("b1", None)).unwrap();
    assert!(!bobs.contains("staging keys"), "{bobs}");
    // Alice's own end hands it off to her next session, and only to hers.
    m.session_end(alice, &event("a1", None)).unwrap();
    let hers = m.session_start(alice, &event("a2", None)).unwrap();
    assert!(hers.contains("- Rotate the staging keys."), "{hers}");
    let his = m.session_start(bob, &event("b2", None)).unwrap();
    assert!(!his.contains("staging keys"), "{his}");
}
