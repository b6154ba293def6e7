#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::Path;

use aerix_config::{Env, Origin};

use super::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn skill(name: &str, description: &str, model: bool) -> Skill {
    Skill {
        name: name.to_owned(),
        description: description.to_owned(),
        argument_hint: None,
        allowed_tools: Vec::new(),
        model_invocable: model,
        user_invocable: true,
        body: format!("Do {name} on $ARGUMENTS."),
        dir: PathBuf::from(format!("/s/{name}")),
        file: PathBuf::from(format!("/s/{name}/SKILL.md")),
        origin: Origin::User,
    }
}

fn set(skills: Vec<Skill>) -> Skills {
    Skills { set: skills.into_iter().collect(), session_id: "s1".into() }
}

#[test]
fn standard_order_project_aerix_then_claude_then_user_then_plugins() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (root, home) = (t.join("repo"), t.join("home"));
    let cwd = root.join("sub");
    let env = Env::for_tests(home.to_str().unwrap());
    for (dir, who) in [
        (cwd.join(".claude/skills/deploy"), "sub claude"),
        (root.join(".aerix/skills/deploy"), "root aerix"),
        (root.join(".aerix/skills/review"), "root aerix"),
        (root.join(".claude/skills/review"), "root claude"),
        (root.join(".claude/skills/lint"), "root claude"),
        (home.join(".config/aerix/skills/lint"), "user aerix"),
        (home.join(".config/aerix/skills/fmt"), "user aerix"),
        (home.join(".claude/skills/fmt"), "user claude"),
        (t.join("plugin/skills/fmt"), "plugin"),
    ] {
        write(&dir.join("SKILL.md"), &format!("---\ndescription: from {who}\n---\nbody"));
    }
    write(&root.join(".claude/commands/frontend/component.md"), "Make a component.\n");
    write(&root.join(".claude/commands/deploy.md"), "---\ndescription: a command\n---\n");
    write(&t.join("plugin/commands/ship.md"), "Ship it.");
    let mut dirs = SkillDirs::standard(&env, &root, &cwd);
    dirs.plugin("tools", &t.join("plugin"));
    let loaded = load(&dirs);
    let got: Vec<(&str, &str)> =
        loaded.skills.iter().map(|s| (s.name.as_str(), s.description.as_str())).collect();
    assert_eq!(
        got,
        [
            ("deploy", "from sub claude"),
            ("fmt", "from user aerix"),
            ("frontend:component", "Make a component."),
            ("lint", "from root claude"),
            ("review", "from root aerix"),
            ("tools:fmt", "from plugin"),
            ("tools:ship", "Ship it."),
        ]
    );
    // Each clash is one line naming both files.
    assert_eq!(loaded.notes.len(), 5, "{:#?}", loaded.notes);
    let deploy = &loaded.notes[0];
    assert!(
        deploy.contains("repo/.aerix/skills/deploy/SKILL.md: `deploy` is already loaded from"),
        "{deploy}"
    );
    assert!(
        deploy.ends_with("repo/sub/.claude/skills/deploy/SKILL.md; this one is skipped"),
        "{deploy}"
    );
    assert!(loaded.notes.iter().any(|n| n.contains("commands/deploy.md: `deploy` is already")));
}

#[test]
fn names_directories_bounds_and_broken_files() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("skills");
    write(&t.join("a/SKILL.md"), "---\nname: renamed\n---\n# Title line\n");
    write(&t.join("b/SKILL.md"), "---\nname: [bad\n---\nFirst line.\n");
    write(&t.join("c/SKILL.md"), "---\nname: has space\n---\nx\n");
    write(&t.join("bad name/SKILL.md"), "x");
    write(&t.join("big/SKILL.md"), &"x".repeat(MAX_SKILL_BYTES as usize + 1));
    write(&t.join("nofile/README.md"), "x");
    let dirs = SkillDirs {
        dirs: vec![SkillDir {
            path: t.clone(),
            kind: Kind::Skills,
            plugin: None,
            origin: Origin::User,
        }],
    };
    let loaded = load(&dirs);
    let got: Vec<(&str, &str)> =
        loaded.skills.iter().map(|s| (s.name.as_str(), s.description.as_str())).collect();
    assert_eq!(got, [("b", "First line."), ("c", "x"), ("renamed", "Title line")]);
    let notes = loaded.notes.join("\n");
    assert_eq!(loaded.notes.len(), 3, "a display name (`has space`) is no note: {notes}");
    for want in [
        "b/SKILL.md: the frontmatter is not YAML",
        "bad name: the directory's name",
        "big/SKILL.md: 262145 bytes, over the 256 KiB",
    ] {
        assert!(notes.contains(want), "{want}: {notes}");
    }
}

