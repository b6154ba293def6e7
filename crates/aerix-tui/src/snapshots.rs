//! Frames at 50, 60 and 100 columns, each scenario fed the way a request feeds the screen.

use std::time::{Duration, Instant};

use aerix_session::{Event, Outcome, Usage};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::{DiffStat, Feed, Gate, Launch, Level, Note, PoolRow, ProfileRow, RequestEnd, Screen};

const WIDTHS: [u16; 3] = [50, 60, 100];
const HEIGHT: u16 = 30;

fn launched() -> Screen {
    let mut screen = Screen::new(Launch {
        model: "SmolLM2-135M-Instruct-Q4_1".into(),
        lane: Some("cpu".into()),
        window: 8192,
        cwd: "~/src/parser".into(),
        version: "0.1.0".into(),
        resumed: false,
    });
    screen.startup.pool = Some(PoolRow {
        model: "SmolLM2-135M-Instruct-Q4_1".into(),
        lane: Some("cpu".into()),
        threads: Some(2),
        device: None,
        decision: None,
        socket: "/run/user/1000/caldrix/pool.sock".into(),
    });
    screen.startup.profile = ProfileRow::Embedded;
    screen.startup.loaded = Some("instructions AGENTS.md; skills review".into());
    screen.startup.session = Some("20261201-143512-9f3a".into());
    screen.startup.ready = Some(Duration::from_millis(1240));
    screen
}

fn check(name: &str, screen: &Screen, now: Instant) {
    for width in WIDTHS {
        let mut terminal = Terminal::new(TestBackend::new(width, HEIGHT)).unwrap();
        terminal.draw(|frame| crate::draw(frame, screen, now)).unwrap();
        insta::assert_snapshot!(format!("{name}_{width}"), terminal.backend());
    }
}

fn event(screen: &mut Screen, event: Event, now: Instant) {
    screen.feed(Feed::Event(event), now);
}

fn spawn(agent: &str, parent: Option<&str>, kind: &str) -> Event {
    Event::AgentSpawn {
        agent: agent.into(),
        parent: parent.map(str::to_owned),
        kind: kind.into(),
        route: Some(aerix_session::Route::Edit),
        member: "main".into(),
        tools: vec![],
        max_turns: 40,
    }
}

fn turn(agent: &str, turn: u32, prompt: u32, completion: u32) -> Event {
    Event::Message {
        agent: agent.into(),
        role: aerix_session::Role::Assistant,
        turn: Some(turn),
        call: None,
        tool: None,
        input: None,
        text: "{}".into(),
        error: None,
        usage: Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            recomputed_from: 0,
            prefill_ms: 1.0,
            decode_ms: 1.0,
        }),
        stop: Some("end".into()),
    }
}

fn call(agent: &str, call: &str, tool: &str, input: serde_json::Value) -> Event {
    Event::Message {
        agent: agent.into(),
        role: aerix_session::Role::Tool,
        turn: None,
        call: Some(call.into()),
        tool: Some(tool.into()),
        input: Some(input),
        text: "ok".into(),
        error: None,
        usage: None,
        stop: None,
    }
}

/// A request of the root delegating two pieces, one verified and one being verified.
fn running(now: Instant) -> Screen {
    let mut screen = launched();
    let t0 = now - Duration::from_secs(12);
    screen.feed(
        Feed::RequestStarted { prompt: "fix the parser's off-by-one".into(), max_turns: 40 },
        t0,
    );
    event(
        &mut screen,
        Event::Route {
            agent: "a1".into(),
            route: aerix_session::Route::Edit,
            raw: None,
            scores: Default::default(),
            member: "main".into(),
        },
        t0,
    );
    event(&mut screen, spawn("a1", None, "root"), t0);
    event(&mut screen, turn("a1", 1, 1800, 120), t0);
    event(&mut screen, call("a1", "c1", "repo_map", serde_json::json!({})), t0);
    event(&mut screen, spawn("a1.c2", Some("a1"), "implementer"), t0);
    event(&mut screen, spawn("a1.c3", Some("a1"), "implementer"), t0);
    event(
        &mut screen,
        call("a1.c2", "c1", "read", serde_json::json!({"path": "src/parse.rs"})),
        t0,
    );
    event(
        &mut screen,
        call("a1.c2", "c2", "edit", serde_json::json!({"path": "src/parse.rs"})),
        t0,
    );
    event(
        &mut screen,
        call("a1.c3", "c1", "bash", serde_json::json!({"command": "cargo test -q"})),
        t0,
    );
    event(&mut screen, spawn("a1.c2.v1", Some("a1.c2"), "verifier"), t0);
    event(
        &mut screen,
        call("a1.c2.v1", "c1", "bash", serde_json::json!({"command": "cargo test"})),
        t0,
    );
    screen.feed(Feed::Diff(Some(DiffStat { added: 12, removed: 3, files: 2 })), t0);
    screen.feed(Feed::Generating { agent: "a1".into() }, t0);
    for _ in 0..40 {
        screen.feed(Feed::Streamed { agent: "a1".into() }, t0);
    }
    screen.queue("then update the changelog".into());
    screen
}

