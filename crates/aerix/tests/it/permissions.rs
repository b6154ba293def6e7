//! Permission rules in Claude Code's format through the real binary: each mode headless
//! (`aerix -p` on a scripted member, read back from the session log) and on the screen (a tmux
//! pane: allow once, always for this project and deny, the answer kept for the next start), and
//! an agent definition's `Bash(git diff:*)`.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::screen::{Pane, STARTUP, STEP, exited};
use crate::{World, call, calls, final_turn, of_type, stderr};

/// The results of `tool` calls, in log order: (text, error).
fn results(world: &World, tool: &str) -> Vec<(String, bool)> {
    of_type(&world.events(), "message")
        .into_iter()
        .filter(|m| m["role"] == "tool" && m["tool"] == tool)
        .map(|m| (m["text"].as_str().unwrap().to_owned(), m["error"] == json!(true)))
        .collect()
}

fn bash(command: &str) -> Value {
    call("bash", json!({ "command": command }))
}

fn write(path: &str) -> Value {
    call("write", json!({ "path": path, "content": "x\n" }))
}

/// One request's replies: routed `answer`, one call a turn, then a final.
fn request(turns: Vec<Value>, answer: &str) -> Vec<String> {
    let mut replies = vec!["answer".to_owned()];
    replies.extend(turns.into_iter().map(|c| calls("Next.", vec![c])));
    replies.push(final_turn("Done.", answer));
    replies
}

