//! A command line as the `Bash` rules see it, parsed by brush-parser (a bash parser) rather
//! than scanned by hand: the simple commands it runs, found through every list, pipeline,
//! compound command and function body, and through every place a command runs from inside a
//! word — `$(...)`, backticks, `<(...)`/`>(...)`, an unquoted here-document's body, a
//! parameter's default, an arithmetic expression — and the scripts of `sh -c` (any option
//! cluster) and `eval`. Each word is kept as written and after quote removal, and marked when
//! what it says is only known when it runs. Output redirections' targets are kept as writes.
//! What cannot be parsed, or nests past the bounds, is unparsed, with the reason.

mod script;
mod walk;
mod words;

use brush_parser::{ParserOptions, Token};

/// Lines longer than this are never parsed: Claude Code asks before them too.
pub(crate) const MAX_LINE: usize = 10_000;
/// Substitutions, subshells and braces nested deeper than this in a line's text are not
/// followed: the parser recurses on them and a test thread's stack is 2 MiB.
pub(crate) const MAX_DEPTH: usize = 32;
/// Compound commands (`if`, loops, `case`, `{ }`) nested deeper than this are not followed:
/// the parser's time grows with the cube of their nesting.
pub(crate) const MAX_COMPOUND: usize = 16;
/// How deep `sh -c` and `eval` scripts inside scripts are followed.
pub(crate) const MAX_SCRIPTS: usize = 3;

/// One word of a simple command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Word {
    /// As written: quotes and substitutions kept.
    pub raw: String,
    /// Quotes removed; an expansion as written (`$HOME`).
    pub value: String,
    /// No expansion, substitution, glob or brace expansion outside quotes: `value` is what
    /// runs.
    pub plain: bool,
    /// The text the word surely starts with: `value` when plain, else what comes before its
    /// first expansion (`to` of `to$(x)`).
    pub head: String,
}

impl Word {
    /// The word as one shell word again after quote removal: `value`, single-quoted when it
    /// holds a space or a shell character; a word that is not plain as written.
    pub(crate) fn quoted(&self) -> String {
        if !self.plain {
            return self.raw.clone();
        }
        let bare = !self.value.is_empty()
            && self.value.chars().all(|c| c.is_alphanumeric() || "-_./:=@%+,^".contains(c));
        if bare { self.value.clone() } else { format!("'{}'", self.value.replace('\'', "'\\''")) }
    }
}

/// A simple command: its words, redirections taken out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Simple {
    pub words: Vec<Word>,
    /// For a script known only when it runs (`sh -c "$X"`, `eval $X`): the command that runs
    /// it, which is what a reason names.
    pub runs: Option<String>,
}

impl Simple {
    /// The words as written, one space between them.
    pub fn text(&self) -> String {
        self.words.iter().map(|w| w.raw.as_str()).collect::<Vec<_>>().join(" ")
    }

    /// What a reason shows of it.
    pub fn shown(&self) -> String {
        self.runs.clone().unwrap_or_else(|| self.text())
    }
}

/// Why a line could not be followed to its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unparsed {
    #[error("the command is over {MAX_LINE} characters")]
    TooLong,
    #[error("substitutions or subshells nest more than {MAX_DEPTH} deep")]
    TooDeep,
    #[error("compound commands nest more than {MAX_COMPOUND} deep")]
    TooManyCompounds,
    #[error("`sh -c` and `eval` scripts nest more than {MAX_SCRIPTS} deep")]
    TooManyScripts,
    #[error("it is not shell syntax the parser knows: {0}")]
    Syntax(String),
}

/// A command line, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub commands: Vec<Simple>,
    /// Output redirection targets (`> f`, `>> f`, `2> f`, `&> f`, `>& f`), as their words say
    /// them; `/dev/null`, `/dev/stdout`, `/dev/stderr` and duplicated descriptors are not
    /// writes.
    pub writes: Vec<Word>,
    /// Why some part could not be followed, when one could not (the first reason).
    pub unparsed: Option<Unparsed>,
}

