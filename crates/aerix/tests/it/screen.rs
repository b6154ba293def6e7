//! The interactive screen end to end: the real `aerix` in a tmux pane (send-keys,
//! capture-pane) on a scripted member, whole requests from launch to Ctrl-D.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{World, call, calls, final_turn, of_type};

/// Waits until the pane is gone (Ctrl-D exited).
pub fn exited(pane: &Pane) {
    let deadline = Instant::now() + STEP;
    while !pane.closed() {
        assert!(Instant::now() < deadline, "Ctrl-D did not exit:\n{}", pane.text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Settings allowing every command and edit, so the screen asks before none.
pub const ALLOW: &str = "[permissions]\nallow = [\"Bash\", \"Edit\"]\n";

/// The first frame waits for the pool to start and load.
pub const STARTUP: Duration = Duration::from_secs(120);
pub const STEP: Duration = Duration::from_secs(20);

pub struct Pane {
    pub name: String,
}

impl Pane {
    /// `aerix` in a 100 × 30 pane, in the world's repository and home.
    pub fn open(world: &World, name: &str, editor: &str) -> Pane {
        Pane::start(world, name, editor, &|aerix| format!("exec '{aerix}'"))
    }

    /// As `open`, the script's last line `run(aerix)` (the pane lives while it runs).
    pub fn start(world: &World, name: &str, editor: &str, run: &dyn Fn(&str) -> String) -> Pane {
        let mut script = String::from("#!/bin/sh\n");
        let command = world.aerix_command(&[]);
        for (key, value) in command.get_envs() {
            let key = key.to_string_lossy();
            match value {
                Some(value) => {
                    script.push_str(&format!("export {key}='{}'\n", value.to_string_lossy()))
                }
                None => script.push_str(&format!("unset {key}\n")),
            }
        }
        script.push_str(&format!(
            "unset NO_COLOR VISUAL\nexport TERM=xterm-256color EDITOR='{editor}'\n"
        ));
        script.push_str(&format!("cd '{}'\n", world.repo.display()));
        script.push_str(&run(&command.get_program().to_string_lossy()));
        script.push('\n');
        let path = world.home.join("screen.sh");
        std::fs::write(&path, script).unwrap();
        let name = format!("aerix-{name}-{}", std::process::id());
        tmux(&[
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "100",
            "-y",
            "30",
            "sh",
            &path.display().to_string(),
        ]);
        Pane { name }
    }

    pub fn text(&self) -> String {
        let out =
            Command::new("tmux").args(["capture-pane", "-p", "-t", &self.name]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the pane shows `what`; the pane's text then.
    pub fn wait_for(&self, what: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text();
            if text.contains(what) {
                return text;
            }
            assert!(Instant::now() < deadline, "the screen never showed {what:?}:\n{text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.name.as_str()];
        args.extend_from_slice(keys);
        tmux(&args);
    }

    pub fn type_line(&self, text: &str) {
        tmux(&["send-keys", "-t", &self.name, "-l", text]);
        self.keys(&["Enter"]);
    }

    /// The pid of the pane's shell's child (the `aerix` it runs).
    pub fn child(&self) -> u32 {
        let out = Command::new("tmux")
            .args(["display", "-p", "-t", &self.name, "#{pane_pid}"])
            .output()
            .unwrap();
        let shell = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let children = format!("/proc/{shell}/task/{shell}/children");
        let deadline = Instant::now() + STEP;
        loop {
            let text = std::fs::read_to_string(&children).unwrap_or_default();
            if let Some(pid) = text.split_whitespace().next() {
                return pid.parse().unwrap();
            }
            assert!(Instant::now() < deadline, "the pane's shell runs no aerix");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn closed(&self) -> bool {
        !Command::new("tmux").args(["has-session", "-t", &self.name]).status().unwrap().success()
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.name]).status();
    }
}

fn tmux(args: &[&str]) {
    let status = Command::new("tmux").args(args).status().unwrap();
    assert!(status.success(), "tmux {args:?}");
}

fn wait_file(path: &Path, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn whole_requests_on_the_screen() {
    let replies = vec![
        // The first request: a plan (gated), a check that takes a moment, an edit, the answer.
        "answer".to_owned(),
        calls("Plan it.", vec![call("plan", json!({"op": "write", "text": "1. fix add"}))]),
        calls("Check.", vec![call("bash", json!({"command": "touch ../slow.started; sleep 2"}))]),
        calls(
            "Fix.",
            vec![call("edit", json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"}))],
        ),
        final_turn("Done.", "add now adds"),
        // The second, queued while the first ran: a command cancelled with Esc.
        "answer".to_owned(),
        calls("Wait.", vec![call("bash", json!({"command": "touch ../long.started; sleep 30"}))]),
    ];
    // The screen asks before a command or an edit no rule allows: these are allowed.
    let world = World::scripted_with("screen", &replies, true, ALLOW);
    let pane = Pane::open(&world, "screen", "true");
    pane.wait_for("ready in", STARTUP);
    let launch = pane.text();
    assert!(launch.contains("? help"), "{launch}");
    // The session's profile is attached as `aerix -p` attaches it: the project's, on its
    // model base, nothing tuned yet.
    // (The row may wrap: read the block as one line of words.)
    let flat = launch.split_whitespace().collect::<Vec<_>>().join(" ");
    let row = flat.split("profile ").nth(1).and_then(|r| r.split(" loaded ").next());
    let row = row.and_then(|r| r.split(" session ").next()).unwrap_or_default().to_owned();
    assert!(row.contains(" · model/") && row.ends_with(" · 0 tuned"), "{row}\n{launch}");
    // The main member's lane, from the pool, in the info line and the pool row (a scripted
    // member runs no engine threads, so the row names none).
    let info = launch.lines().find(|l| l.contains(" ctx · ")).unwrap_or_default();
    assert!(info.contains(" · cpu · "), "{info}\n{launch}");
    let pool_row = flat.split(" pool ").nth(1).and_then(|r| r.split(" profile ").next());
    assert!(pool_row.is_some_and(|r| r.contains(" · cpu · ") && !r.contains("threads")), "{flat}");

    pane.type_line("Fix add.");
    let gate = pane.wait_for("wants to follow this plan", STEP);
    assert!(gate.contains("1. fix add"), "{gate}");
    pane.keys(&["Enter"]);
    wait_file(&world.home.join("slow.started"), STEP);
    pane.type_line("Then wait.");
    pane.wait_for("1 queued", STEP);

    // The second starts by itself once the first has ended. The diff line is the session's
    // (against the tree it started on): the cancelled request keeps the first's edit in it.
    pane.wait_for("add now adds", STEP);
    wait_file(&world.home.join("long.started"), STEP);
    pane.keys(&["Escape"]);
    let cancelled = pane.wait_for("▲ cancelled", STEP);
    assert!(cancelled.contains("diff +1 −1 in 1 file"), "{cancelled}");

    pane.keys(&["?"]);
    pane.wait_for("/<skill> args", STEP);
    pane.keys(&["Escape"]);
    pane.keys(&["C-d"]);
    exited(&pane);

    // The log: two requests, the plan saved as accepted, the second cancelled; git agrees
    // with the diff line.
    let events = world.events();
    let ends: Vec<&str> =
        of_type(&events, "session.end").iter().map(|e| e["outcome"].as_str().unwrap()).collect();
    assert_eq!(ends, ["done", "cancelled"]);
    let starts = of_type(&events, "session.start");
    assert_eq!(
        (starts[0]["resumed"].as_bool(), starts[1]["resumed"].as_bool()),
        (Some(false), Some(true))
    );
    // Both requests read the one commit the startup row shows.
    let commit = starts[0]["profile_commit"].as_str().unwrap();
    assert!(row.contains(&commit[..10]), "{row} / {commit}");
    assert_eq!(starts[1]["profile_commit"], starts[0]["profile_commit"]);
    // Each records the commit its diff line is taken against (the first: the clean tree's
    // HEAD; the second: the tree with the first's edit, its checkpoint below).
    let head = world.git(&["rev-parse", "HEAD"]);
    assert_eq!(starts[0]["start_commit"].as_str(), Some(head.trim()));
    assert!(starts[0]["profile_branch"].as_str().unwrap().starts_with("model/"));
    assert_eq!(of_type(&events, "plan")[0]["text"], "1. fix add");
    assert_eq!(world.git(&["diff", "--numstat"]), "1\t1\tcalc.sh\n");
    // A checkpoint before each request: the first at HEAD, the second with the first's edit;
    // `aerix rewind` takes the screen's session back to before the first.
    let kept: Vec<(u64, &str)> = of_type(&events, "session.checkpoint")
        .iter()
        .map(|c| (c["request"].as_u64().unwrap(), c["commit"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!((kept.len(), kept[0]), (2, (1, head.trim())), "{kept:?}");
    assert_eq!(kept[1].0, 2);
    assert_eq!(starts[1]["start_commit"].as_str(), Some(kept[1].1));
    let second = world.git(&["show", &format!("{}:calc.sh", kept[1].1)]);
    assert!(second.contains("$1 + $2"), "{second}");
    let out = world.aerix(&["rewind", "--to", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::stderr(&out));
    assert_eq!(world.git(&["diff", "--numstat"]), "", "calc.sh as before the first request");
}

#[test]
fn a_second_request_runs_on_the_live_root_not_on_the_log_read_back() {
    let replies = vec![
        "answer".to_owned(),
        final_turn("First.", "the first answer"),
        "answer".to_owned(),
        calls("Where am I?", vec![call("context", json!({"op": "status"}))]),
        final_turn("Second.", "the second answer"),
    ];
    let world = World::scripted_with("screen-live", &replies, true, ALLOW);
    let pane = Pane::open(&world, "screen-live", "true");
    pane.wait_for("ready in", STARTUP);
    pane.type_line("One.");
    pane.wait_for("the first answer", STEP);
    // A line no rebuild could read: were the root read back from the log, the second request
    // would fail naming it.
    let mut log = std::fs::OpenOptions::new().append(true).open(world.log_path()).unwrap();
    let memo = json!({"type": "segment", "agent": "a1", "op": "append", "id": "x1",
                      "role": "user", "label": "memo", "text": "?"});
    std::io::Write::write_all(&mut log, format!("{memo}\n").as_bytes()).unwrap();
    drop(log);
    pane.type_line("Two.");
    pane.wait_for("the second answer", STEP);
    pane.keys(&["C-d"]);
    exited(&pane);
    let events = world.events();
    let ends: Vec<&str> =
        of_type(&events, "session.end").iter().map(|e| e["outcome"].as_str().unwrap()).collect();
    assert_eq!(ends, ["done", "done"]);
    // The second request's root holds the first's exchange, as the model's status shows it.
    let status = crate::last_result(&events, "context");
    for line in ["\np1  prompt  ", "\nt1  turn  ", "\np2  prompt  "] {
        assert!(status.contains(line), "{line:?} is not in:\n{status}");
    }
    assert!(!status.contains("x1"), "{status}");
    // Turns and calls go on from the first request's.
    let turns: Vec<u64> = of_type(&events, "message")
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["turn"].as_u64())
        .collect();
    assert_eq!(turns, [1, 2, 3]);
}

#[test]
fn the_plan_edited_in_the_editor_and_a_hooks_ask_answered() {
    let replies = vec![
        "answer".to_owned(),
        calls("Plan it.", vec![call("plan", json!({"op": "write", "text": "1. draft"}))]),
        calls("Allowed?", vec![call("bash", json!({"command": "echo yes > ../allowed.txt"}))]),
        calls("Denied?", vec![call("bash", json!({"command": "echo no > ../denied.txt"}))]),
        final_turn("Done.", "asked twice"),
    ];
    let world = World::scripted_with("screen-gates", &replies, true, ALLOW);
    let ask = r#"cat > /dev/null; echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}'"#;
    let hooks = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": ask}]}]}});
    let path = world.home.join("config/aerix/hooks.json");
    std::fs::write(&path, hooks.to_string()).unwrap();
    let editor = world.home.join("edit-plan.sh");
    std::fs::write(&editor, "#!/bin/sh\nprintf '1. edited\\n' > \"$1\"\n").unwrap();
    let mut mode = std::fs::metadata(&editor).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&editor, mode).unwrap();
    let pane = Pane::open(&world, "gates", &editor.display().to_string());
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Plan, then ask.");
    pane.wait_for("wants to follow this plan", STEP);
    pane.keys(&["e"]);
    let asked = pane.wait_for("allow this call?", STEP);
    assert!(asked.contains("a PreToolUse hook asks: sure?"), "{asked}");
    pane.keys(&["y"]);
    wait_file(&world.home.join("allowed.txt"), STEP);
    pane.wait_for("denied.txt", STEP);
    pane.keys(&["n"]);
    pane.wait_for("asked twice", STEP);
    pane.keys(&["C-d"]);
    exited(&pane);

    let events = world.events();
    assert_eq!(of_type(&events, "plan")[0]["text"], "1. edited\n");
    assert!(!world.home.join("denied.txt").exists());
    let results: Vec<&str> = of_type(&events, "message")
        .into_iter()
        .filter(|m| m["tool"] == "bash")
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        results[1],
        "refused: the user denied the call a PreToolUse hook asked about: sure?"
    );
}

/// SIGTERM mid-request and SIGHUP at the prompt: the terminal is given back (cooked mode, no
/// alternate screen), the session ends as Ctrl-D ends it (with `SessionEnd`'s `cancelled`),
/// and the statuses are 143 and 129. Meanwhile a hook's stderr is a note row, and a write to
/// aerix's own fd 2 goes to the session's `<id>.stderr`, never onto the frame.
#[test]
fn signals_give_the_terminal_back_and_stray_stderr_never_reaches_the_screen() {
    let replies = vec![
        "answer".to_owned(),
        calls("Wait.", vec![call("bash", json!({"command": "touch ../long.started; sleep 30"}))]),
    ];
    let world = World::scripted_with("screen-signals", &replies, true, ALLOW);
    // The hook writes to its own stderr (captured) and to aerix's (the `sh -c` that runs it
    // expands `$PPID` to aerix's pid).
    let bin = world.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = "#!/bin/sh\necho stray-write >/proc/$1/fd/2\necho hook-said >&2\nexit 1\n";
    std::fs::write(bin.join("noisy"), script).unwrap();
    let mut mode = std::fs::metadata(bin.join("noisy")).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(bin.join("noisy"), mode).unwrap();
    let noisy = "noisy $PPID";
    let record = "cat >> ../ends.jsonl; echo >> ../ends.jsonl";
    let handler = |command: &str| json!([{"hooks": [{"type": "command", "command": command}]}]);
    let hooks =
        json!({"hooks": {"UserPromptSubmit": handler(noisy), "SessionEnd": handler(record)}});
    std::fs::write(world.home.join("config/aerix/hooks.json"), hooks.to_string()).unwrap();
    let pane = Pane::start(&world, "signals", "true", &|aerix| {
        format!(
            "'{aerix}'; echo \"aerix exited $?\"; read _; '{aerix}'; echo \"aerix exited $?\"; \
             stty -a; exec sleep 60"
        )
    });
    pane.wait_for("ready in", STARTUP);
    pane.type_line("Wait.");
    wait_file(&world.home.join("long.started"), STEP);
    let running = pane.wait_for("hook-said", STEP);
    let note = running.lines().find(|l| l.contains("hook-said")).unwrap_or_default();
    assert!(
        note.trim_start().starts_with("▲") && note.contains("exited 1: hook-said"),
        "{running}"
    );
    assert!(!running.contains("stray-write"), "{running}");
    let kill = |signal: &str, pid: u32| {
        assert!(Command::new("kill").args([signal, &pid.to_string()]).status().unwrap().success());
    };
    kill("-TERM", pane.child());
    pane.wait_for("aerix exited 143", STEP);
    let log = world.log_path();
    let events = world.events();
    let end = of_type(&events, "session.end");
    assert_eq!(
        (end.len(), &end[0]["outcome"], &end[0]["exit_code"]),
        (1, &json!("cancelled"), &json!(143))
    );
    let stray = std::fs::read_to_string(log.with_extension("stderr")).unwrap();
    assert!(stray.contains("stray-write"), "{stray:?}");

    // The second screen, idle at its prompt.
    pane.keys(&["Enter"]);
    let second = pane.child();
    let deadline = Instant::now() + STARTUP;
    loop {
        let text = pane.text();
        if text.contains("ready in") && !text.contains("aerix exited 143") {
            break;
        }
        assert!(Instant::now() < deadline, "the second screen never opened:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
    kill("-HUP", second);
    pane.wait_for("aerix exited 129", STEP);
    let after = pane.wait_for("min = ", STEP);
    let words: Vec<&str> = after.split_whitespace().collect();
    assert!(words.contains(&"icanon") && words.contains(&"echo"), "{after}");
    assert!(!words.contains(&"-icanon") && !words.contains(&"-echo"), "{after}");
    let out = Command::new("tmux")
        .args(["display", "-p", "-t", &pane.name, "#{alternate_on}"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "the alternate screen is left");
    let ends = std::fs::read_to_string(world.home.join("ends.jsonl")).unwrap();
    let reasons: Vec<String> = ends
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["reason"].to_string())
        .collect();
    assert_eq!(reasons, [r#""cancelled""#, r#""cancelled""#], "{ends}");
}

/// A screen whose startup failed (the pool cannot start) shows the error row and closes on
/// SIGHUP as at its prompt: exit 129, the error printed once the terminal is back.
#[test]
fn a_screen_whose_startup_failed_closes_on_a_signal() {
    let world = World::scripted("screen-startup-failed", &["answer".to_owned()], true);
    let path = world.home.join("config/aerix/settings.toml");
    let settings = std::fs::read_to_string(&path).unwrap();
    let caldrix = crate::caldrix().display().to_string();
    assert!(settings.contains(&caldrix), "{settings}");
    std::fs::write(&path, settings.replace(&caldrix, "/nonexistent/caldrix")).unwrap();
    let pane = Pane::start(&world, "startup-failed", "true", &|aerix| {
        format!("'{aerix}' 2>../stderr.txt; echo \"aerix exited $?\"; exec sleep 60")
    });
    pane.wait_for("cannot start the pool", STARTUP);
    Command::new("kill").args(["-HUP", &pane.child().to_string()]).status().unwrap();
    pane.wait_for("aerix exited 129", STEP);
    let stderr = std::fs::read_to_string(world.home.join("stderr.txt")).unwrap();
    assert!(stderr.contains("cannot start the pool"), "{stderr}");
}
