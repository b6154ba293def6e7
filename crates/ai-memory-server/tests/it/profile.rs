use ai_memory_core::{Profile, Settings, Toggle};
use ai_memory_index::Principal;
use ai_memory_server::Caller;

use crate::support::{DAY, DAY1, HOUR, Lab};

const ROOT: Principal = Principal::Root;

/// The profile of a single-operator server: `default/_global`.
fn global_home(lab: &Lab) -> ai_memory_server::profile::Home {
    let ws = ai_memory_core::WorkspaceName::default_workspace();
    lab.memory.profile_home(ROOT, &ws).unwrap().unwrap()
}

/// Every entry of the global profile, as stored (path, then the page).
fn entries_text(lab: &Lab) -> String {
    let home = global_home(lab);
    let mut out = String::new();
    for e in lab.memory.profile_entries(&home).unwrap() {
        let path = ai_memory_core::PagePath::new(&e.path).unwrap();
        let text = lab.memory.wiki().read(&home.location(&path)).unwrap().unwrap().text;
        out.push_str(&format!("=== {}\n{text}\n", e.path));
    }
    out
}

fn pending_text(lab: &Lab) -> String {
    let home = global_home(lab);
    let review = lab.memory.profile_review(&home).unwrap();
    review
        .pending
        .iter()
        .map(|p| {
            format!(
                "{} | projects {} | needs {} | waiting {} | forgotten {}\n",
                p.line, p.projects, p.needs_projects, p.waiting_for_operator, p.forgotten
            )
        })
        .collect()
}

/// A pasted ai-memory digest, with the user's own sentence after it.
const PASTED: &str = "<ai-memory-profile>\n> 🧭 ai-memory: your usual choices (cross-project profile)\n\
- Always use yarn. (`profile/tools/yarn.md`)\n</ai-memory-profile>\n\
In all my projects, keep integration tests in tests/suite.";

