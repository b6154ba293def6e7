//! The events of a session log: one JSON object per line, `type` naming the event, `agent` the
//! agent it belongs to. This is a file format: fields are added, never renamed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{Label, Role, Route};

/// One line of the log (`ts` is added by the writer).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    #[serde(rename = "session.start")]
    SessionStart {
        session: String,
        project: String,
        cwd: String,
        model: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<String>,
        prompt: String,
        resumed: bool,
        version: String,
        /// The prompt profile the session read, its model base and the commit it read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile_branch: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile_commit: Option<String>,
        /// The project's commit the request started on: the snapshot its diff is taken against
        /// (`git stash create`'s, or `HEAD` on a clean tree); absent outside a git repository.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_commit: Option<String>,
    },
    #[serde(rename = "route")]
    Route {
        agent: String,
        route: Route,
        /// What the member answered, when it was not one of the routes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw: Option<String>,
        /// Log-probability of each route.
        scores: BTreeMap<String, f64>,
        member: String,
    },
    #[serde(rename = "agent.spawn")]
    AgentSpawn {
        agent: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<String>,
        kind: String,
        /// Absent for an agent no route made (an imported session's).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "crate::record::spawn_route"
        )]
        route: Option<Route>,
        member: String,
        /// The tools the agent may call.
        tools: Vec<String>,
        max_turns: u32,
    },
    /// A change to an agent's context, with the segment's token count as the pool counted it.
    #[serde(rename = "segment")]
    Segment {
        agent: String,
        op: SegmentOp,
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<Role>,
        /// What the segment is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<Label>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pinned: Option<bool>,
        /// For a turn the member generated: the first prompt row it computed (rows before it
        /// were resumed from the pool's prefix store) and the prompt's length.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recomputed_from: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_tokens: Option<u32>,
    },
    /// A turn of the member (`role: assistant`, with its usage), or a tool result.
    #[serde(rename = "message")]
    Message {
        agent: String,
        role: Role,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<serde_json::Value>,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop: Option<String>,
    },
    #[serde(rename = "context.op")]
    ContextOp {
        agent: String,
        op: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ids: Vec<String>,
        ok: bool,
        detail: String,
    },
    #[serde(rename = "plan")]
    Plan { agent: String, text: String },
    #[serde(rename = "job")]
    Job {
        agent: String,
        job: String,
        /// `started` or `ended`.
        state: String,
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ending: Option<String>,
    },
    /// A hook handler's run. The session's own events (`SessionStart`, `UserPromptSubmit`,
    /// `SessionEnd`) belong to no agent.
    #[serde(rename = "hook")]
    Hook {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// Claude Code's event name.
        event: String,
        command: String,
        /// `exit N`, `signal N`, `timeout after Ns`, `not started: ...`.
        ending: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        duration_ms: u64,
        /// It blocked what fired it, or ended the run.
        blocked: bool,
    },
    /// A compaction pass over an agent's context: why it ran (`soft_limit` or `no_room`
    /// before a turn, `result` for a result that did not fit), the context's tokens before and
    /// after, the pass's target and the window, the segments replaced by markers, or the
    /// `PreCompact` hook's reason when one blocked the pass.
    #[serde(rename = "compaction")]
    Compaction {
        agent: String,
        reason: String,
        before: u32,
        after: u32,
        target: u32,
        window: u32,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        compacted: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blocked: Option<String>,
    },
    /// One attempt of a delegated piece (`agent`: the piece, `a1.c3`): its implementer, the tree
    /// it works in and how its turns are sampled (none: greedy), so a session replays exactly.
    #[serde(rename = "attempt")]
    Attempt {
        agent: String,
        /// From 1, of `of`.
        attempt: u32,
        of: u32,
        /// Rounds from 1: round 2 is the first retry.
        round: u32,
        implementer: String,
        /// The worktree, or the caller's tree when the piece runs in place.
        tree: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seed: Option<u64>,
        /// The request's seed the attempt's was made from (`delegation.seed` replays it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_seed: Option<u64>,
    },
    /// How an attempt's work was judged: `by` is `command` (the harness ran the check; its
    /// `exit` decides) or `verifier` (a model read it).
    #[serde(rename = "check")]
    Check {
        agent: String,
        attempt: u32,
        round: u32,
        by: String,
        check: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit: Option<i32>,
        /// `pass` or `fail`.
        verdict: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
    /// What reached the caller's tree from a piece: `landed` (the attempt's files), `unchanged`
    /// (it passed without a change), `conflict` (nothing written; the patch kept at `patch`),
    /// or `none` (no attempt passed).
    #[serde(rename = "land")]
    Land {
        agent: String,
        state: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        patch: Option<String>,
    },
    #[serde(rename = "agent.end")]
    AgentEnd {
        agent: String,
        outcome: Outcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        final_text: Option<String>,
        turns: u32,
    },
    #[serde(rename = "session.end")]
    SessionEnd { outcome: Outcome, exit_code: i32 },
    /// The working tree kept before request `request` (1-based, every `session.start` counted)
    /// as `refs/aerix/checkpoints/<session>/<request>`; `pruned`: the requests whose checkpoints
    /// the cap of 100 removed; `note`: why there is none (outside a git repository, a failure).
    #[serde(rename = "session.checkpoint")]
    Checkpoint {
        request: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pruned: Vec<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// The session rewound to before request `to`: that request and the later ones are left
    /// out of the rebuilt context (they stay in the log); `files`: the working tree was
    /// restored from `to`'s checkpoint too, `conversation`: false for `--files-only`.
    #[serde(rename = "session.rewind")]
    Rewind { to: u32, files: bool, conversation: bool },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentOp {
    Append,
    Replace,
    Remove,
}

/// How an agent or a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A final answer.
    Done,
    /// A turn budget ran out.
    Budget,
    /// A named failure (a turn that never parsed, the pool gone, ...).
    Failed,
    /// Ended by a bound (the context floor, a hook).
    Killed,
    /// The user cancelled.
    Cancelled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Budget => "budget",
            Outcome::Failed => "failed",
            Outcome::Killed => "killed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// A generation's usage as the pool reported it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub recomputed_from: u32,
    pub prefill_ms: f64,
    pub decode_ms: f64,
}

impl Event {
    /// One line for a piece's attempt, check or landing (how the front ends show them); `None`
    /// for every other event.
    pub fn attempt_line(&self) -> Option<String> {
        Some(match self {
            Event::Attempt { agent, attempt, of, round, tree, temperature, seed, .. } => {
                let how = match (temperature, seed) {
                    (Some(t), Some(s)) => format!("sampled at {t}, seed {s}"),
                    _ => "greedy".to_owned(),
                };
                let round =
                    if *round > 1 { format!(", retry {}", round - 1) } else { String::new() };
                format!("{agent} attempt {attempt}/{of}{round} ({how}) in {tree}")
            }
            Event::Check { agent, by, check, exit, verdict, .. } => match (by.as_str(), exit) {
                ("command", Some(exit)) => {
                    format!("{agent} check `{check}`: exit {exit}, {verdict}")
                }
                ("command", None) => format!("{agent} check `{check}`: did not finish, {verdict}"),
                _ => format!("{agent} verifier: {verdict}"),
            },
            Event::Land { agent, state, attempt, files, patch } => match state.as_str() {
                "landed" => format!(
                    "{agent} landed attempt {}: {}",
                    attempt.unwrap_or_default(),
                    files.join(", ")
                ),
                "conflict" => format!(
                    "{agent} conflict: attempt {}'s change does not apply to the tree now; patch kept at {}",
                    attempt.unwrap_or_default(),
                    patch.as_deref().unwrap_or("(nowhere)")
                ),
                "unchanged" => format!("{agent} passed without a change"),
                "in place" => format!("{agent} ran in place"),
                _ => format!("{agent} landed nothing: no attempt passed its check"),
            },
            _ => return None,
        })
    }

    /// The agent an event belongs to (none for the session's own events).
    pub fn agent(&self) -> Option<&str> {
        match self {
            Event::SessionStart { .. }
            | Event::SessionEnd { .. }
            | Event::Checkpoint { .. }
            | Event::Rewind { .. } => None,
            Event::Hook { agent, .. } => agent.as_deref(),
            Event::Route { agent, .. }
            | Event::AgentSpawn { agent, .. }
            | Event::Segment { agent, .. }
            | Event::Message { agent, .. }
            | Event::ContextOp { agent, .. }
            | Event::Plan { agent, .. }
            | Event::Attempt { agent, .. }
            | Event::Check { agent, .. }
            | Event::Land { agent, .. }
            | Event::Job { agent, .. }
            | Event::Compaction { agent, .. }
            | Event::AgentEnd { agent, .. } => Some(agent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Event;

    #[test]
    fn a_hook_line_and_back() {
        let event = Event::Hook {
            agent: None,
            event: "UserPromptSubmit".into(),
            command: "guard.sh".into(),
            ending: "exit 2".into(),
            exit_code: Some(2),
            duration_ms: 12,
            blocked: true,
        };
        let line = serde_json::to_string(&event).unwrap();
        assert_eq!(
            line,
            r#"{"type":"hook","event":"UserPromptSubmit","command":"guard.sh","ending":"exit 2","exit_code":2,"duration_ms":12,"blocked":true}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), event);
        assert_eq!(event.agent(), None);
    }
}
