//! The prompt editor: multi-line text with a cursor, the prompts sent before (`↑`/`↓` on the
//! first and last line), and pastes taken whole.

/// At most this many prompts are kept in the history.
const HISTORY: usize = 200;

#[derive(Clone, Debug, Default)]
pub struct Editor {
    /// The text, one entry per line (never empty).
    lines: Vec<String>,
    /// Line and character (not byte) of the cursor.
    row: usize,
    col: usize,
    history: Vec<String>,
    /// Where `↑` has walked to in the history, and the draft it left.
    browsing: Option<(usize, String)>,
}

impl Editor {
    pub fn new() -> Editor {
        Editor { lines: vec![String::new()], ..Editor::default() }
    }

    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    /// The cursor: line, character.
    pub fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    pub fn set(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_owned).collect();
        if self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].chars().count();
    }

    /// Takes the text (into the history, unless blank), leaving the editor empty.
    pub fn take(&mut self) -> String {
        let text = self.text();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
            if self.history.len() > HISTORY {
                self.history.remove(0);
            }
        }
        self.lines = vec![String::new()];
        self.row = 0;
        self.col = 0;
        self.browsing = None;
        text
    }

    pub fn insert(&mut self, c: char) {
        if c == '\n' {
            return self.newline();
        }
        let line = &mut self.lines[self.row];
        let at = byte_at(line, self.col);
        line.insert(at, c);
        self.col += 1;
    }

    /// A paste: its text as typed, line breaks kept (`\r\n` and `\r` as `\n`).
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        for c in text.chars() {
            if c == '\n' || !c.is_control() {
                self.insert(c);
            } else if c == '\t' {
                self.insert(' ');
            }
        }
    }

    pub fn newline(&mut self) {
        let line = &mut self.lines[self.row];
        let at = byte_at(line, self.col);
        let rest = line.split_off(at);
        self.row += 1;
        self.lines.insert(self.row, rest);
        self.col = 0;
    }

    pub fn backspace(&mut self) {
        if self.col > 0 {
            let line = &mut self.lines[self.row];
            let at = byte_at(line, self.col - 1);
            line.remove(at);
            self.col -= 1;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
            self.lines[self.row].push_str(&line);
        }
    }

    pub fn delete(&mut self) {
        let len = self.lines[self.row].chars().count();
        if self.col < len {
            let line = &mut self.lines[self.row];
            let at = byte_at(line, self.col);
            line.remove(at);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
        }
    }

    pub fn right(&mut self) {
        if self.col < self.lines[self.row].chars().count() {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    pub fn home(&mut self) {
        self.col = 0;
    }

    pub fn end(&mut self) {
        self.col = self.lines[self.row].chars().count();
    }

    /// Up a line, or (on the first line) the previous prompt of the history.
    pub fn up(&mut self) {
        if self.row > 0 {
            self.row -= 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
            return;
        }
        let next = match &self.browsing {
            Some((0, _)) => return,
            Some((at, _)) => at - 1,
            None if self.history.is_empty() => return,
            None => {
                self.browsing = Some((self.history.len(), self.text()));
                self.history.len() - 1
            }
        };
        if let Some((at, _)) = &mut self.browsing {
            *at = next;
        }
        let text = self.history[next].clone();
        self.set(&text);
    }

    /// Down a line, or (on the last line) the next prompt of the history, then the draft.
    pub fn down(&mut self) {
        if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
            return;
        }
        let Some((at, draft)) = self.browsing.clone() else { return };
        if at + 1 >= self.history.len() {
            self.browsing = None;
            self.set(&draft);
        } else {
            self.browsing = Some((at + 1, draft));
            let text = self.history[at + 1].clone();
            self.set(&text);
        }
    }

    /// Ctrl-U: the line up to the cursor goes.
    pub fn kill_to_start(&mut self) {
        let line = &mut self.lines[self.row];
        let at = byte_at(line, self.col);
        line.drain(..at);
        self.col = 0;
    }
}

/// The byte offset of character `col` of `line`.
fn byte_at(line: &str, col: usize) -> usize {
    line.char_indices().nth(col).map(|(i, _)| i).unwrap_or(line.len())
}

#[cfg(test)]
mod tests {
    use super::Editor;

    fn typed(text: &str) -> Editor {
        let mut editor = Editor::new();
        for c in text.chars() {
            editor.insert(c);
        }
        editor
    }

    #[test]
    fn lines_join_and_split_at_the_cursor() {
        let mut editor = typed("héllo");
        editor.left();
        editor.left();
        editor.newline();
        assert_eq!(editor.text(), "hél\nlo");
        editor.home();
        editor.backspace();
        assert_eq!(editor.text(), "héllo");
        assert_eq!(editor.cursor(), (0, 3));
    }

    #[test]
    fn a_paste_keeps_its_line_breaks() {
        let mut editor = Editor::new();
        editor.paste("fn a() {\r\n\tb()\r\n}");
        assert_eq!(editor.text(), "fn a() {\n b()\n}");
        assert_eq!(editor.lines().len(), 3);
    }

    #[test]
    fn the_history_walks_back_and_returns_to_the_draft() {
        let mut editor = typed("first");
        editor.take();
        editor.insert('s');
        editor.take();
        editor.insert('d');
        editor.up();
        assert_eq!(editor.text(), "s");
        editor.up();
        assert_eq!(editor.text(), "first");
        editor.up();
        assert_eq!(editor.text(), "first");
        editor.down();
        editor.down();
        assert_eq!(editor.text(), "d");
        assert_eq!(editor.take(), "d");
        assert!(editor.is_empty());
    }
}
