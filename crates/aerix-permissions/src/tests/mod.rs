//! The examples of Claude Code's permission documentation, each rule with calls it matches and
//! calls it does not, and every mode on both fronts.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::*;

mod breaks;
mod corpus;

const CWD: &str = "/proj";

fn anchors() -> Anchors {
    Anchors {
        source: PathBuf::from(CWD),
        cwd: PathBuf::from(CWD),
        home: Some(PathBuf::from("/home/alice")),
    }
}

fn rules(kind: Kind, texts: &[&str]) -> Vec<Rule> {
    texts.iter().map(|t| Rule::parse(t, kind, &anchors()).unwrap()).collect()
}

fn loaded(deny: &[&str], ask: &[&str], allow: &[&str]) -> Loaded {
    Loaded {
        deny: rules(Kind::Deny, deny),
        ask: rules(Kind::Ask, ask),
        allow: rules(Kind::Allow, allow),
        default_mode: None,
        additional_directories: Vec::new(),
        notes: Vec::new(),
        cwd: PathBuf::from(CWD),
        root: PathBuf::from(CWD),
        home: Some(PathBuf::from("/home/alice")),
        store: None,
    }
}

fn screen(deny: &[&str], ask: &[&str], allow: &[&str]) -> Permissions {
    Permissions::new(loaded(deny, ask, allow), None, Front::Screen)
}

fn bash(command: &str) -> (&'static str, Value) {
    ("bash", json!({ "command": command }))
}

fn file(tool: &'static str, path: &str) -> (&'static str, Value) {
    (tool, json!({ "path": path, "content": "x", "old": "a", "new": "b" }))
}

fn verdict(p: &Permissions, (tool, input): (&str, Value)) -> Verdict {
    p.check(tool, &input, &[])
}

fn allowed(p: &Permissions, call: (&str, Value)) -> bool {
    verdict(p, call) == Verdict::Allow
}

fn denied(p: &Permissions, call: (&str, Value)) -> Option<String> {
    match verdict(p, call) {
        Verdict::Deny(why) => Some(why),
        _ => None,
    }
}

fn asks(p: &Permissions, call: (&str, Value)) -> Option<String> {
    match verdict(p, call) {
        Verdict::Ask { reason, .. } => Some(reason),
        _ => None,
    }
}

#[test]
fn the_documented_wildcard_configuration() {
    // The documentation's example: npm and git commit allowed, git push blocked.
    let p = screen(
        &["Bash(git push *)"],
        &[],
        &[
            "Bash(npm run *)",
            "Bash(git commit *)",
            "Bash(git * main)",
            "Bash(* --version)",
            "Bash(* --help *)",
        ],
    );
    for command in ["npm run build", "git commit -m fix", "git checkout main", "node --version"] {
        assert!(allowed(&p, bash(command)), "{command}");
    }
    assert!(allowed(&p, bash("cargo --help build")));
    // `git * main` would allow it: the deny wins.
    assert_eq!(
        denied(&p, bash("git push origin main")).as_deref(),
        Some("denied by permission rule Bash(git push *)")
    );
    assert!(asks(&p, bash("rm -rf build")).is_some_and(|r| r.contains("rm -rf build")));
}

#[test]
fn deny_then_ask_then_allow_whatever_is_more_specific() {
    // A broad deny blocks what a narrower allow names.
    let p = screen(&["Bash(aws *)"], &[], &["Bash(aws s3 ls)"]);
    assert_eq!(
        denied(&p, bash("aws s3 ls")).as_deref(),
        Some("denied by permission rule Bash(aws *)")
    );
    // A matching ask rule asks even when a more specific allow rule matches.
    let p = screen(&[], &["Bash(git push *)"], &["Bash(git push origin dev)"]);
    let reason = asks(&p, bash("git push origin dev")).unwrap();
    assert!(reason.contains("permission rule Bash(git push *) asks"), "{reason}");
    // An ask rule offers no "always": it would ask again anyway.
    assert!(
        matches!(verdict(&p, bash("git push")), Verdict::Ask { always, .. } if always.is_empty())
    );
}

