//! A command line as the `Bash` rules see it: the simple commands it runs, split at every shell
//! operator Claude Code names (`&&`, `||`, `;`, `|`, `|&`, `&`, newlines) and at subshell
//! parentheses, with the commands inside `$(...)`, backticks and `<(...)` taken out as commands
//! of their own, the words of each redirection removed and its output targets kept as writes.
//! What the split cannot follow (an unclosed quote or substitution) makes the line unparsed:
//! then no pattern rule allows it, while deny rules still see the pieces found.

/// Lines longer than this are never parsed: Claude Code asks before them too.
pub(crate) const MAX_LINE: usize = 10_000;
/// Subshells and substitutions nested deeper than this are not followed (the parser recurses).
const MAX_DEPTH: usize = 32;

/// One word of a simple command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    /// As written: quotes and substitutions kept.
    pub raw: String,
    /// Quotes removed.
    pub value: String,
    /// No expansion, substitution or glob character outside quotes: what it says is what runs.
    pub plain: bool,
}

/// A simple command: its words, redirections taken out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Simple {
    pub words: Vec<Word>,
}

impl Simple {
    /// The words as written, one space between them (rules match this text).
    pub fn text(&self) -> String {
        self.words.iter().map(|w| w.raw.as_str()).collect::<Vec<_>>().join(" ")
    }
}

/// A command line, split.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub commands: Vec<Simple>,
    /// Output redirection targets (`> f`, `>> f`, `2> f`, `&> f`), as their words say them;
    /// `/dev/null`, `/dev/stdout`, `/dev/stderr` and duplicated descriptors are not writes.
    pub writes: Vec<Word>,
    /// Why the line could not be followed to its end, when it could not.
    pub unparsed: Option<String>,
}

/// Words that open a compound command's part and are followed by a command.
const LEADING_KEYWORDS: [&str; 8] = ["if", "then", "else", "elif", "do", "while", "until", "!"];
/// Words that close one and run nothing.
const CLOSING_KEYWORDS: [&str; 5] = ["fi", "done", "esac", "}", "{"];

pub(crate) fn parse(line: &str) -> Parsed {
    parse_at(line, 0)
}

fn parse_at(line: &str, depth: usize) -> Parsed {
    let mut parsed = Parsed::default();
    if line.len() > MAX_LINE {
        parsed.unparsed = Some(format!("the command is over {MAX_LINE} characters"));
        return parsed;
    }
    let chars: Vec<char> = line.chars().collect();
    let mut lexer = Lexer { chars: &chars, pos: 0, out: &mut parsed, heredocs: Vec::new(), depth };
    if let Err(why) = lexer.list(None) {
        lexer.out.unparsed.get_or_insert(why);
    }
    parsed
}

struct Lexer<'a> {
    chars: &'a [char],
    pos: usize,
    out: &'a mut Parsed,
    /// Here-documents whose bodies start after the current line: (delimiter, strip tabs).
    heredocs: Vec<(String, bool)>,
    /// Lists open around the current one.
    depth: usize,
}

/// A word being read.
#[derive(Default)]
struct Building {
    raw: String,
    value: String,
    plain: bool,
    started: bool,
}

impl Building {
    fn new() -> Building {
        Building { plain: true, ..Building::default() }
    }

    fn push(&mut self, c: char) {
        self.raw.push(c);
        self.value.push(c);
        self.started = true;
    }
}

/// What ended a list.
#[derive(PartialEq, Eq)]
enum End {
    Eof,
    Close,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    /// Commands until the end, or until `close` (`)` of a subshell or a substitution).
    fn list(&mut self, close: Option<char>) -> Result<End, String> {
        if self.depth > MAX_DEPTH {
            return Err(format!("subshells nest more than {MAX_DEPTH} deep"));
        }
        self.depth += 1;
        let end = self.list_inner(close);
        self.depth -= 1;
        end
    }

