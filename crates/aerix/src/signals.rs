//! SIGINT, SIGTERM and SIGHUP. The first sets the run's cancel flag: the runtime sends the
//! generation a `cancel` frame, `bash` ends its command's group (`TERM`, `KILL` after 2 s),
//! background jobs and running hooks are ended, and the run ends `cancelled` (exit 130; 143
//! after SIGTERM). A second hurries the flag (a command still in its grace is killed, a
//! `SessionEnd` hook is sent `TERM`) and exits at once, writing `session.end` first when the
//! run has not.
//!
//! Only the binary handles signals; the runtime sees nothing but the flag.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use aerix_tools::Cancel;
use tokio::signal::unix::{SignalKind, signal};

use crate::exit::Exit;
use crate::session::Recorder;

/// After a second signal, how long the tools and hooks have to signal their process groups
/// (they look every 20 ms) before the process exits.
const LAST_TERM: Duration = Duration::from_millis(100);

#[derive(Clone)]
pub struct Signals {
    /// Cancelled by the first signal, hurried by a second.
    pub cancel: Cancel,
    /// The exit status the first signal asks for; 0 before any.
    status: Arc<AtomicI32>,
    /// The session a second signal ends (its running request's `session.end`, written by
    /// whoever comes first: the session, or the signal).
    session: Arc<Mutex<Option<Recorder>>>,
}

impl Signals {
    /// Handles the three signals from now on (inside a tokio runtime).
    pub fn install() -> std::io::Result<Signals> {
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let signals = Signals {
            cancel: Cancel::default(),
            status: Arc::new(AtomicI32::new(0)),
            session: Arc::default(),
        };
        let handler = signals.clone();
        tokio::spawn(async move {
            loop {
                let (name, exit) = tokio::select! {
                    _ = interrupt.recv() => ("SIGINT", Exit::Cancelled),
                    _ = terminate.recv() => ("SIGTERM", Exit::Terminated),
                    _ = hangup.recv() => ("SIGHUP", Exit::Cancelled),
                };
                handler.received(name, exit).await;
            }
        });
        Ok(signals)
    }

    async fn received(&self, name: &str, exit: Exit) {
        let first =
            self.status.compare_exchange(0, exit.code(), Ordering::SeqCst, Ordering::SeqCst);
        if first.is_ok() {
            eprintln!("aerix: {name}: cancelling (a second signal exits at once)");
            self.cancel.cancel();
            return;
        }
        let exit = self.exit();
        self.cancel.hurry();
        tokio::time::sleep(LAST_TERM).await;
        // The session may have written it meanwhile; else it is written here, last.
        if let Some(record) = self.session.lock().unwrap_or_else(PoisonError::into_inner).take() {
            record.abandon(exit);
        }
        eprintln!("aerix: {name}: exiting at once");
        std::process::exit(exit.code());
    }

    /// The status a cancelled run exits with: 143 after SIGTERM, else 130.
    pub fn exit(&self) -> Exit {
        if self.status.load(Ordering::SeqCst) == Exit::Terminated.code() {
            Exit::Terminated
        } else {
            Exit::Cancelled
        }
    }

    /// The session a second signal ends.
    pub fn on_second(&self, record: Recorder) {
        *self.session.lock().unwrap_or_else(PoisonError::into_inner) = Some(record);
    }
}

/// Resolves once the first signal has come.
pub use aerix_agent::runtime::cancelled;

/// The first of the signals a command stops for at its next safe point (`aerix tune`, `aerix
/// profile sync`, the screen): which came first, waited for or looked at.
#[derive(Clone)]
pub struct Interrupt {
    first: Arc<std::sync::OnceLock<(&'static str, Exit)>>,
    notify: Arc<tokio::sync::Notify>,
}

impl Interrupt {
    /// Handles SIGINT and SIGTERM (and SIGHUP when `hangup`) from now on, inside a tokio
    /// runtime; `each` is called on every one, told whether it was the first.
    pub fn install(
        hangup: bool,
        each: impl Fn(bool) + Send + 'static,
    ) -> std::io::Result<Interrupt> {
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hup = if hangup { Some(signal(SignalKind::hangup())?) } else { None };
        let this = Interrupt { first: Arc::default(), notify: Arc::default() };
        let handler = this.clone();
        tokio::spawn(async move {
            loop {
                let hung_up = async {
                    match hup.as_mut() {
                        Some(hup) => hup.recv().await,
                        None => std::future::pending().await,
                    }
                };
                let got = tokio::select! {
                    _ = interrupt.recv() => ("SIGINT", Exit::Cancelled),
                    _ = terminate.recv() => ("SIGTERM", Exit::Terminated),
                    _ = hung_up => ("SIGHUP", Exit::HungUp),
                };
                let first = handler.first.set(got).is_ok();
                if first {
                    handler.notify.notify_one();
                }
                each(first);
            }
        });
        Ok(this)
    }

    /// The first signal's name and status, once one has come.
    pub fn got(&self) -> Option<(&'static str, Exit)> {
        self.first.get().copied()
    }

    /// Resolves once the first signal has come.
    pub async fn wait(&self) -> (&'static str, Exit) {
        loop {
            if let Some(first) = self.got() {
                return first;
            }
            self.notify.notified().await;
        }
    }
}
