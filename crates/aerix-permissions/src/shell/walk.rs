//! brush-parser's syntax tree walked for what a line runs: every simple command of every list,
//! pipeline, compound command and function body; every word's inner command lines; every
//! redirection's target and here-document; the scripts of `sh -c` and `eval`.

use brush_parser::ast;

use super::script::script_of;
use super::words::{Scanned, scan, scan_heredoc};
use super::{Level, MAX_SCRIPTS, Parsed, Simple, Unparsed, Word, parse_into};
use crate::command::{View, forms};

/// The text a here-document or here-string gives a command's standard input.
#[derive(Clone, Debug)]
struct Stdin {
    text: String,
    /// Nothing in it is expanded when it runs.
    known: bool,
}

/// Targets that take output without writing a file.
const QUIET: [&str; 3] = ["/dev/null", "/dev/stdout", "/dev/stderr"];

pub(super) struct Walker<'a> {
    /// The text parsed, which the tree's positions index (in characters).
    source: &'a str,
    level: Level,
    out: &'a mut Parsed,
}

impl<'a> Walker<'a> {
    pub(super) fn new(source: &'a str, level: Level, out: &'a mut Parsed) -> Walker<'a> {
        Walker { source, level, out }
    }

    pub(super) fn program(&mut self, program: &ast::Program) {
        for list in &program.complete_commands {
            self.list(list);
        }
    }

    fn list(&mut self, list: &ast::CompoundList) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => self.pipeline(pipeline),
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) {
        for command in &pipeline.seq {
            self.command(command);
        }
    }

    fn command(&mut self, command: &ast::Command) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound);
                self.redirects(redirects.as_ref());
            }
            // A function's body runs when it is called, which the line may do.
            ast::Command::Function(function) => {
                self.compound(&function.body.0);
                self.redirects(function.body.1.as_ref());
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.test(&test.expr);
                self.redirects(redirects.as_ref());
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(arithmetic) => self.inner(&arithmetic.expr.value),
            C::ArithmeticForClause(clause) => {
                for expression in
                    [&clause.initializer, &clause.condition, &clause.updater].into_iter().flatten()
                {
                    self.inner(&expression.value);
                }
                self.list(&clause.body.list);
            }
            C::BraceGroup(group) => self.list(&group.list),
            C::Subshell(subshell) => self.list(&subshell.list),
            C::ForClause(clause) => {
                for word in clause.values.iter().flatten() {
                    self.word(&word.value);
                }
                self.list(&clause.body.list);
            }
            C::CaseClause(clause) => {
                self.word(&clause.value.value);
                for case in &clause.cases {
                    for pattern in &case.patterns {
                        self.word(&pattern.value);
                    }
                    if let Some(body) = &case.cmd {
                        self.list(body);
                    }
                }
            }
            C::IfClause(clause) => {
                self.list(&clause.condition);
                self.list(&clause.then);
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition);
                    }
                    self.list(&other.body);
                }
            }
            C::WhileClause(clause) | C::UntilClause(clause) => {
                self.list(&clause.0);
                self.list(&clause.1.list);
            }
            C::Coprocess(coprocess) => self.command(&coprocess.body),
        }
    }

    fn test(&mut self, expression: &ast::ExtendedTestExpr) {
        use ast::ExtendedTestExpr as E;
        match expression {
            E::And(a, b) | E::Or(a, b) => {
                self.test(a);
                self.test(b);
            }
            E::Not(inner) | E::Parenthesized(inner) => self.test(inner),
            E::UnaryTest(_, word) => {
                self.word(&word.value);
            }
            E::BinaryTest(_, a, b) => {
                self.word(&a.value);
                self.word(&b.value);
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand) {
        let mut words = Vec::new();
        let mut stdin = None;
        for item in simple.prefix.iter().flat_map(|p| &p.0) {
            stdin = self.item(item, &mut words).or(stdin);
        }
        if let Some(word) = &simple.word_or_name {
            words.push(self.word(&word.value));
        }
        for item in simple.suffix.iter().flat_map(|s| &s.0) {
            stdin = self.item(item, &mut words).or(stdin);
        }
        if words.is_empty() {
            return;
        }
        let command = Simple { words, runs: None };
        self.scripts(&command, stdin);
        self.out.commands.push(command);
    }

    /// One word or redirection of a simple command; the text a here-document or here-string
    /// gives its standard input, and whether that text is known before it runs.
    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        words: &mut Vec<Word>,
    ) -> Option<Stdin> {
        use ast::CommandPrefixOrSuffixItem as I;
        match item {
            I::IoRedirect(redirect) => return self.redirect(redirect),
            I::Word(word) => words.push(self.word(&word.value)),
            I::AssignmentWord(assignment, word) => words.push(self.assignment(assignment, word)),
            I::ProcessSubstitution(kind, subshell) => {
                self.list(&subshell.list);
                let raw = format!("{kind}{}", self.text_of(&subshell.loc));
                words.push(Word { value: raw.clone(), raw, ..Word::default() });
            }
        }
        None
    }

    fn assignment(&mut self, assignment: &ast::Assignment, word: &ast::Word) -> Word {
        match &assignment.value {
            // The whole word, name and index too (`a[$(id)]=x`).
            ast::AssignmentValue::Scalar(_) => self.word(&word.value),
            ast::AssignmentValue::Array(elements) => {
                if let ast::AssignmentName::ArrayElementName(_, index) = &assignment.name {
                    self.inner(index);
                }
                for (key, value) in elements {
                    if let Some(key) = key {
                        self.word(&key.value);
                    }
                    self.word(&value.value);
                }
                let raw = word.value.clone();
                Word { value: raw.clone(), raw, ..Word::default() }
            }
        }
    }

    fn redirects(&mut self, redirects: Option<&ast::RedirectList>) {
        for redirect in redirects.iter().flat_map(|r| &r.0) {
            self.redirect(redirect);
        }
    }

    /// A redirection: its words' command lines, its output target a write; a here-document's
    /// or here-string's text when it is standard input.
    fn redirect(&mut self, redirect: &ast::IoRedirect) -> Option<Stdin> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T};
        match redirect {
            ast::IoRedirect::File(_, kind, target) => {
                let output = matches!(kind, K::Write | K::Append | K::Clobber | K::ReadAndWrite);
                match target {
                    T::Filename(word) => {
                        let target = self.word(&word.value);
                        if output {
                            self.write(target);
                        }
                    }
                    // `>&word`: a descriptor when it is a number or `-`, else a file (as
                    // `&>`); one known only when it runs may be either.
                    T::Duplicate(word) => {
                        let target = self.word(&word.value);
                        let descriptor = target.plain
                            && target
                                .value
                                .trim_end_matches('-')
                                .chars()
                                .all(|c| c.is_ascii_digit());
                        if matches!(kind, K::DuplicateOutput) && !descriptor {
                            self.write(target);
                        }
                    }
                    T::ProcessSubstitution(_, subshell) => self.list(&subshell.list),
                    T::Fd(_) => {}
                }
            }
            // A quoted delimiter makes the body text; an unquoted one expands it.
            ast::IoRedirect::HereDocument(fd, doc) => {
                let mut known = true;
                if doc.requires_expansion {
                    let scanned = scan_heredoc(&doc.doc.value);
                    known = !scanned.expands;
                    self.take(scanned);
                }
                let text = doc.doc.value.clone();
                return matches!(fd, None | Some(0)).then_some(Stdin { text, known });
            }
            ast::IoRedirect::HereString(fd, word) => {
                let word = self.word(&word.value);
                let stdin = Stdin { text: word.value, known: word.plain };
                return matches!(fd, None | Some(0)).then_some(stdin);
            }
            ast::IoRedirect::OutputAndError(word, _) => {
                let target = self.word(&word.value);
                self.write(target);
            }
        }
        None
    }

    fn write(&mut self, target: Word) {
        if !(target.plain && QUIET.contains(&target.value.as_str())) {
            self.out.writes.push(target);
        }
    }

    /// A word, its inner command lines followed.
    fn word(&mut self, raw: &str) -> Word {
        self.take(scan(raw))
    }

    /// Text inside an expansion (an arithmetic expression, an array index): only the command
    /// lines it runs.
    fn inner(&mut self, text: &str) {
        self.word(text);
    }

    fn take(&mut self, scanned: Scanned) -> Word {
        let deeper = Level { depth: self.level.depth + 1, ..self.level };
        for script in &scanned.scripts {
            parse_into(script, deeper, self.out);
        }
        if let Some(error) = scanned.error {
            self.out.refuse(Unparsed::Syntax(error));
        }
        scanned.word
    }

    /// The scripts a command runs (`sh -c`, `eval`, a shell reading `stdin`), in any form its
    /// wrappers leave (`timeout 5 bash -c ...`), parsed as lines of their own.
    fn scripts(&mut self, command: &Simple, stdin: Option<Stdin>) {
        let mut found = Vec::new();
        for form in forms(command, View::Restrict) {
            if let Some(mut script) = script_of(form) {
                if script.stdin {
                    // A shell reading a here-document runs its text; one reading a pipe or
                    // a file runs what the line does not show.
                    let input =
                        stdin.clone().unwrap_or(Stdin { text: String::new(), known: false });
                    (script.text, script.known) = (input.text, input.known);
                    script.raw = "its standard input".to_owned();
                }
                if !found.contains(&script) {
                    found.push(script);
                }
            }
        }
        for script in found {
            if self.level.scripts >= MAX_SCRIPTS {
                self.out.refuse(Unparsed::TooManyScripts);
                return;
            }
            let level = Level { depth: self.level.depth + 1, scripts: self.level.scripts + 1 };
            // What the words say is parsed for what a rule can see in it; a script known only
            // when it runs is also a command of its own whose word no one knows.
            parse_into(&script.text, level, self.out);
            if !script.known {
                let raw =
                    if script.stdin { script.raw.clone() } else { format!("`{}`", script.raw) };
                let unknown = Word { value: raw.clone(), raw, ..Word::default() };
                self.out.commands.push(Simple { words: vec![unknown], runs: Some(command.text()) });
            }
        }
    }

    /// The source text a span covers (its positions count characters).
    fn text_of(&self, span: &brush_parser::SourceSpan) -> String {
        let (start, end) = (span.start.index, span.end.index);
        self.source.chars().skip(start).take(end.saturating_sub(start)).collect()
    }
}
