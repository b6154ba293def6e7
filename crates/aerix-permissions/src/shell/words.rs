//! One word, from brush-parser's pieces: its value after quote removal, whether that value is
//! what runs, and the texts inside it that run as command lines (`$(...)`, backticks, and
//! those inside a parameter's braces or an arithmetic expression).

use brush_parser::word::{WordPiece, WordPieceWithSource};

use super::{Word, options};

/// A word taken apart.
pub(super) struct Scanned {
    pub word: Word,
    /// Texts that run as command lines of their own.
    pub scripts: Vec<String>,
    /// Some part of it is expanded when it runs (globs and braces aside).
    pub expands: bool,
    /// Why some part of it could not be taken apart.
    pub error: Option<String>,
}

/// `raw`, a word as the parser split it.
pub(super) fn scan(raw: &str) -> Scanned {
    let mut build = Build::new(raw);
    match brush_parser::word::parse(raw, &options()) {
        Ok(pieces) => build.pieces(&pieces, false),
        Err(error) => build.fail(error.to_string()),
    }
    build.finish()
}

/// An unquoted here-document's body: what it runs (quotes in it are text).
pub(super) fn scan_heredoc(body: &str) -> Scanned {
    let mut build = Build::new(body);
    match brush_parser::word::parse_heredoc(body, &options()) {
        Ok(pieces) => build.pieces(&pieces, true),
        Err(error) => build.fail(error.to_string()),
    }
    build.finish()
}

struct Build<'a> {
    raw: &'a str,
    value: String,
    plain: bool,
    head: String,
    /// Still in the literal start of the word.
    head_open: bool,
    /// The value with quoted and expanded text blanked: where globs and braces count.
    shape: String,
    scripts: Vec<String>,
    expands: bool,
    error: Option<String>,
}

impl<'a> Build<'a> {
    fn new(raw: &'a str) -> Build<'a> {
        Build {
            raw,
            value: String::new(),
            plain: true,
            head: String::new(),
            head_open: true,
            shape: String::new(),
            scripts: Vec::new(),
            expands: false,
            error: None,
        }
    }

    fn fail(&mut self, error: String) {
        self.error.get_or_insert(error);
        self.opaque(self.raw);
    }

    fn literal(&mut self, text: &str, quoted: bool) {
        self.value.push_str(text);
        if self.head_open {
            self.head.push_str(text);
        }
        if quoted {
            self.shape.extend(text.chars().map(|_| '_'));
        } else {
            self.shape.push_str(text);
        }
    }

    /// Text only known when the word is expanded.
    fn opaque(&mut self, text: &str) {
        self.value.push_str(text);
        self.plain = false;
        self.expands = true;
        self.head_open = false;
        self.shape.push('_');
    }

    fn source(&self, piece: &WordPieceWithSource) -> &'a str {
        self.raw.get(piece.start_index..piece.end_index).unwrap_or(self.raw)
    }

    fn pieces(&mut self, pieces: &[WordPieceWithSource], quoted: bool) {
        for piece in pieces {
            self.piece(piece, quoted);
        }
    }

    fn piece(&mut self, with_source: &WordPieceWithSource, quoted: bool) {
        let source = self.source(with_source);
        match &with_source.piece {
            WordPiece::Text(text) => self.literal(text, quoted),
            WordPiece::SingleQuotedText(text) => self.literal(text, true),
            // `$'...'` with an escape in it says what it says only once decoded: left as
            // unknown rather than decoded here a second way.
            WordPiece::AnsiCQuotedText(text) if !text.contains('\\') => self.literal(text, true),
            WordPiece::AnsiCQuotedText(_) => self.opaque(source),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => self.pieces(inner, true),
            // `\x` is `x`; a backslash-newline joins lines.
            WordPiece::EscapeSequence(escaped) => {
                let rest = escaped.strip_prefix('\\').unwrap_or(escaped);
                if rest != "\n" {
                    self.literal(rest, true);
                }
            }
            WordPiece::CommandSubstitution(script)
            | WordPiece::BackquotedCommandSubstitution(script) => {
                self.scripts.push(script.clone());
                self.opaque(source);
            }
            WordPiece::ParameterExpansion(_) => {
                // What is inside the braces may itself run commands: `${X:-$(id)}`.
                if let Some(inner) = source.strip_prefix("${").and_then(|s| s.strip_suffix('}')) {
                    self.nested(inner);
                }
                self.opaque(source);
            }
            WordPiece::ArithmeticExpression(expression) => {
                self.nested(&expression.value);
                self.opaque(source);
            }
            WordPiece::TildeExpansion(_) => self.opaque(source),
        }
    }

    /// Text inside an expansion: only the command lines it runs are kept.
    fn nested(&mut self, text: &str) {
        let inner = scan(text);
        self.scripts.extend(inner.scripts);
        if let Some(error) = inner.error {
            self.error.get_or_insert(error);
        }
    }

    fn finish(mut self) -> Scanned {
        // Unquoted glob characters and brace expansions make other words of it when it runs
        // (`{touch,x}` runs `touch x`).
        if globs(&self.shape) || braces(&self.shape) {
            self.plain = false;
            self.head.clear();
        }
        if self.plain {
            self.head = self.value.clone();
        }
        let word = Word {
            raw: self.raw.to_owned(),
            value: self.value,
            plain: self.plain,
            head: self.head,
        };
        Scanned { word, scripts: self.scripts, expands: self.expands, error: self.error }
    }
}

/// `*`, `?`, or a `[` with a `]` after it.
fn globs(shape: &str) -> bool {
    shape.contains(['*', '?']) || shape.find('[').is_some_and(|at| shape[at..].contains(']'))
}

/// A `{` with a `,` or `..` and then a `}` after it.
fn braces(shape: &str) -> bool {
    shape.match_indices('{').any(|(at, _)| {
        let rest = &shape[at + 1..];
        rest.find('}').is_some_and(|end| rest[..end].contains(',') || rest[..end].contains(".."))
    })
}