#[test]
fn an_allowed_prefix_does_not_allow_what_is_chained_piped_or_substituted() {
    let p = screen(&[], &[], &["Bash(git diff:*)"]);
    assert!(allowed(&p, bash("git diff")) && allowed(&p, bash("git diff --stat HEAD")));
    for line in [
        "git diff && rm -rf x",
        "git diff; rm x",
        "git diff | sh",
        "git diff || rm x",
        "git diff & rm x",
        "git diff\nrm x",
        "git diff $(rm x)",
        "git diff `rm x`",
        "git diff \"$(rm x)\"",
        "git diff <(rm x)",
        "git diff 'unclosed",
    ] {
        assert!(asks(&p, bash(line)).is_some(), "{line:?} must not be allowed");
    }
    // Each subcommand allowed on its own: the line is allowed.
    let p = screen(&[], &[], &["Bash(git status)", "Bash(npm test *)"]);
    assert!(allowed(&p, bash("git status && npm test -- --watch")));
    assert!(allowed(&p, bash("timeout 30 npm test")), "a wrapper is looked past");
    assert!(allowed(&p, bash("NODE_ENV=test npm test")), "a known-safe variable too");
    assert!(asks(&p, bash("FOO=bar npm test")).is_some(), "another variable is not");
}

#[test]
fn a_deny_matches_any_part_of_the_line() {
    let p = screen(&["Bash(rm:*)"], &[], &["Bash"]);
    for line in [
        "rm -rf x",
        "git diff && rm -rf x",
        "ls | rm x",
        "echo $(rm x)",
        "echo `rm x`",
        "FOO=bar rm -rf tmp/",
        "timeout 5 rm x",
        "sh -c 'rm x'",
        "bash -c \"ls; rm x\"",
        "eval rm x",
        "(cd /tmp && rm x)",
        "for f in a; do rm $f; done",
    ] {
        assert_eq!(
            denied(&p, bash(line)).as_deref(),
            Some("denied by permission rule Bash(rm:*)"),
            "{line:?}"
        );
    }
    assert!(allowed(&p, bash("rmdir x")), "`rm:*` holds a word boundary");
    assert!(allowed(&p, bash("echo 'rm x'")), "quoted text is no command");
}

#[test]
fn redirected_output_is_a_write_the_edit_rules_see() {
    let p = screen(&["Edit(/secrets/**)"], &[], &["Bash(git log *)"]);
    assert!(allowed(&p, bash("git log > /dev/null")));
    assert!(allowed(&p, bash("git log 2>&1")));
    let reason = asks(&p, bash("git log > out.txt")).unwrap();
    assert!(reason.contains("a write to out.txt"), "{reason}");
    assert_eq!(
        denied(&p, bash("git log > secrets/k")).as_deref(),
        Some("denied by permission rule Edit(/secrets/**)")
    );
    // A deny of every edit sees a command's writes too.
    let p = screen(&["Edit"], &[], &["Bash"]);
    assert_eq!(
        denied(&p, bash("echo x > notes.txt")).as_deref(),
        Some("denied by permission rule Edit")
    );
    assert!(allowed(&p, bash("echo x > /dev/null")));
    // An Edit allow rule lets the write through; acceptEdits does inside the tree.
    let p = screen(&[], &[], &["Bash(git log *)", "Edit(/logs/**)"]);
    assert!(allowed(&p, bash("git log > logs/today.txt")));
    let accept = Permissions::new(
        loaded(&[], &[], &["Bash(git log *)"]),
        Some(Mode::AcceptEdits),
        Front::Screen,
    );
    assert!(allowed(&accept, bash("git log > out.txt")));
    assert!(asks(&accept, bash("git log > /tmp/out.txt")).is_some());
    assert!(asks(&accept, bash("git log > ~/out.txt")).is_some(), "`~` is not followed");
}

