//! Keys: what each does to the screen, and what it asks of the binary.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::screen::{Gate, Screen};

/// What the user asked for that the screen cannot do itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Run this prompt now (nothing is running).
    Submit(String),
    /// Cancel the running request.
    Cancel,
    /// Leave (Ctrl-D on an empty prompt, `/exit`).
    Exit,
    /// The answer to the plan gate.
    Plan(PlanAnswer),
    /// Edit this plan in `$EDITOR`, then answer the gate with what was saved.
    EditPlan(String),
    /// The answer to an ask gate (a `PreToolUse` hook's `ask`, or the permission rules').
    Ask(AskAnswer),
    /// The answer to the startup's trust question: trusted, or run without the project's parts.
    Trust(bool),
    /// `/rewind [N]`: list the session's requests, or go back to before request N.
    Rewind(Option<String>),
}

/// The answer to an ask gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskAnswer {
    Once,
    /// Once, and always for this project (offered only when the gate says so).
    Always,
    Deny,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanAnswer {
    Accept,
    /// The plan as the user edited it.
    Edited(String),
    Abort,
}

/// Every key, for the `?` help.
pub const HELP_KEYS: &[(&str, &str)] = &[
    ("enter", "send the prompt (queued while a request runs)"),
    ("ctrl-j, alt-enter", "a new line in the prompt"),
    ("↑ ↓", "move between lines; on the first or last line, the prompts sent before"),
    ("← → home end", "move in the line (ctrl-a, ctrl-e too)"),
    ("ctrl-u", "delete to the start of the line"),
    ("esc", "cancel the running request"),
    ("ctrl-c", "cancel the running request, or clear the prompt"),
    ("pgup pgdn", "scroll the transcript"),
    ("ctrl-d", "exit (on an empty prompt)"),
    ("?", "this help (on an empty prompt)"),
    ("plan gate", "enter accepts · e edits in $EDITOR · esc aborts the request"),
    ("a call asks", "y once · a always here · n or esc denies"),
];

/// Every command, for the `?` help.
pub const HELP_COMMANDS: &[(&str, &str)] = &[
    ("/help", "this help"),
    ("/exit", "exit"),
    ("/<skill> args", "run a skill with its arguments (the prompt's first line)"),
    ("/rewind [N]", "list the requests, or go back to before request N"),
];

