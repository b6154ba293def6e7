//! The session's hooks (`aerix-hooks`) as a headless run fires them: every handler's run a
//! `hook` event in the session log, every note a line on stderr.

use aerix_core::Sink as _;
use aerix_hooks::{Fire, Fired, Hooks, Session};
use aerix_session::Event;
use aerix_tools::Cancel;

use crate::sink::HeadlessSink;

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
        if self.hooks.is_empty() {
            return Fired::default();
        }
        let cancelled = || match fire {
            Fire::SessionEnd(_) => cancel.is_hurried(),
            _ => cancel.is_cancelled(),
        };
        // The handlers block this worker thread (the runtime is multi-threaded).
        let fired =
            tokio::task::block_in_place(|| self.hooks.fire(&self.session, fire, &cancelled));
        for run in &fired.runs {
            sink.event(Event::Hook {
                agent: None,
                event: run.event.name().to_owned(),
                command: run.command.clone(),
                ending: run.ending.describe(),
                exit_code: run.ending.exit_code(),
                duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
                blocked: run.blocked,
            });
        }
        for note in &fired.notes {
            eprintln!("{note}");
        }
        fired
    }
}
