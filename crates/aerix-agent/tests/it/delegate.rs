//! Delegation in process, on a scripted pool: which attempt wins, what a retry is told, and
//! what lands in the caller's tree. No daemon: every piece and attempt connects to the fake.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use aerix_agent::delegate::{Delegator, WorktreePlace};
use aerix_agent::runtime::{
    Caller, Context, Delegation, Label, Options, Prompts, Runtime, Segment,
};
use aerix_session::Event;
use aerix_tools::Cancel;
use aerix_turn::Call;
use caldrix_proto::Role;
use serde_json::{Value, json};

use crate::pool::{Pool, Recorded, Reply};

const CHECK: &str = "sh test.sh";

/// A git repository whose check passes once `ok.txt` says `good` (it starts as `ok`), a data
/// home for attempts' worktrees, and the scripted pool every piece connects to.
struct Case {
    repo: tempfile::TempDir,
    data: tempfile::TempDir,
    pool: Arc<Pool>,
}

impl Case {
    fn new(ok: &str, script: impl Fn(Reply<'_>) -> String + Send + Sync + 'static) -> Case {
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        std::fs::write(root.join("test.sh"), "grep -q good ok.txt\n").unwrap();
        std::fs::write(root.join("ok.txt"), ok).unwrap();
        git(root, &["init", "-q"]);
        git(root, &["add", "."]);
        git(root, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"]);
        Case { repo, data: tempfile::tempdir().unwrap(), pool: Pool::new(script) }
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.repo.path().join(file)).unwrap()
    }

    /// The one piece `c1`, "make the check pass": its result, and the events.
    async fn one_piece(&self, attempts: u32, retries: u32) -> (Value, Vec<Event>) {
        let (results, events) =
            self.delegate(attempts, retries, &[agent_call("c1", "make the check pass")]).await;
        let (id, result) = results.into_iter().next().unwrap();
        assert_eq!(id, "c1", "the call has its result");
        (result, events)
    }

    /// Runs one turn's `agent` calls of the root `a1` in the repository; each call's result as
    /// JSON, and the events.
    async fn delegate(
        &self,
        attempts: u32,
        retries: u32,
        calls: &[Call],
    ) -> (Vec<(String, Value)>, Vec<Event>) {
        let delegator = Arc::new(Delegator {
            pool: Arc::clone(&self.pool) as Arc<dyn aerix_agent::runtime::Connect>,
            parallel: 2,
            retries,
            max_turns: 6,
            depth: 2,
            attempts,
            temperature: 0.7,
            seed: 7,
            whole: false,
            review: false,
            worktrees: Some(WorktreePlace {
                data_home: self.data.path().to_owned(),
                project_key: "p".to_owned(),
            }),
        });
        let mut events = Recorded::default();
        let mut client = self.pool.client();
        let system = Segment {
            id: "system".to_owned(),
            role: Role::System,
            label: Label::System,
            text: "You are a test.".to_owned(),
            pinned: false,
            tokens: 0,
        };
        // The caller's context, as its pieces' prefix.
        let _ = Context::create(&mut client, &mut events, "a1", "main", vec![system.clone()], true)
            .await
            .unwrap();
        let caller = Caller {
            id: "a1".to_owned(),
            depth: 0,
            member: "main".to_owned(),
            window: 8192,
            json: true,
            held: Vec::new(),
            prefix: vec![system],
        };
        let results = {
            let prompts = Arc::new(Prompts::embedded());
            let tree = self.repo.path();
            let mut rt =
                Runtime::new(&mut client, &mut events, options(), prompts, tree, Cancel::default())
                    .with_checks(vec![CHECK.to_owned()])
                    .with_delegation(Arc::clone(&delegator) as Arc<dyn Delegation>);
            delegator.run_all(&mut rt, &caller, calls).await
        };
        let results = results
            .into_iter()
            .map(|(id, result)| {
                let text = result.unwrap_or_else(|e| panic!("piece {id}: {}", e.0));
                (id, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")))
            })
            .collect();
        (results, events.events)
    }
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn options() -> Options {
    Options {
        max_new_tokens: 256,
        repeat_guard: false,
        last_turn_final: false,
        tool_caps: Default::default(),
        default_tool_cap: 20_000,
        skills_chars: 0,
        planner_tools: Vec::new(),
    }
}

fn agent_call(id: &str, brief: &str) -> Call {
    Call {
        id: id.to_owned(),
        tool: "agent".to_owned(),
        input: json!({"brief": brief, "check": CHECK}),
    }
}

/// The `attempt` events' (attempt, round), in order.
fn attempts(events: &[Event]) -> Vec<(u32, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Attempt { attempt, round, .. } => Some((*attempt, *round)),
            _ => None,
        })
        .collect()
}

fn write(path: &str, content: &str) -> String {
    json!({"thought": "writing", "calls": [{"tool": "write", "input": {"path": path, "content": content}}]})
        .to_string()
}

fn done(text: &str) -> String {
    json!({"thought": "done", "final": text}).to_string()
}

const START: &str = "nothing yet\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempt_that_passes_its_check_wins_and_only_its_change_lands() {
    // Attempt 1 (greedy) writes what fails the check; attempt 2 (sampled) what passes it.
    let case = Case::new(START, |reply: Reply<'_>| match (reply.sampled, reply.turn) {
        (false, 0) => write("ok.txt", "bad\n"),
        (true, 0) => write("ok.txt", "good\n"),
        _ => done("wrote ok.txt"),
    });
    let (result, events) = case.one_piece(2, 0).await;
    assert_eq!(result["outcome"], "done", "{result}");
    assert_eq!(result["landed"], "attempt 2's change: ok.txt", "{result}");
    assert_eq!(case.read("ok.txt"), "good\n", "the winner's change is the one that landed");
    let first_round: Vec<(u32, u32)> = attempts(&events).into_iter().filter(|a| a.1 == 1).collect();
    assert_eq!(first_round.len(), 2, "two attempts ran: {first_round:?}");
    let verdicts: Vec<(u32, bool)> = result["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["attempt"].as_u64().unwrap() as u32, v["verdict"] == "pass"))
        .collect();
    // Attempt 1 may be cancelled before its check runs once attempt 2 has passed; it never
    // passes.
    let passed: Vec<u32> = verdicts.iter().filter(|(_, pass)| *pass).map(|(a, _)| *a).collect();
    assert_eq!(passed, [2], "{verdicts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_is_retried_with_its_checks_reason() {
    // The first round writes what fails; the retry, told why, what passes.
    let case = Case::new(START, |reply: Reply<'_>| {
        let retried = reply.context.contains("The last attempt failed its check");
        match (retried, reply.turn) {
            (false, 0) => write("ok.txt", "bad\n"),
            (true, 0) => write("ok.txt", "good\n"),
            _ => done("wrote ok.txt"),
        }
    });
    let (result, events) = case.one_piece(1, 1).await;
    assert_eq!(result["outcome"], "done", "{result}");
    assert_eq!(case.read("ok.txt"), "good\n");
    let rounds: Vec<u32> = attempts(&events).into_iter().map(|(_, round)| round).collect();
    assert_eq!(rounds, [1, 2], "one attempt a round, the second a retry");
    let briefs = case.pool.briefs();
    assert!(
        briefs.iter().any(|b| b.contains("The last attempt failed its check") && b.contains(CHECK)),
        "the retry's brief names the failed check: {briefs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_attempt_fails_nothing_lands_and_the_result_says_so() {
    let case = Case::new(START, |reply: Reply<'_>| match reply.turn {
        0 => write("ok.txt", "bad\n"),
        _ => done("wrote ok.txt"),
    });
    let (result, _) = case.one_piece(1, 1).await;
    assert_eq!(result["outcome"], "failed", "{result}");
    assert_eq!(
        result["landed"], "nothing: no attempt passed its check, and the tree is as it was",
        "{result}"
    );
    assert!(
        result["summary"].as_str().unwrap().contains("verification failed after 2 attempts"),
        "{result}"
    );
    assert_eq!(case.read("ok.txt"), START, "the caller's tree is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pieces_of_one_turn_both_land_in_call_order() {
    // The check passes from the start; each piece writes the file its brief names.
    let case = Case::new("good\n", |reply: Reply<'_>| {
        let file = if reply.context.contains("first piece") { "one.txt" } else { "two.txt" };
        match reply.turn {
            0 => write(file, "mine\n"),
            _ => done("wrote it"),
        }
    });
    let calls = [agent_call("c1", "the first piece"), agent_call("c2", "the second piece")];
    let (results, _) = case.delegate(1, 0, &calls).await;
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"], "results in call order");
    for ((id, result), file) in results.iter().zip(["one.txt", "two.txt"]) {
        assert_eq!(result["outcome"], "done", "{id}: {result}");
        assert_eq!(result["landed"], format!("attempt 1's change: {file}"), "{id}: {result}");
    }
    assert_eq!(case.read("one.txt"), "mine\n");
    assert_eq!(case.read("two.txt"), "mine\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_piece_whose_attempt_panics_is_a_failed_call_not_a_lost_one() {
    let case = Case::new(START, |_: Reply<'_>| panic!("the member broke"));
    let (result, _) = case.one_piece(1, 0).await;
    assert_eq!(result["outcome"], "failed", "{result}");
    assert!(result["summary"].as_str().unwrap().contains("the attempt panicked"), "{result}");
}