#[test]
fn a_directory_past_the_entry_bound_is_cut_with_a_line() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..MAX_ENTRIES + 2 {
        std::fs::create_dir(tmp.path().join(format!("s{i}"))).unwrap();
    }
    let dirs = SkillDirs {
        dirs: vec![SkillDir {
            path: tmp.path().to_owned(),
            kind: Kind::Skills,
            plugin: None,
            origin: Origin::User,
        }],
    };
    let loaded = load(&dirs);
    assert_eq!(loaded.notes.len(), 1, "{:?}", loaded.notes);
    assert!(
        loaded.notes[0].contains("more than 1000 entries; 2 are not read"),
        "{:?}",
        loaded.notes
    );
}

#[test]
fn the_listing_stays_within_its_characters_and_counts_the_rest() {
    let skills = set(vec![
        skill("alpha", "first", true),
        skill("beta", "second", true),
        skill("gamma", "third", true),
        skill("hidden", "user only", false),
    ]);
    let full = skills.listing(4000).unwrap();
    assert!(full.starts_with("# Skills\n"), "{full}");
    assert!(full.ends_with("- alpha: first\n- beta: second\n- gamma: third\n"), "{full}");
    assert!(!full.contains("hidden"), "disable-model-invocation is not listed");
    // "- alpha: first\n" is 15 characters, "- beta: second\n" 15.
    let cut = skills.listing(30).unwrap();
    assert!(
        cut.ends_with("- alpha: first\n- beta: second\n(and 1 more skill: call skill with list)\n"),
        "{cut}"
    );
    let none = skills.listing(0).unwrap();
    assert!(none.ends_with("(and 3 more skills: call skill with list)\n"), "{none}");
    assert_eq!(set(vec![skill("hidden", "x", false)]).listing(4000), None);
    assert_eq!(skills.model_names(), ["alpha", "beta", "gamma"]);
}

#[test]
fn load_list_and_the_prompt_s_first_line() {
    let mut only_model = skill("auto", "model only", true);
    only_model.user_invocable = false;
    let mut hinted = skill("fix", "fixes", true);
    hinted.argument_hint = Some("[issue]".into());
    hinted.body = "Fix issue $0 in ${CLAUDE_SKILL_DIR} (${CLAUDE_SESSION_ID}).".into();
    let skills = set(vec![only_model, hinted, skill("manual", "by hand", false)]);
    assert_eq!(skills.list(), "2 skills:\n- auto: model only\n- fix [issue]: fixes");
    assert_eq!(
        skills.load("fix", "12 now").unwrap(),
        "Base directory for this skill: /s/fix\n\nFix issue 12 in /s/fix (s1)."
    );
    assert_eq!(skills.load("manual", "").unwrap_err(), SkillError::NotForModel("manual".into()));
    let unknown = skills.load("nope", "").unwrap_err().to_string();
    assert_eq!(unknown, "no skill named `nope`; the skills are auto, fix");

    assert_eq!(
        skills.expand_prompt("/manual src/ lib/\nand be quick").unwrap().unwrap(),
        "Do manual on src/ lib/.\n\nand be quick"
    );
    assert_eq!(skills.expand_prompt("/usr/bin/env is slow").unwrap(), None);
    assert_eq!(skills.expand_prompt("fix /fix").unwrap(), None);
    assert!(matches!(skills.expand_prompt("/nope x"), Err(SkillError::Unknown { .. })));
    assert_eq!(skills.expand_prompt("/auto").unwrap_err(), SkillError::NotForUser("auto".into()));
}

#[test]
fn a_projects_or_plugins_skill_linked_out_of_its_tree_is_skipped_and_the_users_own_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (root, home) = (t.join("repo"), t.join("home"));
    let env = Env::for_tests(home.to_str().unwrap());
    let secret = home.join(".aws/credentials");
    write(&secret, "aws_secret_access_key = hunter2\n");
    let link = |dir: &Path, target: &Path| {
        std::fs::create_dir_all(dir).unwrap();
        std::os::unix::fs::symlink(target, dir.join("SKILL.md")).unwrap();
    };
    link(&root.join(".claude/skills/creds"), &secret);
    link(&t.join("plugin/skills/creds"), &secret);
    // A link inside the project stays a skill.
    write(&root.join("docs/deploy.md"), "---\ndescription: deploys\n---\nDeploy.\n");
    link(&root.join(".claude/skills/deploy"), &root.join("docs/deploy.md"));
    // The user's own link is theirs.
    write(&t.join("dotfiles/mine.md"), "---\ndescription: mine\n---\nMine.\n");
    link(&home.join(".claude/skills/mine"), &t.join("dotfiles/mine.md"));
    let mut dirs = SkillDirs::standard(&env, &root, &root);
    dirs.plugin("tools", &t.join("plugin"));
    let loaded = load(&dirs);
    let names: Vec<&str> = loaded.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["deploy", "mine"], "{:#?}", loaded.notes);
    assert!(loaded.skills.iter().all(|s| !s.body.contains("hunter2")));
    let outside: Vec<&String> =
        loaded.notes.iter().filter(|n| n.contains("a link to") && n.contains("outside")).collect();
    assert_eq!(outside.len(), 2, "{:#?}", loaded.notes);
    assert!(outside[0].contains(".claude/skills/creds/SKILL.md"), "{}", outside[0]);
}
