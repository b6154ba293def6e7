//! One call's way through the user's controls, for a model's call and for a command aerix runs
//! on a model's behalf (delegation's check) alike: `PreToolUse`, the permission rules, the
//! approval before it runs; `PostToolUse` after. Nothing runs a tool without passing here.

use serde_json::Value;

use aerix_permissions::Verdict;
use aerix_turn::tools::{Key, Run};

use crate::runtime::gates::AskAnswer;

use crate::runtime::hooks::{HookFire, HookReply};
use crate::runtime::services::{Held, Runtime};

/// Who makes a call: the agent, its definition's type (`None`: the root) and what holds it.
#[derive(Clone, Copy, Debug)]
pub struct Who<'a> {
    pub agent: &'a str,
    pub agent_type: Option<&'a str>,
    pub held: &'a [Held],
}

/// A call the gate let through: its input as the hooks left it, and their context.
#[derive(Clone, Debug)]
pub struct Passed {
    pub input: Value,
    pub context: Option<String>,
}

/// A call the gate refused: why, whether a hook (`refused:`) or the rules and the user
/// (`error:`) said so, and a hook's reason to end the agent.
#[derive(Clone, Debug)]
pub struct Refused {
    pub why: String,
    pub by_hook: bool,
    pub stop: Option<String>,
}

impl Refused {
    /// The refused call's result, as the model reads it.
    pub fn text(&self) -> String {
        let prefix = if self.by_hook { "refused" } else { "error" };
        format!("{prefix}: {}", self.why)
    }
}

/// `PreToolUse` for a call, then the permission rules on the input it left, and the user's
/// answer when either asks. One prompt at most: the rules' (naming a hook's ask too), else a
/// hook's.
pub async fn before(
    rt: &mut Runtime<'_>,
    who: Who<'_>,
    call: &str,
    tool: &str,
    input: &Value,
) -> Result<Passed, Refused> {
    let Who { agent, agent_type, held } = who;
    let reply =
        rt.services.hooks.fire(HookFire::PreToolUse { agent, agent_type, call, tool, input });
    if let Some(reason) = reply.stop {
        let stop = Some(format!("a PreToolUse hook ended the agent: {reason}"));
        return Err(Refused { why: reason, by_hook: true, stop });
    }
    if let Some(reason) = reply.block {
        return Err(Refused { why: reason, by_hook: true, stop: None });
    }
    let input = reply.updated_input.unwrap_or_else(|| input.clone());
    let refused = |why: String, by_hook: bool| Err(Refused { why, by_hook, stop: None });
    // A skill hands the model a file: the `Read` rules judge that file (in the field the
    // registry names) as they judge `read`.
    let checked = match aerix_turn::tool_named(tool).map(|t| (t.run, t.key)) {
        Some((Run::Skill, Key::Names { field, file: Some(slot), .. })) => input
            .get(field)
            .and_then(Value::as_str)
            .and_then(|name| rt.services.skills.get(name))
            .map(|skill| {
                let mut checked = input.clone();
                checked[slot] = Value::from(skill.file.display().to_string());
                checked
            }),
        _ => None,
    };
    let checked = checked.as_ref().unwrap_or(&input);
    let rules = rt.services.permissions.clone();
    let verdict = rules.as_ref().map_or(Verdict::Allow, |r| r.check(tool, checked, held));
    match verdict {
        Verdict::Deny(why) => return refused(why, false),
        Verdict::Ask { reason, always } => {
            let reason = match &reply.ask {
                Some(hook) => format!("{reason}; a PreToolUse hook asks too: {hook}"),
                None => reason,
            };
            match rt
                .services
                .ask_gate
                .ask_permission(agent, call, tool, &input, &reason, !always.is_empty())
                .await
            {
                AskAnswer::Once => {}
                AskAnswer::Always => {
                    if let Some(rules) = &rules
                        && let Err(e) = rules.remember(tool, checked, held)
                    {
                        rt.sink.note(format!("the answer holds for this run only: {e}"));
                    }
                }
                AskAnswer::Deny(why) => return refused(why, false),
            }
        }
        Verdict::Allow => {
            if let Some(reason) = &reply.ask
                && let Err(why) = rt.services.ask_gate.ask(agent, call, tool, &input, reason).await
            {
                return refused(why, true);
            }
        }
    }
    Ok(Passed { input, context: reply.context })
}

/// `PostToolUse` (`PostToolUseFailure` when `error`) for a call that ran.
#[allow(clippy::too_many_arguments, reason = "the event's fields, each once")]
pub fn after(
    rt: &mut Runtime<'_>,
    who: Who<'_>,
    call: &str,
    tool: &str,
    input: &Value,
    result: &str,
    error: bool,
    interrupted: bool,
) -> HookReply {
    let Who { agent, agent_type, .. } = who;
    rt.services.hooks.fire(HookFire::PostToolUse {
        agent,
        agent_type,
        call,
        tool,
        input,
        result,
        error,
        interrupted,
    })
}
