//! A `Bash` rule's specifier and what it matches, as Claude Code documents it: an exact command
//! (`Bash(npm run build)`), the legacy prefix (`Bash(npm run test:*)`), or a pattern with `*`
//! anywhere (`Bash(git * main)`), where a lone trailing ` *` also matches the bare prefix and
//! holds a word boundary (`Bash(ls *)` matches `ls -la`, not `lsof`). `\*` is a literal star.
//! Each simple command of a line is matched on its own, in the forms the wrappers Claude Code
//! strips leave it in (`timeout 30 npm test` is `npm test` too).

use regex::Regex;

use crate::shell::{Simple, Word};

#[derive(Clone, Debug)]
pub(crate) enum CommandPattern {
    /// No unescaped `*`: the whole command.
    Exact(String),
    /// `*` anywhere (and the legacy `prefix:*`).
    Wildcard {
        regex: Regex,
        /// What a matching command starts with: the literal text before the first `*`.
        lead: String,
        /// A lone trailing ` *` (`npm test *`): the prefix, which then ends the command or
        /// is followed by a space.
        word: bool,
    },
}

impl CommandPattern {
    pub(crate) fn parse(spec: &str) -> Result<CommandPattern, String> {
        // The legacy `prefix:*`, recognized only at the end: `ls:*` is `ls *`.
        let spec = match spec.strip_suffix(":*") {
            Some(prefix) if !prefix.is_empty() && !prefix.ends_with('\\') => {
                format!("{prefix} *")
            }
            Some(_) => return Err("`:*` needs a command before it".to_owned()),
            None => spec.to_owned(),
        };
        let mut parts = vec![String::new()];
        let mut chars = spec.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if matches!(chars.peek(), Some('*' | '\\')) => {
                    if let (Some(part), Some(next)) = (parts.last_mut(), chars.next()) {
                        part.push(next);
                    }
                }
                '*' => parts.push(String::new()),
                c => {
                    if let Some(part) = parts.last_mut() {
                        part.push(c);
                    }
                }
            }
        }
        if parts.len() == 1 {
            return Ok(CommandPattern::Exact(parts.remove(0)));
        }
        let mut regex = String::from("(?s)^");
        // One trailing ` *` as the only wildcard: the prefix alone, or it and a space and more.
        let word = parts.len() == 2 && parts[1].is_empty() && parts[0].ends_with(' ');
        let lead = if word {
            let prefix = parts[0].trim_end_matches(' ');
            regex.push_str(&regex::escape(prefix));
            regex.push_str("(?: .*)?");
            prefix.to_owned()
        } else {
            let escaped: Vec<String> = parts.iter().map(|p| regex::escape(p)).collect();
            regex.push_str(&escaped.join(".*"));
            parts[0].clone()
        };
        regex.push('$');
        let regex = Regex::new(&regex).map_err(|e| e.to_string())?;
        Ok(CommandPattern::Wildcard { regex, lead, word })
    }

    pub(crate) fn matches(&self, command: &str) -> bool {
        match self {
            CommandPattern::Exact(exact) => command == exact,
            CommandPattern::Wildcard { regex, .. } => regex.is_match(command),
        }
    }

    /// Whether some command that starts with `head` could match: what a command whose later
    /// words are known only when it runs might turn out to be.
    pub(crate) fn may_match_from(&self, head: &str) -> bool {
        match self {
            CommandPattern::Exact(exact) => exact.starts_with(head),
            // `lead` then a space, or `lead` alone: the head must agree with `lead ` as far as
            // both go.
            CommandPattern::Wildcard { lead, word: true, .. } => {
                let spaced = format!("{lead} ");
                spaced.starts_with(head) || head.starts_with(&spaced)
            }
            // Past the literal lead, a `*` takes whatever follows.
            CommandPattern::Wildcard { lead, .. } => {
                lead.starts_with(head) || head.starts_with(lead.as_str())
            }
        }
    }
}

/// Whose view of a command: an allow rule's (only the wrappers and known-safe variables are
/// looked past) or a deny or ask rule's (any leading assignment too).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    Allow,
    Restrict,
}

/// Variables whose leading assignment an allow rule looks past (`NODE_ENV=test npm test`):
/// they change output or locale, not what runs.
const SAFE_VARIABLES: [&str; 16] = [
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "TERM",
    "CI",
    "NODE_ENV",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
];

/// The forms a simple command is matched in: as written, then each form a wrapper or leading
/// assignment taken off leaves (`timeout`, `time`, `nice`, `nohup`, `stdbuf`, `command`,
/// `builtin`, `noglob`, a bare `xargs`).
pub(crate) fn forms(command: &Simple, view: View) -> Vec<&[Word]> {
    let mut words: &[Word] = &command.words;
    let mut out = vec![words];
    loop {
        let rest = strip_one(words, view);
        if rest.len() == words.len() || rest.is_empty() {
            return out;
        }
        words = rest;
        out.push(words);
    }
}