#[test]
fn path_rules_from_the_documentation() {
    let p = screen(&["Read(./.env)", "Read(./secrets/**)"], &[], &["Edit(/docs/**)"]);
    assert_eq!(
        denied(&p, file("read", ".env")).as_deref(),
        Some("denied by permission rule Read(./.env)")
    );
    assert!(denied(&p, file("read", "/proj/secrets/a/key")).is_some());
    // A Read deny keeps edits off the path too, and reaches grep and glob.
    assert!(denied(&p, file("write", ".env")).is_some());
    assert!(denied(&p, file("edit", "./secrets/k")).is_some());
    assert!(denied(&p, ("grep", json!({"pattern": "x", "path": "secrets"}))).is_some());
    assert!(denied(&p, ("glob", json!({"pattern": "secrets/*"}))).is_some());
    // `Edit(/docs/**)`: edits in <project>/docs/ pass; elsewhere they ask.
    assert!(allowed(&p, file("write", "docs/guide.md")));
    assert!(allowed(&p, file("edit", "/proj/docs/a/b.md")));
    assert!(asks(&p, file("write", "src/main.rs")).is_some());
    assert!(asks(&p, file("write", "/docs/x.md")).is_some());
    // `..` does not get out of a rule's anchor.
    assert!(asks(&p, file("write", "docs/../src/x")).is_some());
    // Reads inside the working directories pass without a rule; outside they ask.
    assert!(allowed(&p, file("read", "src/main.rs")));
    assert!(asks(&p, file("read", "/etc/passwd")).is_some_and(|r| r.contains("outside")));
    let p = screen(&[], &[], &["Read(~/.zshrc)", "Edit(//tmp/scratch.txt)"]);
    assert!(allowed(&p, file("read", "/home/alice/.zshrc")));
    assert!(allowed(&p, file("write", "/tmp/scratch.txt")));
    assert!(asks(&p, file("write", "/tmp/other.txt")).is_some());
}

#[test]
fn a_symlink_is_checked_as_itself_and_as_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (cwd, home) = (root.join("work"), root.join("home"));
    std::fs::create_dir_all(cwd.join("project")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "key").unwrap();
    std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), cwd.join("project/key")).unwrap();
    std::fs::write(cwd.join("project/plain"), "x").unwrap();
    let anchors = Anchors { source: cwd.clone(), cwd: cwd.clone(), home: Some(home.clone()) };
    let parse = |kind, text: &str| vec![Rule::parse(text, kind, &anchors).unwrap()];
    let make = |deny: Vec<Rule>| {
        let mut l = loaded(&[], &[], &[]);
        l.deny = deny;
        l.allow = parse(Kind::Allow, "Read(./project/**)");
        (l.cwd, l.root, l.home) = (cwd.clone(), cwd.join("nowhere"), Some(home.clone()));
        Permissions::new(l, None, Front::Screen)
    };
    let input = |name: &str| json!({"path": cwd.join("project").join(name).display().to_string()});
    // The documentation's example: the target fails the allow rule and matches the deny.
    let p = make(parse(Kind::Deny, "Read(~/.ssh/**)"));
    assert!(matches!(p.check("read", &input("key"), &[]), Verdict::Deny(_)));
    assert_eq!(p.check("read", &input("plain"), &[]), Verdict::Allow);
    // Without the deny, an allow rule needs both paths: the symlink asks.
    let p = make(Vec::new());
    assert!(matches!(p.check("read", &input("key"), &[]), Verdict::Ask { .. }));

    // A working directory reached through a symlink is itself: reads in it need no rule.
    std::os::unix::fs::symlink(&cwd, root.join("link")).unwrap();
    let mut l = loaded(&[], &[], &[]);
    (l.cwd, l.root) = (root.join("link"), root.join("link"));
    let p = Permissions::new(l, None, Front::Screen);
    let inside = json!({"path": root.join("link/project/plain").display().to_string()});
    assert_eq!(p.check("read", &inside, &[]), Verdict::Allow);
}

