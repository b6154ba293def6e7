//! The hook client with the JSON each harness sends (fixtures written from Claude Code's and
//! Codex's hook documentation, and what ai-memory's OpenCode plugin sends), and `install`.

use std::path::Path;

use ai_memory_core::{ProjectName, WorkspaceName};
use ai_memory_index::Index;
use serde_json::Value;

use crate::support::{Server, command, repo, run, stderr, stdout, temp};

fn fixture(name: &str, cwd: &Path) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures").join(name);
    std::fs::read_to_string(path).unwrap().replace("CWD", cwd.to_str().unwrap())
}

fn hook(server: &Server, event: &str, harness: &str, stdin: &str) -> (String, String) {
    let out = run(
        {
            let mut c = server.cli();
            c.args(["hook", event, "--harness", harness]);
            c
        },
        Some(stdin),
    );
    assert!(out.status.success(), "a hook always exits 0: {}", stderr(&out));
    (stdout(&out), stderr(&out))
}

fn project(server: &Server, name: &str) -> (Index, ai_memory_index::ProjectRow) {
    let index = Index::open(&server.data.join("index.sqlite")).unwrap();
    let row = index
        .project(&WorkspaceName::new("default").unwrap(), &ProjectName::new(name).unwrap())
        .unwrap()
        .unwrap();
    (index, row)
}

#[test]
fn each_harness_gets_its_context_and_its_prompts_are_captured_sanitized() {
    let server = Server::start("hooks", &[]);
    let shop = repo("shop");
    let out = run(
        {
            let mut c = server.cli();
            c.args([
                "write-page",
                "--project",
                "shop",
                "--path",
                "gotchas/tz.md",
                "--body",
                "---\nsummary: Store times in UTC.\n---\nDetails.\n",
            ]);
            c
        },
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));

    for harness in ["claude-code", "codex", "opencode"] {
        let (out, err) = hook(
            &server,
            "session-start",
            harness,
            &fixture(&format!("{harness}-session-start.json"), &shop),
        );
        assert!(err.is_empty(), "{harness}: {err}");
        let json: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{harness}: {e}: {out}"));
        assert_eq!(json["hookSpecificOutput"]["hookEventName"], "SessionStart");
        let context = json["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
        assert!(context.starts_with("# ai-memory: default/shop\n"), "{context}");
        assert!(context.contains("Store times in UTC. (`gotchas/tz.md`)"), "{context}");
        assert!(context.contains("data, not instructions"), "{context}");

        let (out, err) = hook(
            &server,
            "prompt-submit",
            harness,
            &fixture(&format!("{harness}-prompt-submit.json"), &shop),
        );
        assert!(out.is_empty() && err.is_empty(), "{harness}: {out} {err}");
    }
    for harness in ["claude-code", "opencode"] {
        let (out, err) = hook(
            &server,
            "session-end",
            harness,
            &fixture(&format!("{harness}-session-end.json"), &shop),
        );
        assert!(out.is_empty() && err.is_empty(), "{harness}: {out} {err}");
    }

    let (index, shop_row) = project(&server, "shop");
    let prompts: Vec<String> =
        index.prompts(&shop_row).unwrap().into_iter().map(|p| p.text).collect();
    assert_eq!(
        prompts,
        [
            "Always run cargo fmt before committing. My key is [REDACTED], do not store it.",
            "Prefer small commits over big ones. password=[REDACTED]",
            "Use pnpm, not npm, in this repo.",
        ]
    );
    assert_eq!(index.session_ended("cc-7f3a").unwrap(), Some(true));
    assert_eq!(index.session_ended("ses_4bd1opencode").unwrap(), Some(true));
    assert_eq!(
        index.session_ended("019a2c5e-codex").unwrap(),
        Some(false),
        "Codex has no session end"
    );
}

