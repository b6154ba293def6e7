//! Agent definitions at startup: every file that cannot be used is one note on stderr naming
//! it, and the run goes on.

use crate::{World, final_turn, stderr};

#[test]
fn a_bad_agent_definition_is_a_startup_note_and_the_run_goes_on() {
    let replies = vec!["answer".to_owned(), final_turn("Nothing to do.", "done")];
    let world = World::scripted("agents-notes", &replies, true);
    world.write(".aerix/agents/broken.md", "---\ndescription: no name\n---\nbody\n");
    world.write(
        ".claude/agents/researcher.md",
        "---\nname: researcher\ndescription: Looks things up.\ntools: Read, WebSearch\n---\nLook.\n",
    );
    let user = world.home.join(".claude/agents/bad-yaml.md");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(&user, "---\nname: [oops\n---\n").unwrap();

    let out = world.aerix(&["-p", "Hello."]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let notes: Vec<&str> = err.lines().filter(|l| l.starts_with("agents: ")).collect();
    assert_eq!(notes.len(), 3, "{err}");
    let broken = world.repo.join(".aerix/agents/broken.md");
    assert!(
        notes.contains(
            &format!("agents: {}: key `name` is missing; skipped", broken.display()).as_str()
        ),
        "{err}"
    );
    let researcher = world.repo.join(".claude/agents/researcher.md");
    assert!(
        notes.contains(
            &format!(
                "agents: {}: tool `WebSearch` has no aerix equivalent and is left out",
                researcher.display()
            )
            .as_str()
        ),
        "{err}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n
                .starts_with(&format!("agents: {}: the frontmatter is not YAML", user.display()))),
        "{err}"
    );
}
