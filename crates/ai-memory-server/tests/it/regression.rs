//! One regression test per gap found in the profile (issue 22), each named for its bug.

use ai_memory_core::Settings;
use ai_memory_index::Principal;

use crate::support::{DAY, DAY1, Lab, date_of};

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

/// `applies_to` / `enforced_by` in a page's own frontmatter are checked like the arguments on a
/// write; a hand edit the watcher imports is kept, named in `profile review`, and an unknown
/// tag hides nothing.
#[test]
fn entry_keys_in_frontmatter_are_checked_and_a_bad_hand_edit_is_named_not_hidden() {
    let lab = Lab::new("frontmatter-keys", Settings::default());
    let caller = ai_memory_server::Caller { who: ROOT, workspace: None, project: None };
    let write = |scope: &str, project: Option<&str>, path: &str, body: &str| {
        let req = ai_memory_server::WritePage {
            scope: Some(scope.into()),
            project: project.map(str::to_owned),
            path: path.into(),
            body: body.into(),
            ..Default::default()
        };
        lab.memory.write_page(&caller, &req).map(|_| ()).map_err(|e| e.to_string())
    };
    let cobol = "---\napplies_to: [cobol]\n---\n# Cobc\n\nUse cobc, not gnucobol.\n";
    let err = write("profile", None, "tools/cobc.md", cobol).unwrap_err();
    assert!(err.contains("frontmatter: unknown stack tag `cobol` in `applies_to`"), "{err}");
    let err = write("project", Some("alpha"), "notes.md", "---\nenforced_by: ci\n---\n# N\n")
        .unwrap_err();
    assert!(err.contains("`applies_to` and `enforced_by` are for profile entries"), "{err}");
    write("profile", None, "tools/pnpm.md", "---\napplies_to: rust\n---\n# P\n\nUse pnpm.\n")
        .unwrap();

    // The same pages copied in by hand: imported (the files are the user's), then named.
    let wiki = lab.memory.data_dir().join("wiki/default");
    std::fs::write(wiki.join("_global/profile/tools/cobc.md"), cobol).unwrap();
    std::fs::create_dir_all(wiki.join("alpha")).unwrap();
    std::fs::write(wiki.join("alpha/notes.md"), "---\nenforced_by: ci\n---\n# N\n").unwrap();
    let (imported, broken) = lab.memory.import_changed().unwrap();
    assert_eq!((imported.len(), broken.len()), (2, 0), "{imported:?} {broken:?}");
    let ws = ai_memory_core::WorkspaceName::default_workspace();
    let home = lab.memory.profile_home(ROOT, &ws).unwrap().unwrap();
    let problems = lab.memory.profile_review(&home).unwrap().problems;
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("default/_global/profile/tools/cobc.md: unknown stack tag `cobol`"),
        "{problems:?}"
    );
    assert!(problems[0].ends_with("(the tag is ignored: the entry shows in every project)"));
    assert!(problems[1].starts_with("default/alpha/notes.md: `applies_to` and `enforced_by`"));
    // A Rust project still gets the entry with the unknown tag.
    lab.session(ROOT, "default/crate", &["Cargo.toml"], &[]);
    lab.write(ROOT, "default/crate", "notes.md", "# Notes\n");
    let context = lab.start(ROOT, "default/crate");
    assert!(
        context.contains("Use cobc, not gnucobol.") && context.contains("Use pnpm."),
        "{context}"
    );
}

/// The baseline digest (6,000 bytes by default) stays within a smaller session-start cap, the
/// entries that did not fit counted; below the digest's header only the count is given.
#[test]
fn the_baseline_digest_stays_within_the_session_start_cap() {
    for (cap, named) in
        [(3_000, "more entries did not fit"), (700, "did not fit in the session-start cap")]
    {
        let mut settings = Settings::default();
        settings.session_start.max_chars = cap;
        let lab = Lab::new("capped-baseline", settings);
        for i in 0..120 {
            lab.write(
                ROOT,
                "default/_global",
                &format!("profile/habits/h{i:03}.md"),
                &format!("# H{i}\n\nHabit number {i}, written out as a longer line of prose.\n"),
            );
        }
        let context = lab.start(ROOT, "default/fresh");
        assert!(context.chars().count() <= cap, "{cap}: {}", context.chars().count());
        assert!(context.contains(named), "{cap}: {context}");
        assert!(context.contains("# ai-memory: default/fresh"), "{cap}: {context}");
    }
}

/// A curated page's evidence carries the page's own date (its last commit), not the pass's;
/// a deleted page stops backing its entry, and an entry nothing backs any more goes.
#[test]
fn curated_evidence_is_dated_by_the_page_and_a_deleted_page_stops_backing_it() {
    let lab = Lab::new("page-evidence", Settings::default());
    let rule = "---\nsummary: We deploy from the main branch only.\n---\nDetails.\n";
    lab.write(ROOT, "default/alpha", "_rules/deploy.md", rule);
    lab.write(ROOT, "default/beta", "decisions/deploy.md", rule);
    let loc = |project: &str, path: &str| ai_memory_store::Location {
        workspace: ai_memory_core::WorkspaceName::default_workspace(),
        project: ai_memory_core::ProjectName::new(project).unwrap(),
        path: ai_memory_core::PagePath::new(path).unwrap(),
    };
    let committed =
        lab.memory.wiki().history(&loc("alpha", "_rules/deploy.md"), 1).unwrap()[0].time;
    lab.at(DAY1 + 40 * DAY);
    lab.memory.profile_pass(false).unwrap();
    let ws = ai_memory_core::WorkspaceName::default_workspace();
    let home = lab.memory.profile_home(ROOT, &ws).unwrap().unwrap();
    let learned = || {
        let entries = lab.memory.profile_entries(&home).unwrap();
        entries.first().and_then(|e| e.learned.clone())
    };
    let evidence = learned().unwrap().evidence;
    assert_eq!(evidence.len(), 2, "{evidence:?}");
    for e in &evidence {
        assert_eq!(e.date, date_of(committed), "{e:?}");
        assert_ne!(e.date, date_of(DAY1 + 40 * DAY), "not the pass's date");
    }

    let caller = ai_memory_server::Caller { who: ROOT, workspace: None, project: None };
    let delete = |project: &str, path: &str| {
        let req = ai_memory_server::PageRef {
            path: path.into(),
            project: Some(project.into()),
            ..Default::default()
        };
        lab.memory.delete_page(&caller, &req).unwrap();
    };
    delete("alpha", "_rules/deploy.md");
    lab.memory.profile_pass(false).unwrap();
    let evidence = learned().unwrap().evidence;
    assert_eq!(evidence.iter().map(|e| e.project.as_str()).collect::<Vec<_>>(), ["default/beta"]);
    delete("beta", "decisions/deploy.md");
    let report = lab.memory.profile_pass(false).unwrap();
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert!(lab.memory.profile_entries(&home).unwrap().is_empty());
}