#[test]
fn launch() {
    let now = Instant::now();
    let mut screen = launched();
    screen.startup = Default::default();
    check("launch", &screen, now);
}

#[test]
fn startup_with_warning_and_error_rows() {
    let now = Instant::now();
    let mut screen = launched();
    screen.startup.notes = vec![
        Note {
            level: Level::Warning,
            text: "hooks: .aerix/hooks.json cannot be read: permission denied".into(),
        },
        Note {
            level: Level::Error,
            text: "agents: reviewer.md: no `description` in its frontmatter".into(),
        },
        Note { level: Level::Info, text: "skills: 2 loaded from ~/.claude/skills".into() },
    ];
    check("startup", &screen, now);
}

#[test]
fn startup_on_a_gpu_names_the_device_and_the_layers() {
    let now = Instant::now();
    let mut screen = launched();
    screen.launch.lane = Some("gpu 31/31 layers".into());
    if let Some(pool) = &mut screen.startup.pool {
        pool.lane = Some("gpu 31/31 layers".into());
        pool.threads = None;
        pool.device = Some("Vulkan0 NVIDIA GeForce RTX 4090, 171 MiB of 24564 MiB".into());
    }
    check("startup_gpu", &screen, now);
}

#[test]
fn a_running_request_with_two_subagents_and_a_verifier() {
    let now = Instant::now();
    let screen = running(now);
    check("running", &screen, now);
}

#[test]
fn the_plan_gate() {
    let now = Instant::now();
    let mut screen = running(now);
    screen.set_gate(Gate::Plan {
        agent: "a1".into(),
        text: "1. find the loop in src/parse.rs\n2. fix its bound\n3. run cargo test".into(),
    });
    check("plan_gate", &screen, now);
}

#[test]
fn trust_question_at_startup() {
    let now = Instant::now();
    let mut screen = launched();
    screen.startup.ready = None;
    screen.set_gate(Gate::Trust {
        root: "/home/u/src/cloned".into(),
        items: vec![
            "hook SessionStart: sh .aerix/setup.sh (.claude/settings.json)".into(),
            "plugin lint@team (.aerix/plugins/lint)".into(),
            "setting pool.caldrix = ./bin/caldrix (.aerix/settings.toml)".into(),
        ],
        changed: false,
    });
    check("trust_gate", &screen, now);
}

#[test]
fn a_long_trust_list_keeps_the_keys_and_counts_the_rest() {
    let now = Instant::now();
    let mut screen = launched();
    screen.startup.ready = None;
    // As the binary hands them over: escaped, a padded command already shown by its length.
    let long = format!("hook SessionStart: true {} (.claude/settings.json)", "x".repeat(400));
    let length = format!("({} characters)", long.chars().count());
    let mut items = vec![long];
    items.extend((1..=12).map(|i| format!("hook Stop: sh .aerix/step-{i}.sh (.aerix/hooks.json)")));
    screen.set_gate(Gate::Trust { root: "/home/u/src/cloned".into(), items, changed: false });
    for width in WIDTHS {
        let mut terminal = Terminal::new(TestBackend::new(width, HEIGHT)).unwrap();
        terminal.draw(|frame| crate::draw(frame, &screen, now)).unwrap();
        let text: String = terminal
            .backend()
            .buffer()
            .content()
            .chunks(usize::from(width))
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect();
        assert!(text.contains("run 13"), "{width}:\n{text}");
        assert!(text.contains(&length), "{width}:\n{text}");
        // Every item shown, or the rest counted.
        let all = text.contains("step-12.sh");
        assert!(all != text.contains(" more (answer n"), "{width}:\n{text}");
        assert!(text.contains("runs without them"), "the keys are cut at {width}:\n{text}");
    }
    check("trust_gate_long", &screen, now);
}