/// The texts a form is matched in: as written, and its words after quote removal (quoted
/// where a word holds a space or a shell character, so `'a b'` stays one word). A deny or ask
/// rule also sees the words joined bare (`rm "-rf /"` as `rm -rf /`): it may catch more, never
/// less.
pub(crate) fn texts(words: &[Word], view: View) -> Vec<String> {
    let raw = join(words.iter().map(|w| w.raw.as_str()));
    let quoted = quoted_text(words);
    let mut out = vec![raw];
    if !out.contains(&quoted) {
        out.push(quoted);
    }
    if view == View::Restrict {
        let bare = join(words.iter().map(|w| w.value.as_str()));
        if !out.contains(&bare) {
            out.push(bare);
        }
    }
    out
}

/// The words after quote removal, each one shell word again (`git diff 'a b'`): what an
/// "always" answer's rule names.
pub(crate) fn quoted_text(words: &[Word]) -> String {
    words.iter().map(Word::quoted).collect::<Vec<_>>().join(" ")
}

fn join<'w>(words: impl Iterator<Item = &'w str>) -> String {
    words.collect::<Vec<_>>().join(" ")
}

/// Whether the form's first word is a variable assignment (`NAME=value`): it runs nothing.
pub(crate) fn is_assignment(word: &Word) -> bool {
    word.raw.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

fn strip_one(words: &[Word], view: View) -> &[Word] {
    let Some(first) = words.first() else { return words };
    if is_assignment(first) {
        let name = first.raw.split_once('=').map_or("", |(name, _)| name);
        return match view {
            View::Restrict => &words[1..],
            View::Allow if SAFE_VARIABLES.contains(&name) => &words[1..],
            View::Allow => words,
        };
    }
    if !first.plain {
        return words;
    }
    let flags = |from: usize| {
        let mut i = from;
        while words.get(i).is_some_and(|w| w.value.starts_with('-')) {
            i += 1;
        }
        i
    };
    match first.value.as_str() {
        "time" | "nohup" | "builtin" | "noglob" => &words[flags(1)..],
        "command" if !words.get(1).is_some_and(|w| matches!(w.value.as_str(), "-v" | "-V")) => {
            &words[flags(1)..]
        }
        // `timeout [flags] DURATION cmd`.
        "timeout" => {
            let at = past_flags(words, &["-s", "-k", "--signal", "--kill-after"]);
            words.get(at + 1..).unwrap_or(&[])
        }
        // `nice [-n N | -N] cmd`.
        "nice" => &words[past_flags(words, &["-n"])..],
        "stdbuf" => &words[past_flags(words, &["-i", "-o", "-e"])..],
        // Only a bare `xargs`: with flags it is matched as itself.
        "xargs" if !words.get(1).is_some_and(|w| w.value.starts_with('-')) => &words[1..],
        // A deny or ask rule also sees past these (aerix's addition: they too run their
        // arguments as the command, and only narrowing is looked for here).
        "sudo" if view == View::Restrict => {
            &words[past_flags(words, &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"])..]
        }
        "env" | "exec" if view == View::Restrict => &words[flags(1)..],
        _ => words,
    }
}

/// Past a wrapper's flags (from the word after it), `valued` ones taking the next word too.
fn past_flags(words: &[Word], valued: &[&str]) -> usize {
    let mut i = 1;
    while let Some(word) = words.get(i) {
        if valued.contains(&word.value.as_str()) {
            i += 2;
        } else if word.value.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    i.min(words.len())
}

/// The commands whose arguments are the files they change, which `acceptEdits` lets through
/// when every one of them lies inside the working directories (Claude Code's list less `sed`,
/// whose first argument is a script, not a file).
const FILE_COMMANDS: [&str; 6] = ["mkdir", "touch", "rm", "rmdir", "mv", "cp"];

/// The files a simple command changes, when it is one of `FILE_COMMANDS` and every argument is
/// a plain word (no expansion or glob); `None` otherwise.
pub(crate) fn file_command_paths(command: &Simple) -> Option<Vec<String>> {
    let mut words: &[Word] = &command.words;
    loop {
        let rest = strip_one(words, View::Allow);
        if rest.len() == words.len() {
            break;
        }
        words = rest;
    }
    let (name, args) = words.split_first()?;
    if !name.plain || !FILE_COMMANDS.contains(&name.value.as_str()) {
        return None;
    }
    let mut paths = Vec::new();
    let mut options_end = false;
    for arg in args {
        if !arg.plain || arg.value.is_empty() {
            return None;
        }
        if !options_end && arg.value == "--" {
            options_end = true;
        } else if !options_end && arg.value.starts_with('-') {
            // `cp -t DIR` and `mv -t DIR` name their target in the next word; any flag's value
            // is a word too, so every non-flag word is checked as a path.
            continue;
        } else {
            paths.push(arg.value.clone());
        }
    }
    (!paths.is_empty()).then_some(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::parse;

    fn pattern(spec: &str) -> CommandPattern {
        CommandPattern::parse(spec).unwrap()
    }

    #[test]
    fn the_documented_patterns_match_what_the_documentation_says() {
        let cases: [(&str, &[&str], &[&str]); 10] = [
            ("npm run build", &["npm run build"], &["npm run build --prod", "npm run"]),
            (
                "npm run test *",
                &["npm run test", "npm run test --watch", "npm run test a b"],
                &["npm run testing", "npm run"],
            ),
            ("npm *", &["npm", "npm install", "npm run build"], &["npmx", "pnpm i"]),
            ("* install", &["npm install", "pip install"], &["npm install x", "install"]),
            (
                "git * main",
                &["git checkout main", "git log --oneline main", "git push origin main"],
                &["git checkout dev", "git main"],
            ),
            ("ls *", &["ls", "ls -la"], &["lsof"]),
            ("ls*", &["ls -la", "lsof", "ls"], &["echo ls"]),
            ("ls:*", &["ls", "ls -la"], &["lsof"]),
            // The `:*` form is recognized only at the end: here the colon is literal.
            ("git:* push", &["git:x push"], &["git push", "git x push"]),
            ("echo \\*", &["echo *"], &["echo x"]),
        ];
        for (spec, yes, no) in cases {
            let p = pattern(spec);
            for command in yes {
                assert!(p.matches(command), "Bash({spec}) should match {command:?}");
            }
            for command in no {
                assert!(!p.matches(command), "Bash({spec}) should not match {command:?}");
            }
        }
        assert!(CommandPattern::parse(":*").is_err());
    }

    fn forms_of(line: &str, view: View) -> Vec<String> {
        let parsed = parse(line);
        forms(&parsed.commands[0], view).iter().map(|w| texts(w, view).remove(0)).collect()
    }

    #[test]
    fn wrappers_and_safe_assignments_are_looked_past_as_claude_code_does() {
        assert!(forms_of("timeout 30 npm test", View::Allow).contains(&"npm test".to_owned()));
        assert!(forms_of("nice -n 5 nohup npm test", View::Allow).contains(&"npm test".to_owned()));
        assert!(forms_of("NODE_ENV=test npm test", View::Allow).contains(&"npm test".to_owned()));
        assert!(forms_of("xargs grep pattern", View::Allow).contains(&"grep pattern".to_owned()));
        // With flags, `xargs` is matched as itself.
        assert_eq!(forms_of("xargs -n1 grep p", View::Allow), ["xargs -n1 grep p"]);
        // An allow rule does not look past another variable; a deny rule does.
        assert_eq!(forms_of("FOO=bar rm -rf tmp/", View::Allow), ["FOO=bar rm -rf tmp/"]);
        assert!(
            forms_of("FOO=bar rm -rf tmp/", View::Restrict).contains(&"rm -rf tmp/".to_owned())
        );
        // `command -v` looks a command up; it runs none.
        assert_eq!(forms_of("command -v rm", View::Allow), ["command -v rm"]);
        let signalled = forms_of("timeout -s KILL 30 rm x", View::Restrict);
        assert!(signalled.contains(&"rm x".to_owned()), "{signalled:?}");
        // Only a deny or ask rule looks past `sudo` and `env`.
        assert!(forms_of("sudo -u root rm x", View::Restrict).contains(&"rm x".to_owned()));
        assert_eq!(forms_of("sudo rm x", View::Allow), ["sudo rm x"]);
        assert!(forms_of("env A=1 rm x", View::Restrict).contains(&"rm x".to_owned()));
    }

    #[test]
    fn a_pattern_says_whether_a_command_starting_so_may_match() {
        let may = |spec: &str, head: &str| pattern(spec).may_match_from(head);
        // Nothing known: any pattern may match.
        assert!(may("touch:*", "") && may("npm run build", "") && may("* install", ""));
        assert!(may("touch:*", "to") && may("touch:*", "touch ") && may("touch:*", "touch -a "));
        assert!(!may("touch:*", "tou ") && !may("touch:*", "touchy") && !may("touch:*", "echo "));
        assert!(may("npm run build", "npm ") && !may("npm run build", "npm test "));
        assert!(may("git * main", "git push ") && !may("git * main", "gi t"));
        assert!(may("* install", "anything ") && may("ls*", "lsof "));
    }

    #[test]
    fn words_are_matched_as_written_and_after_quote_removal() {
        let parsed = parse("'git' \\diff \"a b\"");
        let words = &parsed.commands[0].words;
        assert_eq!(texts(words, View::Allow), ["'git' \\diff \"a b\"", "git diff 'a b'"]);
        assert_eq!(texts(words, View::Restrict)[2], "git diff a b");
    }

    #[test]
    fn file_commands_name_their_files_only_when_the_words_are_plain() {
        let paths = |line: &str| file_command_paths(&parse(line).commands[0]);
        assert_eq!(paths("mkdir -p a/b"), Some(vec!["a/b".to_owned()]));
        assert_eq!(paths("timeout 5 cp -r a b"), Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(paths("rm -- -x"), Some(vec!["-x".to_owned()]));
        assert_eq!(paths("rm *.o"), None);
        assert_eq!(paths("rm $X"), None);
        assert_eq!(paths("cat a"), None);
        assert_eq!(paths("rm -rf"), None);
    }
}