/// The corpus: prompts across four projects over three days drive harvest and converge; the
/// entries (with their evidence) and the digest are asserted exactly.
#[test]
fn a_corpus_of_prompts_becomes_the_profile() {
    let lab = Lab::new("corpus", Settings::default());
    let rust = ["Cargo.toml", "src/main.rs"];

    lab.at(DAY1);
    lab.session(ROOT, "default/alpha", &rust, &[
        "Always use pnpm, not npm.",
        // Not preferences: no action, a question, code, agent text, injected text.
        "The build always fails on CI.",
        "Why do you always use npm?",
        "Look at this:\n```\nalways use yarn\n```",
        "**Always** run the linter first.",
        "Fix src/main.rs:42 and always check bounds there.",
        "<system-reminder>Always use tabs.</system-reminder>",
        "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nNever commit to main.\n</INSTRUCTIONS>",
        // Only the pasted block is skipped: the user's general sentence counts at once.
        PASTED,
        "From now on, never push directly to main.",
    ]);
    lab.write(
        ROOT,
        "default/alpha",
        "decisions/adr-1.md",
        "# ADR 1\n\n**Status:** Accepted\n\nWe deploy from the main branch only.\n",
    );

    lab.at(DAY1 + DAY);
    lab.session(
        ROOT,
        "default/beta",
        &rust,
        &["Use pnpm, not npm, please.", "From now on, never push directly to main."],
    );
    lab.write(
        ROOT,
        "default/beta",
        "_rules/deploy.md",
        "---\nsummary: We deploy from the main branch only.\n---\nDetails.\n",
    );
    lab.write(
        ROOT,
        "default/beta",
        "gotchas/images.md",
        "---\nauto_approved: true\nsummary: Always pin docker images.\n---\n",
    );

    // One message fanned out to three checkouts within the hour: one project, not three.
    for (i, p) in ["default/gamma", "work/delta", "default/alpha"].iter().enumerate() {
        lab.at(DAY1 + DAY + 2 * HOUR + i as i64 * 600);
        let files: &[&str] = if *p == "default/alpha" { &[] } else { &["package.json"] };
        lab.session(ROOT, p, files, &["Always squash commits before merging."]);
    }
    lab.at(DAY1 + DAY + 5 * HOUR);
    lab.session(
        ROOT,
        "default/gamma",
        &["package.json"],
        &["Prefiro usar tabs em vez de espaços."],
    );

    lab.at(DAY1 + 2 * DAY);
    lab.session(ROOT, "work/delta", &[], &["Prefiro usar tabs em vez de espaços."]);
    let first = lab.memory.profile_pass(false).unwrap();
    assert!(first.written.len() >= 4, "{first:?}");
    let before_change = entries_text(&lab);
    assert!(before_change.contains("Always use pnpm, not npm."), "{before_change}");

    // The latest ruling wins (the old text stays in git history).
    lab.at(DAY1 + 2 * DAY + HOUR);
    lab.session(ROOT, "work/delta", &[], &["Use bun instead of pnpm from now on."]);
    lab.memory.profile_pass(false).unwrap();
    // Curated pages' evidence is dated by their commit (the real clock, not the lab's).
    let today = crate::support::date_of(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
            as i64,
    );
    let entries = entries_text(&lab).replace(&format!("date: {today}"), "date: <page commit>");
    insta::assert_snapshot!("corpus_entries", entries);
    // Every statement harvested, with where it came from: none of the skipped sentences.
    let home = global_home(&lab);
    let row = lab.memory.index().project(&home.workspace, &home.project).unwrap().unwrap();
    let harvested: String = lab
        .memory
        .index()
        .candidates(&row)
        .unwrap()
        .iter()
        .map(|c| {
            let s: ai_memory_profile::sentence::Statement =
                serde_json::from_str(&c.statement).unwrap();
            format!(
                "{} {} | {} | general {} | {}\n",
                c.date,
                c.project,
                s.text,
                s.general,
                s.topic.key()
            )
        })
        .collect();
    insta::assert_snapshot!("corpus_harvested", harvested.replace(&today, "<page commit>"));
    // The earlier ruling stays in the page's history.
    let pnpm = ai_memory_core::PagePath::new("profile/tools/pnpm-npm.md").unwrap();
    let history = lab.memory.wiki().history(&home.location(&pnpm), 10).unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
    insta::assert_snapshot!("corpus_pending", pending_text(&lab));

    // The digest: a new project gets every entry and the baseline note; a Rust project with
    // pages gets the entries for its stack.
    let new = lab.start(ROOT, "default/epsilon");
    insta::assert_snapshot!("corpus_digest_new_project", new);
    let alpha = lab.start(ROOT, "default/alpha");
    let digest_end = alpha.find("</ai-memory-profile>").unwrap();
    insta::assert_snapshot!("corpus_digest_alpha", &alpha[..digest_end]);

    // Nothing new: a pass changes nothing; two session starts are byte-identical.
    let again = lab.memory.profile_pass(false).unwrap();
    assert!(again.written.is_empty(), "{again:?}");
    assert_eq!((again.prompts_read, again.pages_read), (0, 0), "each pass reads only what is new");
    assert_eq!(lab.start(ROOT, "default/alpha"), alpha);
    // Rebuild re-reads everything and writes nothing new.
    let rebuilt = lab.memory.profile_pass(true).unwrap();
    assert!(rebuilt.written.is_empty() && rebuilt.prompts_read > 10, "{rebuilt:?}");
    assert_eq!(rebuilt.pages_read, 3, "{rebuilt:?}");
}

#[test]
fn digest_budgets_clamp_and_count_what_does_not_fit() {
    let settings = Settings {
        profile: Profile { digest_max_bytes: 10, baseline_max_bytes: 1, ..Profile::default() },
        ..Settings::default()
    };
    let lab = Lab::new("budget", settings);
    for i in 0..120 {
        lab.write(
            ROOT,
            "default/_global",
            &format!("profile/habits/h{i:03}.md"),
            &format!("# H{i}\n\nHabit number {i}, written out as a longer line of prose.\n"),
        );
    }
    lab.write(ROOT, "default/old", "notes.md", "# Notes\n");
    let old = lab.start(ROOT, "default/old");
    let digest = &old[..old.find("</ai-memory-profile>").unwrap() + "</ai-memory-profile>\n".len()];
    assert!(digest.len() <= 1_500, "{}", digest.len());
    assert!(digest.len() > 1_300, "the clamped floor is used: {}", digest.len());
    assert!(digest.contains("more entries did not fit: memory_query finds them."), "{digest}");
    let new = lab.start(ROOT, "default/fresh");
    let digest = &new[..new.find("</ai-memory-profile>").unwrap() + "</ai-memory-profile>\n".len()];
    assert!(digest.len() <= 2_000 && digest.len() > 1_800, "{}", digest.len());
    assert!(digest.contains("profile apply"), "{digest}");
}