    fn list_inner(&mut self, close: Option<char>) -> Result<End, String> {
        let mut words: Vec<Word> = Vec::new();
        let mut word = Building::new();
        loop {
            let Some(c) = self.peek(0) else {
                self.finish_word(&mut word, &mut words);
                self.finish_command(&mut words);
                return match close {
                    None => Ok(End::Eof),
                    Some(c) => Err(format!("a `{c}` is missing")),
                };
            };
            match c {
                ' ' | '\t' => {
                    self.pos += 1;
                    self.finish_word(&mut word, &mut words);
                }
                '\n' => {
                    self.pos += 1;
                    self.finish_word(&mut word, &mut words);
                    self.finish_command(&mut words);
                    self.heredoc_bodies();
                }
                '#' if !word.started => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                ';' | '&' | '|' => {
                    if c == '&' && self.peek(1) == Some('>') {
                        // `&>` and `&>>`: both outputs to a file.
                        self.finish_word(&mut word, &mut words);
                        self.pos += 1;
                        self.redirect()?;
                        continue;
                    }
                    self.pos += 1;
                    // `&&`, `||`, `|&`, `;;`: one operator.
                    if matches!(self.peek(0), Some('&' | '|' | ';')) {
                        self.pos += 1;
                    }
                    self.finish_word(&mut word, &mut words);
                    self.finish_command(&mut words);
                }
                '(' => {
                    self.pos += 1;
                    self.finish_word(&mut word, &mut words);
                    self.finish_command(&mut words);
                    self.list(Some(')'))?;
                }
                ')' => {
                    self.pos += 1;
                    self.finish_word(&mut word, &mut words);
                    self.finish_command(&mut words);
                    if close == Some(')') {
                        return Ok(End::Close);
                    }
                    // `case` patterns (`a)`) and stray parentheses: a separator.
                }
                '>' | '<' => {
                    // A leading descriptor number (`2>`) belongs to the redirection.
                    if word.started && word.plain && word.raw.chars().all(|c| c.is_ascii_digit()) {
                        word = Building::new();
                    } else {
                        self.finish_word(&mut word, &mut words);
                    }
                    if self.peek(1) == Some('(') {
                        // `<(...)`, `>(...)`: a process substitution, a word that runs commands.
                        let start = self.pos;
                        self.pos += 2;
                        self.list(Some(')'))?;
                        let text: String = self.chars[start..self.pos].iter().collect();
                        word.raw.push_str(&text);
                        word.value.push_str(&text);
                        word.plain = false;
                        word.started = true;
                        continue;
                    }
                    self.redirect()?;
                }
                _ => self.word_char(&mut word)?,
            }
        }
    }

    /// One character of a word (quotes, escapes and substitutions whole).
    fn word_char(&mut self, word: &mut Building) -> Result<(), String> {
        let Some(c) = self.peek(0) else { return Ok(()) };
        match c {
            '\\' => {
                self.pos += 1;
                match self.peek(0) {
                    // A line continuation joins the lines.
                    Some('\n') => self.pos += 1,
                    Some(next) => {
                        self.pos += 1;
                        word.raw.push('\\');
                        word.raw.push(next);
                        word.value.push(next);
                        word.started = true;
                    }
                    None => word.push('\\'),
                }
            }
            '\'' => {
                let start = self.pos;
                self.pos += 1;
                while self.peek(0).is_some_and(|c| c != '\'') {
                    self.pos += 1;
                }
                if self.peek(0).is_none() {
                    return Err("a `'` is not closed".to_owned());
                }
                self.pos += 1;
                word.raw.extend(&self.chars[start..self.pos]);
                word.value.extend(&self.chars[start + 1..self.pos - 1]);
                word.started = true;
            }
            '"' => {
                let start = self.pos;
                self.pos += 1;
                let value = self.double_quoted(word)?;
                word.raw.extend(&self.chars[start..self.pos]);
                word.value.push_str(&value);
                word.started = true;
            }
            '$' | '`' => {
                let start = self.pos;
                self.expansion()?;
                let text: String = self.chars[start..self.pos].iter().collect();
                word.raw.push_str(&text);
                word.value.push_str(&text);
                word.plain = false;
                word.started = true;
            }
            '*' | '?' | '[' | '~' | '{' => {
                if c != '{' || word.started {
                    word.plain = false;
                }
                self.pos += 1;
                word.push(c);
            }
            _ => {
                self.pos += 1;
                word.push(c);
            }
        }
        Ok(())
    }

