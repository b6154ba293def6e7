//! The terminal the screen is drawn on: raw mode, the alternate screen and bracketed paste
//! while it is open, put back when it closes (also on a panic), and the input read on a
//! thread of its own so that a draw never waits on a key.

use std::io::{self, Stdout};
use std::time::Duration;

use crossterm::event::{self, DisableBracketedPaste, EnableBracketedPaste, KeyEvent};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// What the user did.
#[derive(Clone, Debug)]
pub enum Input {
    Key(KeyEvent),
    Paste(String),
    Resize,
}

/// The open screen; dropping it gives the terminal back as it was.
pub struct Tty {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Tty {
    pub fn open() -> io::Result<Tty> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        enter()?;
        let terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
        Ok(Tty { terminal })
    }

    /// Runs `f` with the terminal given back (an `$EDITOR`), then takes it again.
    pub fn suspended<T>(&mut self, f: impl FnOnce() -> T) -> io::Result<T> {
        restore();
        let out = f();
        enter()?;
        self.terminal.clear()?;
        Ok(out)
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        restore();
    }
}

fn enter() -> io::Result<()> {
    enable_raw_mode()?;
    execute!(io::stdout(), EnterAlternateScreen, EnableBracketedPaste)
}

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), DisableBracketedPaste, LeaveAlternateScreen, cursor::Show);
}

/// Reads the terminal's input on a thread and hands each to `send` until it returns false
/// (the screen has closed) or the terminal is gone.
pub fn read_input(send: impl Fn(Input) -> bool + Send + 'static) {
    std::thread::spawn(move || {
        loop {
            match event::poll(Duration::from_millis(200)) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(_) => return,
            }
            let input = match event::read() {
                Ok(event::Event::Key(key)) => Input::Key(key),
                Ok(event::Event::Paste(text)) => Input::Paste(text),
                Ok(event::Event::Resize(..)) => Input::Resize,
                Ok(_) => continue,
                Err(_) => return,
            };
            if !send(input) {
                return;
            }
        }
    });
}
