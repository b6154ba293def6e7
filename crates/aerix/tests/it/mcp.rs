//! MCP servers through the real binary: a stdio server the test writes in Python (no
//! dependency; `mcp/server.py`) declared in each of the three places, a scripted member
//! calling its tools through the turn schema, the timeout, a crash mid-call, the caps, trust,
//! a `PreToolUse` matcher on `mcp__.*`, and `aerix mcp list`. Servers written with the
//! official Python SDK in `sdk`.

pub mod sdk;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{World, call, calls, final_turn, of_type, stderr, stdout};

const SERVER: &str = include_str!("mcp/server.py");

/// The server script in the world's home; its log and pid files.
pub struct Peer {
    pub script: PathBuf,
    pub log: PathBuf,
    pub pid: PathBuf,
}

pub fn peer(world: &World, name: &str) -> Peer {
    let dir = world.home.join("mcp");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("server.py");
    std::fs::write(&script, SERVER).unwrap();
    Peer { script, log: dir.join(format!("{name}.log")), pid: dir.join(format!("{name}.pid")) }
}

impl Peer {
    /// `[mcp.servers.<name>]` for this server.
    fn toml(&self, name: &str) -> String {
        format!(
            "[mcp.servers.{name}]\ncommand = \"python3\"\nargs = [{:?}]\nenv = {{ MCP_LOG = {:?}, MCP_PID = {:?} }}\n",
            self.script.display().to_string(),
            self.log.display().to_string(),
            self.pid.display().to_string(),
        )
    }

    /// Claude Code's entry for this server.
    fn json(&self) -> Value {
        json!({"command": "python3", "args": [self.script], "env": {
            "MCP_LOG": self.log, "MCP_PID": self.pid,
        }})
    }

    /// The calls the server received: (tool, arguments).
    pub fn calls(&self) -> Vec<Value> {
        self.logged().into_iter().filter(|l| l.get("tool").is_some()).collect()
    }

    /// The cancellations it received: (the cancelled call's tool, the reason).
    fn cancellations(&self) -> Vec<Value> {
        self.logged().into_iter().filter(|l| l.get("cancelled").is_some()).collect()
    }

