//! One piece: `delegation.attempts` implementers at once, each in a worktree of the caller's
//! tree (`attempt.rs`), the first to pass its check winning (the others are cancelled); when
//! every attempt fails, each is rerun with every attempt's reason, at most `delegation.retries`
//! times. The winner's change lands in the caller's tree later, in call order (`lib.rs`); the
//! caller gets `{summary, files_touched, checks_run, outcome, verdicts, landed}`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use aerix_config::AgentDefinition as Definition;

use crate::runtime::{Connection, CoreError, Runtime, Stats};
use aerix_session::{Event, Outcome};
use aerix_tools::ToolError;
use aerix_turn::Call;
use aerix_worktrees::Change;
use caldrix_proto::Sampling;
use serde_json::Value;

use crate::delegate::attempt::{self, Judged, Lane, Verdict};
use crate::delegate::reasons;
use crate::delegate::sink::{PieceSink, Trace};
use crate::delegate::tree::Trees;
use crate::delegate::{Shared, lock};

/// The member a piece's agents run on.
pub(crate) struct Member {
    pub(crate) alias: String,
    pub(crate) window: u32,
    pub(crate) json: bool,
}

/// How a piece ended, before its change lands.
pub(crate) struct Ending {
    pub(crate) outcome: Outcome,
    pub(crate) summary: String,
    pub(crate) trace: Trace,
    pub(crate) judged: Vec<Judged>,
    /// The passing attempt's change, to land in the caller's tree.
    pub(crate) landing: Option<Landing>,
    /// Why nothing lands when it ran in place (not a git work tree).
    pub(crate) in_place: bool,
    /// The outcome the caller reads when it is not an agent's (`conflict`).
    pub(crate) outcome_text: Option<&'static str>,
}

/// A passing attempt's change and the store of the tree it lands in.
pub(crate) struct Landing {
    pub(crate) store: aerix_worktrees::Store,
    pub(crate) change: Change,
    pub(crate) attempt: u32,
}

/// Runs the piece of `call`; how it ended, and the time its generations took.
pub(crate) async fn run(
    shared: &Arc<Shared>,
    caller: &Arc<crate::runtime::Caller>,
    call: &Call,
) -> (Result<Ending, ToolError>, Stats) {
    let piece = format!("{}.{}", caller.id, call.id);
    let mut stats = Stats::default();
    let ending = async {
        let (input, member) = prepare(shared, caller, &piece, call).await?;
        rounds(shared, caller, &piece, input, member, &mut stats).await
    }
    .await;
    (ending, stats)
}

/// The call's input and the member, on a connection of the piece's own.
async fn prepare(
    shared: &Shared,
    caller: &crate::runtime::Caller,
    piece: &str,
    call: &Call,
) -> Result<(Input, Member), ToolError> {
    let mut client = connect(shared).await?;
    let trace = Mutex::new(Trace::default());
    let mut sink = PieceSink::new(&shared.outlet, piece, &trace);
    let services = Arc::clone(&shared.services);
    let mut rt =
        Runtime::sharing(&mut *client, &mut sink, services, &shared.cwd, shared.cancel.clone());
    let input = input(&rt, &call.input)?;
    let member = member(&mut rt, caller, &input).await?;
    Ok((input, member))
}

