//! The screen's startup: the shared startup's steps (`crate::startup`), each shown as a row of
//! the startup block where `aerix -p` prints a line.

use std::future::Future;
use std::path::Path;
use std::time::Instant;

use aerix_config::{Env, Layered, Settings};
use aerix_session::Event;
use aerix_tools::Cancel;
use aerix_tui::terminal::{Input, Tty};
use aerix_tui::{Action, Gate, Note, PoolRow, ProfileRow, Screen};
use caldrix_proto::Lane;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::close::Stderr;
use super::{Msg, Options, model_name};
use crate::attach::Attached;
use crate::pool;
use crate::session::{self, CancelledExit, Launch, Opened, Out, Session};
use crate::startup::{self, Front, Trust};

/// The screen as the startup's front end: a note is a row of the startup block; a step waits
/// while keys are read (Ctrl-D leaves).
struct Rows<'a> {
    screen: &'a mut Screen,
    tty: &'a mut Tty,
    rx: &'a mut UnboundedReceiver<Msg>,
    stderr: &'a mut Option<Stderr>,
}

impl Rows<'_> {
    fn redraw(&mut self) {
        let now = Instant::now();
        let screen = &*self.screen;
        let _ = self.tty.terminal.draw(|frame| aerix_tui::draw(frame, screen, now));
    }
}

impl Front for Rows<'_> {
    fn note(&mut self, note: &str) {
        self.screen.startup.notes.push(Note::classify(note));
    }

    async fn step<T>(&mut self, step: impl Future<Output = T>) -> Option<T> {
        self.redraw();
        tokio::pin!(step);
        loop {
            tokio::select! {
                out = &mut step => return Some(out),
                msg = self.rx.recv() => if let Some(Msg::Input(Input::Key(key))) = msg
                    && self.screen.key(key) == Some(Action::Exit) {
                    return None;
                },
            }
            self.redraw();
        }
    }

    fn loaded(&mut self, line: &str) {
        self.screen.startup.loaded = Some(line.trim_start_matches("loaded: ").to_owned());
    }

    fn session(&mut self, id: &str, _: Option<&[Event]>, log: &Path) {
        self.screen.startup.session = Some(id.to_owned());
        if let Some(stderr) = self.stderr.as_mut() {
            stderr.settle(&log.with_extension("stderr"));
        }
    }

    fn bound(&mut self, main: &pool::Bound, settings: &Settings) {
        let screen = &mut *self.screen;
        screen.launch.window = main.window;
        screen.launch.lane = main.lane_text();
        screen.startup.pool = Some(PoolRow {
            model: model_name(&settings.main.model),
            lane: main.lane_text(),
            device: main.device_text(),
            // The spec's "CPU lane's thread count": a GPU member's threads are not its lane's.
            threads: main.threads.filter(|_| main.lane == Some(Lane::Cpu)),
            decision: settings.decision.as_ref().map(|d| model_name(&d.model)),
            socket: settings.pool.socket.display().to_string(),
        });
    }

    fn profile(&mut self, attached: &Attached) {
        self.screen.startup.profile = match &attached.profile {
            Some((name, branch, commit)) => ProfileRow::Attached {
                name: name.clone(),
                branch: branch.clone(),
                commit: commit.clone(),
                tuned: attached.tuned,
            },
            None => ProfileRow::Embedded,
        };
    }

    async fn trust(&mut self, root: &Path, items: &[String], changed: bool) -> Option<bool> {
        let root = aerix_trust::escaped(&root.display().to_string());
        self.screen.set_gate(Gate::Trust { root, items: items.to_vec(), changed });
        loop {
            self.redraw();
            // A resize redraws; nothing else comes before the session exists.
            if let Msg::Input(Input::Key(key)) = self.rx.recv().await? {
                match self.screen.key(key) {
                    Some(Action::Trust(answer)) => return Some(answer),
                    Some(Action::Exit) => return None,
                    _ => {}
                }
            }
        }
    }
}

/// The startup block, row by row; `None` when the user left during it. Keys come on `rx`;
/// the session's outputs go on `outs`; fd 2 is sent to the session's file through `stderr`.
pub(super) async fn startup(
    (layered, mut trust): (Layered, Trust),
    env: &Env,
    options: &Options,
    (screen, tty, rx): (&mut Screen, &mut Tty, &mut UnboundedReceiver<Msg>),
    (outs, cancelled_exit): (UnboundedSender<Out>, CancelledExit),
    stderr: &mut Option<Stderr>,
) -> anyhow::Result<Option<Box<Session>>> {
    // Until the session is known, stray writes go to a file of this process's.
    if let Some(data) = env.data_home() {
        let project = aerix_session::project_key(&aerix_config::project_root(&options.asked.cwd));
        let early = aerix_session::Store::new(&data)
            .project_dir(&project)
            .join(format!("screen-{}.stderr", std::process::id()));
        *stderr = Stderr::redirect(&early).ok();
    }
    let mut rows = Rows { screen, tty, rx, stderr };
    // Step 0: an untrusted project is asked about before anything of it runs.
    if startup::ask_trust(&mut trust, &mut rows).await.is_none() {
        return Ok(None);
    }
    let settings = crate::finish(trust.settings(layered), options.model.clone());
    let launch = Launch {
        asked: options.asked.clone(),
        front: aerix_permissions::Front::Screen,
        prompt: None,
        cancelled_exit,
        mcp: Vec::new(),
    };
    // The startup's hooks have no request to cancel: Ctrl-D leaves between steps.
    let cancel = Cancel::default();
    match session::open(settings, env, &trust, launch, &mut rows, outs, &cancel).await? {
        Opened::Open(session) => Ok(Some(session)),
        Opened::Ended { exit, error: Some(error), .. } => {
            Err(exit.with(format!("{error:#}")).into())
        }
        Opened::Ended { error: None, .. } => Ok(None),
    }
}