    /// After an opening `"`: its text up to the closing one, which is consumed. Substitutions
    /// inside still run, so their commands are taken out.
    fn double_quoted(&mut self, word: &mut Building) -> Result<String, String> {
        let mut value = String::new();
        loop {
            match self.peek(0) {
                None => return Err("a `\"` is not closed".to_owned()),
                Some('"') => {
                    self.pos += 1;
                    return Ok(value);
                }
                Some('\\') => {
                    self.pos += 1;
                    match self.peek(0) {
                        Some(c @ ('"' | '\\' | '$' | '`')) => {
                            self.pos += 1;
                            value.push(c);
                        }
                        Some('\n') => self.pos += 1,
                        _ => value.push('\\'),
                    }
                }
                Some('$' | '`') => {
                    let start = self.pos;
                    self.expansion()?;
                    value.extend(&self.chars[start..self.pos]);
                    word.plain = false;
                }
                Some(c) => {
                    self.pos += 1;
                    value.push(c);
                }
            }
        }
    }

    /// At `$` or a backtick: a substitution (its commands taken out), a parameter or an
    /// arithmetic expansion, consumed.
    fn expansion(&mut self) -> Result<(), String> {
        if self.depth > MAX_DEPTH {
            return Err(format!("substitutions nest more than {MAX_DEPTH} deep"));
        }
        self.depth += 1;
        let done = self.expansion_inner();
        self.depth -= 1;
        done
    }

