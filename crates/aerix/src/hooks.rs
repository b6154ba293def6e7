//! The session's hooks (`aerix-hooks`) as a headless run fires them: every handler's run a
//! `hook` event in the session log, every note a line on stderr. `AgentHooks` is the same for
//! the events the runtime fires itself (compaction, delegation).

use std::sync::Mutex;

use aerix_core::{HookFire, HookReply, RuntimeHooks, Sink as _};
use aerix_hooks::{CompactTrigger, Fire, Fired, Hooks, Session};
use aerix_session::{Event, Log};
use aerix_tools::Cancel;

use crate::sink::{HeadlessSink, progress};

/// The hooks of a session whose `SessionStart` has fired (so its `SessionEnd` fires too).
pub struct SessionHooks {
    pub hooks: Hooks,
    pub session: Session,
}

impl SessionHooks {
    /// Fires `fire` (the handlers run on this thread's blocking section) and logs its runs;
    /// handlers still running when `cancel` is cancelled (`SessionEnd`: hurried, as it runs
    /// after a cancel) are ended.
    pub fn fire(&self, fire: Fire<'_>, cancel: &Cancel, sink: &mut HeadlessSink) -> Fired {
        let fired = self.run(fire, cancel);
        for event in hook_events(&fired, None) {
            sink.event(event);
        }
        for note in &fired.notes {
            eprintln!("{note}");
        }
        fired
    }

    fn run(&self, fire: Fire<'_>, cancel: &Cancel) -> Fired {
        if self.hooks.is_empty() {
            return Fired::default();
        }
        // A handler reading `transcript_path` sees the session so far.
        if let Err(e) = aerix_claude::refresh(&self.session.transcript_path) {
            eprintln!("aerix: the Claude Code transcript could not be written: {e}");
        }
        let cancelled = || match fire {
            Fire::SessionEnd(_) => cancel.is_hurried(),
            _ => cancel.is_cancelled(),
        };
        // The handlers block this worker thread (the runtime is multi-threaded).
        tokio::task::block_in_place(|| self.hooks.fire(&self.session, fire, &cancelled))
    }
}

/// The runtime's hook events through the session's hooks. The runtime holds the sink, so runs
/// are logged (as `hook` events of the agent that fired them) through a second handle on the
/// session log, which appends whole lines.
pub struct AgentHooks<'a> {
    pub hooks: &'a SessionHooks,
    pub log: Option<Mutex<Log>>,
    pub cancel: Cancel,
    pub quiet: bool,
}

impl RuntimeHooks for AgentHooks<'_> {
    fn fire(&self, event: HookFire<'_>) -> HookReply {
        // One arm per runtime event (`HookFire` is non-exhaustive: a new one fires nothing
        // until it has an arm here).
        let (agent, fire) = match event {
            HookFire::PreCompact { agent, trigger } => {
                let trigger =
                    if trigger == "manual" { CompactTrigger::Manual } else { CompactTrigger::Auto };
                (agent, Fire::PreCompact { agent, trigger, custom_instructions: "" })
            }
            HookFire::ContextCompact { agent, before, after, compacted } => {
                (agent, Fire::ContextCompact { agent, before, after, compacted })
            }
            HookFire::AgentSpawn { agent, parent, agent_type } => {
                (agent, Fire::AgentSpawn { agent, parent, agent_type })
            }
            HookFire::SubagentStart { agent, agent_type } => {
                (agent, Fire::SubagentStart { agent, agent_type })
            }
            HookFire::SubagentStop { agent, agent_type } => {
                (agent, Fire::SubagentStop { agent, agent_type })
            }
            HookFire::Verify { agent, implementer, attempt } => {
                (agent, Fire::Verify { agent, implementer, attempt })
            }
            _ => return HookReply::default(),
        };
        let fired = self.hooks.run(fire, &self.cancel);
        for event in hook_events(&fired, Some(agent)) {
            if !self.quiet {
                progress(&event);
            }
            if let Some(log) = &self.log
                && let Ok(mut log) = log.lock()
                && let Err(e) = log.append(&event)
            {
                eprintln!("aerix: a hook event could not be logged: {e}");
            }
        }
        for note in &fired.notes {
            eprintln!("{note}");
        }
        HookReply {
            block: fired.block.map(|b| b.reason),
            stop: fired.stop.map(|b| b.reason),
            context: fired.context,
        }
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