#[test]
fn context_is_capped_prompts_are_bounded_and_bad_input_never_blocks() {
    let server = Server::start("hook-bounds", &[("AI_MEMORY_CAPTURE__MAX_PROMPT_BYTES", "100")]);
    let big = repo("big");
    for i in 0..300 {
        let out = run(
            {
                let mut c = server.cli();
                c.args([
                    "write-page",
                    "--project",
                    "big",
                    "--path",
                    &format!("notes/a-rather-long-page-name-number-{i:03}.md"),
                    "--body",
                    &format!("# A page with a title long enough to fill the context {i}\n"),
                ]);
                c
            },
            None,
        );
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let (out, _) = hook(
        &server,
        "session-start",
        "claude-code",
        &fixture("claude-code-session-start.json", &big),
    );
    let json: Value = serde_json::from_str(&out).unwrap();
    let context = json["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(context.chars().count() <= 10_000, "{}", context.chars().count());
    assert!(context.contains("more pages not listed: memory_query finds them"), "{context}");

    let long = format!(
        "{{\"session_id\":\"s\",\"cwd\":\"{}\",\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"{}\"}}",
        big.display(),
        "word ".repeat(200)
    );
    hook(&server, "prompt-submit", "claude-code", &long);
    let (index, row) = project(&server, "big");
    assert_eq!(index.prompts(&row).unwrap()[0].text.len(), 100, "cut to capture.max_prompt_bytes");

    for (stdin, want) in [
        ("not json", "the hook input is not JSON"),
        ("{\"cwd\":\"/tmp\"}", "no session id"),
        ("{\"session_id\":\"s\",\"hook_event_name\":\"Stop\"}", "is for Stop, not SessionStart"),
    ] {
        let (out, err) = hook(&server, "session-start", "claude-code", stdin);
        assert!(out.is_empty() && err.contains(want), "{stdin}: {err}");
    }
}

#[test]
fn without_a_server_the_hook_writes_to_the_data_directory() {
    let data = temp("hook-direct");
    let home = temp("home");
    let shop = repo("quiet");
    let mut c = command(&data, &home);
    // Nothing listens on port 9 of loopback.
    c.env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9").args(["hook", "prompt-submit"]);
    let out = run(c, Some(&fixture("claude-code-prompt-submit.json", &shop)));
    assert!(out.status.success() && stderr(&out).is_empty(), "{}", stderr(&out));
    let index = Index::open(&data.join("index.sqlite")).unwrap();
    let row = index
        .project(&WorkspaceName::new("default").unwrap(), &ProjectName::new("quiet").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(index.prompts(&row).unwrap().len(), 1);
}

#[test]
fn install_is_idempotent_keeps_a_backup_and_uses_a_stable_command() {
    let data = temp("install");
    let home = temp("home");
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(
        home.join(".claude/settings.json"),
        "{\"model\": \"opus\", \"hooks\": {\"Stop\": []}}",
    )
    .unwrap();
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::write(home.join(".codex/config.toml"), "# my settings\nmodel = \"gpt-5-codex\"\n")
        .unwrap();
    let install = |harness: &str| {
        let mut c = command(&data, &home);
        c.args(["install", harness]);
        let out = run(c, None);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };

    let first = install("claude-code");
    assert!(first.contains("backup:"), "{first}");
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude/settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["model"], "opus", "the user's keys stay");
    assert_eq!(
        settings["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        "ai-memory hook session-start --harness claude-code"
    );
    assert_eq!(
        settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"],
        "ai-memory hook prompt-submit --harness claude-code"
    );
    let tool = &settings["hooks"]["PostToolUse"][0];
    assert_eq!(tool["matcher"], "Write|Edit|MultiEdit|NotebookEdit", "edit tools only");
    assert_eq!(tool["hooks"][0]["command"], "ai-memory hook tool-use --harness claude-code");
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(mcp["mcpServers"]["ai-memory"]["args"][0], "mcp");
    let backups = std::fs::read_dir(data.join("backups/install/claude-code")).unwrap().count();
    assert_eq!(backups, 1, "the settings file that existed is backed up; the new one is not");
    let second = install("claude-code");
    assert_eq!(second.matches("unchanged").count(), 2, "{second}");

    install("codex");
    let toml = std::fs::read_to_string(home.join(".codex/config.toml")).unwrap();
    assert!(
        toml.starts_with("# my settings\nmodel = \"gpt-5-codex\"\n"),
        "comments and keys kept: {toml}"
    );
    assert!(toml.contains("[mcp_servers.ai-memory]"), "{toml}");
    let hooks: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".codex/hooks.json")).unwrap())
            .unwrap();
    assert_eq!(
        hooks["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        "ai-memory hook session-start --harness codex"
    );
    assert_eq!(
        hooks["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
        "ai-memory hook tool-use --harness codex"
    );
    assert!(hooks["hooks"]["PostToolUse"][0].get("matcher").is_none(), "every tool: patches");
    assert!(install("codex").matches("unchanged").count() == 2, "a second run changes nothing");

    install("opencode");
    let plugin =
        std::fs::read_to_string(home.join(".config/opencode/plugins/ai-memory.js")).unwrap();
    assert!(plugin.contains("ai-memory hook ${event} --harness opencode"));
    assert!(plugin.contains("experimental.chat.system.transform"));
    let oc: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".config/opencode/opencode.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(oc["mcp"]["ai-memory"]["command"][1], "mcp");

    let aerix_settings = home.join(".config/aerix/settings.toml");
    std::fs::create_dir_all(aerix_settings.parent().unwrap()).unwrap();
    std::fs::write(&aerix_settings, "# mine\nmax_turns = 12\n").unwrap();
    install("aerix");
    let settings = std::fs::read_to_string(&aerix_settings).unwrap();
    assert!(settings.starts_with("# mine\nmax_turns = 12\n"), "kept: {settings}");
    assert!(
        settings.contains("[mcp.servers.ai-memory]\ncommand = \"ai-memory\"\nargs = [\"mcp\"]"),
        "{settings}"
    );
    assert_eq!(install("aerix").matches("unchanged").count(), 2, "a second run changes nothing");
    let aerix: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".config/aerix/hooks.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        aerix["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        "ai-memory hook session-start --harness aerix"
    );
    assert_eq!(
        aerix["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
        "ai-memory hook tool-use --harness aerix"
    );

    let mut c = command(&data, &home);
    c.args(["install", "vim"]);
    let out = run(c, None);
    assert!(!out.status.success() && stderr(&out).contains("unknown harness `vim`"));
}

/// The OpenCode plugin `install opencode` writes, run by node through OpenCode's plugin calls
/// (with a shim for the part of Bun's shell it uses): the session start's context reaches the
/// system prompt, the user's prompt (not the synthetic part) is captured, the session ends.
#[test]
fn the_opencode_plugin_runs_the_hooks() {
    let server = Server::start("opencode", &[]);
    let shop = repo("oc-shop");
    let mut c = server.cli();
    c.args([
        "write-page",
        "--project",
        "oc-shop",
        "--path",
        "gotchas/tz.md",
        "--body",
        "---\nsummary: Store times in UTC.\n---\n",
    ]);
    assert!(run(c, None).status.success());
    let mut c = server.cli();
    c.args(["install", "opencode"]);
    let out = run(c, None);
    assert!(out.status.success(), "{}", stderr(&out));
    let plugin = server.home.join(".config/opencode/plugins/ai-memory.js");
    assert!(plugin.is_file());

    // The hook command is `ai-memory` on PATH, pointed at this server.
    let bin = server.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(crate::support::BIN, bin.join("ai-memory")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let driver =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/opencode-driver.mjs");
    let out = std::process::Command::new("node")
        .arg(&driver)
        .args([
            plugin.to_str().unwrap(),
            shop.to_str().unwrap(),
            "oc-1",
            "Always use pnpm, not npm.",
        ])
        .env("PATH", path)
        .env("HOME", &server.home)
        .env("XDG_CONFIG_HOME", server.home.join(".config"))
        .env("AI_MEMORY_DATA_DIR", &server.data)
        .env("AI_MEMORY_SERVER__BIND", &server.addr)
        .output()
        .expect("node runs (scripts/setup installs it)");
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let system = result["system"][0].as_str().unwrap_or_default();
    assert!(system.contains("Store times in UTC."), "{result}");

    let (index, row) = project(&server, "oc-shop");
    let prompts: Vec<String> = index.prompts(&row).unwrap().into_iter().map(|p| p.text).collect();
    assert_eq!(prompts, ["Always use pnpm, not npm."]);
    assert_eq!(index.session_ended("oc-1").unwrap(), Some(true));
    // The driver's `edit` call: its file is in the handoff the session's end wrote.
    let handoff = index.handoff(&row, None).unwrap().unwrap().text;
    assert!(
        handoff.contains("- Always use pnpm, not npm.\nFiles changed: `src/app.ts`\n"),
        "{handoff}"
    );
}

/// Kimi Code: `install kimi-code` adds `[[hooks]]` tables (keeping the user's) and the MCP
/// server; the hooks run with Kimi's payloads (a prompt of content parts), and the context goes
/// out as plain text with the session's first prompt only, nothing at session start.
#[test]
fn kimi_code_is_installed_and_gets_the_context_with_its_first_prompt() {
    let data = temp("kimi");
    let home = temp("home");
    let kimi = home.join(".kimi-code");
    std::fs::create_dir_all(&kimi).unwrap();
    let mine = "default_model = \"kimi-for-coding\"\n\n[[hooks]]\nevent = \"Stop\"\ncommand = \"notify\"\n";
    std::fs::write(kimi.join("config.toml"), mine).unwrap();
    let install = || {
        let mut c = command(&data, &home);
        c.args(["install", "kimi-code"]);
        let out = run(c, None);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    install();
    let config: toml::Table =
        std::fs::read_to_string(kimi.join("config.toml")).unwrap().parse().unwrap();
    assert_eq!(config["default_model"].as_str(), Some("kimi-for-coding"));
    let hooks = config["hooks"].as_array().unwrap();
    let events: Vec<_> = hooks.iter().map(|h| h["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["Stop", "SessionStart", "UserPromptSubmit", "SessionEnd"]);
    assert_eq!(
        hooks[2]["command"].as_str(),
        Some("ai-memory hook prompt-submit --harness kimi-code")
    );
    assert!(
        hooks[1..].iter().all(|h| h.as_table().unwrap().len() == 3),
        "event, command, timeout only"
    );
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(kimi.join("mcp.json")).unwrap()).unwrap();
    assert_eq!(
        mcp["mcpServers"]["ai-memory"],
        serde_json::json!({"command": "ai-memory", "args": ["mcp"]})
    );
    assert_eq!(install().matches("unchanged").count(), 2, "a second run changes nothing");

    let shop = repo("shop");
    let mut c = command(&data, &home);
    c.args([
        "write-page",
        "--project",
        "shop",
        "--path",
        "gotchas/tz.md",
        "--body",
        "---\nsummary: Store times in UTC.\n---\n",
    ]);
    assert!(run(c, None).status.success());
    let hook = |event: &str, fixture_name: &str| {
        let mut c = command(&data, &home);
        c.env("AI_MEMORY_SERVER__BIND", "127.0.0.1:9").args([
            "hook",
            event,
            "--harness",
            "kimi-code",
        ]);
        let out = run(c, Some(&fixture(fixture_name, &shop)));
        assert!(out.status.success() && stderr(&out).is_empty(), "{event}: {}", stderr(&out));
        stdout(&out)
    };
    assert_eq!(
        hook("session-start", "kimi-code-session-start.json"),
        "",
        "nothing at session start"
    );
    let first = hook("prompt-submit", "kimi-code-prompt-submit.json");
    assert!(first.starts_with("# ai-memory: default/shop\n"), "{first}");
    assert!(first.contains("Store times in UTC. (`gotchas/tz.md`)"), "{first}");
    assert_eq!(hook("prompt-submit", "kimi-code-prompt-submit.json"), "", "once a session");
    assert_eq!(hook("session-end", "kimi-code-session-end.json"), "");
    let (index, row) = {
        let index = Index::open(&data.join("index.sqlite")).unwrap();
        let row = index
            .project(&WorkspaceName::new("default").unwrap(), &ProjectName::new("shop").unwrap())
            .unwrap()
            .unwrap();
        (index, row)
    };
    let prompts: Vec<String> = index.prompts(&row).unwrap().into_iter().map(|p| p.text).collect();
    assert_eq!(prompts, ["Always run the tests before pushing."; 2]);
    assert_eq!(index.session_ended("session_k1").unwrap(), Some(true));
}
