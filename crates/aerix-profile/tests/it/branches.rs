use aerix_profile::{
    Attach, CAS_RETRIES, Change, MAIN, Profile, ProfileError, Written, model_branch, profile_path,
};

use crate::{EMBEDDED, hand_commit, next_release, open, release};

fn put(path: &str, text: &str) -> Change {
    Change::Put { path: path.into(), bytes: text.as_bytes().to_vec() }
}

fn attach<'a>(session: &'a str, recorded: Option<&'a str>, refresh: bool) -> Attach<'a> {
    Attach { model: "qwen3-0.6b", session, recorded, refresh, project_key: "p" }
}

#[test]
fn main_is_seeded_once_and_reseeded_for_a_release_that_differs() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    assert_eq!(profile.path(), profile_path(tmp.path(), "p"));
    assert!(profile.path().ends_with("aerix/profiles/p.git"));
    let first = profile.head(MAIN).unwrap().unwrap();
    let files = profile.files(&first).unwrap();
    for (path, text) in EMBEDDED {
        assert_eq!(files[path], text, "{path} laid out as the built-in path");
    }
    assert_eq!(profile.history(MAIN, None, 10).unwrap()[0].message, "aerix 0.1.0");
    // The same release again commits nothing.
    let again = open(tmp.path(), "p");
    assert_eq!(again.head(MAIN).unwrap().unwrap(), first);
    // A release whose set differs: one commit naming it, on main only.
    let (_, base) = again.model_base("m").unwrap();
    let next = Profile::create_or_open(tmp.path(), "p", &next_release()).unwrap();
    let head = next.head(MAIN).unwrap().unwrap();
    assert_ne!(head, first);
    let log = next.history(MAIN, None, 10).unwrap();
    assert_eq!(
        log.iter().map(|c| c.message.as_str()).collect::<Vec<_>>(),
        ["aerix 0.2.0", "aerix 0.1.0"]
    );
    assert_eq!(
        next.read(&head, "system.md").unwrap().unwrap(),
        "You are a careful coding agent.\n"
    );
    assert_eq!(
        next.head(&model_branch("m")).unwrap().unwrap(),
        base,
        "the model base is not moved"
    );
}

#[test]
fn a_bad_name_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in [".x", "a/b", ""] {
        let err = Profile::create_or_open(tmp.path(), bad, &release()).unwrap_err();
        assert!(matches!(err, ProfileError::BadName(_)), "{err}");
    }
    let err = Profile::open(tmp.path(), "absent").unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn the_model_base_is_made_once_from_main_percent_encoded() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    let main = profile.head(MAIN).unwrap().unwrap();
    let (branch, head) = profile.model_base("qwen3-0.6b").unwrap();
    assert_eq!(branch, "model/qwen3-0%2E6b");
    assert_eq!(head, main);
    let tuned = hand_commit(&profile, &branch, "system.md", "tuned\n");
    assert_eq!(profile.model_base("qwen3-0.6b").unwrap(), (branch.clone(), tuned), "made once");
    let names: Vec<String> = profile.branches().unwrap().into_iter().map(|(b, _)| b).collect();
    assert_eq!(names, ["main", "model/qwen3-0%2E6b"]);
    assert!(profile.path().join("refs/heads/model/qwen3-0%2E6b").exists(), "one ref component");
}

