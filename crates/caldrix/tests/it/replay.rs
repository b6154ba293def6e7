//! The replay member (`replay:REPLIES@MODEL`) through the real daemon: scripted replies forced
//! through SmolLM2's engine, so their rows and the prompt's are computed and stored.

use caldrix_proto::{
    Constraint, Edit, ErrorKind, FrameFormat, Reply, Role, ServingFlags, StopReason,
};

use crate::pool::{Daemon, generate, runtime, seg};
use crate::smollm2;

#[test]
fn a_replay_member_computes_and_stores_the_rows_of_its_replies() {
    let _serial = crate::serial();
    let daemon = Daemon::start("replay", FrameFormat::Json, &[], None);
    let script = daemon.dir.join("replies.json");
    let answer = "The bug is in calc.sh: it adds where it should subtract.";
    let turn = r#"{"thought":"Fix it.","final":"done"}"#;
    let replies = [answer, turn, "edit", "not json"];
    std::fs::write(&script, serde_json::to_string(&replies).unwrap()).unwrap();
    let reference = format!("replay:{}@{}", script.display(), smollm2().display());
    runtime().block_on(async {
        let mut client = daemon.client(FrameFormat::Json).await;
        let err = client.load_member("r", "replay:nothing.json", Default::default()).await;
        assert!(err.unwrap_err().to_string().contains("replay:REPLIES@MODEL"));
        let flags = ServingFlags { ctx: Some(2048), threads: Some(2), ..Default::default() };
        client.load_member("replay", &reference, flags).await.unwrap();
        let segments = vec![
            seg("sys", Role::System, "You are a coding agent. Keep answers short."),
            seg("u1", Role::User, "sh test.sh fails. Why?"),
        ];
        let c = client.create_context("replay", segments).await.unwrap().context;

        let mut deltas = String::new();
        let first = client
            .generate(generate(c, 64, Some("a1")), |f| {
                if let Reply::Delta { text } = f {
                    deltas.push_str(text);
                }
            })
            .await
            .unwrap();
        assert_eq!((first.text.as_str(), deltas.as_str()), (answer, answer));
        assert_eq!(first.stop, StopReason::EndOfTurn);
        let usage = &first.usage;
        assert_eq!(usage.recomputed_from, Some(0), "a cold prefill");
        assert!(usage.prefill_ms > 0.0 && usage.decode_ms > 0.0, "timed for real: {usage:?}");
        let stored = usage.prompt_tokens + usage.completion_tokens;
        let store = client.status().await.unwrap().members.into_iter().find(|m| m.info.alias == "replay");
        let store = store.unwrap().store;
        assert!(store.rows >= u64::from(stored) && store.entries == 1, "{store:?}");

        client
            .edit_context(c, vec![Edit::Append { segment: seg("u2", Role::User, "Fix it.") }])
            .await
            .unwrap();
        let schema = r#"{"type":"object","properties":{"thought":{"type":"string"},"final":{"type":"string"}},"required":["thought","final"],"additionalProperties":false}"#;
        let mut json = generate(c, 64, Some("a2"));
        json.constraint = Constraint::Json { schema: schema.into() };
        let second = client.generate(json.clone(), |_| {}).await.unwrap();
        assert_eq!((second.text.as_str(), second.stop), (turn, StopReason::Complete));
        let from = second.usage.recomputed_from.unwrap();
        assert!(
            from >= stored && from < second.usage.prompt_tokens,
            "resumed at {from}, past the first turn's {stored} rows of prompt and reply"
        );

        let mut route = generate(c, 8, None);
        route.constraint = Constraint::OneOf { options: vec!["answer".into(), "edit".into()] };
        let routed = client.generate(route, |_| {}).await.unwrap();
        let scores = routed.one_of.unwrap();
        assert_eq!((routed.text.as_str(), scores.chosen), ("edit", 1), "the scripted option");
        assert!(scores.logprobs.iter().all(|&l| l < 0.0 && l > -1000.0), "scored: {scores:?}");
        assert!(routed.usage.recomputed_from.unwrap() > from, "the probe resumed the second turn's rows");

        let err = client.generate(json.clone(), |_| {}).await.unwrap_err();
        assert_eq!(err.kind(), Some(ErrorKind::Script), "{err}");
        let err = client.generate(json, |_| {}).await.unwrap_err();
        assert!(err.to_string().contains("no reply left"), "{err}");

        let status = client.status().await.unwrap();
        let store = status.members.into_iter().find(|m| m.info.alias == "replay").unwrap().store;
        assert!(store.hits >= 2 && store.rows > u64::from(stored), "{store:?}");
        client.stop().await.unwrap();
    });
}