#[test]
fn a_deny_rule_naming_an_mcp_tool_or_its_server_hides_it() {
    // One tool by name: that tool only.
    let p = screen(&["mcp__memory__memory_write_page"], &[], &[]);
    assert!(p.hides("mcp__memory__memory_write_page"));
    assert!(!p.hides("mcp__memory__memory_query"));
    // A whole server, in both of Claude Code's forms: its tools, no other server's (not one
    // whose name only starts with it).
    for server in ["mcp__github", "mcp__github__*"] {
        let p = screen(&[server], &[], &[]);
        assert!(p.hides("mcp__github__create_issue"), "{server}");
        assert!(p.hides("mcp__github__get_issue"), "{server}");
        assert!(!p.hides("mcp__github2__create_issue"), "{server}");
        assert!(!p.hides("mcp__slack__post"), "{server}");
    }
    let p = screen(&["mcp__github__get_*"], &[], &[]);
    assert!(p.hides("mcp__github__get_issue") && !p.hides("mcp__github__create_issue"));
    // Ask and allow rules hide nothing; nor does a deny rule hide a built-in tool (its rules
    // are checked per call, with their specifiers).
    let p = screen(&["Bash", "Read(./.env)"], &["mcp__slack__post"], &["mcp__github"]);
    assert!(!p.hides("mcp__slack__post") && !p.hides("mcp__github__create_issue"));
    assert!(!p.hides("bash") && !p.hides("read"));
    let p = screen(&["mcp__*"], &[], &[]);
    assert!(p.hides("mcp__slack__post") && !p.hides("bash"));
}

#[test]
fn mcp_and_agent_rules() {
    let p = screen(&["mcp__github", "Agent(Explore)"], &[], &["mcp__puppeteer__*"]);
    let call = |tool: &'static str| (tool, json!({}));
    assert!(denied(&p, call("mcp__github__create_issue")).is_some());
    assert!(allowed(&p, call("mcp__puppeteer__puppeteer_navigate")));
    assert!(asks(&p, call("mcp__slack__post")).is_some());
    let agent =
        |definition: &str| ("agent", json!({"brief": "b", "check": "c", "definition": definition}));
    assert_eq!(
        denied(&p, agent("Explore")).as_deref(),
        Some("denied by permission rule Agent(Explore)")
    );
    assert!(allowed(&p, agent("reviewer")));
    let p = screen(&["Bash(run_in_background:true)"], &[], &["Bash"]);
    assert!(denied(&p, ("bash", json!({"command": "sleep 9", "background": true}))).is_some());
    assert!(allowed(&p, ("bash", json!({"command": "sleep 9", "background": false}))));
}

