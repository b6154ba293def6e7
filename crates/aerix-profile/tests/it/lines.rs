use aerix_profile::{
    Attach, BuiltinState, OverlayKind, Profile, Source, Target, Upstream, legacy_prompt_dirs,
    sha256_hex,
};

use crate::{EMBEDDED, NEXT, hand_commit, next_release, open, release};

fn attach(session: &str) -> Attach<'_> {
    Attach { model: "m", session, recorded: None, refresh: false, project_key: "p" }
}

fn upstream(entries: &[(&str, &str)]) -> String {
    let mut up = Upstream::default();
    for (path, text) in entries {
        up.hashes.insert((*path).to_owned(), sha256_hex(text.as_bytes()));
    }
    up.render()
}

#[test]
fn a_prompt_the_commit_lacks_is_embedded_with_a_line() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    let (branch, _) = profile.model_base("m").unwrap();
    let bare = gitstore::bare::Bare::open_or_init(profile.path()).unwrap();
    let head = bare
        .commit(
            &branch,
            &[gitstore::bare::Change::Delete { path: "tools/read.md".into() }],
            "rm",
            "x",
        )
        .unwrap();
    let read = profile.attach(&attach("s"), &release()).unwrap().read;
    assert_eq!(read.prompts["tools/read.md"], EMBEDDED[3].1);
    assert_eq!(read.states["tools/read.md"], BuiltinState::Missing);
    assert_eq!(
        read.lines,
        [format!(
            "profile p: tools/read.md is not in commit {}; the embedded text is used",
            &head[..12]
        )]
    );
}

#[test]
fn never_tuned_follows_the_release_and_tuned_is_used_even_when_stale() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    let (branch, _) = profile.model_base("m").unwrap();
    // system.md tuned from 0.1.0's text (recorded), tools/read.md untouched.
    hand_commit(&profile, &branch, "upstream.json", &upstream(&[("system.md", EMBEDDED[0].1)]));
    let tuned = hand_commit(&profile, &branch, "system.md", "Tuned.\n");
    let read = profile.attach(&attach("s1"), &release()).unwrap().read;
    assert_eq!(read.commit, tuned);
    assert_eq!(read.prompts["system.md"], "Tuned.\n");
    assert_eq!(read.tuned(), 1);
    assert!(read.lines.is_empty(), "{:?}", read.lines);
    // A newer release: main re-seeded; the base is not. The tuned file is stale (used as it is),
    // the never-tuned one takes the new embedded text, with its line; nothing is written.
    let next = Profile::create_or_open(tmp.path(), "p", &next_release()).unwrap();
    let head = next.head(&branch).unwrap();
    let read = next.attach(&attach("s2"), &next_release()).unwrap().read;
    assert_eq!(next.head(&branch).unwrap(), head, "nothing written on the base");
    assert_eq!(read.prompts["system.md"], "Tuned.\n");
    assert_eq!(read.states["system.md"], BuiltinState::Tuned { stale: true });
    assert_eq!(read.prompts["tools/read.md"], NEXT[3].1);
    assert_eq!(read.states["tools/read.md"], BuiltinState::NeverTuned);
    assert_eq!(
        read.lines,
        [
            "profile p: system.md is stale: its upstream changed since it was tuned (`aerix profile sync` reconciles it)",
            "profile p: tools/read.md was never tuned; this release's embedded text is used",
        ]
    );
    // A file whose text is still its recorded upstream is never tuned too.
    hand_commit(&next, &branch, "upstream.json", &upstream(&[("system.md", "Tuned.\n")]));
    let read = next.attach(&attach("s3"), &next_release()).unwrap().read;
    assert_eq!(read.states["system.md"], BuiltinState::NeverTuned);
    assert_eq!(read.prompts["system.md"], NEXT[0].1);
}

#[test]
fn a_hand_edit_without_an_upstream_entry_counts_as_tuned() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    let (branch, _) = profile.model_base("m").unwrap();
    hand_commit(&profile, &branch, "tools/read.md", "Mine.\n");
    let read = profile.attach(&attach("s"), &release()).unwrap().read;
    assert_eq!(read.prompts["tools/read.md"], "Mine.\n");
    assert_eq!(read.states["tools/read.md"], BuiltinState::Tuned { stale: false });
}

