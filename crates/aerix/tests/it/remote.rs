//! A remote main member: `aerix -p` whose main member is `openai:URL#MODEL` on the real
//! llama-server serving SmolLM2 (a real generation under the turn schema), and whose decision
//! member is local (scripted: a real route on SmolLM2 adds nothing here but time). One server
//! for the binary.

use std::sync::OnceLock;

use test_models::server::{Server, ServerConfig};

use crate::{World, of_type, smollm2, stderr, toml_str};

/// The API key the pool sends; llama-server started without `--api-key` takes any.
const KEY: &str = "sk-aerix-remote-test-0123456789";

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let (binary, model) = (test_models::llama_server(), smollm2());
        let config =
            ServerConfig { binary: &binary, model: &model, threads: 2, slots: 1, window: 4096 };
        Server::start_tied(&config).expect("llama-server starts on SmolLM2")
    })
}

#[test]
fn a_remote_main_member_takes_turns_under_the_turn_schema_beside_a_local_decision_member() {
    let _engine = crate::engine();
    let (server, model) = (server(), smollm2());
    let world = World::new("remote", "", "");
    let decision = world.script("decision", &["answer".to_owned()], true);
    let smol = model.display().to_string();
    world.write_settings_with(
        &format!("openai:{}#{smol}", server.base_url()),
        &format!("ctx = 4096\ntokenizer = {}\napi_key_env = \"AERIX_REMOTE_TEST_KEY\"\n", toml_str(&smol)),
        &format!(
            "[members.decision]\nmodel = {}\n[context]\nmax_new_tokens = 120\nrepeat_guard = false\n\
             [delegation]\ndepth = 0\n",
            toml_str(&decision)
        ),
    );
    let out = world
        .aerix_command(&["-p", "What does the add function in calc.sh do?", "--max-turns", "1"])
        .env("AERIX_REMOTE_TEST_KEY", KEY)
        .output()
        .unwrap();
    let code = out.status.code();
    assert!(matches!(code, Some(0) | Some(2)), "a named outcome: {code:?}\n{}", stderr(&out));
    let events = world.events();
    assert_eq!(of_type(&events, "route")[0]["member"], "decision");
    assert_turns_parse(&events);
    let end = of_type(&events, "agent.end").into_iter().find(|e| e["agent"] == "a1").unwrap();
    assert_ne!(end["outcome"], "failed", "{end}");
    // The key is named in the settings, read by the pool, and written nowhere.
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    assert!(!log.contains(KEY) && !stderr(&out).contains(KEY));
    let status = std::process::Command::new(crate::caldrix())
        .args(["pool", "status", "--json", "--socket", world.socket.to_str().unwrap()])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("\"llama-server\"") && !status.contains(KEY), "{status}");
}

/// The engine renders (`render = "engine"`, the route of vLLM, which serves no template): the
/// turn goes to its chat endpoint as messages under the turn schema, counted with its own
/// tokens of them.
#[test]
fn a_remote_main_member_whose_engine_renders_takes_a_turn() {
    let _engine = crate::engine();
    let world = World::new("remote-chat", "", "");
    let decision = world.script("decision", &["answer".to_owned()], true);
    world.write_settings_with(
        &format!("openai:{}#{}", server().base_url(), smollm2().display()),
        "ctx = 4096\nrender = \"engine\"\n",
        &format!(
            "[members.decision]\nmodel = {}\n[context]\nmax_new_tokens = 120\nrepeat_guard = false\n\
             [delegation]\ndepth = 0\n",
            toml_str(&decision)
        ),
    );
    let out = world
        .aerix_command(&["-p", "What does the add function in calc.sh do?", "--max-turns", "1"])
        .output()
        .unwrap();
    let code = out.status.code();
    assert!(matches!(code, Some(0) | Some(2)), "a named outcome: {code:?}\n{}", stderr(&out));
    let events = world.events();
    assert_turns_parse(&events);
    let status = std::process::Command::new(crate::caldrix())
        .args(["pool", "status", "--json", "--socket", world.socket.to_str().unwrap()])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let main =
        status["members"].as_array().unwrap().iter().find(|m| m["info"]["remote"].is_object());
    assert_eq!(main.unwrap()["info"]["remote"]["render"], "engine", "{status}");
}

/// The root agent took at least one turn on the remote member, over the whole prompt, and
/// every turn parsed under the turn schema.
fn assert_turns_parse(events: &[serde_json::Value]) {
    let turns: Vec<_> = of_type(events, "segment")
        .into_iter()
        .filter(|s| s["agent"] == "a1" && s["label"] == "turn" && s["op"] == "append")
        .collect();
    assert!(!turns.is_empty(), "the remote member took a turn");
    assert!(turns.iter().all(|t| t["prompt_tokens"].as_u64().unwrap() > 100), "{turns:?}");
    assert!(
        of_type(events, "segment")
            .iter()
            .all(|s| !s["text"].as_str().unwrap_or("").starts_with("[parse error]")),
        "every turn parses under the schema"
    );
}