#[test]
fn forgotten_entries_stay_forgotten_and_hand_edits_are_never_rewritten() {
    let lab = Lab::new("forget", Settings::default());
    lab.session(ROOT, "default/a", &[], &["In all my projects, use ruff for linting."]);
    lab.session(
        ROOT,
        "default/b",
        &[],
        &["Never use tabs for indentation in my projects, always spaces."],
    );
    lab.at(DAY1 + 2 * HOUR);
    lab.session(
        ROOT,
        "default/c",
        &[],
        &["Never use tabs for indentation in my projects, always spaces."],
    );
    lab.memory.profile_pass(false).unwrap();
    let home = global_home(&lab);
    let entries = lab.memory.profile_entries(&home).unwrap();
    assert_eq!(entries.len(), 2, "{entries:?}");
    let ruff = entries.iter().find(|e| e.summary.contains("ruff")).unwrap().path.clone();
    let tabs = entries.iter().find(|e| e.summary.contains("tabs")).unwrap().path.clone();

    lab.memory.profile_forget(&home, &ruff).unwrap();
    lab.at(DAY1 + 3 * HOUR);
    lab.memory.profile_pass(true).unwrap();
    assert!(lab.memory.profile_entries(&home).unwrap().iter().all(|e| e.path != ruff), "forgotten");

    // Edited by hand: the harvester leaves it alone, even with new evidence.
    let path = ai_memory_core::PagePath::new(&tabs).unwrap();
    let text = lab.memory.wiki().read(&home.location(&path)).unwrap().unwrap().text;
    let edited = text.replacen("\n\nNever", "\n\nMy own words. Never", 1);
    assert_ne!(edited, text);
    lab.write(ROOT, "default/_global", &tabs, &edited);
    lab.at(DAY1 + 5 * HOUR);
    lab.session(
        ROOT,
        "default/d",
        &[],
        &["Never use tabs for indentation in my projects, always spaces."],
    );
    lab.memory.profile_pass(false).unwrap();
    let now = lab.memory.wiki().read(&home.location(&path)).unwrap().unwrap().text;
    assert_eq!(now, edited, "a hand-edited entry is never rewritten");
    let review = lab.memory.profile_review(&home).unwrap();
    assert!(review.entries.iter().any(|e| e.path == tabs && e.edited_by_hand));

    // Said again after the forgetting: it comes back.
    lab.at(DAY1 + DAY);
    lab.session(ROOT, "default/e", &[], &["In all my projects, use ruff for linting."]);
    lab.memory.profile_pass(false).unwrap();
    assert!(lab.memory.profile_entries(&home).unwrap().iter().any(|e| e.summary.contains("ruff")));
}

