//! Skills and plugins end to end: a skill in `.claude/skills/` listed in the system segment and
//! loaded by the model, `/name args` on the prompt's first line, and a plugin installed the
//! way Claude Code installs one (its skill, agent definition and hook), beside a broken one.

use std::path::Path;

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, of_type, stderr};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A plugin in Claude Code's layout, in Claude Code's cache, installed and enabled as Claude
/// Code records it.
fn install_claude_code_plugin(world: &World) -> std::path::PathBuf {
    let root = world.home.join(".claude/plugins/cache/team/tools/1.0.0");
    write(&root.join(".claude-plugin/plugin.json"), r#"{"name": "tools", "version": "1.0.0"}"#);
    write(
        &root.join("skills/fmt/SKILL.md"),
        "---\nname: fmt\ndescription: Formats shell scripts.\n---\nRun shfmt.\n",
    );
    write(
        &root.join("agents/explorer.md"),
        "---\nname: explorer\ndescription: Reads code.\ntools: Read, Grep\n---\nYou explore.\n",
    );
    write(
        &root.join("hooks/hooks.json"),
        r#"{"description": "records its environment", "hooks": {"SessionStart": [{"hooks": [
            {"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/hooks/start.sh"}]}]}}"#,
    );
    let script = root.join("hooks/start.sh");
    write(
        &script,
        "#!/bin/sh\nprintf '%s\\n%s\\n' \"$CLAUDE_PLUGIN_ROOT\" \"$CLAUDE_PLUGIN_DATA\" > \"$CLAUDE_PLUGIN_DATA/seen\"\necho 'tools plugin loaded'\n",
    );
    let mut mode = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&script, mode).unwrap();
    let installed = json!({"version": 2, "plugins": {"tools@team": [
        {"scope": "user", "installPath": root, "version": "1.0.0"}]}});
    write(&world.home.join(".claude/plugins/installed_plugins.json"), &installed.to_string());
    write(&world.home.join(".claude/settings.json"), r#"{"enabledPlugins": {"tools@team": true}}"#);
    root
}

fn root_segment<'a>(events: &'a [Value], id: &str) -> &'a Value {
    of_type(events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1" && s["id"] == id)
        .unwrap_or_else(|| panic!("no root segment {id}"))
}

#[test]
fn skills_are_listed_loaded_and_expanded_and_a_claude_code_plugin_brings_its_parts() {
    let root = calls(
        "Load the greeting skill and the plugin's skill, and delegate to the plugin's explorer.",
        vec![
            call("skill", json!({"name": "greet", "args": "Ada Lovelace"})),
            call("skill", json!({"name": "tools:fmt"})),
            call(
                "agent",
                json!({"brief": "Read calc.sh.", "check": "true", "definition": "tools:explorer"}),
            ),
        ],
    );
    let replies = vec![
        "answer".to_owned(),
        root,
        final_turn("Read it.", "calc.sh subtracts."),
        json!({"thought": "Checked.", "final": {"reason": "ok", "verdict": "pass"}}).to_string(),
        final_turn("Done.", "Greeted."),
    ];
    // Under the constraint: the turn schema's `skill.name` and `agent.definition` enums must
    // hold the loaded names, or the scripted replies would be refused.
    let world = World::scripted_with(
        "skills",
        &replies,
        true,
        "[delegation]\nparallel = 1\n[plugins]\nenabled = [\"broken\"]\n",
    );
    world.write(
        ".claude/skills/greet/SKILL.md",
        "---\nname: greet\ndescription: Greets someone by name.\nargument-hint: [name]\n---\nGreet $0 (all of it: $ARGUMENTS) from ${CLAUDE_SKILL_DIR}.\n",
    );
    world.write(".aerix/plugins/broken/.claude-plugin/plugin.json", "{\"name\": ");
    let plugin = install_claude_code_plugin(&world);

    let out = world.aerix(&["-p", "/greet Grace Hopper\nThen stop."]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let broken = world.repo.join(".aerix/plugins/broken/.claude-plugin/plugin.json");
    let notes: Vec<&str> = err.lines().filter(|l| l.starts_with("plugins: ")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(
        notes[0].starts_with(&format!("plugins: {}: not valid JSON", broken.display())),
        "{err}"
    );
    assert!(notes[0].ends_with("; skipped"), "{err}");

    let events = world.events();
    let system = root_segment(&events, "system")["text"].as_str().unwrap().to_owned();
    assert!(
        system
            .contains("\n- greet: Greets someone by name.\n- tools:fmt: Formats shell scripts.\n"),
        "{system}"
    );
    assert!(system.contains("`skill` — "), "the tool is described: {system}");
    let greet = world.repo.join(".claude/skills/greet");
    let prompt = of_type(&events, "segment")
        .into_iter()
        .find(|s| s["agent"] == "a1" && s["label"] == "prompt")
        .unwrap();
    assert_eq!(
        prompt["text"],
        format!("Greet Grace (all of it: Grace Hopper) from {}.\n\nThen stop.", greet.display())
    );
    let result = |call: &str| {
        of_type(&events, "message")
            .into_iter()
            .find(|m| m["agent"] == "a1" && m["call"] == call)
            .unwrap()["text"]
            .clone()
    };
    assert_eq!(
        result("c1"),
        format!(
            "Base directory for this skill: {0}\n\nGreet Ada (all of it: Ada Lovelace) from {0}.\n",
            greet.display()
        )
    );
    assert_eq!(
        result("c2"),
        format!(
            "Base directory for this skill: {}\n\nRun shfmt.\n",
            plugin.join("skills/fmt").display()
        )
    );
    let explorer =
        of_type(&events, "agent.spawn").into_iter().find(|s| s["agent"] == "a1.c3").unwrap();
    assert_eq!(
        (&explorer["kind"], &explorer["tools"]),
        (&json!("tools:explorer"), &json!(["read", "grep"]))
    );

    let data = world.home.join(".claude/plugins/data/tools-team");
    let seen = std::fs::read_to_string(data.join("seen")).unwrap();
    assert_eq!(seen, format!("{}\n{}\n", plugin.display(), data.display()));
    let hooks = root_segment(&events, "hooks")["text"].as_str().unwrap().to_owned();
    assert!(hooks.contains("tools plugin loaded"), "{hooks}");
}

#[test]
fn without_skills_no_skill_tool_and_an_unknown_slash_name_is_a_usage_error() {
    let world =
        World::scripted("skills-none", &["answer".to_owned(), final_turn("Hi.", "hi")], true);
    let out = world.aerix(&["-p", "/deploy prod"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no skill named `deploy`; no skills are loaded"),
        "{}",
        stderr(&out)
    );
    assert!(world.try_log_path().is_none(), "refused before a session is made");

    let out = world.aerix(&["-p", "/usr/bin/env is slow"]);
    assert_eq!(out.status.code(), Some(0), "a path is not a skill name: {}", stderr(&out));
    let events = world.events();
    let spawn = of_type(&events, "agent.spawn")[0];
    assert!(!spawn["tools"].as_array().unwrap().contains(&json!("skill")), "{spawn}");
    let system = root_segment(&events, "system")["text"].as_str().unwrap().to_owned();
    assert!(!system.contains("`skill`") && !system.contains("# Skills"), "{system}");
}
