//! What the `context` call's per-turn ids enum costs a generation on a real pool member: the
//! same context generated one token at a time under no constraint, the turn schema without the
//! enum, and the turn schema with it, alternating, for contexts of several sizes.
//!
//!     caldrix pool --socket /tmp/cost/pool.sock --load MODEL --ctx 8192 --threads 2 &
//!     cargo run -p aerix-turn --example turn_schema_cost -- /tmp/cost/pool.sock [--runs 15] [--pairs 5,20,50]
//!
//! A generation of one token after a stored prefix computes almost no rows, so its wall time
//! apart from the pool's `prefill_ms` and `decode_ms` is the schema's compile (llguidance: the
//! schema to a grammar, the parser over the vocabulary) plus the frame round trip, which the
//! unconstrained run measures alone; `decode_ms` holds the first token's mask (llguidance
//! builds its lexer states lazily, so the first mask pays for them). Prints medians in ms.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "an experiment fails loudly")]

use std::path::PathBuf;
use std::time::Instant;

use aerix_turn::prompts::Prompts;
use aerix_turn::schemas::{ContextIds, restrict_context_call};
use aerix_turn::{ALL_TOOLS, Answer, schema_for, system_segment};
use caldrix_client::Client;
use caldrix_proto::{Constraint, FrameFormat, Generate, Role, Segment};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let socket = PathBuf::from(args.next().expect("SOCKET"));
    let (mut runs, mut pairs) = (15usize, vec![5usize, 20, 50]);
    while let Some(a) = args.next() {
        let v = args.next().expect("a value");
        match a.as_str() {
            "--runs" => runs = v.parse().unwrap(),
            "--pairs" => pairs = v.split(',').map(|n| n.parse().unwrap()).collect(),
            other => panic!("unknown argument {other}"),
        }
    }
    let mut client = Client::connect(&socket, FrameFormat::Cbor, "turn-schema-cost").await.unwrap();
    let member = client.members().await.unwrap().remove(0).alias;
    let tools: Vec<String> = ALL_TOOLS.iter().map(|t| (*t).to_owned()).collect();
    let plain = schema_for(&tools, Answer::Text);
    println!(
        "| segments (context) | schema bytes without / with | compile + round trip: none / without / with (ms) | first token's mask: none / without / with (ms) | prefill (ms) |"
    );
    println!("|---|---|---|---|---|");
    for n in pairs {
        // The system segment, the prompt, then n turns each with its result.
        let mut segments = vec![
            segment("system", Role::System, system_segment(&Prompts::embedded(), None)),
            segment("p1", Role::User, "sh test.sh fails. Find out why and fix calc.sh.".into()),
        ];
        for i in 1..=n {
            let turn = format!(
                r#"{{"thought":"Look at part {i}.","calls":[{{"tool":"read","input":{{"path":"part{i}.txt"}}}}]}}"#
            );
            segments.push(segment(&format!("t{i}"), Role::Assistant, turn));
            segments.push(segment(
                &format!("c{i}"),
                Role::User,
                format!("[read c{i}]\n1\tpart {i}"),
            ));
        }
        let all: Vec<String> = segments.iter().map(|s| s.id.clone()).collect();
        let ids = ContextIds { droppable: all[1..].to_vec(), all };
        let mut with = plain.clone();
        restrict_context_call(&mut with, &ids);
        let (plain_text, with_text) = (plain.to_string(), with.to_string());
        let counts = client.create_context(&member, segments).await.unwrap();
        let context = counts.context;
        let generate = |constraint: Constraint| Generate {
            context,
            constraint,
            max_new_tokens: 1,
            sampling: None,
            logprobs: None,
            append_as: None,
        };
        // The prompt's rows, stored once.
        client.generate(generate(Constraint::None), |_| {}).await.unwrap();
        let kinds = [
            Constraint::None,
            Constraint::Json { schema: plain_text.clone() },
            Constraint::Json { schema: with_text.clone() },
        ];
        let mut rest: [Vec<f64>; 3] = Default::default();
        let mut first: [Vec<f64>; 3] = Default::default();
        let mut prefill = Vec::new();
        for _ in 0..runs {
            for (k, constraint) in kinds.iter().enumerate() {
                let start = Instant::now();
                let done = client.generate(generate(constraint.clone()), |_| {}).await.unwrap();
                let wall = start.elapsed().as_secs_f64() * 1e3;
                rest[k].push(wall - done.usage.prefill_ms - done.usage.decode_ms);
                first[k].push(done.usage.decode_ms);
                prefill.push(done.usage.prefill_ms);
                if std::env::var_os("COST_DEBUG").is_some() {
                    eprintln!("{:?}", done.usage);
                }
            }
        }
        client.drop_context(context).await.unwrap();
        let m = |v: &mut Vec<f64>| median(v);
        println!(
            "| {} ({} tokens) | {} / {} | {:.1} / {:.1} / {:.1} | {:.1} / {:.1} / {:.1} | {:.0} |",
            2 + 2 * n,
            counts.total_tokens,
            plain_text.len(),
            with_text.len(),
            m(&mut rest[0]),
            m(&mut rest[1]),
            m(&mut rest[2]),
            m(&mut first[0]),
            m(&mut first[1]),
            m(&mut first[2]),
            m(&mut prefill),
        );
    }
}

fn segment(id: &str, role: Role, text: String) -> Segment {
    Segment { id: id.to_owned(), role, text, pinned: false }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