#[test]
fn the_permission_ask_gate() {
    let now = Instant::now();
    let mut screen = running(now);
    screen.set_gate(Gate::Ask {
        agent: "a1".into(),
        tool: "bash".into(),
        input: r#"{"command":"cargo test --workspace"}"#.into(),
        reason: "no permission rule allows cargo test --workspace".into(),
        always: true,
    });
    check("ask_gate", &screen, now);
}

#[test]
fn a_compaction_shows_the_clients_count() {
    let now = Instant::now();
    let mut screen = running(now);
    screen.feed(Feed::Generated { agent: "a1".into() }, now);
    event(&mut screen, turn("a1", 2, 5400, 200), now);
    event(
        &mut screen,
        Event::Compaction {
            agent: "a1".into(),
            reason: "soft_limit".into(),
            before: 5600,
            after: 3900,
            target: 4096,
            window: 8192,
            compacted: vec!["r1".into(), "r2".into()],
            blocked: None,
        },
        now,
    );
    check("compaction", &screen, now);
    // The pool's next report replaces the client's count.
    event(&mut screen, turn("a1", 3, 4000, 50), now);
    assert_eq!(screen.context_line().as_deref(), Some("context 4,050 / 8,192 tokens (49%)"));
}

#[test]
fn completion_with_the_stats_line() {
    let now = Instant::now();
    let mut screen = launched();
    let t0 = now - Duration::from_secs(41);
    screen.feed(Feed::RequestStarted { prompt: "explain src/parse.rs".into(), max_turns: 40 }, t0);
    event(&mut screen, spawn("a1", None, "root"), t0);
    // Two generations overlapping: 2 s of streaming, not 3.
    screen.feed(Feed::Generating { agent: "a1".into() }, t0);
    screen.feed(Feed::Generating { agent: "a1.c1".into() }, t0);
    screen.feed(Feed::Streamed { agent: "a1".into() }, t0 + Duration::from_secs(1));
    screen.feed(Feed::Streamed { agent: "a1.c1".into() }, t0 + Duration::from_millis(1500));
    screen.feed(Feed::Generated { agent: "a1".into() }, t0 + Duration::from_millis(2500));
    screen.feed(Feed::Generated { agent: "a1.c1".into() }, t0 + Duration::from_secs(3));
    event(&mut screen, turn("a1", 1, 900, 60), t0);
    event(&mut screen, turn("a1.c1", 1, 700, 40), t0);
    // A generation that never streamed adds nothing.
    screen.feed(Feed::Generating { agent: "a1".into() }, t0 + Duration::from_secs(4));
    screen.feed(Feed::Generated { agent: "a1".into() }, t0 + Duration::from_secs(9));
    event(&mut screen, turn("a1", 2, 1000, 500), t0);
    screen.feed(Feed::Diff(Some(DiffStat { added: 0, removed: 0, files: 0 })), now);
    screen.feed(
        Feed::RequestEnded(RequestEnd {
            outcome: Outcome::Done,
            answer: Some(
                "The parser reads one token too far when a line ends in a comment.".into(),
            ),
            error: None,
            local_time: "14:02:07".into(),
        }),
        now,
    );
    check("completion", &screen, now);
    // Too little streamed: no rate.
    screen.feed(Feed::RequestStarted { prompt: "again".into(), max_turns: 40 }, now);
    screen.feed(
        Feed::RequestEnded(RequestEnd {
            outcome: Outcome::Done,
            answer: None,
            error: None,
            local_time: "14:02:08".into(),
        }),
        now + Duration::from_millis(400),
    );
    let Some(crate::screen::Entry::Stats(stats)) = screen.history.last() else {
        panic!("no stats line")
    };
    assert_eq!(stats, "– tok/s · 0.4 s · 14:02:08");
}

#[test]
fn help() {
    let now = Instant::now();
    let mut screen = launched();
    screen.show_help(true);
    check("help", &screen, now);
}
