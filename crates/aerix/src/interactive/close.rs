//! How the screen ends other than by Ctrl-D, and who may write to the terminal while it is open.
//!
//! A SIGTERM, SIGHUP or SIGINT (Ctrl-C is a key in raw mode, so a SIGINT comes from `kill`)
//! cancels the running request and closes the screen once it has ended: the terminal given
//! back, `SessionEnd` fired with `cancelled`, exit 143, 129 or 130. A second signal closes it at
//! once and hurries a `SessionEnd` handler.
//!
//! While the screen is drawn, fd 2 is a file beside the session's log (`<id>.stderr`), so a
//! stray write of a library or an inheriting child never tears the frame.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use aerix_tools::Cancel;
use tokio::sync::mpsc::UnboundedSender;

use super::Msg;
use crate::exit::Exit;
use crate::signals::Interrupt;

/// The screen's signals: the first one's status, and what a second hurries.
pub(super) struct Signals {
    first: Interrupt,
    /// Cancelled by the first signal (the session ends `cancelled`), hurried by a second: a
    /// `SessionEnd` handler still running is ended.
    pub(super) hurry: Cancel,
}

impl Signals {
    /// Handles SIGINT, SIGTERM and SIGHUP from now on (inside a tokio runtime); each is also
    /// sent to the screen's loop as a `Msg::Signal`.
    pub(super) fn install(tx: UnboundedSender<Msg>) -> io::Result<Signals> {
        let hurry = Cancel::default();
        let second = hurry.clone();
        let first = Interrupt::install(true, move |first| {
            // The first marks the session's end as cancelled; a second hurries its handlers.
            if first {
                second.cancel();
            } else {
                second.hurry();
            }
            let _ = tx.send(Msg::Signal);
        })?;
        Ok(Signals { first, hurry })
    }

    /// The first signal, for whoever must look at it later.
    pub(super) fn interrupt(&self) -> Interrupt {
        self.first.clone()
    }

    /// The first signal's name and status, once one has come.
    pub(super) fn first(&self) -> Option<(&'static str, Exit)> {
        self.first.got()
    }

    /// Resolves once the first signal has come.
    pub(super) async fn wait(&self) -> (&'static str, Exit) {
        self.first.wait().await
    }
}

/// fd 2 sent to a file while the screen is open; dropping it puts the terminal's fd 2 back.
pub(super) struct Stderr {
    saved: Option<OwnedFd>,
    path: PathBuf,
    /// Moved to the session's `<id>.stderr` (else removed when empty at the end).
    settled: bool,
}

impl Stderr {
    /// Sends fd 2 to `path` (created, appended to). On failure fd 2 stays the terminal: the
    /// screen still works, only stray writes show until the next redraw.
    pub(super) fn redirect(path: &Path) -> io::Result<Stderr> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let saved = nix::unistd::dup(io::stderr()).map_err(io::Error::from)?;
        // A panic's message is for the terminal: fd 2 is put back before it is printed.
        let for_panic = saved.try_clone()?;
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = nix::unistd::dup2_stderr(&for_panic);
            previous(info);
        }));
        nix::unistd::dup2_stderr(&file).map_err(io::Error::from)?;
        Ok(Stderr { saved: Some(saved), path: path.to_owned(), settled: false })
    }

    /// The session is known: the file becomes `to` (the open fd follows the rename).
    pub(super) fn settle(&mut self, to: &Path) {
        if std::fs::rename(&self.path, to).is_ok() {
            self.path = to.to_owned();
            self.settled = true;
        }
    }

    /// Runs `f` with the terminal's fd 2 back (an `$EDITOR` the screen hands the terminal to).
    pub(super) fn suspended<T>(&self, f: impl FnOnce() -> T) -> T {
        let Some(saved) = &self.saved else { return f() };
        let _ = nix::unistd::dup2_stderr(saved);
        let out = f();
        if let Ok(file) = OpenOptions::new().append(true).open(&self.path) {
            let _ = nix::unistd::dup2_stderr(&file);
        }
        out
    }

    /// Puts the terminal's fd 2 back now.
    pub(super) fn restore(&mut self) {
        if let Some(saved) = self.saved.take() {
            let _ = nix::unistd::dup2_stderr(&saved);
            let empty =
                File::open(&self.path).and_then(|f| f.metadata()).is_ok_and(|m| m.len() == 0);
            if !self.settled && empty {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

impl Drop for Stderr {
    fn drop(&mut self) {
        self.restore();
    }
}