#[test]
fn an_upstream_json_that_does_not_parse_is_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    let (branch, _) = profile.model_base("m").unwrap();
    let head = hand_commit(&profile, &branch, "upstream.json", "{nope");
    let read = profile.attach(&attach("s"), &release()).unwrap().read;
    assert!(read.upstream.is_none());
    assert_eq!(read.lines.len(), 1, "{:?}", read.lines);
    assert!(
        read.lines[0]
            .starts_with(&format!("profile p: upstream.json at {} does not parse (", &head[..12])),
        "{}",
        read.lines[0]
    );
}

#[test]
fn overlays_replace_bodies_by_source_with_one_line_per_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    let (branch, _) = profile.model_base("m").unwrap();
    hand_commit(&profile, &branch, "skills/user/review/SKILL.md", "Review, tuned.\n");
    hand_commit(&profile, &branch, "agents/tools/fmt.md", "Format, tuned.\n");
    hand_commit(&profile, &branch, "skills/project/local/SKILL.md", "Local, tuned.\n");
    hand_commit(&profile, &branch, "upstream/agents/tools/fmt.md", "Format.\n");
    hand_commit(&profile, &branch, "skills/user/same/SKILL.md", "Same.\n");
    hand_commit(
        &profile,
        &branch,
        "upstream.json",
        &upstream(&[("skills/user/same/SKILL.md", "Same.\n")]),
    );
    let skill = |source, name, text| Target { kind: OverlayKind::Skill, source, name, text };
    let targets = [
        skill(Source::User, "review", "Review.\n"),
        Target {
            kind: OverlayKind::Agent,
            source: Source::Plugin("tools"),
            name: "fmt",
            text: "Format, v2.\n",
        },
        skill(Source::Project, "local", "Local.\n"),
        skill(Source::User, "same", "Same.\n"),
        skill(Source::Plugin("user"), "x", "X.\n"),
        skill(Source::User, "..", "Y.\n"),
        skill(Source::User, "none", "Z.\n"),
    ];
    // Its own project: project overlays apply; the agent's upstream changed: stale.
    let read = profile.attach(&attach("s1"), &release()).unwrap().read;
    let (texts, lines) = read.overlays(&targets);
    assert_eq!(
        texts,
        [
            Some("Review, tuned.\n".to_owned()),
            Some("Format, tuned.\n".to_owned()),
            Some("Local, tuned.\n".to_owned()),
            None,
            None,
            None,
            None
        ]
    );
    assert_eq!(
        lines,
        [
            "profile p: agents/tools/fmt.md is stale: its upstream changed since it was tuned (`aerix profile sync` reconciles it)",
            "profile p: skill `x` (user) has no overlay path: its plugin's id `user` is a source name; it loads from its file",
            "profile p: skill `..` (user) has no overlay path: its name `..` is not one path component: it is `.` or `..`; it loads from its file",
        ]
    );
    assert!(read.lines.is_empty());
    // Attached from another project: its project overlays are skipped, with one line.
    let other = Attach { project_key: "elsewhere", ..attach("s2") };
    let read = profile.attach(&other, &release()).unwrap().read;
    assert_eq!(read.overlays(&targets).0[2], None);
    assert_eq!(
        read.lines,
        ["profile p: its project overlays are skipped: the profile is not this project's"]
    );
}

#[test]
fn legacy_prompt_directories_holding_files_get_one_line_each() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (empty, nested, linked, crowded) =
        (t.join("empty"), t.join("nested"), t.join("linked"), t.join("crowded"));
    std::fs::create_dir_all(empty.join("tools")).unwrap();
    std::fs::create_dir_all(nested.join("tools")).unwrap();
    std::fs::write(nested.join("tools/read.md"), "x").unwrap();
    std::fs::create_dir_all(&linked).unwrap();
    std::fs::write(t.join("target.md"), "x").unwrap();
    std::os::unix::fs::symlink(t.join("target.md"), linked.join("system.md")).unwrap();
    std::fs::create_dir_all(&crowded).unwrap();
    for i in 0..=aerix_profile::MAX_LEGACY_ENTRIES {
        std::fs::create_dir(crowded.join(format!("d{i}"))).unwrap();
    }
    let lines = legacy_prompt_dirs(&[
        empty,
        nested.clone(),
        linked.clone(),
        crowded.clone(),
        t.join("absent"),
    ]);
    let named: Vec<_> = [nested, linked, crowded]
        .iter()
        .map(|d| format!("{} holds files; they are ignored: prompts are read from the session's profile (aerix profile edit)", d.display()))
        .collect();
    assert_eq!(lines, named);
}