    fn logged(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Whether its process still runs.
    pub fn alive(&self) -> bool {
        let pid = std::fs::read_to_string(&self.pid).unwrap();
        std::path::Path::new(&format!("/proc/{}", pid.trim())).exists()
            && !std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                .unwrap_or_default()
                .contains(") Z ")
    }
}

/// The results of `tool` calls, in log order: (text, error).
pub fn results(world: &World, tool: &str) -> Vec<(String, bool)> {
    of_type(&world.events(), "message")
        .into_iter()
        .filter(|m| m["role"] == "tool" && m["tool"] == tool)
        .map(|m| (m["text"].as_str().unwrap().to_owned(), m["error"] == json!(true)))
        .collect()
}

/// One request's replies: routed `answer`, one call a turn, then a final.
fn request(turns: Vec<Value>, answer: &str) -> Vec<String> {
    let mut replies = vec!["answer".to_owned()];
    replies.extend(turns.into_iter().map(|c| calls("Next.", vec![c])));
    replies.push(final_turn("Done.", answer));
    replies
}

#[test]
fn a_stdio_servers_tools_are_called_capped_timed_out_and_a_crash_is_an_error() {
    let replies = request(
        vec![
            call("mcp__t__echo", json!({"text": "hello", "times": 2})),
            call("mcp__t__big", json!({})),
            call("mcp__t__fail", json!({})),
            call("mcp__t__slow", json!({"secs": 4})),
            call("mcp__t__crash", json!({})),
            call("mcp__t__echo", json!({"text": "again"})),
        ],
        "done",
    );
    let world = World::scripted("mcp-stdio", &replies, true);
    let t = peer(&world, "t");
    let model = world.script("replies", &replies, true);
    let extra = format!("[mcp]\ntimeout_secs = 2\n[context.tool_caps]\nmcp = 300\n{}", t.toml("t"));
    world.write_settings(&model, &extra);

    let start = Instant::now();
    let out = world.aerix(&["-p", "Use the tools."]);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "done");
    // The schema the constraint refuses leaves its tool out, named.
    assert!(
        stderr(&out).contains("tool `mcp__t__negated` left out") && stderr(&out).contains("`not`"),
        "{}",
        stderr(&out)
    );
    let events = world.events();
    let spawn = of_type(&events, "agent.spawn");
    let tools = spawn[0]["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("mcp__t__echo")) && !tools.contains(&json!("mcp__t__negated")));

    let echo = results(&world, "mcp__t__echo");
    assert_eq!(echo[0], ("echo: hello hello".to_owned(), false));
    let big = &results(&world, "mcp__t__big")[0];
    assert!(!big.1 && big.0.starts_with("0123456789"), "{big:?}");
    assert!(big.0.contains("[truncated: 4700 more bytes; read with read("), "{}", big.0);
    assert_eq!(
        results(&world, "mcp__t__fail")[0],
        ("error: the widget is broken".to_owned(), true)
    );
    let slow = &results(&world, "mcp__t__slow")[0];
    assert!(slow.1 && slow.0.contains("did not answer within 2s (mcp.timeout_secs)"), "{slow:?}");
    let crash = &results(&world, "mcp__t__crash")[0];
    // The call ends when the server does, with what it wrote on stderr.
    assert!(
        crash.1 && crash.0.contains("`t`") && crash.0.contains("crashing on purpose"),
        "{crash:?}"
    );
    assert!(
        !crash.0.contains("did not answer"),
        "the crash ended the call, not the timeout: {crash:?}"
    );
    assert!(echo[1].1 && echo[1].0.contains("`t`"), "after the crash: {:?}", echo[1]);
    // Nothing hung, and the timed-out call was cancelled (MCP's `notifications/cancelled`), so
    // the server stopped its work: the crash call after it is not queued behind the slow one's
    // remaining seconds (the server, like the SDK's, runs calls concurrently).
    assert!(took < Duration::from_secs(25), "{took:?}");
    let cancelled = t.cancellations();
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0]["cancelled"], "slow");
    let received: Vec<Value> = t.calls().iter().map(|c| c["tool"].clone()).collect();
    assert_eq!(
        received,
        [json!("echo"), json!("big"), json!("fail"), json!("slow"), json!("crash")]
    );
    assert_eq!(t.calls()[0]["arguments"], json!({"text": "hello", "times": 2}));
}

#[test]
fn arguments_the_schema_refuses_cannot_be_generated() {
    // `times` is at most 3: the scripted reply breaks the constraint, as no model's can.
    let replies = request(vec![call("mcp__t__echo", json!({"text": "x", "times": 9}))], "done");
    let world = World::scripted("mcp-constrained", &replies, true);
    let t = peer(&world, "t");
    let model = world.script("replies", &replies, true);
    world.write_settings(&model, &t.toml("t"));
    let out = world.aerix(&["-p", "Echo."]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("does not satisfy"), "{}", stderr(&out));
    assert!(t.calls().is_empty(), "the server never saw the call");
}