impl Screen {
    /// A key: the editor's, a gate's or the help's; what the binary must do, if anything.
    pub fn key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        if let Some(gate) = self.gate.clone() {
            return self.gate_key(gate, key.code);
        }
        if self.help {
            self.help = false;
            return None;
        }
        match key.code {
            KeyCode::Char('d') if ctrl => {
                if self.editor.is_empty() {
                    return Some(Action::Exit);
                }
                self.editor.delete();
            }
            KeyCode::Char('c') if ctrl => {
                if self.is_running() {
                    self.cancelling();
                    return Some(Action::Cancel);
                }
                self.editor.take();
            }
            KeyCode::Esc if self.is_running() => {
                self.cancelling();
                return Some(Action::Cancel);
            }
            KeyCode::Char('j') if ctrl => self.editor.newline(),
            KeyCode::Enter if alt || key.modifiers.contains(KeyModifiers::SHIFT) => {
                self.editor.newline()
            }
            KeyCode::Enter => return self.enter(),
            KeyCode::Char('a') if ctrl => self.editor.home(),
            KeyCode::Char('e') if ctrl => self.editor.end(),
            KeyCode::Char('u') if ctrl => self.editor.kill_to_start(),
            KeyCode::Char('?') if self.editor.is_empty() => self.help = true,
            KeyCode::Char(c) if !ctrl => self.editor.insert(c),
            KeyCode::Tab => self.editor.insert(' '),
            KeyCode::Backspace => self.editor.backspace(),
            KeyCode::Delete => self.editor.delete(),
            KeyCode::Left => self.editor.left(),
            KeyCode::Right => self.editor.right(),
            KeyCode::Up => self.editor.up(),
            KeyCode::Down => self.editor.down(),
            KeyCode::Home => self.editor.home(),
            KeyCode::End => self.editor.end(),
            KeyCode::PageUp => self.scroll_by(10),
            KeyCode::PageDown => self.scroll_by(-10),
            _ => {}
        }
        None
    }

    /// A paste, taken whole into the prompt.
    pub fn paste(&mut self, text: &str) {
        if self.gate.is_none() {
            self.help = false;
            self.editor.paste(text);
        }
    }

    fn enter(&mut self) -> Option<Action> {
        if self.editor.text().trim().is_empty() {
            return None;
        }
        match self.editor.text().trim() {
            "/help" => {
                self.editor.take();
                self.help = true;
                return None;
            }
            "/exit" => return Some(Action::Exit),
            "/rewind" => {
                self.editor.take();
                return Some(Action::Rewind(None));
            }
            text if text.starts_with("/rewind ") => {
                let arg = text["/rewind ".len()..].trim().to_owned();
                self.editor.take();
                return Some(Action::Rewind(Some(arg)));
            }
            _ => {}
        }
        let prompt = self.editor.take();
        if self.is_running() || !self.queued.is_empty() {
            self.queue(prompt);
            return None;
        }
        Some(Action::Submit(prompt))
    }

    fn gate_key(&mut self, gate: Gate, code: KeyCode) -> Option<Action> {
        let answer = match (&gate, code) {
            (Gate::Plan { .. }, KeyCode::Enter) => Action::Plan(PlanAnswer::Accept),
            (Gate::Plan { text, .. }, KeyCode::Char('e')) => Action::EditPlan(text.clone()),
            (Gate::Plan { .. }, KeyCode::Esc) => Action::Plan(PlanAnswer::Abort),
            (Gate::Ask { .. }, KeyCode::Char('y') | KeyCode::Enter) => Action::Ask(AskAnswer::Once),
            (Gate::Ask { always: true, .. }, KeyCode::Char('a')) => Action::Ask(AskAnswer::Always),
            (Gate::Ask { .. }, KeyCode::Char('n') | KeyCode::Esc) => Action::Ask(AskAnswer::Deny),
            // Trusting runs the project's commands: only a deliberate `y`, never Enter.
            (Gate::Trust { .. }, KeyCode::Char('y')) => Action::Trust(true),
            (Gate::Trust { .. }, KeyCode::Char('n') | KeyCode::Esc) => Action::Trust(false),
            _ => return None,
        };
        // `e` keeps the gate until the edited plan comes back.
        if !matches!(answer, Action::EditPlan(_)) {
            self.gate = None;
        }
        if answer == Action::Plan(PlanAnswer::Abort) {
            self.cancelling();
        }
        Some(answer)
    }

    /// The plan came back from `$EDITOR`: the gate is answered with it.
    pub fn plan_edited(&mut self, text: String) -> Action {
        self.gate = None;
        Action::Plan(PlanAnswer::Edited(text))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::{Action, PlanAnswer};
    use crate::{Feed, Gate, Launch, Screen};

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(screen: &mut Screen, text: &str) -> Option<Action> {
        for c in text.chars() {
            screen.key(key(KeyCode::Char(c)));
        }
        screen.key(key(KeyCode::Enter))
    }

    #[test]
    fn a_prompt_runs_when_idle_and_queues_while_one_runs() {
        let mut screen = Screen::new(Launch::default());
        assert_eq!(typed(&mut screen, "one"), Some(Action::Submit("one".into())));
        screen.feed(Feed::RequestStarted { prompt: "one".into(), max_turns: 40 }, Instant::now());
        assert_eq!(typed(&mut screen, "two"), None);
        assert_eq!(screen.queued(), ["two"]);
        assert_eq!(screen.next_queued(), None, "not while one runs");
        assert_eq!(screen.key(key(KeyCode::Esc)), Some(Action::Cancel));
    }

    #[test]
    fn rewind_is_a_command_not_a_prompt() {
        let mut screen = Screen::new(Launch::default());
        assert_eq!(typed(&mut screen, "/rewind"), Some(Action::Rewind(None)));
        assert_eq!(typed(&mut screen, "/rewind 2"), Some(Action::Rewind(Some("2".into()))));
        assert_eq!(typed(&mut screen, "/rewinding"), Some(Action::Submit("/rewinding".into())));
    }

    #[test]
    fn the_plan_gate_takes_enter_e_and_esc() {
        let mut screen = Screen::new(Launch::default());
        let gate = Gate::Plan { agent: "a1".into(), text: "1. read".into() };
        screen.set_gate(gate.clone());
        assert_eq!(screen.key(key(KeyCode::Char('x'))), None);
        assert_eq!(screen.key(key(KeyCode::Char('e'))), Some(Action::EditPlan("1. read".into())));
        assert_eq!(
            screen.plan_edited("2. write".into()),
            Action::Plan(PlanAnswer::Edited("2. write".into()))
        );
        screen.set_gate(gate.clone());
        assert_eq!(screen.key(key(KeyCode::Enter)), Some(Action::Plan(PlanAnswer::Accept)));
        assert!(screen.gate().is_none());
        screen.set_gate(gate);
        assert_eq!(screen.key(key(KeyCode::Esc)), Some(Action::Plan(PlanAnswer::Abort)));
    }

    #[test]
    fn the_ask_gate_takes_y_a_only_when_offered_and_n() {
        use crate::AskAnswer;
        let mut screen = Screen::new(Launch::default());
        let gate = |always| Gate::Ask {
            agent: "a1".into(),
            tool: "bash".into(),
            input: "{}".into(),
            reason: "no permission rule allows ls".into(),
            always,
        };
        screen.set_gate(gate(true));
        assert_eq!(screen.key(key(KeyCode::Char('a'))), Some(Action::Ask(AskAnswer::Always)));
        assert!(screen.gate().is_none());
        // Without the offer, `a` is no answer: the gate stays.
        screen.set_gate(gate(false));
        assert_eq!(screen.key(key(KeyCode::Char('a'))), None);
        assert!(screen.gate().is_some());
        assert_eq!(screen.key(key(KeyCode::Char('y'))), Some(Action::Ask(AskAnswer::Once)));
        screen.set_gate(gate(true));
        assert_eq!(screen.key(key(KeyCode::Esc)), Some(Action::Ask(AskAnswer::Deny)));
    }

    #[test]
    fn question_mark_opens_help_only_on_an_empty_prompt() {
        let mut screen = Screen::new(Launch::default());
        screen.key(key(KeyCode::Char('?')));
        assert!(screen.help_shown());
        screen.key(key(KeyCode::Esc));
        assert!(!screen.help_shown());
        screen.key(key(KeyCode::Char('a')));
        screen.key(key(KeyCode::Char('?')));
        assert!(!screen.help_shown());
        assert_eq!(screen.editor.text(), "a?");
        let ctrl_d = KeyEvent::new(KeyCode::Char('d'), KeyModifiers::CONTROL);
        assert_eq!(screen.key(ctrl_d), None, "not on a prompt with text");
        screen.editor.take();
        assert_eq!(screen.key(ctrl_d), Some(Action::Exit));
    }
}