#[test]
fn headless_default_lets_everything_through_but_a_deny_and_an_ask_rule_denies() {
    let replies = request(
        vec![
            bash("touch ../ran.txt"),
            bash("ls && rm calc.sh"),
            bash("git push origin main"),
            write("new.txt"),
        ],
        "done",
    );
    let world = World::scripted_with(
        "perm-headless",
        &replies,
        true,
        "[permissions]\nask = [\"Bash(git push *)\"]\n",
    );
    // Claude Code's own file, in its own syntax.
    let claude = world.home.join(".claude/settings.json");
    std::fs::create_dir_all(claude.parent().unwrap()).unwrap();
    std::fs::write(&claude, json!({"permissions": {"deny": ["Bash(rm:*)"]}}).to_string()).unwrap();

    let out = world.aerix(&["-p", "Go."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(world.home.join("ran.txt").exists(), "no rule allows it, and headless lets it run");
    assert!(world.repo.join("calc.sh").exists(), "the deny matched a part of the line");
    assert!(world.repo.join("new.txt").exists());
    let bash = results(&world, "bash");
    assert_eq!(
        bash[1],
        ("error: denied by permission rule Bash(rm:*)".to_owned(), true),
        "the model reads the rule as written"
    );
    assert_eq!(
        bash[2].0,
        "error: denied by permission rule Bash(git push *) (an ask rule): a headless run cannot ask"
    );
    // The hooks' input names the mode.
    assert_eq!(of_type(&world.events(), "session.end")[0]["outcome"], "done");
}

#[test]
fn headless_plan_mode_from_the_settings_reads_and_denies_edits_and_commands() {
    let mut replies = request(
        vec![
            call("read", json!({"path": "calc.sh"})),
            write("plan.txt"),
            call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"})),
            bash("touch ../ran.txt"),
            bash("git status"),
        ],
        "planned",
    );
    // The second run: `--permission-mode default` wins over the settings' `plan`.
    replies.extend(request(vec![write("plan.txt")], "written"));
    let settings = "[permissions]\ndefault_mode = \"plan\"\nallow = [\"Bash(git status)\"]\n";
    let world = World::scripted_with("perm-plan", &replies, true, settings);

    let out = world.aerix(&["-p", "Plan."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!world.repo.join("plan.txt").exists() && !world.home.join("ran.txt").exists());
    assert!(!results(&world, "read")[0].1, "reads run");
    // Denied for what plan mode is, not only because a headless run cannot ask.
    let write = &results(&world, "write")[0];
    assert_eq!(
        write,
        &(
            "error: denied by permission mode plan: write changes a file, and plan mode changes \
             none"
                .to_owned(),
            true
        )
    );
    let edit = &results(&world, "edit")[0];
    assert!(edit.0.starts_with("error: denied by permission mode plan:"), "{edit:?}");
    let bash = results(&world, "bash");
    assert!(
        bash[0].0.starts_with("error: denied by permission mode plan:")
            && bash[0].0.ends_with("a headless run cannot ask"),
        "{bash:?}"
    );
    assert!(!bash[1].1, "an allow rule runs a command in plan mode: {bash:?}");

    let out = world.aerix(&["-p", "Write.", "--permission-mode", "default"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(world.repo.join("plan.txt").exists(), "the flag wins over default_mode");
}

#[test]
fn headless_accept_edits_bypass_and_dont_ask_each_as_documented() {
    let mut replies = request(vec![write("a.txt"), bash("touch ../accept.txt")], "accepted");
    replies.extend(request(vec![bash("touch ../bypass.txt"), bash("rm -f calc.sh")], "bypassed"));
    replies.extend(request(vec![bash("touch ../dont.txt"), bash("git status")], "refused"));
    let settings = "[permissions]\ndeny = [\"Bash(rm:*)\"]\nallow = [\"Bash(git status)\"]\n";
    let world = World::scripted_with("perm-modes", &replies, true, settings);

    let out = world.aerix(&["-p", "Edit.", "--permission-mode", "acceptEdits"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(world.repo.join("a.txt").exists() && world.home.join("accept.txt").exists());

    let out = world.aerix(&["-p", "All.", "--permission-mode", "bypassPermissions"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(world.home.join("bypass.txt").exists());
    assert!(world.repo.join("calc.sh").exists(), "a deny holds in bypassPermissions");
    assert_eq!(results(&world, "bash")[1].0, "error: denied by permission rule Bash(rm:*)");

    let out = world.aerix(&["-p", "Ask.", "--permission-mode", "dontAsk"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!world.home.join("dont.txt").exists());
    let bash = results(&world, "bash");
    assert!(bash[0].0.starts_with("error: denied by permission mode dontAsk:"), "{bash:?}");
    assert!(!bash[1].1, "what a rule allows runs: {bash:?}");

    let out = world.aerix(&["-p", "x", "--permission-mode", "yolo"]);
    assert_eq!(out.status.code(), Some(64), "a usage error: {}", stderr(&out));
    assert!(stderr(&out).contains("`yolo` is not a permission mode"), "{}", stderr(&out));
}

#[test]
fn a_definitions_bash_pattern_allows_git_diff_and_denies_rm() {
    let root = calls(
        "Delegate the review.",
        vec![call(
            "agent",
            json!({"brief": "Review the diff.", "check": "git diff", "definition": "reviewer"}),
        )],
    );
    let replies = vec![
        "edit".to_owned(),
        root,
        calls("Look.", vec![bash("git diff --stat")]),
        calls("Clean up.", vec![bash("rm calc.sh")]),
        calls("Sneak.", vec![bash("git diff && rm calc.sh")]),
        final_turn("Reviewed.", "nothing to say"),
        json!({"thought": "Checked.", "final": {"reason": "ok", "verdict": "pass"}}).to_string(),
        final_turn("Delegated.", "reviewed"),
    ];
    let world =
        World::scripted_with("perm-definition", &replies, true, "[delegation]\nparallel = 1\n");
    world.write(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews diffs.\ntools: Read, Bash(git diff:*)\n---\nReview.\n",
    );
    let out = world.aerix(&["-p", "Review."]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("not enforced"), "no note: the pattern is enforced\n{err}");
    assert!(world.repo.join("calc.sh").exists());
    let bash: Vec<(String, String)> = of_type(&world.events(), "message")
        .into_iter()
        .filter(|m| m["role"] == "tool" && m["tool"] == "bash")
        .map(|m| (m["agent"].as_str().unwrap().to_owned(), m["text"].as_str().unwrap().to_owned()))
        .collect();
    let denied = "error: denied by the agent definition `reviewer`: it may call bash only as \
                  Bash(git diff:*)";
    assert_eq!(bash[0].0, "a1.c1");
    assert!(!bash[0].1.starts_with("error:"), "git diff runs: {bash:?}");
    assert_eq!(bash[1], ("a1.c1".to_owned(), denied.to_owned()));
    assert_eq!(bash[2].1, denied, "a part of the line that does not match is enough");
}

/// The project's store of "always" answers, once it exists.
fn store(world: &World) -> Option<PathBuf> {
    let dir = world.home.join("data/aerix/permissions");
    std::fs::read_dir(dir).ok()?.next()?.ok().map(|e| e.path())
}

#[test]
fn the_screen_asks_allow_once_always_for_this_project_and_deny() {
    let mut replies = request(
        vec![bash("touch ../once.txt"), bash("touch ../always.txt"), bash("touch ../denied.txt")],
        "asked three times",
    );
    // The next start: the kept answer runs without asking; the once-answer asks again.
    replies.extend(request(vec![bash("touch ../always.txt"), bash("touch ../once.txt")], "second"));
    let world = World::scripted("perm-screen", &replies, true);
    let pane = Pane::open(&world, "perm-screen", "true");
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Go.");
    let asked = pane.wait_for("allows touch ../once.txt", STEP);
    assert!(
        asked.contains("allow this call?") && asked.contains("a always, in this project"),
        "{asked}"
    );
    pane.keys(&["y"]);
    pane.wait_for("allows touch ../always.txt", STEP);
    assert!(world.home.join("once.txt").exists());
    pane.keys(&["a"]);
    pane.wait_for("allows touch ../denied.txt", STEP);
    assert!(world.home.join("always.txt").exists());
    pane.keys(&["n"]);
    pane.wait_for("asked three times", STEP);
    pane.keys(&["C-d"]);
    exited(&pane);
    assert!(!world.home.join("denied.txt").exists());
    let denied = &results(&world, "bash")[2];
    assert!(denied.1 && denied.0.starts_with("error: denied by the user"), "{denied:?}");
    // Kept per user, never in the repository.
    let kept = store(&world).expect("the answers file");
    assert!(kept.starts_with(world.home.join("data")), "{}", kept.display());
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    assert_eq!(value, json!({"permissions": {"allow": ["Bash(touch ../always.txt)"]}}));
    assert!(!world.repo.join(".claude").exists() && !world.repo.join(".aerix").exists());

    std::fs::remove_file(world.home.join("always.txt")).unwrap();
    let pane = Pane::open(&world, "perm-screen-next", "true");
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Again.");
    let asked = pane.wait_for("allows touch ../once.txt", STEP);
    assert!(!asked.contains("allows touch ../always.txt"), "{asked}");
    assert!(world.home.join("always.txt").exists(), "the kept answer ran it without asking");
    pane.keys(&["n"]);
    pane.wait_for("second", STEP);
    pane.keys(&["C-d"]);
    exited(&pane);
}

#[test]
fn the_screen_in_accept_edits_plan_and_bypass_permissions() {
    let mut replies = request(vec![write("notes.txt"), bash("touch ../cmd.txt")], "accepted");
    replies.extend(request(
        vec![write("plan.txt"), call("read", json!({"path": "calc.sh"}))],
        "planned",
    ));
    replies.extend(request(vec![bash("touch ../bypass.txt"), bash("rm calc.sh")], "bypassed"));
    let world = World::scripted_with(
        "perm-screen-modes",
        &replies,
        true,
        "[permissions]\ndeny = [\"Bash(rm:*)\"]\n",
    );
    let open = |name: &str, mode: &'static str| {
        Pane::start(&world, name, "true", &move |aerix| {
            format!("exec '{aerix}' --permission-mode {mode}")
        })
    };

    // acceptEdits: the edit passes without asking, the command asks.
    let pane = open("perm-accept", "acceptEdits");
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Edit.");
    pane.wait_for("allows touch ../cmd.txt", STEP);
    assert!(world.repo.join("notes.txt").exists(), "written before any prompt");
    pane.keys(&["y"]);
    pane.wait_for("accepted", STEP);
    pane.keys(&["C-d"]);
    exited(&pane);
    assert!(world.home.join("cmd.txt").exists());

    // plan: the write is denied without asking, the read runs.
    let pane = open("perm-plan", "plan");
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Plan.");
    let text = pane.wait_for("planned", STEP);
    assert!(!text.contains("allow this call?"), "{text}");
    pane.keys(&["C-d"]);
    exited(&pane);
    assert!(!world.repo.join("plan.txt").exists());
    let write = &results(&world, "write")[0];
    assert!(write.0.starts_with("error: denied by permission mode plan:"), "{write:?}");
    assert!(!results(&world, "read")[0].1);

    // bypassPermissions: the command runs without asking; the deny still holds.
    let pane = open("perm-bypass", "bypassPermissions");
    pane.wait_for("ready in", STARTUP);
    pane.type_line("All.");
    let text = pane.wait_for("bypassed", STEP);
    assert!(!text.contains("allow this call?"), "{text}");
    pane.keys(&["C-d"]);
    exited(&pane);
    assert!(world.home.join("bypass.txt").exists() && world.repo.join("calc.sh").exists());
    assert_eq!(results(&world, "bash")[1].0, "error: denied by permission rule Bash(rm:*)");
}

/// Two pieces running together each ask: the screen shows one gate at a time, and each answer
/// reaches the piece that asked (a second gate never takes the first one's place).
#[test]
fn pieces_asking_together_are_asked_one_at_a_time() {
    let root = calls(
        "Two pieces.",
        vec![
            call("agent", json!({"brief": "Touch one.", "check": "true"})),
            call("agent", json!({"brief": "Touch another.", "check": "true"})),
        ],
    );
    let touch = calls("Touch.", vec![bash("touch ../piece-$PPID.txt")]);
    let verdict = json!({"thought": "Checked.", "final": {"reason": "ok", "verdict": "pass"}});
    let replies = vec![
        "edit".to_owned(),
        root,
        touch.clone(),
        touch,
        final_turn("Touched.", "one"),
        verdict.to_string(),
        final_turn("Touched.", "two"),
        verdict.to_string(),
        final_turn("Delegated.", "both pieces ran"),
    ];
    let world = World::scripted_with("perm-pieces", &replies, true, "[delegation]\nparallel = 2\n");
    let pane = Pane::open(&world, "perm-pieces", "true");
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Go.");
    pane.wait_for("allows touch ../piece-$PPID.txt", STEP);
    pane.keys(&["y"]);
    // The second gate is answered once the first piece has been verified, so the scripted
    // replies go to the agents they were written for.
    let verified = || {
        let events = world.events();
        let ended = of_type(&events, "agent.end");
        ended.iter().any(|e| e["agent"].as_str().is_some_and(|a| a.ends_with(".v1")))
    };
    let deadline = std::time::Instant::now() + STEP;
    while !verified() {
        assert!(std::time::Instant::now() < deadline, "no piece was verified:\n{}", pane.text());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    pane.wait_for("allows touch ../piece-$PPID.txt", STEP);
    pane.keys(&["y"]);
    pane.wait_for("both pieces ran", STEP);
    pane.keys(&["C-d"]);
    exited(&pane);
    let touched: Vec<(String, String)> = of_type(&world.events(), "message")
        .into_iter()
        .filter(|m| m["role"] == "tool" && m["tool"] == "bash")
        .map(|m| (m["agent"].as_str().unwrap().to_owned(), m["text"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(touched.len(), 2, "{touched:?}");
    assert!(touched.iter().all(|(_, text)| !text.starts_with("error:")), "{touched:?}");
}