#[test]
fn multi_user_profiles_are_private_and_team_profiles_wait_for_a_second_operator() {
    // A multi-user server keeps `auto` off.
    let lab = Lab::new("multi-off", Settings::default());
    let (alice, _) = lab.memory.index().add_user("alice").unwrap();
    assert_eq!(lab.memory.profile_mode().unwrap(), None);
    assert!(lab.memory.profile_homes().unwrap().is_empty());
    let _ = alice;

    // enabled = true: a private profile per operator.
    let on = Settings {
        profile: Profile { enabled: Toggle::On, ..Profile::default() },
        ..Settings::default()
    };
    let lab = Lab::new("multi-private", on.clone());
    let (a, _) = lab.memory.index().add_user("alice").unwrap();
    let (b, _) = lab.memory.index().add_user("bob").unwrap();
    let (alice, bob) = (Principal::User(a), Principal::User(b));
    let general = "In all my projects, use uv to manage Python environments.";
    lab.session(alice, "default/a1", &[], &[general]);
    lab.session(bob, "default/b1", &[], &["In all my projects, use poetry for Python packaging."]);
    lab.memory.profile_pass(false).unwrap();
    let ws = ai_memory_core::WorkspaceName::default_workspace();
    let alice_home = lab.memory.profile_home(alice, &ws).unwrap().unwrap();
    let bob_home = lab.memory.profile_home(bob, &ws).unwrap().unwrap();
    assert_eq!(alice_home.project.as_str(), format!("_profile.{a}"));
    let alice_entries = lab.memory.profile_entries(&alice_home).unwrap();
    let bob_entries = lab.memory.profile_entries(&bob_home).unwrap();
    assert_eq!(alice_entries.len(), 1);
    assert!(alice_entries[0].summary.contains("uv"));
    assert!(bob_entries.iter().all(|e| !e.summary.contains("uv")), "nothing of alice reaches bob");
    // Bob cannot read alice's private profile, and his queries do not union it.
    let bob_caller = Caller { who: bob, workspace: Some(ws.clone()), project: None };
    let read = ai_memory_server::PageRef {
        path: alice_entries[0].path.clone(),
        workspace: Some("default".into()),
        project: Some(format!("_profile.{a}")),
        ..Default::default()
    };
    assert!(lab.memory.read_page(&bob_caller, &read).is_err());
    let q = ai_memory_server::Query {
        query: "uv python".into(),
        project: Some("b1".into()),
        ..Default::default()
    };
    let hits = lab.memory.query(&bob_caller, &q).unwrap();
    let alice_profile = format!("_profile.{a}");
    assert!(hits.global_scope_hits.iter().all(|h| h.project != alice_profile), "{hits:?}");
    let alice_caller = Caller { who: alice, workspace: Some(ws.clone()), project: None };
    let q = ai_memory_server::Query {
        query: "uv python".into(),
        project: Some("a1".into()),
        ..Default::default()
    };
    let hits = lab.memory.query(&alice_caller, &q).unwrap();
    assert!(
        hits.global_scope_hits.iter().any(|h| h.project == format!("_profile.{a}")),
        "{hits:?}"
    );
    // Alice's session start carries her digest; bob's does not.
    assert!(lab.start(alice, "default/a2").contains("uv to manage"));
    assert!(!lab.start(bob, "default/b2").contains("uv to manage"));

    // share = "global" on a multi-user server: a team profile, two operators per entry, fed
    // by open projects only.
    let team = Settings {
        profile: Profile {
            enabled: Toggle::On,
            share: ai_memory_core::Share::Global,
            ..Profile::default()
        },
        ..Settings::default()
    };
    let lab = Lab::new("team", team);
    let (a, _) = lab.memory.index().add_user("alice").unwrap();
    let (b, _) = lab.memory.index().add_user("bob").unwrap();
    let (alice, bob) = (Principal::User(a), Principal::User(b));
    let rule = "Always run the formatter before committing.";
    lab.session(alice, "default/p1", &[], &[rule]);
    lab.at(DAY1 + DAY);
    lab.session(alice, "default/p2", &[], &[rule]);
    // A restricted project never feeds a team profile.
    lab.write(bob, "default/secret", "notes.md", "# n\n");
    let restricted = ai_memory_server::WritePage {
        path: "x.md".into(),
        body: "x".into(),
        project: Some("hidden".into()),
        workspace: Some("default".into()),
        restricted: Some(true),
        ..Default::default()
    };
    lab.memory
        .write_page(&Caller { who: bob, workspace: None, project: None }, &restricted)
        .unwrap();
    lab.session(bob, "default/hidden", &[], &[rule]);
    lab.memory.profile_pass(false).unwrap();
    let home = lab.memory.profile_home(alice, &ws).unwrap().unwrap();
    assert!(home.team);
    assert!(lab.memory.profile_entries(&home).unwrap().is_empty(), "one operator is not enough");
    let review = lab.memory.profile_review(&home).unwrap();
    assert!(review.pending.iter().any(|p| p.waiting_for_operator), "{:?}", review.pending);
    lab.at(DAY1 + 2 * DAY);
    lab.session(bob, "default/p3", &[], &[rule]);
    lab.memory.profile_pass(false).unwrap();
    let entries = lab.memory.profile_entries(&home).unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let learned = entries[0].learned.as_ref().unwrap();
    assert_eq!(learned.operators, 2);
    assert!(learned.evidence.iter().all(|e| e.project != "default/hidden"), "{learned:?}");
    assert!(lab.start(alice, "default/p4").contains("team defaults"));
}

#[test]
fn contribute_false_takes_back_earlier_evidence_and_consume_false_gets_no_digest() {
    let lab = Lab::new("optout", Settings::default());
    let rule = "Always write the changelog entry with the change.";
    // A day apart each: not one message fanned out.
    for (i, p) in ["default/open1", "default/nda", "default/open2"].iter().enumerate() {
        lab.at(DAY1 + i as i64 * DAY);
        lab.session(ROOT, p, &[], &[rule]);
    }
    lab.memory.profile_pass(false).unwrap();
    let home = global_home(&lab);
    let learned = lab.memory.profile_entries(&home).unwrap()[0].learned.clone().unwrap();
    assert!(learned.evidence.iter().any(|e| e.project == "default/nda"));

    // The marker says contribute = false: recorded at the next session start; the next pass
    // takes the project's evidence back.
    let mut event = ai_memory_server::HookEvent {
        harness: "claude-code".into(),
        session_id: "optout".into(),
        workspace: "default".into(),
        project: "nda".into(),
        contribute: Some(false),
        consume: Some(false),
        ..Default::default()
    };
    let context = lab.memory.session_start(ROOT, &event).unwrap();
    assert!(!context.contains("ai-memory-profile"), "consume = false: no digest\n{context}");
    lab.memory.profile_pass(false).unwrap();
    let entries = lab.memory.profile_entries(&home).unwrap();
    let learned = entries[0].learned.clone().unwrap();
    assert!(learned.evidence.iter().all(|e| e.project != "default/nda"), "{learned:?}");
    assert_eq!(learned.projects, 2);

    // A session start that says nothing leaves the opt-out as recorded.
    event.session_id = "later".into();
    event.contribute = None;
    event.consume = None;
    assert!(!lab.memory.session_start(ROOT, &event).unwrap().contains("ai-memory-profile"));
    // An explicit `consume = true` turns it back on.
    event.session_id = "again".into();
    event.consume = Some(true);
    assert!(lab.memory.session_start(ROOT, &event).unwrap().contains("ai-memory-profile"));
}