async fn rounds(
    shared: &Arc<Shared>,
    caller: &Arc<crate::runtime::Caller>,
    piece: &str,
    input: Input,
    member: Member,
    stats: &mut Stats,
) -> Result<Ending, ToolError> {
    let delegator = &shared.delegator;
    let trees = match &delegator.worktrees {
        Some(place) => {
            Trees::open(&shared.cwd, place, Arc::clone(&shared.services.hooks))?.map(Arc::new)
        }
        None => None,
    };
    let (input, member) = (Arc::new(input), Arc::new(member));
    let in_place = trees.is_none();
    let n = if in_place { 1 } else { delegator.attempts.max(1) };
    let mut lanes = Vec::new();
    for k in 1..=n {
        let prefix = if n == 1 { piece.to_owned() } else { format!("{piece}.a{k}") };
        let tree = match &trees {
            Some(trees) => trees.make(&prefix)?,
            None => shared.cwd.clone(),
        };
        lanes.push(Arc::new(Lane {
            number: k,
            tree,
            sampling: (k > 1).then(|| Sampling {
                // Bounded to (0, 2] by the settings.
                #[allow(clippy::cast_possible_truncation, reason = "bounded by the settings")]
                temperature: delegator.temperature as f32,
                top_p: 1.0,
                seed: seed(delegator.seed, piece, k),
            }),
            prefix,
            trace: Mutex::new(Trace::default()),
            cancel: shared.cancel.child(),
        }));
    }
    let lanes = Arc::new(lanes);
    let mut reasons: Arc<Vec<reasons::Group>> = Arc::default();
    let mut judged = Vec::new();
    let mut live: Vec<Arc<Lane>> = lanes.iter().cloned().collect();
    for round in 0..=delegator.retries {
        for lane in &live {
            shared.outlet.event(Event::Attempt {
                agent: piece.to_owned(),
                attempt: lane.number,
                of: n,
                round: round + 1,
                implementer: if round == 0 {
                    lane.prefix.clone()
                } else {
                    format!("{}.r{round}", lane.prefix)
                },
                tree: lane.tree.display().to_string(),
                temperature: lane.sampling.map(|_| delegator.temperature),
                seed: lane.sampling.map(|s| s.seed),
                request_seed: lane.sampling.map(|_| delegator.seed),
            });
        }
        let winner = Arc::new(AtomicU32::new(0));
        // Each attempt a task of its own; the first to pass wins and cancels the others.
        let mut attempts = tokio::task::JoinSet::new();
        let mut numbers = std::collections::HashMap::new();
        for lane in &live {
            let (shared, caller, lane, lanes) =
                (Arc::clone(shared), Arc::clone(caller), Arc::clone(lane), Arc::clone(&lanes));
            let (input, member, reasons, winner, trees) = (
                Arc::clone(&input),
                Arc::clone(&member),
                Arc::clone(&reasons),
                Arc::clone(&winner),
                trees.clone(),
            );
            let number = lane.number;
            let task = attempts.spawn(async move {
                let mut ended =
                    attempt::run(&shared, &caller, &lane, &input, &member, round, &reasons).await;
                if let (Verdict::Pass, Some(trees)) = (&ended.verdict, &trees) {
                    tests_kept(&shared, trees, &lane, &input, round, &mut ended);
                }
                if matches!(ended.verdict, Verdict::Pass)
                    && winner
                        .compare_exchange(0, lane.number, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                {
                    for other in lanes.iter().filter(|l| l.number != lane.number) {
                        other.cancel.cancel();
                    }
                }
                (lane.number, ended)
            });
            numbers.insert(task.id(), number);
        }
        let mut ended: Vec<(u32, attempt::Ended)> = Vec::new();
        while let Some(joined) = attempts.join_next().await {
            match joined {
                Ok(one) => ended.push(one),
                // An attempt that panicked ends as failed; the others' verdicts stand.
                Err(e) => {
                    let number = numbers.get(&e.id()).copied().unwrap_or_default();
                    let why = format!("the attempt {}", crate::delegate::stopped(&e));
                    ended.push((number, attempt::Ended::stopped(why)));
                }
            }
        }
        ended.sort_by_key(|(number, _)| *number);
        let won = winner.load(Ordering::SeqCst);
        let mut next_reasons = Vec::new();
        let mut still: Vec<Arc<Lane>> = Vec::new();
        let (mut summary, mut change) = (None, None);
        let mut stopped: Option<(Outcome, String)> = None;
        for (number, end) in ended {
            stats.add(&end.stats);
            judged.extend(end.judged);
            match end.verdict {
                Verdict::Pass if number == won => {
                    (summary, change) = (Some(end.summary), end.change)
                }
                Verdict::Fail(reason) => {
                    next_reasons.push(reason);
                    if let Some(lane) = lanes.iter().find(|l| l.number == number) {
                        still.push(Arc::clone(lane));
                    }
                }
                Verdict::Ended(outcome, why) => {
                    stopped.get_or_insert((outcome, why));
                }
                Verdict::Pass | Verdict::Cancelled => {}
            }
        }
        if let Some(summary) = summary {
            let lane = lanes
                .iter()
                .find(|l| l.number == won)
                .map_or_else(Trace::default, |l| lock(&l.trace).clone());
            let landing = match (&trees, change) {
                (Some(_), Some(change)) => Some(change),
                (Some(trees), None) => {
                    let path = &lanes[usize::try_from(won - 1).unwrap_or(0)].tree;
                    Some(trees.change(path)?)
                }
                (None, _) => None,
            };
            if let Some(trees) = &trees {
                trees.clear();
            }
            let store = trees.as_ref().map(|t| t.store().clone());
            return Ok(Ending {
                outcome: Outcome::Done,
                summary,
                trace: lane,
                judged,
                landing: match (landing, store) {
                    (Some(change), Some(store)) => Some(Landing { store, change, attempt: won }),
                    _ => None,
                },
                in_place,
                outcome_text: None,
            });
        }
        if shared.cancel.is_cancelled() {
            return Ok(ending(
                Outcome::Cancelled,
                "cancelled".to_owned(),
                &lanes,
                judged,
                in_place,
            ));
        }
        if still.is_empty() {
            // No attempt is left to retry: each ended without a verdict (as one implementer's
            // ending ends the piece), or was cancelled.
            let (outcome, summary) =
                stopped.take().unwrap_or((Outcome::Failed, "every attempt stopped".to_owned()));
            return Ok(ending(outcome, summary, &lanes, judged, in_place));
        }
        reasons = Arc::new(reasons::group(&next_reasons));
        live = still;
    }
    let rounds = delegator.retries + 1;
    // One attempt a round: the spec's words; several: each round's attempts counted.
    let summary = if n == 1 {
        format!("verification failed after {rounds} attempts: {}", reasons::summary(&reasons))
    } else {
        format!(
            "every check failed, in {rounds} rounds of {n} attempts; the last round's: {}",
            reasons::summary(&reasons)
        )
    };
    Ok(ending(Outcome::Failed, summary, &lanes, judged, in_place))
}

/// A passing attempt whose change edits the check's tests or removes tests fails instead
/// (`tests_kept.rs`), logged and judged `by: tests`; a change that counts is kept for landing.
fn tests_kept(
    shared: &Shared,
    trees: &Trees,
    lane: &Lane,
    input: &Input,
    round: u32,
    ended: &mut attempt::Ended,
) {
    let why = match trees.change(&lane.tree) {
        Ok(change) => {
            let patch = String::from_utf8_lossy(change.patch());
            let why = crate::delegate::tests_kept::broken(
                &change.paths(),
                &patch,
                &input.brief,
                &input.check,
            );
            if why.is_none() {
                ended.change = Some(change);
            }
            why
        }
        Err(e) => Some(e.0),
    };
    let Some(why) = why else { return };
    let (attempt, round) = (lane.number, round + 1);
    let agent =
        if round == 1 { lane.prefix.clone() } else { format!("{}.r{}", lane.prefix, round - 1) };
    let verdict = Judged { attempt, round, by: "tests", exit: None, verifier: None, pass: false };
    shared.outlet.event(verdict.event(agent, &input.check, why.clone()));
    ended.judged.push(verdict);
    ended.verdict = Verdict::Fail(why);
}

/// An ending where nothing lands: every attempt's files and commands, once each.
fn ending(
    outcome: Outcome,
    summary: String,
    lanes: &[Arc<Lane>],
    judged: Vec<Judged>,
    in_place: bool,
) -> Ending {
    let mut trace = Trace::default();
    for lane in lanes {
        let t = lock(&lane.trace);
        for f in &t.files {
            if !trace.files.contains(f) {
                trace.files.push(f.clone());
            }
        }
        for c in &t.checks {
            if !trace.checks.contains(c) {
                trace.checks.push(c.clone());
            }
        }
    }
    Ending { outcome, summary, trace, judged, landing: None, in_place, outcome_text: None }
}

/// Attempt `k`'s seed: the request's, mixed with the piece (so pieces differ) and `k`.
fn seed(base: u64, piece: &str, k: u32) -> u64 {
    // FNV-1a: stable across builds, unlike the standard hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in piece.bytes().chain(k.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    base ^ h
}

/// A connection of the piece's own (the pool's room waited for, up to its bound).
pub(crate) async fn connect(shared: &Shared) -> Result<Box<dyn Connection>, ToolError> {
    shared.delegator.pool.connect(&shared.cancel).await.map_err(|e| {
        ToolError::new(format!("the piece could not reach the pool: {}", client_words(e)))
    })
}

/// A pool error in the client's own words (without the runtime's `the pool:`), as the piece's
/// result said them before the connection was a trait.
fn client_words(e: CoreError) -> String {
    match e {
        CoreError::Pool(e) => e.to_string(),
        other => other.to_string(),
    }
}

/// The `agent` call's input, checked.
pub(crate) struct Input {
    pub(crate) brief: String,
    pub(crate) check: String,
    pub(crate) definition: Option<Definition>,
    pub(crate) member: Option<String>,
}

fn input(rt: &Runtime<'_>, value: &Value) -> Result<Input, ToolError> {
    let text =
        |key: &str| value.get(key).and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty());
    let brief = text("brief").ok_or_else(|| ToolError::new("`agent` needs a `brief`"))?;
    let check = text("check").ok_or_else(|| ToolError::new("`agent` needs a `check`"))?;
    let definition = match text("definition") {
        Some(name) => Some(
            rt.services
                .definitions
                .get(name)
                .cloned()
                .ok_or_else(|| ToolError::new(format!("no agent definition named `{name}`")))?,
        ),
        None => None,
    };
    Ok(Input {
        brief: brief.to_owned(),
        check: check.to_owned(),
        definition,
        member: text("member").map(str::to_owned),
    })
}