#[test]
fn sessions_read_their_commit_resume_refresh_and_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    let first = profile.attach(&attach("s1", None, false), &release()).unwrap();
    let base = first.read.commit.clone();
    assert_eq!(first.branch, "model/qwen3-0%2E6b");
    assert_eq!(first.session_branch, "session/s1");
    assert_eq!(profile.head("session/s1").unwrap(), None, "made by the first request");
    profile.session_at("s1", &base).unwrap();
    assert_eq!(profile.head("session/s1").unwrap().unwrap(), base, "made at the read commit");
    // A later commit on the model base does not change the session: resume reads its commit.
    let tuned = hand_commit(&profile, &first.branch, "system.md", "tuned\n");
    let resumed = profile.attach(&attach("s1", Some(&base), false), &release()).unwrap();
    assert_eq!(resumed.read.commit, base);
    assert_eq!(resumed.read.prompts["system.md"], EMBEDDED[0].1);
    assert!(resumed.read.lines.is_empty(), "{:?}", resumed.read.lines);
    // A new session starts on the new head.
    let second = profile.attach(&attach("s2", None, false), &release()).unwrap();
    profile.session_at("s2", &second.read.commit).unwrap();
    assert_eq!(second.read.commit, tuned);
    assert_eq!(second.read.prompts["system.md"], "tuned\n");
    // --profile-refresh: the branch moves to the model base's head first.
    let refreshed = profile.attach(&attach("s1", Some(&base), true), &release()).unwrap();
    assert_eq!(refreshed.read.commit, tuned);
    profile.session_at("s1", &refreshed.read.commit).unwrap();
    assert_eq!(profile.head("session/s1").unwrap().unwrap(), tuned);
    // A recorded commit that no longer exists: one line, the base's head.
    let gone = "0123456789abcdef0123456789abcdef01234567";
    let missing = profile.attach(&attach("s3", Some(gone), false), &release()).unwrap();
    assert_eq!(missing.read.commit, tuned);
    assert_eq!(
        missing.read.lines,
        [format!(
            "profile p: the recorded commit {gone} no longer exists; model/qwen3-0%2E6b's head {} is used",
            &tuned[..12]
        )]
    );
    // Removing a session deletes its branch only.
    assert!(profile.remove_session("s1").unwrap());
    assert!(!profile.remove_session("s1").unwrap());
    assert_eq!(profile.head("session/s1").unwrap(), None);
    assert!(profile.head("session/s2").unwrap().is_some());
    // Nothing propagated upward: main is still the seed, the base only has the hand commit.
    assert_eq!(profile.history(MAIN, None, 10).unwrap().len(), 1);
    assert_eq!(profile.head(&first.branch).unwrap().unwrap(), tuned);
    let session_commit = hand_commit(&profile, "session/s2", "system.md", "session only\n");
    profile.attach(&attach("s4", None, false), &release()).unwrap();
    assert_eq!(
        profile.head(&first.branch).unwrap().unwrap(),
        tuned,
        "{session_commit} stays there"
    );
}

#[test]
fn a_write_retries_from_the_new_head_then_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    let (branch, _) = profile.model_base("m").unwrap();
    // Another writer moves the branch once, between this write's read and its ref move.
    let mut calls = 0;
    let written = profile
        .write(&branch, "edit a", "test", |head| {
            calls += 1;
            if calls == 1 {
                hand_commit(&profile, &branch, "other.md", "theirs\n");
            }
            assert_eq!(head.files.contains_key("other.md"), calls > 1, "rebuilt on the new head");
            Ok(vec![put("tools/read.md", "mine\n")])
        })
        .unwrap();
    assert_eq!(calls, 2);
    let Written::Committed(id) = written else { panic!("{written:?}") };
    let files = profile.files(&id).unwrap();
    assert_eq!(
        (files["other.md"].as_str(), files["tools/read.md"].as_str()),
        ("theirs\n", "mine\n")
    );
    // A branch that moves on every attempt: refused by name, nothing of this write lands.
    let mut attempts = 0;
    let err = profile
        .write(&branch, "edit b", "test", |_| {
            attempts += 1;
            hand_commit(&profile, &branch, &format!("theirs{attempts}.md"), "x");
            Ok(vec![put("system.md", "lost?\n")])
        })
        .unwrap_err();
    assert_eq!(attempts, CAS_RETRIES + 1);
    assert_eq!(
        err.to_string(),
        format!("profile p: {branch} moved during the write 4 times; nothing written")
    );
    let head = profile.head(&branch).unwrap().unwrap();
    assert_eq!(profile.read(&head, "system.md").unwrap().unwrap(), EMBEDDED[0].1);
    assert_eq!(
        profile.files(&head).unwrap().len(),
        EMBEDDED.len() + 1 + 4,
        "the others' writes kept"
    );
    // Nothing to change commits nothing.
    let same =
        profile.write(&branch, "noop", "test", |_| Ok(vec![put("system.md", EMBEDDED[0].1)]));
    assert_eq!(same.unwrap(), Written::Unchanged(Some(head)));
}

#[test]
fn concurrent_writers_of_one_profile_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = open(tmp.path(), "p");
    let (branch, _) = profile.model_base("m").unwrap();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let (profile, branch) = (profile.clone(), branch.clone());
            std::thread::spawn(move || {
                let path = format!("w{i}.md");
                profile.write(&branch, &path, "t", |_| Ok(vec![put(&path, "x")])).unwrap()
            })
        })
        .collect();
    for t in threads {
        assert!(matches!(t.join().unwrap(), Written::Committed(_)));
    }
    assert_eq!(profile.history(&branch, None, 100).unwrap().len(), 9);
}