impl Parsed {
    fn refuse(&mut self, why: Unparsed) {
        self.unparsed.get_or_insert(why);
    }
}

pub(crate) fn parse(line: &str) -> Parsed {
    let mut parsed = Parsed::default();
    parse_into(line, Level::default(), &mut parsed);
    parsed
}

/// How far inside the line being checked a text is.
#[derive(Clone, Copy, Debug, Default)]
struct Level {
    /// Substitutions and scripts around it, and what its own text nests.
    depth: usize,
    /// `sh -c` and `eval` scripts around it.
    scripts: usize,
}

/// The options bash runs `-c` scripts with: no extended globs (an `@(...)` is then a syntax
/// error, so unparsed, rather than a pattern taken for a command).
fn options() -> ParserOptions {
    ParserOptions { enable_extended_globbing: false, ..ParserOptions::default() }
}

/// `line`'s commands and writes added to `out`: the line itself, or a text that runs inside
/// it (a substitution, a script) at `level`.
fn parse_into(line: &str, level: Level, out: &mut Parsed) {
    if line.len() > MAX_LINE {
        return out.refuse(Unparsed::TooLong);
    }
    // Bounded before the parser sees the text: it recurses on nesting.
    if level.depth + text_nesting(line) > MAX_DEPTH {
        return out.refuse(Unparsed::TooDeep);
    }
    let options = options();
    let tokens = match brush_parser::uncached_tokenize_str(line, &options.tokenizer_options()) {
        Ok(tokens) => tokens,
        Err(error) => return out.refuse(Unparsed::Syntax(error.to_string())),
    };
    if compound_nesting(&tokens) > MAX_COMPOUND {
        return out.refuse(Unparsed::TooManyCompounds);
    }
    match brush_parser::parse_tokens(&tokens, &options) {
        Ok(program) => walk::Walker::new(line, level, out).program(&program),
        Err(error) => out.refuse(Unparsed::Syntax(error.to_string())),
    }
}

/// How deep `(` and `{` nest in a text, quotes not looked at: an over-count only refuses a
/// line whose quoted text opens that many more than it closes.
fn text_nesting(line: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in line.chars() {
        match c {
            '(' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// How deep compound commands nest among a line's tokens (a quoted word or a here-document's
/// body is one token, so their text is not counted). A closer counts only against the opener
/// it closes (a `case` pattern's `)` closes no subshell).
fn compound_nesting(tokens: &[Token]) -> usize {
    let mut open: Vec<&str> = Vec::new();
    let mut deepest = 0;
    let mut command_start = true;
    fn close(open: &mut Vec<&str>, openers: &[&str]) {
        if open.last().is_some_and(|top| openers.contains(top)) {
            open.pop();
        }
    }
    for token in tokens {
        match token {
            Token::Operator(op, _) => {
                match op.as_str() {
                    "(" => open.push("("),
                    ")" => close(&mut open, &["("]),
                    _ => {}
                }
                // After a redirection comes its target, after any other operator a command.
                command_start = !op.contains(['<', '>']);
            }
            Token::Word(word, _) => {
                let word = word.as_str();
                if command_start {
                    match word {
                        "if" | "while" | "until" | "for" | "case" | "select" | "{" => {
                            open.push(word);
                        }
                        "fi" => close(&mut open, &["if"]),
                        "done" => close(&mut open, &["while", "until", "for", "select"]),
                        "esac" => close(&mut open, &["case"]),
                        "}" => close(&mut open, &["{"]),
                        _ => {}
                    }
                }
                // After these a command starts again; after any other word come arguments.
                command_start = matches!(
                    word,
                    "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "{" | "!" | "time"
                );
            }
        }
        deepest = deepest.max(open.len());
    }
    deepest
}

#[cfg(test)]
mod tests;