/// The call's `member`, else the definition's `model` when the pool has it, else the caller's.
async fn member(
    rt: &mut Runtime<'_>,
    caller: &crate::runtime::Caller,
    input: &Input,
) -> Result<Member, ToolError> {
    let wanted = input.member.clone();
    let from_definition = input.definition.as_ref().and_then(|d| d.model.clone());
    if wanted.is_none() && from_definition.is_none() {
        return Ok(Member {
            alias: caller.member.clone(),
            window: caller.window,
            json: caller.json,
        });
    }
    let members =
        rt.client.members().await.map_err(|e| {
            ToolError::new(format!("listing the pool's members: {}", client_words(e)))
        })?;
    let find = |name: &str| members.iter().find(|m| m.alias == name || m.reference == name);
    let found = match (&wanted, &from_definition) {
        (Some(name), _) => Some(find(name).ok_or_else(|| {
            let aliases: Vec<&str> = members.iter().map(|m| m.alias.as_str()).collect();
            ToolError::new(format!("no pool member `{name}`; loaded: {}", aliases.join(", ")))
        })?),
        // Claude Code's `inherit`, `sonnet`, ...: no such member here, the caller's serves.
        (None, Some(model)) => find(model),
        (None, None) => None,
    };
    Ok(match found {
        Some(m) => {
            Member { alias: m.alias.clone(), window: m.context_window, json: m.json_constraint }
        }
        None => Member { alias: caller.member.clone(), window: caller.window, json: caller.json },
    })
}
