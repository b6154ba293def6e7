//! Prompt profiles end to end: a tuned prompt on the model branch reaching the system segment,
//! `session.start`'s profile fields, resume and `--profile-refresh`, `sessions rm`, a profile
//! that cannot be opened; `aerix profile` and every refusal of `edit`; 50 concurrent edits.

use std::path::{Path, PathBuf};
use std::process::Output;

use aerix_profile::{Change, MAIN, Profile, Release, Written, model_branch, sha256_hex};
use serde_json::Value;

use crate::{World, final_turn, of_type, smollm2, stderr, stdout};

fn release() -> Release<'static> {
    Release { version: env!("CARGO_PKG_VERSION"), embedded: &aerix_agent::runtime::EMBEDDED }
}

fn embedded(path: &str) -> &'static str {
    aerix_agent::runtime::EMBEDDED.iter().find(|(p, _)| *p == path).unwrap().1
}

fn data(world: &World) -> PathBuf {
    world.home.join("data")
}

/// A profile as a session would create it, with `model`'s base.
fn open_profile(world: &World, name: &str, model: &str) -> (Profile, String) {
    let profile = Profile::create_or_open(&data(world), name, &release()).unwrap();
    let (branch, _) = profile.model_base(model).unwrap();
    (profile, branch)
}

fn commit(profile: &Profile, branch: &str, path: &str, text: &str) -> String {
    let change = Change::Put { path: path.into(), bytes: text.as_bytes().to_vec() };
    match profile.write(branch, "test", "test", |_| Ok(vec![change.clone()])).unwrap() {
        Written::Committed(id) => id,
        other => panic!("{other:?}"),
    }
}

fn session_start(events: &[Value], nth: usize) -> Value {
    of_type(events, "session.start")[nth].clone()
}

