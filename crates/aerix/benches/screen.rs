//! The interactive screen's cost. In process: keystroke to frame (the key applied to the
//! `Screen`, the frame drawn and its escape sequences written) on a long transcript, idle and
//! while a request's events stream in. Through the real program: `aerix` in a tmux pane on a
//! scripted member, its CPU time while idle at the prompt (from `/proc`), and a typed
//! character's time until tmux shows it.
//!
//!     cargo bench --profile dev -p aerix --bench screen -- --caldrix target/debug/caldrix [--idle-secs N]
//!
//! (a relative `--caldrix` is taken from the workspace root)

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use aerix_session::{Event, Usage};
use aerix_tui::{Feed, Launch, Screen};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use serde_json::json;

const KEYS: usize = 2000;

fn main() {
    let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
    let (mut caldrix, mut idle) = (None, 10u64);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} takes a value"));
        match arg.as_str() {
            "--caldrix" => caldrix = Some(PathBuf::from(value())),
            "--idle-secs" => idle = value().parse().expect("--idle-secs N"),
            other => panic!("unknown argument {other}"),
        }
    }
    in_process(false);
    in_process(true);
    if let Some(caldrix) = caldrix {
        real(&caldrix, idle);
    }
}

fn message(agent: &str, call: u32) -> Event {
    Event::Message {
        agent: agent.into(),
        role: aerix_session::Role::Tool,
        turn: None,
        call: Some(format!("c{call}")),
        tool: Some("bash".into()),
        input: Some(json!({"command": "cargo test -q"})),
        text: "ok".into(),
        error: None,
        usage: None,
        stop: None,
    }
}

/// A screen with 300 requests of 10 steps behind it, and one running.
fn long_screen(now: Instant) -> Screen {
    let mut screen = Screen::new(Launch {
        model: "model.gguf".into(),
        window: 8192,
        cwd: "~/src".into(),
        version: "0.1.0".into(),
        ..Launch::default()
    });
    for r in 0..300 {
        screen.feed(Feed::RequestStarted { prompt: format!("request {r}"), max_turns: 40 }, now);
        for c in 0..10 {
            screen.feed(Feed::Event(message("a1", c)), now);
        }
        screen.feed(
            Feed::RequestEnded(aerix_tui::RequestEnd {
                outcome: aerix_session::Outcome::Done,
                answer: Some("done".into()),
                error: None,
                local_time: "12:00:00".into(),
            }),
            now,
        );
    }
    screen.feed(Feed::RequestStarted { prompt: "the running one".into(), max_turns: 40 }, now);
    screen
}

fn in_process(streaming: bool) {
    let now = Instant::now();
    let mut screen = long_screen(now);
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::sink())).unwrap();
    terminal.resize(ratatui::layout::Rect::new(0, 0, 100, 30)).unwrap();
    let mut times = Vec::with_capacity(KEYS);
    for i in 0..KEYS {
        if streaming {
            // What a request sends between two keys: a delta, a call, a turn's usage.
            screen.feed(Feed::Streamed { agent: "a1".into() }, now);
            screen.feed(Feed::Event(message("a1.c2", u32::try_from(i).unwrap())), now);
            screen.feed(
                Feed::Event(Event::Message {
                    agent: "a1".into(),
                    role: aerix_session::Role::Assistant,
                    turn: Some(1),
                    call: None,
                    tool: None,
                    input: None,
                    text: "{}".into(),
                    error: None,
                    usage: Some(Usage {
                        prompt_tokens: 1000,
                        completion_tokens: 10,
                        recomputed_from: 0,
                        prefill_ms: 1.0,
                        decode_ms: 1.0,
                    }),
                    stop: None,
                }),
                now,
            );
        }
        let c = char::from(b'a' + u8::try_from(i % 26).unwrap());
        let start = Instant::now();
        screen.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        terminal.draw(|frame| aerix_tui::draw(frame, &screen, Instant::now())).unwrap();
        times.push(start.elapsed());
        if i % 60 == 59 {
            screen.editor.take();
        }
    }
    let entries = 300 * 12 + if streaming { 2 * KEYS } else { 0 };
    report(
        &format!("in_process streaming={streaming} transcript_entries~{entries} 100x30"),
        &mut times,
    );
}