/// The same calls in every mode, on the screen and headless.
#[test]
fn every_mode_on_both_fronts() {
    use Front::{Headless, Screen};
    #[derive(Debug, PartialEq)]
    enum V {
        Allow,
        Ask,
        Deny,
    }
    let calls: [(&str, (&'static str, Value)); 6] = [
        ("read inside", file("read", "src/a.rs")),
        ("read outside", file("read", "/etc/hosts")),
        ("write inside", file("write", "src/a.rs")),
        ("write outside", file("write", "/tmp/a.rs")),
        ("command", bash("cargo build")),
        ("file command", bash("mkdir -p src/new")),
    ];
    use V::{Allow as A, Ask as Q, Deny as D};
    let table: [(Mode, Front, [V; 6]); 10] = [
        (Mode::Default, Screen, [A, Q, Q, Q, Q, Q]),
        (Mode::Default, Headless, [A, A, A, A, A, A]),
        (Mode::AcceptEdits, Screen, [A, Q, A, Q, Q, A]),
        (Mode::AcceptEdits, Headless, [A, A, A, A, A, A]),
        (Mode::Plan, Screen, [A, Q, D, D, Q, Q]),
        (Mode::Plan, Headless, [A, A, D, D, D, D]),
        (Mode::BypassPermissions, Screen, [A, A, A, A, A, A]),
        (Mode::BypassPermissions, Headless, [A, A, A, A, A, A]),
        (Mode::DontAsk, Screen, [A, D, D, D, D, D]),
        (Mode::DontAsk, Headless, [A, D, D, D, D, D]),
    ];
    for (mode, front, expected) in table {
        let p = Permissions::new(loaded(&[], &[], &[]), Some(mode), front);
        for ((what, call), want) in calls.iter().zip(expected) {
            let got = match verdict(&p, call.clone()) {
                Verdict::Allow => V::Allow,
                Verdict::Ask { .. } => V::Ask,
                Verdict::Deny(why) => {
                    assert!(why.starts_with("denied by permission mode "), "{why}");
                    assert!(why.contains(mode.as_str()), "the mode is named: {why}");
                    V::Deny
                }
            };
            assert_eq!(got, want, "{mode} on {front:?}: {what}");
        }
    }
}

#[test]
fn deny_holds_in_every_mode_and_ask_rules_deny_headless() {
    for mode in Mode::NAMES.map(|m| m.parse::<Mode>().unwrap()) {
        for front in [Front::Screen, Front::Headless] {
            let p = Permissions::new(
                loaded(&["Bash(rm:*)"], &["Bash(git push *)"], &["Bash"]),
                Some(mode),
                front,
            );
            assert_eq!(
                denied(&p, bash("rm -rf /")).as_deref(),
                Some("denied by permission rule Bash(rm:*)"),
                "{mode} {front:?}"
            );
            let pushed = verdict(&p, bash("git push"));
            match (front, mode) {
                (Front::Screen, Mode::DontAsk) | (Front::Headless, _) => {
                    let Verdict::Deny(why) = pushed else { panic!("{mode} {front:?}: {pushed:?}") };
                    assert!(why.contains("Bash(git push *) (an ask rule)"), "{why}");
                }
                (Front::Screen, _) => assert!(matches!(pushed, Verdict::Ask { .. }), "{mode}"),
            }
        }
    }
    // The flag wins over the settings' default mode, which wins over `default`.
    let mut l = loaded(&[], &[], &[]);
    l.default_mode = Some(Mode::Plan);
    assert_eq!(Permissions::new(l, None, Front::Screen).mode(), Mode::Plan);
    let mut l = loaded(&[], &[], &[]);
    l.default_mode = Some(Mode::Plan);
    assert_eq!(
        Permissions::new(l, Some(Mode::AcceptEdits), Front::Screen).mode(),
        Mode::AcceptEdits
    );
}

#[test]
fn an_agent_definition_s_patterns_hold_its_agent_and_never_widen() {
    let p =
        Permissions::new(loaded(&["Bash(git diff --no-index*)"], &[], &[]), None, Front::Headless);
    let patterns = vec!["Bash(git diff:*)".to_owned()];
    let held = [Held { definition: "reviewer".into(), patterns }];
    let check = |line: &str| p.check("bash", &json!({ "command": line }), &held);
    assert_eq!(check("git diff"), Verdict::Allow);
    assert_eq!(check("git diff --stat"), Verdict::Allow);
    let Verdict::Deny(why) = check("rm calc.sh") else { panic!() };
    assert_eq!(
        why,
        "denied by the agent definition `reviewer`: it may call bash only as Bash(git diff:*)"
    );
    for line in ["git diff && rm x", "git diff | sh", "git diff $(rm x)", "git diff 'open"] {
        assert!(matches!(check(line), Verdict::Deny(_)), "{line}");
    }
    // Settings' deny rules still apply on top.
    assert!(
        matches!(check("git diff --no-index a b"), Verdict::Deny(w) if w.contains("permission rule"))
    );
    // Tools the patterns do not name are not held by them.
    assert_eq!(p.check("read", &json!({"path": "a"}), &held), Verdict::Allow);
    // A pattern that cannot be parsed still holds its tool, and allows nothing.
    let bad = vec!["Bash(:*)".to_owned()];
    let held = [Held { definition: "broken".into(), patterns: bad }];
    assert!(matches!(p.check("bash", &json!({"command": "ls"}), &held), Verdict::Deny(_)));
}

#[test]
fn always_keeps_one_rule_per_part_and_applies_now_and_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_path(dir.path(), "proj");
    let mut l = loaded(&[], &[], &["Bash(git status)"]);
    l.store = Some(store.clone());
    let p = Permissions::new(l, None, Front::Screen);
    let line = bash("git status && npm test");
    let Verdict::Ask { always, .. } = verdict(&p, line.clone()) else { panic!() };
    assert_eq!(always, ["Bash(npm test)"]);
    assert_eq!(p.remember(line.0, &line.1, &[]).unwrap(), ["Bash(npm test)"]);
    assert!(allowed(&p, line.clone()));
    // Stars are kept literal: the rule allows that command, not a pattern.
    let starred = bash("ls *.rs");
    assert_eq!(p.remember(starred.0, &starred.1, &[]).unwrap(), ["Bash(ls \\*.rs)"]);
    assert!(asks(&p, bash("ls x.rs")).is_some());
    let edit = file("write", "/tmp/out.txt");
    assert_eq!(p.remember(edit.0, &edit.1, &[]).unwrap(), ["Edit(//tmp/out.txt)"]);
    // The next start reads them back from the store, the user's own file.
    let sources = Sources {
        claude_user: None,
        claude_project: dir.path().join("none.json"),
        claude_local: dir.path().join("none.local.json"),
        aerix: &[],
        remembered: Some(store),
        cwd: PathBuf::from(CWD),
        root: PathBuf::from(CWD),
        home: None,
    };
    let next = Permissions::new(load(&sources, false), None, Front::Screen);
    assert!(allowed(&next, bash("npm test")));
    assert!(allowed(&next, file("write", "/tmp/out.txt")));
    assert!(asks(&next, bash("git status")).is_some(), "only what was answered");
}

/// A project with every kind of file, read untrusted and trusted.
fn project() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("repo");
    let home = dir.path().canonicalize().unwrap().join("home");
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    let project = json!({"permissions": {
        "allow": ["Bash(*)"],
        "deny": ["Bash(rm:*)", "Bash(curl"],
        "ask": ["Bash(git push *)"],
        "defaultMode": "bypassPermissions",
        "additionalDirectories": ["../docs"],
    }});
    std::fs::write(root.join(".claude/settings.json"), project.to_string()).unwrap();
    std::fs::write(root.join(".claude/settings.local.json"), "{not json").unwrap();
    let user = json!({"permissions": {"allow": ["Bash(npm test)"], "deny": ["Read(/secrets/**)"], "defaultMode": "yolo"}});
    std::fs::write(home.join(".claude/settings.json"), user.to_string()).unwrap();
    (dir, root, home)
}

