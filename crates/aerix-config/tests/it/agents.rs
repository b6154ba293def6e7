//! Agent definitions from every directory they are read from, on a real tree.

use aerix_config::{AgentDirs, Env, load_agents};

use crate::{temp, write};

fn agent(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

#[test]
fn definitions_load_from_every_directory_and_the_project_and_aerix_win() {
    let dir = temp("agents");
    let home = dir.join("home");
    let env = Env {
        home: Some(home.clone()),
        config_home: Some(dir.join("config")),
        ..Env::for_tests("/nowhere")
    };
    let root = dir.join("repo");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let cwd = root.join("crates/core");
    std::fs::create_dir_all(&cwd).unwrap();
    // `fixer`: in all four kinds of directory; the project's aerix one wins.
    write(&root.join(".aerix/agents/fixer.md"), &agent("fixer", "project aerix", "A"));
    write(&root.join(".claude/agents/fixer.md"), &agent("fixer", "project claude", "B"));
    write(&dir.join("config/aerix/agents/fixer.md"), &agent("fixer", "user aerix", "C"));
    write(&home.join(".claude/agents/fixer.md"), &agent("fixer", "user claude", "D"));
    // `reviewer`: the project's Claude Code one over the user's aerix one.
    write(&root.join(".claude/agents/review/reviewer.md"), &agent("reviewer", "project", "E"));
    write(&dir.join("config/aerix/agents/reviewer.md"), &agent("reviewer", "user", "F"));
    // The closest directory to the working directory wins over the root's.
    write(&cwd.join(".claude/agents/x.md"), &agent("fixer-near", "near", "G"));
    write(&root.join(".aerix/agents/y.md"), &agent("fixer-near", "far", "H"));
    // A user's own subagent, found in ~/.claude/agents, under any file name.
    write(&home.join(".claude/agents/misc/tester-file.md"), &agent("tester", "user claude", "I"));
    // Bad files: one note each, naming the file and what is wrong; the rest load.
    let no_name = root.join(".aerix/agents/broken.md");
    write(&no_name, "---\ndescription: no name\n---\nbody\n");
    let bad_yaml = home.join(".claude/agents/bad.md");
    write(&bad_yaml, "---\nname: [oops\n---\n");
    write(&root.join(".aerix/agents/notes.txt"), "not markdown, not read");
    let again = root.join(".aerix/agents/z-again.md");
    write(&again, &agent("fixer", "same directory twice", "J"));

    let loaded = load_agents(&AgentDirs::standard(&env, &root, &cwd));
    let defs = &loaded.definitions;
    let description = |name: &str| defs.get(name).unwrap().description.as_str();
    assert_eq!(description("fixer"), "project aerix");
    assert_eq!(defs.get("fixer").unwrap().body, "A\n");
    assert_eq!(defs.get("fixer").unwrap().source, root.join(".aerix/agents/fixer.md"));
    assert_eq!(description("reviewer"), "project");
    assert_eq!(description("fixer-near"), "near");
    assert_eq!(description("tester"), "user claude");
    assert!(defs.get("tester-file").is_none(), "identity comes from `name`, not the file");
    assert_eq!(defs.len(), 4);

    let notes = &loaded.notes;
    assert_eq!(notes.len(), 3, "{notes:#?}");
    let note = |path: &std::path::Path| {
        notes.iter().find(|n| n.contains(&path.display().to_string())).unwrap().clone()
    };
    assert!(note(&no_name).ends_with("key `name` is missing; skipped"), "{notes:#?}");
    assert!(note(&bad_yaml).contains("not YAML"), "{notes:#?}");
    assert!(note(&again).contains("defines `fixer` again"), "{notes:#?}");
    assert!(notes.iter().all(|n| n.lines().count() == 1), "one line each: {notes:#?}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn no_directories_no_definitions_no_notes() {
    let dir = temp("agents-none");
    let env = Env::for_tests(&dir.join("home").display().to_string());
    let loaded = load_agents(&AgentDirs::standard(&env, &dir, &dir));
    assert!(loaded.definitions.is_empty() && loaded.notes.is_empty(), "{:?}", loaded.notes);
    std::fs::remove_dir_all(dir).unwrap();
}