    fn expansion_inner(&mut self) -> Result<(), String> {
        if self.peek(0) == Some('`') {
            self.pos += 1;
            let mut inner = String::new();
            loop {
                match self.peek(0) {
                    None => return Err("a backtick is not closed".to_owned()),
                    Some('`') => {
                        self.pos += 1;
                        break;
                    }
                    Some('\\') if matches!(self.peek(1), Some('`' | '\\' | '$')) => {
                        inner.push(self.chars[self.pos + 1]);
                        self.pos += 2;
                    }
                    Some(c) => {
                        inner.push(c);
                        self.pos += 1;
                    }
                }
            }
            let nested = parse_at(&inner, self.depth + 1);
            self.take_nested(nested);
            return Ok(());
        }
        // At `$`.
        self.pos += 1;
        match self.peek(0) {
            Some('(') if self.peek(1) == Some('(') => {
                // `$((...))`: arithmetic, which may still hold a substitution.
                self.pos += 2;
                let mut depth = 2usize;
                while depth > 0 {
                    match self.peek(0) {
                        None => return Err("an arithmetic `$((` is not closed".to_owned()),
                        Some('(') => depth += 1,
                        Some(')') => depth -= 1,
                        Some('$' | '`') => {
                            self.expansion()?;
                            continue;
                        }
                        _ => {}
                    }
                    self.pos += 1;
                }
            }
            Some('(') => {
                self.pos += 1;
                self.list(Some(')'))?;
            }
            Some('{') => {
                self.pos += 1;
                loop {
                    match self.peek(0) {
                        None => return Err("a `${` is not closed".to_owned()),
                        Some('}') => {
                            self.pos += 1;
                            break;
                        }
                        Some('$' | '`') => self.expansion()?,
                        Some('\\') => self.pos += 2,
                        Some(_) => self.pos += 1,
                    }
                }
            }
            _ => {
                while self.peek(0).is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                    self.pos += 1;
                }
                // `$?`, `$$`, `$1`, `$@`: one character.
                if self.chars.get(self.pos - 1) == Some(&'$')
                    && self.peek(0).is_some_and(|c| "?$!#@*-0123456789".contains(c))
                {
                    self.pos += 1;
                }
            }
        }
        Ok(())
    }

    /// The commands and writes of a line parsed inside this one (a backtick substitution).
    fn take_nested(&mut self, nested: Parsed) {
        self.out.commands.extend(nested.commands);
        self.out.writes.extend(nested.writes);
        if let Some(why) = nested.unparsed {
            self.out.unparsed.get_or_insert(why);
        }
    }

    /// At `>`, `>>`, `<`, `<<`, `<<<`, `>|`, `>&`, `<&` (after `&` for `&>`): the operator and
    /// its target word, consumed; an output target is a write.
    fn redirect(&mut self) -> Result<(), String> {
        let first = self.peek(0);
        self.pos += 1;
        let mut output = first == Some('>');
        let mut heredoc = None;
        match (first, self.peek(0)) {
            (Some('>'), Some('>' | '|')) => self.pos += 1,
            (Some('<'), Some('<')) => {
                self.pos += 1;
                if self.peek(0) == Some('<') {
                    self.pos += 1;
                } else {
                    let strip = self.peek(0) == Some('-');
                    if strip {
                        self.pos += 1;
                    }
                    heredoc = Some(strip);
                }
            }
            (Some('<'), Some('>')) => {
                self.pos += 1;
                output = true;
            }
            _ => {}
        }
        // `>&2`, `2>&1`, `<&0`: a descriptor duplicated, no file.
        let dup = self.peek(0) == Some('&');
        if dup {
            self.pos += 1;
        }
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.pos += 1;
        }
        let mut target = Building::new();
        while let Some(c) = self.peek(0) {
            if matches!(c, ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>') {
                break;
            }
            self.word_char(&mut target)?;
        }
        if !target.started {
            return Err("a redirection has no target".to_owned());
        }
        if let Some(strip) = heredoc {
            self.heredocs.push((target.value.clone(), strip));
            return Ok(());
        }
        let descriptor = target.value == "-" || target.value.chars().all(|c| c.is_ascii_digit());
        let quiet = ["/dev/null", "/dev/stdout", "/dev/stderr"].contains(&target.value.as_str());
        if output && !(dup && descriptor) && !quiet {
            self.out.writes.push(Word {
                raw: target.raw,
                value: target.value,
                plain: target.plain,
            });
        }
        Ok(())
    }

    /// At the start of a line after `<<WORD`: the here-documents' bodies, skipped.
    fn heredoc_bodies(&mut self) {
        for (delimiter, strip) in std::mem::take(&mut self.heredocs) {
            loop {
                let start = self.pos;
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let line: String = self.chars[start..self.pos].iter().collect();
                if self.peek(0) == Some('\n') {
                    self.pos += 1;
                }
                let line = if strip { line.trim_start_matches('\t') } else { line.as_str() };
                if line == delimiter || self.peek(0).is_none() {
                    break;
                }
            }
        }
    }

    fn finish_word(&mut self, word: &mut Building, words: &mut Vec<Word>) {
        if word.started {
            let done = std::mem::replace(word, Building::new());
            words.push(Word { raw: done.raw, value: done.value, plain: done.plain });
        }
    }

    /// The words so far as a command, compound keywords taken off.
    fn finish_command(&mut self, words: &mut Vec<Word>) {
        let mut words = std::mem::take(words);
        while words.first().is_some_and(|w| w.plain && LEADING_KEYWORDS.contains(&w.raw.as_str())) {
            words.remove(0);
        }
        while words.last().is_some_and(|w| w.plain && CLOSING_KEYWORDS.contains(&w.raw.as_str())) {
            words.pop();
        }
        if words.first().is_some_and(|w| w.plain && w.raw == "{") {
            words.remove(0);
        }
        if !words.is_empty() {
            self.out.commands.push(Simple { words });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(line: &str) -> Vec<String> {
        let parsed = parse(line);
        assert_eq!(parsed.unparsed, None, "{line}");
        parsed.commands.iter().map(Simple::text).collect()
    }

    #[test]
    fn every_operator_claude_code_names_splits_the_line() {
        for line in [
            "git diff && rm x",
            "git diff || rm x",
            "git diff; rm x",
            "git diff | rm x",
            "git diff |& rm x",
            "git diff & rm x",
            "git diff\nrm x",
        ] {
            assert_eq!(commands(line), ["git diff", "rm x"], "{line:?}");
        }
    }

    #[test]
    fn quotes_keep_operators_and_substitutions_are_commands_of_their_own() {
        assert_eq!(commands("echo 'a && b' \"c; d\""), ["echo 'a && b' \"c; d\""]);
        assert_eq!(commands("git diff $(rm -rf x)"), ["rm -rf x", "git diff $(rm -rf x)"]);
        assert_eq!(commands("git diff `rm x`"), ["rm x", "git diff `rm x`"]);
        assert_eq!(
            commands("echo \"$(curl e | sh)\""),
            ["curl e", "sh", "echo \"$(curl e | sh)\""]
        );
        assert_eq!(commands("diff <(ls a) b"), ["ls a", "diff <(ls a) b"]);
        assert_eq!(commands("(cd x && rm y)"), ["cd x", "rm y"]);
        assert_eq!(commands("echo ${X:-$(id)}"), ["id", "echo ${X:-$(id)}"]);
        assert_eq!(commands("echo $((1 + $(id -u)))"), ["id -u", "echo $((1 + $(id -u)))"]);
    }

    #[test]
    fn compound_keywords_are_taken_off_the_commands_they_run() {
        assert_eq!(commands("for f in a b; do rm $f; done"), ["for f in a b", "rm $f"],);
        assert_eq!(commands("if true; then rm x; else ls; fi"), ["true", "rm x", "ls"]);
        assert_eq!(commands("{ rm x; }"), ["rm x"]);
    }

    #[test]
    fn redirections_leave_the_command_and_output_targets_are_writes() {
        let parsed = parse("git log > out.txt 2>&1 < in.txt 2>/dev/null &>> all.log");
        assert_eq!(parsed.commands.iter().map(Simple::text).collect::<Vec<_>>(), ["git log"]);
        let writes: Vec<&str> = parsed.writes.iter().map(|w| w.value.as_str()).collect();
        assert_eq!(writes, ["out.txt", "all.log"]);
        let parsed = parse("cat <<'EOF' > f\nrm -rf /\nEOF\nls");
        assert_eq!(parsed.commands.iter().map(Simple::text).collect::<Vec<_>>(), ["cat", "ls"]);
        assert_eq!(parsed.writes[0].value, "f");
    }

    #[test]
    fn what_cannot_be_followed_is_unparsed_with_what_was_found() {
        let parsed = parse("ls; echo 'open");
        assert!(parsed.unparsed.as_deref().is_some_and(|w| w.contains("not closed")));
        assert_eq!(parsed.commands[0].text(), "ls");
        assert!(parse("echo $(ls").unparsed.is_some());
        assert!(parse(&"x".repeat(MAX_LINE + 1)).unparsed.is_some());
        // Deep nesting is refused, not followed until the stack runs out.
        let deep = format!("{}ls{}", "$(".repeat(2000), ")".repeat(2000));
        assert!(parse(&deep).unparsed.is_some_and(|w| w.contains("nest")));
    }

    #[test]
    fn words_know_whether_they_say_what_runs() {
        let parsed = parse("rm 'a b' c* $HOME ~/x");
        let plain: Vec<(String, bool)> =
            parsed.commands[0].words.iter().map(|w| (w.value.clone(), w.plain)).collect();
        assert_eq!(
            plain,
            [
                ("rm".to_owned(), true),
                ("a b".to_owned(), true),
                ("c*".to_owned(), false),
                ("$HOME".to_owned(), false),
                ("~/x".to_owned(), false),
            ]
        );
    }
}
