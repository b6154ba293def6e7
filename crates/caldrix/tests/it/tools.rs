//! Tool calls through the real daemon on SmolLM2: every reply under the `tools` constraint is
//! a plain answer or calls of the offered tools whose arguments validate, whatever the seed.

use caldrix_proto::{
    Constraint, ErrorKind, FrameFormat, Reply, Request, Role, Sampling, Tool, ToolChoice,
};

use crate::pool::{Daemon, generate, runtime, seg};

const READ: &str = r#"{"type":"object","properties":{"path":{"type":"string","maxLength":80},"lines":{"type":"integer","minimum":1,"maximum":500}},"required":["path"],"additionalProperties":false}"#;
const BASH: &str = r#"{"type":"object","properties":{"command":{"type":"string","maxLength":120}},"required":["command"],"additionalProperties":false}"#;

fn tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            parameters: READ.into(),
        },
        Tool {
            name: "bash".into(),
            description: "Runs a shell command.".into(),
            parameters: BASH.into(),
        },
    ]
}

fn schema_of(name: &str) -> serde_json::Value {
    let text = if name == "read_file" { READ } else { BASH };
    serde_json::from_str(text).unwrap()
}

#[test]
fn every_sampled_reply_is_calls_that_validate_or_a_plain_answer() {
    let _serial = crate::serial();
    let daemon = Daemon::start("tools", FrameFormat::Cbor, &[], None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Cbor).await;
        let segments = vec![
            seg("s", Role::System, "You are a coding agent. Use the tools."),
            seg("u", Role::User, "What is in src/main.rs?"),
        ];
        let created = client
            .request(&Request::ContextCreate { member: "main".into(), segments, tools: tools() })
            .await
            .unwrap();
        let Reply::Context { context, .. } = created else { panic!("{created:?}") };
        let mut calls = 0;
        // Fewer seeds than the SDK test's 20 (http.rs), which takes the same grammar through HTTP.
        for (choice, seeds) in [(ToolChoice::Required {}, 0..8u64), (ToolChoice::Auto {}, 8..12)] {
            for seed in seeds {
                let mut g = generate(context, 160, None);
                // One call per reply: a 135M model repeats calls when it may chain them.
                g.constraint = Constraint::Tools { choice: choice.clone(), parallel: false };
                g.sampling = Some(Sampling { temperature: 1.0, top_p: 1.0, seed });
                let done = client.generate(g, |_| {}).await.unwrap();
                if done.stop == caldrix_proto::StopReason::MaxTokens {
                    continue; // cut short: neither an answer nor a call, and it says so
                }
                if choice == (ToolChoice::Required {}) {
                    assert!(!done.tool_calls.is_empty(), "seed {seed}: no call in {:?}", done.text);
                    calls += 1;
                }
                if done.tool_calls.is_empty() {
                    assert!(!done.text.trim_start().starts_with("<tool_call>"), "{:?}", done.text);
                }
                for call in &done.tool_calls {
                    let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
                    let validator = jsonschema::validator_for(&schema_of(&call.name)).unwrap();
                    assert!(validator.is_valid(&args), "seed {seed}: {} {args}", call.name);
                }
            }
        }
        // The bound on strings keeps calls short: all but a few finish within the tokens.
        assert!(calls >= 7, "{calls} of 8 required replies ended as calls");
        // `none`: text, never a call; a named tool: only that tool.
        let mut g = generate(context, 48, None);
        g.constraint = Constraint::Tools { choice: ToolChoice::None {}, parallel: true };
        let done = client.generate(g, |_| {}).await.unwrap();
        assert!(
            done.tool_calls.is_empty() && !done.text.contains("<tool_call>"),
            "{:?}",
            done.text
        );
        let mut g = generate(context, 96, None);
        g.constraint = Constraint::Tools {
            choice: ToolChoice::Named { name: "bash".into() },
            parallel: false,
        };
        let done = client.generate(g, |_| {}).await.unwrap();
        assert_eq!(done.tool_calls.len(), 1, "{:?}", done.text);
        assert_eq!(done.tool_calls[0].name, "bash");
    });
}

#[test]
fn a_schema_the_constraint_cannot_take_is_refused_naming_the_tool() {
    let _serial = crate::serial();
    let daemon = Daemon::start("tools-bad", FrameFormat::Json, &[], None);
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Json).await;
        let mut offered = tools();
        offered.push(Tool {
            name: "weird".into(),
            description: String::new(),
            parameters: r##"{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}"##.into(),
        });
        let err = client
            .request(&Request::ContextCreate {
                member: "main".into(),
                segments: vec![seg("u", Role::User, "hi")],
                tools: offered,
            })
            .await
            .unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::BadConstraint), "{err}");
        assert!(err.to_string().contains("tool `weird`"), "{err}");
        // The daemon serves on: the same tools without the bad one make a context.
        let ok = client
            .request(&Request::ContextCreate {
                member: "main".into(),
                segments: vec![seg("u", Role::User, "hi"), seg("t", Role::Tool, "done")],
                tools: tools(),
            })
            .await
            .unwrap();
        assert!(matches!(ok, Reply::Context { .. }), "{ok:?}");
    });
}