#[test]
fn share_workspace_keeps_one_profile_per_workspace() {
    let settings = Settings {
        profile: Profile { share: ai_memory_core::Share::Workspace, ..Profile::default() },
        ..Settings::default()
    };
    let lab = Lab::new("workspace", settings);
    lab.session(ROOT, "work/api", &[], &["In all my projects, use conventional commit messages."]);
    lab.session(ROOT, "home/blog", &[], &["In all my projects, write posts in plain markdown."]);
    lab.memory.profile_pass(false).unwrap();
    let work = ai_memory_core::WorkspaceName::new("work").unwrap();
    let home = lab.memory.profile_home(ROOT, &work).unwrap().unwrap();
    assert_eq!((home.workspace.as_str(), home.project.as_str()), ("work", "_profile"));
    let entries = lab.memory.profile_entries(&home).unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].summary.contains("conventional commit"));
    // Each workspace's sessions get their own workspace's profile only.
    let at_work = lab.start(ROOT, "work/web");
    assert!(at_work.contains("conventional commit") && !at_work.contains("markdown"), "{at_work}");
    let at_home = lab.start(ROOT, "home/notes");
    assert!(at_home.contains("plain markdown") && !at_home.contains("conventional"), "{at_home}");
    // `scope: "profile"` writes go to the caller's workspace profile.
    let caller = Caller {
        who: ROOT,
        workspace: Some(work.clone()),
        project: Some(ai_memory_core::ProjectName::new("api").unwrap()),
    };
    let req = ai_memory_server::WritePage {
        scope: Some("profile".into()),
        path: "tools/make.md".into(),
        body: "# Make\n\nUse just, not make.\n".into(),
        ..Default::default()
    };
    let written = lab.memory.write_page(&caller, &req).unwrap();
    assert_eq!((written.workspace.as_str(), written.project.as_str()), ("work", "_profile"));
}

#[test]
fn contribute_false_takes_evidence_back_from_a_hand_edited_entry_too() {
    let lab = Lab::new("optout-edited", Settings::default());
    let rule = "Always pin the toolchain version in the repository.";
    for (i, p) in ["default/open1", "default/nda"].iter().enumerate() {
        lab.at(DAY1 + i as i64 * DAY);
        lab.session(ROOT, p, &[], &[rule]);
    }
    lab.memory.profile_pass(false).unwrap();
    let home = global_home(&lab);
    let path = lab.memory.profile_entries(&home).unwrap()[0].path.clone();
    let page = ai_memory_core::PagePath::new(&path).unwrap();
    let text = lab.memory.wiki().read(&home.location(&page)).unwrap().unwrap().text;
    assert!(text.contains("default/nda"));
    let edited = text.replacen("\n\nAlways", "\n\nIn my words: always", 1);
    lab.write(ROOT, "default/_global", &path, &edited);

    let event = ai_memory_server::HookEvent {
        harness: "claude-code".into(),
        session_id: "optout".into(),
        workspace: "default".into(),
        project: "nda".into(),
        contribute: Some(false),
        ..Default::default()
    };
    lab.memory.session_start(ROOT, &event).unwrap();
    lab.memory.profile_pass(false).unwrap();
    let now = lab.memory.wiki().read(&home.location(&page)).unwrap().unwrap().text;
    assert!(!now.contains("default/nda"), "{now}");
    assert!(now.contains("In my words: always"), "the user's edit stays: {now}");
    assert!(lab.memory.profile_entries(&home).unwrap()[0].edited_by_hand);
}
