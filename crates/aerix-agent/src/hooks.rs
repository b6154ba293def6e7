//! The session's hooks (`aerix-hooks`) as a headless run fires them: every handler's run a
//! `hook` event in the session log, every note a line on stderr and a `Notification`.
//! `AgentHooks` is the same for the events the runtime fires itself (routing, tool calls, an
//! agent's final, compaction, delegation); tool calls are shown to hooks in Claude Code's terms
//! (`aerix_claude::view`), and an `updatedInput` is mapped back and checked against the tool's
//! input schema.

use std::sync::{Arc, Mutex};

use crate::runtime::{HookFire, HookReply, RuntimeHooks, Sink};
use aerix_hooks::{CompactTrigger, Fire, Fired, HookEvent, Hooks, Session, Subagent, ToolCall};
use aerix_session::Event;
use aerix_tools::Cancel;
use serde_json::Value;

use crate::session::Recorder;

/// `Notification`'s `title`.
const TITLE: &str = "aerix";

/// Where a hook's note goes: the session's front end (`Out::Note`).
pub type Notes = Box<dyn Fn(&str) + Send + Sync>;

/// The hooks of a session whose `SessionStart` has fired (so its `SessionEnd` fires too).
pub struct SessionHooks {
    pub hooks: Hooks,
    pub session: Session,
    pub notes: Notes,
}

impl SessionHooks {
    /// A note for the user, shown by the front end.
    fn note(&self, note: &str) {
        (self.notes)(note);
    }

    /// Fires `fire` (the handlers run on this thread's blocking section) and logs its runs;
    /// handlers still running when `cancel` is cancelled (`SessionEnd`: hurried, as it runs
    /// after a cancel) are ended. Its notes go to the front end and are `Notification`s.
    pub fn fire(&self, fire: Fire<'_>, cancel: &Cancel, sink: &mut dyn Sink) -> Fired {
        let fired = self.run(fire, cancel);
        for event in hook_events(&fired, None) {
            sink.event(event);
        }
        for note in &fired.notes {
            self.note(note);
        }
        if fire.event() != HookEvent::Notification {
            self.notify(&fired.notes, "hook_note", cancel, sink);
        }
        fired
    }

    /// A `Notification` per line (`notification_type`: `startup_note` or `hook_note`); what
    /// its own handlers say is printed, not notified again.
    pub fn notify(&self, lines: &[String], kind: &str, cancel: &Cancel, sink: &mut dyn Sink) {
        for line in lines {
            let fire = Fire::Notification { message: line, title: TITLE, notification_type: kind };
            // A Notification's answers do nothing (docs/configuration.md); its notes print.
            let _ = self.fire(fire, cancel, sink);
        }
    }

    fn run(&self, fire: Fire<'_>, cancel: &Cancel) -> Fired {
        if self.hooks.is_empty() {
            return Fired::default();
        }
        // A handler reading `transcript_path` sees the session so far.
        if let Err(e) = aerix_claude::refresh(&self.session.transcript_path) {
            self.note(&format!("aerix: the Claude Code transcript could not be written: {e}"));
        }
        let cancelled = || match fire {
            Fire::SessionEnd(_) => cancel.is_hurried(),
            _ => cancel.is_cancelled(),
        };
        // The handlers block this worker thread (the runtime is multi-threaded).
        let hurried = || cancel.is_hurried();
        tokio::task::block_in_place(|| {
            self.hooks.fire_until(&self.session, fire, &cancelled, &hurried)
        })
    }
}

/// The runtime's hook events through the session's hooks. The runtime holds the sink, so runs
/// are recorded (as `hook` events of the agent that fired them) through a second handle on the
/// session's recorder: to the log and the front end alike.
pub struct AgentHooks {
    pub hooks: Arc<SessionHooks>,
    pub record: Mutex<Recorder>,
    pub cancel: Cancel,
}

fn trigger(trigger: &str) -> CompactTrigger {
    if trigger == "manual" { CompactTrigger::Manual } else { CompactTrigger::Auto }
}

fn subagent<'a>(agent: &'a str, agent_type: Option<&'a str>) -> Option<Subagent<'a>> {
    agent_type.map(|agent_type| Subagent { agent_id: agent, agent_type })
}

/// A hook's `updatedInput` (Claude Code's terms) as the call's input, or why it cannot be used.
fn updated_input(tool: &str, updated: &Value) -> Result<Value, String> {
    let input = aerix_claude::from_claude(tool, updated)?;
    let schema = aerix_tools::input_schema(tool)
        .or_else(|| aerix_turn::schemas::runtime_input_schema(tool))
        .ok_or_else(|| format!("aerix has no tool `{tool}`"))?;
    aerix_claude::check_input(&input, &schema)?;
    Ok(input)
}

