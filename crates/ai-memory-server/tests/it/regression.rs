//! One regression test per gap found in the profile (issue 22), each named for its bug.

use ai_memory_core::Settings;
use ai_memory_index::Principal;

use crate::support::{DAY, DAY1, Lab};

const ROOT: Principal = Principal::Root;

fn summaries(lab: &Lab) -> Vec<String> {
    let ws = ai_memory_core::WorkspaceName::default_workspace();
    let home = lab.memory.profile_home(ROOT, &ws).unwrap().unwrap();
    lab.memory.profile_entries(&home).unwrap().into_iter().map(|e| e.summary).collect()
}

/// The session-start context pasted back into a prompt is skipped whole (its page lines are
/// the project's, not the user's words); the user's sentences around it still count.
#[test]
fn a_pasted_session_context_is_not_learned_but_the_text_around_it_is() {
    let lab = Lab::new("pasted-context", Settings::default());
    lab.write(
        ROOT,
        "default/alpha",
        "decisions/deploy.md",
        "# Deploy\n\nAlways deploy on Fridays.\n",
    );
    lab.write(ROOT, "default/alpha", "notes.md", "# Notes\n\nFree text.\n");
    let context = lab.start(ROOT, "default/alpha");
    assert!(context.contains("Always deploy on Fridays."), "{context}");
    let routing = "<!-- ai-memory:routing:start -->\nIn all my projects, query memory before answering.\n\
                   <!-- ai-memory:routing:end -->";
    lab.at(DAY1 + DAY);
    let prompt = format!(
        "In all my projects, use pnpm.\n\n{context}\n{routing}\nIn all my projects, run the linter first."
    );
    lab.session(ROOT, "default/beta", &[], &[&prompt]);
    lab.memory.profile_pass(false).unwrap();
    let mut got = summaries(&lab);
    got.sort();
    assert_eq!(got, ["Run the linter first.", "Use pnpm."]);
}