#[test]
fn a_projects_server_starts_only_once_trusted_and_the_users_always() {
    let mut replies = request(vec![call("mcp__u__echo", json!({"text": "user"}))], "one");
    replies.extend(request(vec![call("mcp__p__echo", json!({"text": "project"}))], "two"));
    replies.extend(request(vec![], "three"));
    let world = World::scripted("mcp-trust", &replies, true);
    let (u, p, c) = (peer(&world, "u"), peer(&world, "p"), peer(&world, "c"));
    // The user's `~/.claude.json`, with a per-project entry, and the repository's `.mcp.json`.
    let repo = world.repo.canonicalize().unwrap();
    let claude = json!({
        "mcpServers": {"u": u.json()},
        "projects": {repo.display().to_string(): {"mcpServers": {"c": c.json()}}},
    });
    std::fs::write(world.home.join(".claude.json"), claude.to_string()).unwrap();
    world.write(".mcp.json", &json!({"mcpServers": {"p": p.json()}}).to_string());

    let out = world.aerix(&["-p", "One."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the MCP server `p = python3")
            && stderr(&out).contains("aerix trust"),
        "{}",
        stderr(&out)
    );
    assert_eq!(results(&world, "mcp__u__echo")[0], ("echo: user".to_owned(), false));
    assert!(!p.pid.exists(), "the untrusted project's server never ran");
    assert!(c.pid.exists(), "the per-project entry of ~/.claude.json is the user's own");

    world.trust();
    let out = world.aerix(&["-p", "Two."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(results(&world, "mcp__p__echo")[0], ("echo: project".to_owned(), false));
    // Every server ended with its run.
    for server in [&u, &p, &c] {
        assert!(!server.alive(), "{} outlived the run", server.pid.display());
    }

    // A changed environment is a change of what the project runs: untrusted again.
    let mut changed = p.json();
    changed["env"]["LD_PRELOAD"] = json!("/tmp/evil.so");
    world.write(".mcp.json", &json!({"mcpServers": {"p": changed}}).to_string());
    std::fs::remove_file(&p.pid).unwrap();
    let out = world.aerix(&["-p", "Three."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("not trusted since it changed"), "{}", stderr(&out));
    assert!(!p.pid.exists(), "the changed server did not run");
}

#[test]
fn a_pre_tool_use_matcher_on_mcp_tools_sees_claude_codes_name_and_blocks() {
    let replies = request(vec![call("mcp__t__echo", json!({"text": "blocked"}))], "done");
    let world = World::scripted("mcp-hook", &replies, true);
    let t = peer(&world, "t");
    let model = world.script("replies", &replies, true);
    world.write_settings(&model, &t.toml("t"));
    let seen = world.home.join("seen.json");
    let hook = format!("cat > {}; echo 'no MCP calls today' >&2; exit 2", seen.display());
    let hooks = json!({"hooks": {"PreToolUse": [
        {"matcher": "mcp__.*", "hooks": [{"type": "command", "command": hook}]},
    ]}});
    let path = world.home.join("config/aerix/hooks.json");
    std::fs::write(&path, hooks.to_string()).unwrap();

    let out = world.aerix(&["-p", "Echo."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(input["tool_name"], "mcp__t__echo");
    assert_eq!(input["tool_input"], json!({"text": "blocked"}));
    let result = &results(&world, "mcp__t__echo")[0];
    assert!(result.1 && result.0.contains("no MCP calls today"), "{result:?}");
    assert!(t.calls().is_empty());
}

#[test]
fn a_deny_rule_takes_an_mcp_tool_out_of_view() {
    let replies = request(vec![call("mcp__t__echo", json!({"text": "x"}))], "done");
    let world = World::scripted("mcp-deny", &replies, true);
    let t = peer(&world, "t");
    let model = world.script("replies", &replies, true);
    world.write_settings(&model, &format!("[permissions]\ndeny = [\"mcp__t\"]\n{}", t.toml("t")));
    let out = world.aerix(&["-p", "Echo."]);
    // Denied whole, the tool is out of the model's view: in no agent's tools, so a call of it
    // is no turn the schema allows, and the server is never called.
    let spawns = of_type(&world.events(), "agent.spawn").into_iter().cloned().collect::<Vec<_>>();
    assert!(!spawns.is_empty(), "{}", stderr(&out));
    for spawn in &spawns {
        let tools = spawn["tools"].as_array().unwrap();
        assert!(!tools.iter().any(|t| t.as_str().unwrap().starts_with("mcp__t")), "{spawn}");
    }
    assert!(results(&world, "mcp__t__echo").iter().all(|r| r.1), "{}", stderr(&out));
    assert!(t.calls().is_empty());
}

#[test]
fn mcp_list_shows_each_server_its_state_and_tools() {
    let world = World::scripted("mcp-list", &[], true);
    let t = peer(&world, "t");
    let model = world.script("replies", &[], true);
    let broken = "[mcp.servers.gone]\ncommand = \"/nonexistent/server\"\n";
    world.write_settings(&model, &format!("{}{broken}", t.toml("t")));
    world.write(".mcp.json", &json!({"mcpServers": {"p": t.json()}}).to_string());
    let out = world.aerix(&["mcp", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("t (stdio"), "{text}");
    assert!(text.contains("ready"), "{text}");
    assert!(text.contains("mcp__t__echo"), "{text}");
    assert!(text.contains("mcp__t__negated (left out:"), "{text}");
    assert!(text.contains("gone (stdio") && text.contains("failed: cannot run"), "{text}");
    assert!(text.contains("p (stdio") && text.contains("skipped:"), "{text}");
}

/// `ai-memory` on the world's PATH, run as aerix's hooks and servers run it.
fn ai_memory(world: &World, args: &[&str]) -> std::process::Output {
    let bin = world.home.join("bin");
    if !bin.join("ai-memory").exists() {
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(crate::workspace_binary("ai-memory"), bin.join("ai-memory"))
            .unwrap();
    }
    let out = std::process::Command::new(bin.join("ai-memory"))
        .args(args)
        .current_dir(&world.repo)
        .env("HOME", &world.home)
        .env("XDG_CONFIG_HOME", world.home.join("config"))
        .env("XDG_DATA_HOME", world.home.join("data"))
        .env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9")
        .output()
        .unwrap();
    assert!(out.status.success(), "ai-memory {args:?}: {}", stderr(&out));
    out
}

const PAGE: &str = "---\nsummary: One queue per member.\n---\n# Queue\n\nJobs wait in one FIFO queue per member.\n";

/// `ai-memory install aerix` registers its stdio server; the scripted member queries it,
/// opens the page a hit names, and opens a profile digest line's page by its path as the
/// digest prints it (no scope, no project), through the real server.
#[test]
fn ai_memorys_installed_stdio_server_answers_a_query_and_opens_the_page() {
    // In the schema's order of properties, which the constraint keeps.
    let query = json!({"query": "what queue does a member use?", "project": "app"});
    let read = json!({"path": "decisions/queue.md", "project": "app"});
    let digest_line = json!({"path": "profile/testing/suite.md"});
    let replies = request(
        vec![
            call("mcp__ai-memory__memory_query", query),
            call("mcp__ai-memory__memory_read_page", read),
            call("mcp__ai-memory__memory_read_page", digest_line),
        ],
        "done",
    );
    let world = World::scripted("mcp-ai-memory", &replies, true);
    ai_memory(&world, &["install", "aerix"]);
    let settings = std::fs::read_to_string(world.home.join("config/aerix/settings.toml")).unwrap();
    assert!(
        settings.contains("[pool]") && settings.contains("[mcp.servers.ai-memory]"),
        "{settings}"
    );
    let page = ["write-page", "--project", "app", "--path", "decisions/queue.md", "--body", PAGE];
    ai_memory(&world, &page);
    let entry = "---\nsummary: Keep integration tests in tests/suite.\n---\n# Suite\n\nKeep integration tests in tests/suite.\n";
    ai_memory(
        &world,
        &["write-page", "--scope", "profile", "--path", "testing/suite.md", "--body", entry],
    );

    let out = world.aerix(&["-p", "Which queue?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hits = &results(&world, "mcp__ai-memory__memory_query")[0];
    assert!(!hits.1 && hits.0.contains("decisions/queue.md"), "{hits:?}");
    let pages = results(&world, "mcp__ai-memory__memory_read_page");
    assert!(!pages[0].1 && pages[0].0.contains("one FIFO queue per member"), "{pages:?}");
    assert!(!pages[1].1 && pages[1].0.contains("tests/suite"), "the digest line's page: {pages:?}");
}

/// A streamable-HTTP server: `ai-memory serve` with a root token, declared by `url` with an
/// `Authorization` header whose value comes from the environment: the right token gets in, a
/// wrong one is a failed server.
#[test]
fn ai_memorys_http_server_answers_through_streamable_http() {
    let replies = request(
        vec![call("mcp__mem__memory_query", json!({"query": "queue member", "project": "app"}))],
        "done",
    );
    let world = World::scripted("mcp-http", &replies, true);
    ai_memory(
        &world,
        &["write-page", "--project", "app", "--path", "decisions/queue.md", "--body", PAGE],
    );
    let mut serve = std::process::Command::new(world.home.join("bin/ai-memory"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .current_dir(&world.repo)
        .env("HOME", &world.home)
        .env("XDG_CONFIG_HOME", world.home.join("config"))
        .env("XDG_DATA_HOME", world.home.join("data"))
        .env("AI_MEMORY_SERVER__ROOT_TOKEN", "root-secret-token")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(serve.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let addr = line.trim().strip_prefix("ai-memory listening on ").unwrap().to_owned();
    let model = world.script("replies", &replies, true);
    let server = format!(
        "[mcp.servers.mem]\nurl = \"http://{addr}/mcp\"\nheaders = {{ Authorization = \"Bearer ${{MEM_TOKEN}}\" }}\n"
    );
    world.write_settings(&model, &server);

    let wrong = world.aerix_command(&["mcp", "list"]).env("MEM_TOKEN", "wrong").output().unwrap();
    assert!(
        stdout(&wrong).contains("mem (http") && stdout(&wrong).contains("failed:"),
        "{}",
        stdout(&wrong)
    );
    let out = world
        .aerix_command(&["-p", "Which queue?"])
        .env("MEM_TOKEN", "root-secret-token")
        .output()
        .unwrap();
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hits = &results(&world, "mcp__mem__memory_query")[0];
    assert!(!hits.1 && hits.0.contains("decisions/queue.md"), "{hits:?}");
}

/// SmolLM2 through the real engine calls ai-memory's `memory_query` under the turn schema. The
/// setup makes the call likely, not certain of its arguments: the route is `plan` (a scripted
/// decision member), whose root has only `plan` and the MCP tools that read (deny rules take
/// the writing ones out of its view), and the prompt names the tool. What the model asks and what the server answers are its own.
#[test]
fn smollm2_calls_memory_query_through_the_real_engine() {
    let _engine = crate::engine();
    let world = World::new("mcp-smollm2", "", "");
    ai_memory(&world, &["install", "aerix"]);
    let page = ["write-page", "--project", "app", "--path", "decisions/queue.md", "--body", PAGE];
    ai_memory(&world, &page);
    let decision = world.script("decision", &["plan".to_owned()], true);
    let extra = format!(
        "[members.decision]\nmodel = {decision:?}\n[context]\nmax_new_tokens = 200\nrepeat_guard = false\n[delegation]\ndepth = 0\nplanner_tools = [\"plan\"]\n[mcp.servers.ai-memory]\ncommand = \"ai-memory\"\nargs = [\"mcp\"]\n[permissions]\ndeny = [\"mcp__ai-memory__memory_write_page\", \"mcp__ai-memory__memory_delete_page\", \"mcp__ai-memory__memory_forget\"]\n"
    );
    world.write_settings(&crate::smollm2().display().to_string(), &extra);
    let prompt =
        "Call the tool mcp__ai-memory__memory_query with the query \"queue\" to search the memory.";
    let out = world.aerix(&["-p", prompt, "--max-turns", "2"]);
    let code = out.status.code();
    assert!(matches!(code, Some(0) | Some(2)), "a named outcome: {code:?}\n{}", stderr(&out));
    let events = world.events();
    let calls: Vec<&Value> = of_type(&events, "message")
        .into_iter()
        .filter(|m| m["role"] == "tool" && m["tool"] == "mcp__ai-memory__memory_query")
        .collect();
    eprintln!("memory_query results: {calls:?}");
    assert!(!calls.is_empty(), "SmolLM2 made no memory_query call:\n{}", stderr(&out));
    // The server answered the model's own query (a result, or the server's own error for it).
    assert!(calls[0]["text"].as_str().unwrap().contains("hits"), "{}", calls[0]);
}

/// The screen starts the servers at its startup too, runs a call of a request, and its server
/// ends when the screen closes.
#[test]
fn the_screen_starts_the_servers_calls_them_and_ends_them_when_it_closes() {
    use crate::screen::{Pane, STARTUP, STEP, exited};
    let replies = request(vec![call("mcp__t__echo", json!({"text": "on screen"}))], "echoed it");
    let world = World::scripted("mcp-screen", &replies, true);
    let t = peer(&world, "t");
    let model = world.script("replies", &replies, true);
    // The screen asks before a call no rule allows: this one is allowed.
    world.write_settings(&model, &format!("[permissions]\nallow = [\"mcp__t\"]\n{}", t.toml("t")));
    let pane = Pane::open(&world, "mcp-screen", "true");
    pane.wait_for("ready in", STARTUP);
    assert!(t.alive(), "started with the screen");
    pane.type_line("Echo.");
    pane.wait_for("echoed it", STEP);
    pane.keys(&["C-d"]);
    exited(&pane);
    assert_eq!(results(&world, "mcp__t__echo")[0], ("echo: on screen".to_owned(), false));
    let deadline = Instant::now() + Duration::from_secs(5);
    while t.alive() {
        assert!(Instant::now() < deadline, "the server outlived the screen");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Implementers get the MCP tools and call them; one whose agent definition lists its tools
/// gets only those it names; a verifier gets none.
#[test]
fn implementers_get_the_mcp_tools_a_definition_names_and_verifiers_none() {
    let root = calls(
        "Delegate.",
        vec![
            call("agent", json!({"brief": "Echo.", "check": "it echoed", "definition": "echoer"})),
            call("agent", json!({"brief": "Echo.", "check": "it echoed"})),
        ],
    );
    let echo = |text: &str| calls("Echo.", vec![call("mcp__t__echo", json!({ "text": text }))]);
    let verdict = json!({"thought": "Checked.", "final": {"reason": "ok", "verdict": "pass"}});
    let replies = vec![
        "edit".to_owned(),
        root,
        echo("from the echoer"),
        final_turn("Done.", "echoed"),
        verdict.to_string(),
        echo("from a piece"),
        final_turn("Done.", "echoed"),
        verdict.to_string(),
        final_turn("Delegated.", "both echoed"),
    ];
    let world = World::scripted("mcp-pieces", &replies, true);
    let t = peer(&world, "t");
    let model = world.script("replies", &replies, true);
    world.write_settings(&model, &format!("[delegation]\nparallel = 1\n{}", t.toml("t")));
    let definition =
        "---\nname: echoer\ndescription: Echoes.\ntools: Read, mcp__t__echo\n---\nEcho.\n";
    let dir = world.home.join(".claude/agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("echoer.md"), definition).unwrap();
    let out = world.aerix(&["-p", "Echo."]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = world.events();
    let tools = |agent: &str| -> Vec<String> {
        let spawn = of_type(&events, "agent.spawn").into_iter().find(|s| s["agent"] == agent);
        let spawn = spawn.unwrap_or_else(|| panic!("no {agent}"));
        spawn["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
    };
    let echoer = tools("a1.c1");
    assert!(echoer.contains(&"mcp__t__echo".to_owned()), "{echoer:?}");
    assert!(!echoer.contains(&"mcp__t__big".to_owned()), "{echoer:?}");
    let plain = tools("a1.c2");
    assert!(
        plain.contains(&"mcp__t__echo".to_owned()) && plain.contains(&"mcp__t__big".to_owned()),
        "{plain:?}"
    );
    // A piece's call reaches the server too (on its own thread, inside its own runtime).
    let echoed: Vec<String> = results(&world, "mcp__t__echo").into_iter().map(|r| r.0).collect();
    assert_eq!(echoed, ["echo: from the echoer", "echo: from a piece"]);
    for spawn in of_type(&events, "agent.spawn").into_iter().filter(|s| s["kind"] == "verifier") {
        assert!(!spawn["tools"].to_string().contains("mcp__"), "{spawn}");
    }
}