impl AgentHooks {
    /// Fires, logs the runs as `agent`'s, prints the notes and notifies them.
    fn run(&self, agent: &str, fire: Fire<'_>) -> Fired {
        let fired = self.hooks.run(fire, &self.cancel);
        let mut record = self.record.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for event in hook_events(&fired, Some(agent)) {
            record.event(event);
        }
        drop(record);
        for note in &fired.notes {
            self.hooks.note(note);
        }
        if fire.event() != HookEvent::Notification {
            for note in &fired.notes {
                let fire = Fire::Notification {
                    message: note,
                    title: TITLE,
                    notification_type: "hook_note",
                };
                // A Notification's answers do nothing; its notes print.
                let _ = self.run(agent, fire);
            }
        }
        fired
    }

    fn tool_event(&self, event: HookFire<'_>) -> Option<HookReply> {
        let cwd = &self.hooks.session.cwd;
        let (agent, agent_type, call, tool, input) = match event {
            HookFire::PreToolUse { agent, agent_type, call, tool, input }
            | HookFire::PostToolUse { agent, agent_type, call, tool, input, .. } => {
                (agent, agent_type, call, tool, input)
            }
            _ => return None,
        };
        let view = aerix_claude::view(tool, input, cwd);
        // Unique across the session's agents (every agent numbers its calls from `c1`).
        let tool_use_id = aerix_claude::use_id(agent, call);
        let call = ToolCall {
            subagent: subagent(agent, agent_type),
            tool_name: &view.name,
            aerix_tool: tool,
            tool_input: &view.input,
            tool_use_id: &tool_use_id,
        };
        let response;
        let fire = match event {
            HookFire::PostToolUse { result, error: true, interrupted, .. } => {
                let error = result.strip_prefix("error: ").unwrap_or(result);
                Fire::PostToolUseFailure { call, error, is_interrupt: interrupted }
            }
            HookFire::PostToolUse { result, .. } => {
                response = aerix_claude::tool_response(tool, input, result, cwd);
                Fire::PostToolUse { call, tool_response: &response }
            }
            _ => Fire::PreToolUse(call),
        };
        let fired = self.run(agent, fire);
        let updated = fired.updated_input.clone();
        let mut reply = reply(fired);
        if reply.block.is_none()
            && let Some(updated) = updated
        {
            match updated_input(tool, &updated) {
                Ok(input) => reply.updated_input = Some(input),
                Err(why) => {
                    reply.block = Some(format!(
                        "a PreToolUse hook's updatedInput for {} cannot be used: {why}",
                        view.name
                    ))
                }
            }
        }
        Some(reply)
    }
}

fn reply(fired: Fired) -> HookReply {
    HookReply {
        block: fired.block.map(|b| b.reason),
        stop: fired.stop.map(|b| b.reason),
        context: fired.context,
        updated_input: None,
        ask: fired.ask.map(|b| b.reason),
    }
}

impl RuntimeHooks for AgentHooks {
    fn fire(&self, event: HookFire<'_>) -> HookReply {
        if let Some(reply) = self.tool_event(event) {
            return reply;
        }
        // One arm per runtime event (`HookFire` is non-exhaustive: a new one fires nothing
        // until it has an arm here).
        let (agent, fire) = match event {
            HookFire::RouteDecision { agent, route, scores, raw } => {
                (agent, Fire::RouteDecision { route, scores, raw })
            }
            HookFire::Stop { agent, last_message, active } => (
                agent,
                Fire::Stop { last_assistant_message: last_message, stop_hook_active: active },
            ),
            HookFire::PreCompact { agent, trigger: t } => {
                (agent, Fire::PreCompact { agent, trigger: trigger(t), custom_instructions: "" })
            }
            HookFire::ContextCompact { agent, before, after, compacted } => {
                (agent, Fire::ContextCompact { agent, before, after, compacted })
            }
            HookFire::PostCompact { agent, trigger: t } => {
                (agent, Fire::PostCompact { agent, trigger: trigger(t) })
            }
            HookFire::AgentSpawn { agent, parent, agent_type } => {
                (agent, Fire::AgentSpawn { agent, parent, agent_type })
            }
            HookFire::SubagentStart { agent, agent_type } => {
                (agent, Fire::SubagentStart { agent, agent_type })
            }
            HookFire::SubagentStop { agent, agent_type, last_message, active } => (
                agent,
                Fire::SubagentStop {
                    agent,
                    agent_type,
                    last_assistant_message: last_message,
                    stop_hook_active: active,
                },
            ),
            HookFire::Verify { agent, implementer, attempt } => {
                (agent, Fire::Verify { agent, implementer, attempt })
            }
            HookFire::WorktreeCreate { agent, name, base } => {
                (agent, Fire::WorktreeCreate { agent, name, base_commit: base })
            }
            HookFire::WorktreeRemove { agent, path } => {
                (agent, Fire::WorktreeRemove { agent, worktree_path: path })
            }
            _ => return HookReply::default(),
        };
        reply(self.run(agent, fire))
    }
}

/// A `hook` event per handler that ran.
fn hook_events(fired: &Fired, agent: Option<&str>) -> Vec<Event> {
    fired
        .runs
        .iter()
        .map(|run| Event::Hook {
            agent: agent.map(str::to_owned),
            event: run.event.name().to_owned(),
            command: run.command.clone(),
            ending: run.ending.describe(),
            exit_code: run.ending.exit_code(),
            duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
            blocked: run.blocked,
        })
        .collect()
}