fn sources<'a>(
    root: &Path,
    home: &Path,
    aerix: &'a [aerix_config::FilePermissions],
) -> Sources<'a> {
    Sources {
        claude_user: Some(home.join(".claude/settings.json")),
        claude_project: root.join(".claude/settings.json"),
        claude_local: root.join(".claude/settings.local.json"),
        aerix,
        remembered: None,
        cwd: root.to_owned(),
        root: root.to_owned(),
        home: Some(home.to_owned()),
    }
}

#[test]
fn an_untrusted_project_s_files_only_narrow() {
    let (_dir, root, home) = project();
    let mut table = aerix_config::PermissionSettings {
        allow: Vec::new(),
        ask: Vec::new(),
        deny: Vec::new(),
        default_mode: None,
        additional_directories: Vec::new(),
    };
    table.allow = vec!["Edit".to_owned()];
    table.deny = vec!["Bash(curl *)".to_owned()];
    let aerix = [aerix_config::FilePermissions {
        path: root.join(".aerix/settings.toml"),
        scope: aerix_config::SettingsScope::Project,
        table,
    }];
    let untrusted = load(&sources(&root, &home, &aerix), false);
    let notes = untrusted.notes.join("\n");
    let project_file = root.join(".claude/settings.json").display().to_string();
    // One note per part left out, naming the file.
    let left_out: Vec<&String> =
        untrusted.notes.iter().filter(|n| n.contains("not trusted")).collect();
    assert_eq!(left_out.len(), 4, "{notes}");
    assert!(
        notes.contains(&format!(
            "{project_file}: the project is not trusted, so its allow rules are ignored: `Bash(*)`"
        )),
        "{notes}"
    );
    assert!(notes.contains("its default mode `bypassPermissions` is ignored"), "{notes}");
    assert!(notes.contains("its additional directories are ignored: ../docs"), "{notes}");
    assert!(
        notes.contains(
            "settings.toml: the project is not trusted, so its allow rules are ignored: `Edit`"
        ),
        "{notes}"
    );
    // A bad rule is one note naming the file and the rule, and the file's others apply.
    assert!(
        notes.contains(&format!(
            "{project_file}: permissions.deny rule `Bash(curl` was skipped: malformed"
        )),
        "{notes}"
    );
    assert!(notes.contains("settings.local.json: not JSON"), "{notes}");
    assert!(
        notes.contains("permissions.defaultMode is skipped: `yolo` is not a permission mode"),
        "{notes}"
    );
    assert_eq!(untrusted.default_mode, None);
    assert!(untrusted.additional_directories.is_empty());
    // What it would widen is listed all the same, for the trust step to list and hash.
    let widening = read(&sources(&root, &home, &aerix)).widening();
    let widening: Vec<&str> = widening.iter().map(|(_, what)| what.as_str()).collect();
    for grant in [
        "permissions.allow = Bash(*)",
        "permissions.defaultMode = bypassPermissions",
        "permissions.additionalDirectories = ../docs",
        "permissions.allow = Edit",
    ] {
        assert!(widening.contains(&grant), "{grant}: {widening:?}");
    }
    let p = Permissions::new(untrusted, None, Front::Screen);
    assert_eq!(p.mode(), Mode::Default, "a cloned repository does not set bypassPermissions");
    assert!(asks(&p, bash("cargo build")).is_some(), "nor pre-approve Bash(*)");
    assert!(denied(&p, bash("rm -rf .")).is_some(), "its deny rules apply");
    assert!(denied(&p, bash("curl x")).is_some(), "aerix's project file's too");
    assert!(asks(&p, bash("git push")).is_some_and(|r| r.contains("asks")), "and its ask rules");
    assert!(allowed(&p, bash("npm test")), "the user's own allow rules apply");
    // The user's `/secrets/**` is anchored at ~/.claude, as Claude Code anchors it.
    assert!(
        denied(&p, file("read", &home.join(".claude/secrets/k").display().to_string())).is_some()
    );
    assert!(denied(&p, file("read", &root.join("secrets/k").display().to_string())).is_none());

    let trusted = load(&sources(&root, &home, &aerix), true);
    assert!(!trusted.notes.iter().any(|n| n.contains("not trusted")), "{:?}", trusted.notes);
    assert_eq!(trusted.default_mode, Some(Mode::BypassPermissions));
    assert_eq!(trusted.additional_directories, [root.parent().unwrap().join("docs")]);
    let p = Permissions::new(trusted, None, Front::Screen);
    assert!(allowed(&p, bash("cargo build")));
    assert!(denied(&p, bash("rm x")).is_some(), "deny still wins in bypassPermissions");
}

#[test]
fn a_skill_is_judged_by_the_read_rules_on_the_file_it_returns() {
    let p = screen(&["Read(~/.aws/**)"], &["Read(//secrets/**)"], &[]);
    let skill = |file: &str| ("skill", json!({"name": "creds", "file": file}));
    let denied_by = denied(&p, skill("/home/alice/.aws/credentials")).unwrap_or_default();
    assert!(denied_by.contains("Read(~/.aws/**)"), "{denied_by}");
    assert!(asks(&p, skill("/secrets/deploy/SKILL.md")).is_some());
    // Any other skill, and one whose file the runtime did not resolve, is aerix's own call.
    assert!(allowed(&p, skill("/home/alice/.claude/skills/fmt/SKILL.md")));
    assert!(allowed(&p, ("skill", json!({"name": "creds"}))));
}