#[test]
fn a_tuned_prompt_reaches_the_system_segment_and_sessions_record_their_commit() {
    let mut replies = Vec::new();
    for i in 0..5 {
        replies.push("answer".to_owned());
        replies.push(final_turn("Done.", &format!("answer {i}")));
    }
    let world = World::scripted("profile-e2e", &replies, true);
    let model =
        format!("script:{}@{}", world.home.join("replies.json").display(), smollm2().display());
    let (profile, branch) = open_profile(&world, "demo", &model);
    assert_eq!(branch, model_branch(&model));
    let seed = profile.head(MAIN).unwrap().unwrap();
    let tuned = format!("{}\nTUNED-MARKER: answer in one line.\n", embedded("system.md"));
    let first = commit(&profile, &branch, "system.md", &tuned);
    world.write(".aerix/prompts/system.md", "old override\n");

    let out = world.aerix(&["-p", "Hi.", "--profile", "demo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let legacy = format!(
        "{} holds files; they are ignored: prompts are read from the session's profile (aerix profile edit)",
        world.repo.join(".aerix/prompts").display()
    );
    assert!(stderr(&out).lines().any(|l| l == legacy), "{}", stderr(&out));
    let events = world.events();
    let start = session_start(&events, 0);
    assert_eq!(
        (&start["profile"], &start["profile_branch"], &start["profile_commit"]),
        (&Value::from("demo"), &Value::from(branch.clone()), &Value::from(first.clone()))
    );
    let system = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1" && s["label"] == "system")
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("TUNED-MARKER"), "{system}");
    let id = start["session"].as_str().unwrap().to_owned();
    assert_eq!(profile.head(&format!("session/{id}")).unwrap().unwrap(), first);

    // A later commit: the resumed session keeps its commit, until --profile-refresh.
    let second = commit(&profile, &branch, "system.md", &format!("{tuned}SECOND\n"));
    let out = world.aerix(&["-p", "Again.", "--resume", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(session_start(&world.events(), 1)["profile_commit"], first.as_str());
    let out = world.aerix(&["-p", "Refresh.", "--resume", &id, "--profile-refresh"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(session_start(&world.events(), 2)["profile_commit"], second.as_str());
    assert_eq!(profile.head(&format!("session/{id}")).unwrap().unwrap(), second);

    // A profile that cannot be opened: one line, the embedded prompts.
    std::fs::write(data(&world).join("aerix/profiles/broken.git"), "not a repository").unwrap();
    let out = world.aerix(&["-p", "Broken.", "--profile", "broken"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = stderr(&out)
        .lines()
        .find(|l| l.starts_with("profile broken: "))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{}", stderr(&out)));
    assert!(line.ends_with("; the embedded prompts are used"), "{line}");
    let events = world.events();
    let start = session_start(&events, 0);
    assert!(start.get("profile").is_none() && start.get("profile_commit").is_none(), "{start}");

    // Settings' `profile`, and a skill overlay on its model branch replacing the skill's body.
    let skill_file = world.home.join("config/aerix/skills/greet/SKILL.md");
    std::fs::create_dir_all(skill_file.parent().unwrap()).unwrap();
    std::fs::write(&skill_file, "---\ndescription: Greets.\n---\nSay hello from the file.\n")
        .unwrap();
    let (other, other_branch) = open_profile(&world, "fromsettings", &model);
    commit(&other, &other_branch, "skills/user/greet/SKILL.md", "OVERLAY-BODY: greet in French.\n");
    world.write(".aerix/settings.toml", "profile = \"fromsettings\"\n");
    let out = world.aerix(&["-p", "/greet"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    assert_eq!(session_start(&events, 0)["profile"], "fromsettings");
    let prompt = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1" && s["label"] == "prompt")
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(prompt.contains("OVERLAY-BODY") && !prompt.contains("from the file"), "{prompt}");

    // `sessions rm` deletes the session's branch; nothing propagated upward.
    let out = world.aerix(&["sessions", "rm", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(profile.head(&format!("session/{id}")).unwrap(), None);
    assert_eq!(profile.head(MAIN).unwrap().unwrap(), seed);
    assert_eq!(profile.head(&branch).unwrap().unwrap(), second);
    let list = stdout(&world.aerix(&["profile", "--profile", "demo", "list"]));
    let branches: Vec<&str> = list.lines().map(|l| l.split("  ").next().unwrap()).collect();
    assert_eq!(branches, ["main", branch.as_str()], "{list}");
}

#[test]
fn a_bad_profile_name_is_a_usage_error() {
    let world = World::new("profile-name", "unused.gguf", "");
    let out = world.aerix(&["-p", "x", "--profile", ".hidden"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("is not a profile name"), "{}", stderr(&out));
    world.write_settings("unused.gguf", "");
    std::fs::write(world.home.join("config/aerix/settings.toml"), "profile = \"a/b\"\n").unwrap();
    let out = world.aerix(&["-p", "x"]);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(stderr(&out).contains("key `profile`"), "{}", stderr(&out));
}

/// An editor script in the world's `bin`: `body` runs with the file as `$1`.
fn editor(world: &World, name: &str, body: &str) -> PathBuf {
    let path = world.home.join("bin").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    let mut mode = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&path, mode).unwrap();
    path
}

fn edit(world: &World, editor: &Path, branch: &str, path: &str) -> Output {
    world
        .aerix_command(&["profile", "--profile", "demo", "edit", branch, path])
        .env("EDITOR", editor)
        .env_remove("VISUAL")
        .output()
        .unwrap()
}

fn skill(world: &World, name: &str) {
    let file = world.home.join(format!("config/aerix/skills/{name}/SKILL.md"));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, format!("---\ndescription: {name}\n---\nDo {name}.\n")).unwrap();
}

#[test]
fn profile_edit_commits_by_hand_and_refuses_each_thing_by_name() {
    let world = World::new("profile-edit", "unused.gguf", "");
    let (profile, branch) = open_profile(&world, "demo", "m");
    skill(&world, "review");
    let append = editor(&world, "append", "echo 'Be brief.' >> \"$1\"");
    let out = edit(&world, &append, &branch, "system.md");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let head = profile.head(&branch).unwrap().unwrap();
    assert_eq!(stdout(&out), format!("committed {head} on {branch}\n"));
    let shown =
        stdout(&world.aerix(&["profile", "--profile", "demo", "show", &branch, "system.md"]));
    assert_eq!(shown, format!("{}Be brief.\n", embedded("system.md")));
    let upstream = profile.read(&head, "upstream.json").unwrap().unwrap();
    assert!(upstream.contains(&sha256_hex(embedded("system.md").as_bytes())), "{upstream}");
    let log = stdout(&world.aerix(&["profile", "--profile", "demo", "log", &branch, "system.md"]));
    assert_eq!(log.lines().count(), 2, "the edit and main's seed: {log}");
    assert!(log.lines().next().unwrap().ends_with("aerix profile edit  edit system.md"), "{log}");
    let diff = stdout(&world.aerix(&["profile", "--profile", "demo", "diff", &head]));
    assert!(diff.contains("+Be brief.") && diff.contains("upstream.json"), "{diff}");
    let parent = format!("{head}^");
    let same = stdout(&world.aerix(&["profile", "--profile", "demo", "diff", &parent, &head]));
    assert_eq!(same, diff);

    // An overlay of a loaded skill: its upstream text is kept beside it.
    let out = edit(&world, &append, &branch, "skills/user/review/SKILL.md");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let head = profile.head(&branch).unwrap().unwrap();
    assert_eq!(
        profile.read(&head, "skills/user/review/SKILL.md").unwrap().unwrap(),
        "Do review.\nBe brief.\n"
    );
    assert_eq!(
        profile.read(&head, "upstream/skills/user/review/SKILL.md").unwrap().unwrap(),
        "Do review.\n"
    );

    // Every refusal names what it refuses and writes nothing.
    let refusals: [(&Path, &str, &str, i32, &str); 10] = [
        (&append, "main", "system.md", 64, "edit refuses main"),
        (
            &append,
            "session/20260101-000000-abcd",
            "system.md",
            64,
            "edit refuses session/20260101-000000-abcd",
        ),
        (&append, &branch, "upstream.json", 64, "edit refuses upstream.json"),
        (&append, &branch, "upstream/system.md", 64, "edit refuses upstream/system.md"),
        (
            &append,
            &branch,
            "skills/user/nope/SKILL.md",
            64,
            "no loaded skill or agent definition has this overlay path",
        ),
        (&append, &branch, "notes.md", 64, "neither a built-in prompt nor an overlay path"),
        (
            &editor(&world, "drop-check", "sed -i 's/{{check}}//g' \"$1\""),
            &branch,
            "brief.md",
            1,
            "brief.md drops the placeholder {{check}}",
        ),
        (
            &editor(&world, "drop-reason", "sed -i 's/reason/why/g' \"$1\""),
            &branch,
            "verifier.md",
            1,
            "verifier.md drops the verdict shape word \"reason\"",
        ),
        (
            &editor(&world, "drop-plan", "sed -i 's/plan/design/g' \"$1\""),
            &branch,
            "routing.md",
            1,
            "routing.md drops the shape word `plan`",
        ),
        (
            &editor(&world, "grow", "cat \"$1\" \"$1\" \"$1\" > \"$1.x\" && mv \"$1.x\" \"$1\""),
            &branch,
            "tools/read.md",
            1,
            "over twice its embedded text's",
        ),
    ];
    for (editor, on, path, code, says) in refusals {
        let out = edit(&world, editor, on, path);
        assert_eq!(out.status.code(), Some(code), "{path}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(says) && stderr(&out).contains("nothing written"),
            "{path}: {}",
            stderr(&out)
        );
        assert_eq!(profile.head(&branch).unwrap().unwrap(), head, "{path}: nothing written");
    }
}

#[test]
fn fifty_concurrent_edits_of_different_files_all_land() {
    let world = World::new("profile-fifty", "unused.gguf", "");
    let (profile, branch) = open_profile(&world, "demo", "m");
    for i in 0..50 {
        skill(&world, &format!("s{i}"));
    }
    let append = editor(&world, "append", "echo 'Tuned.' >> \"$1\"");
    let children: Vec<_> = (0..50)
        .map(|i| {
            world
                .aerix_command(&[
                    "profile",
                    "--profile",
                    "demo",
                    "edit",
                    &branch,
                    &format!("skills/user/s{i}/SKILL.md"),
                ])
                .env("EDITOR", &append)
                .env_remove("VISUAL")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let edits = profile.history(&branch, None, 1000).unwrap();
    assert_eq!(edits.iter().filter(|c| c.message.starts_with("edit skills/user/s")).count(), 50);
    let head = profile.head(&branch).unwrap().unwrap();
    let files = profile.files(&head).unwrap();
    for i in 0..50 {
        assert_eq!(files[&format!("skills/user/s{i}/SKILL.md")], format!("Do s{i}.\nTuned.\n"));
    }
    let upstream = aerix_profile::Upstream::parse(&files["upstream.json"]).unwrap();
    assert_eq!(upstream.hashes.len(), 50, "every edit's upstream recorded");
}

/// A resumed root's conversation is the log's; its system and instruction segments are this
/// start's: the recorded commit's prompts (the model base's head with `--profile-refresh`) and
/// the instruction files as they are now, each replaced in place when it changed.
#[test]
fn a_resumed_root_reads_refreshed_prompts_and_the_instruction_files_as_they_are() {
    let mut replies = Vec::new();
    for i in 0..3 {
        replies.push("answer".to_owned());
        replies.push(final_turn("Done.", &format!("answer {i}")));
    }
    let world = World::scripted("profile-resume", &replies, true);
    let model =
        format!("script:{}@{}", world.home.join("replies.json").display(), smollm2().display());
    let (profile, branch) = open_profile(&world, "demo", &model);
    world.write("AGENTS.md", "Indent with tabs.\n");
    let out = world.aerix(&["-p", "Hi.", "--profile", "demo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = session_start(&world.events(), 0)["session"].as_str().unwrap().to_owned();
    let last = |events: &[Value], id: &str| {
        of_type(events, "segment")
            .into_iter()
            .rfind(|s| s["agent"] == "a1" && s["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id} segment"))
    };

    let tuned = format!("{}\nREFRESHED-MARKER\n", embedded("system.md"));
    commit(&profile, &branch, "system.md", &tuned);
    world.write("AGENTS.md", "Indent with spaces.\n");
    // Resumed without a refresh: the recorded commit's prompts, the instruction file as it is.
    let out = world.aerix(&["-p", "Again.", "--resume", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let instructions = last(&events, "instructions");
    assert_eq!(instructions["op"], "replace", "{instructions}");
    let text = instructions["text"].as_str().unwrap();
    assert!(text.contains("Indent with spaces.") && !text.contains("tabs"), "{text}");
    let system = last(&events, "system");
    assert_eq!(system["op"], "append", "unchanged: {system}");
    assert!(!system["text"].as_str().unwrap().contains("REFRESHED-MARKER"));
    // With --profile-refresh: the model base's head, replaced in place; the conversation is
    // still the log's (the first request's prompt is in the root).
    let out = world.aerix(&["-p", "Refresh.", "--resume", &id, "--profile-refresh"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let system = last(&events, "system");
    assert_eq!(system["op"], "replace", "{system}");
    assert!(system["text"].as_str().unwrap().contains("REFRESHED-MARKER"), "{system}");
    let replaced = of_type(&events, "segment")
        .into_iter()
        .filter(|s| s["id"] == "instructions" && s["op"] == "replace")
        .count();
    assert_eq!(replaced, 1, "an unchanged file is not replaced again");
    let prompts: Vec<&str> = of_type(&events, "segment")
        .into_iter()
        .filter(|s| s["agent"] == "a1" && s["label"] == "prompt")
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["Hi.", "Again.", "Refresh."]);
}