fn report(what: &str, times: &mut [Duration]) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "{{\"bench\":\"{what}\",\"n\":{},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3}}}",
        times.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().unwrap();
    assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `utime + stime` of a process, in clock ticks (100 a second on Linux).
fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn real(caldrix: &Path, idle: u64) {
    // cargo runs a bench in its crate's directory and aerix in the bench's own repository:
    // a relative path is taken from the workspace root, where the documented command runs.
    let caldrix = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(caldrix);
    let home = std::env::temp_dir().join(format!("aerix-bench-screen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let repo = home.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    Command::new("git").args(["init", "-q"]).current_dir(&repo).status().unwrap();
    let script = home.join("replies.json");
    std::fs::write(&script, "[]").unwrap();
    let model = format!("script:{}@{}", script.display(), test_models::smollm2().display());
    let socket = home.join("run/pool.sock");
    let settings = format!(
        "[members.main]\nmodel = {model:?}\nthreads = 2\n[pool]\ncaldrix = {:?}\nsocket = {:?}\nstart_timeout_secs = 120\n",
        caldrix.display().to_string(),
        socket.display().to_string()
    );
    std::fs::create_dir_all(home.join("config/aerix")).unwrap();
    std::fs::write(home.join("config/aerix/settings.toml"), settings).unwrap();
    let run = home.join("run.sh");
    std::fs::write(
        &run,
        format!(
            "#!/bin/sh\nexport HOME='{h}' XDG_CONFIG_HOME='{h}/config' XDG_DATA_HOME='{h}/data' XDG_STATE_HOME='{h}/state' XDG_RUNTIME_DIR='{h}/run' TERM=xterm-256color\nunset NO_COLOR\ncd '{r}' && exec '{a}'\n",
            h = home.display(),
            r = repo.display(),
            a = env!("CARGO_BIN_EXE_aerix")
        ),
    )
    .unwrap();
    let name = format!("aerix-bench-{}", std::process::id());
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
        &run.display().to_string(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !tmux(&["capture-pane", "-p", "-t", &name]).contains("ready in") {
        if Instant::now() > deadline {
            let pane = tmux(&["capture-pane", "-p", "-t", &name]);
            let _ = Command::new("tmux").args(["kill-session", "-t", &name]).status();
            panic!("the screen never got ready; the pane shows:\n{pane}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = tmux(&["display-message", "-p", "-t", &name, "#{pane_pid}"]).trim().to_owned();
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_ticks(&pid);
    std::thread::sleep(Duration::from_secs(idle));
    let ticks = cpu_ticks(&pid) - before;
    println!(
        "{{\"bench\":\"real idle at the prompt\",\"secs\":{idle},\"cpu_ms\":{},\"cpu_percent\":{:.3}}}",
        ticks * 10,
        ticks as f64 * 10.0 / (idle as f64 * 1e3) * 100.0
    );
    let mut times = Vec::new();
    for i in 0..40 {
        let word = format!("k{i}x");
        let start = Instant::now();
        tmux(&["send-keys", "-t", &name, "-l", &word]);
        while !tmux(&["capture-pane", "-p", "-t", &name]).contains(&word) {
            std::thread::sleep(Duration::from_micros(200));
        }
        times.push(start.elapsed());
        tmux(&["send-keys", "-t", &name, "C-u"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    report("real keys to tmux's pane (includes tmux's own send and capture)", &mut times);
    let _ = Command::new("tmux").args(["kill-session", "-t", &name]).status();
    let _ = std::fs::remove_dir_all(&home);
}
