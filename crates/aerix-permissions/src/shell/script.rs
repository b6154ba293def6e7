//! The script a simple command runs as a command line of its own: `sh -c SCRIPT` (and `bash`,
//! `dash`, `zsh`, `ksh`, `ash`), whatever options come with the `-c` (`-ec`, `-lc`, `-e -c`,
//! `-c --`, `--norc -c`, `-o pipefail -c`), `eval ARGS` (its arguments joined by spaces, as
//! eval joins them), and a shell that reads its script from standard input (`sh`, `bash -s`,
//! `... | sh`), whose script is a here-document's body or not on the line at all.

use super::Word;

/// A script found.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Script {
    /// The line it runs, as far as the words say (their values joined).
    pub text: String,
    /// Every word of it is plain: `text` is exactly what runs.
    pub known: bool,
    /// The words it comes from, as written.
    pub raw: String,
    /// Read from standard input: `text` is empty until the caller gives the input's text.
    pub stdin: bool,
}

const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

/// `words`: a command's words, its wrappers taken off (`sudo`, `timeout 5`, ...).
pub(super) fn script_of(words: &[Word]) -> Option<Script> {
    let (name, args) = words.split_first()?;
    if !name.plain {
        return None;
    }
    let program = name.value.rsplit('/').next()?;
    if program == "eval" {
        let args = match args.first() {
            Some(first) if first.plain && first.value == "--" => &args[1..],
            _ => args,
        };
        return (!args.is_empty()).then(|| joined(args));
    }
    if !SHELLS.contains(&program) {
        return None;
    }
    shell_script(args)
}

fn joined(words: &[Word]) -> Script {
    let values: Vec<&str> = words.iter().map(|w| w.value.as_str()).collect();
    let raw: Vec<&str> = words.iter().map(|w| w.raw.as_str()).collect();
    Script {
        text: values.join(" "),
        known: words.iter().all(|w| w.plain),
        raw: raw.join(" "),
        stdin: false,
    }
}

/// A shell's arguments: options (a cluster holding `c` makes the first operand the script),
/// then operands.
fn shell_script(args: &[Word]) -> Option<Script> {
    let (mut command, mut stdin) = (false, false);
    let mut at = 0;
    while let Some(word) = args.get(at) {
        // An option word known only when it runs may be `-c` and more: what follows it may
        // be a script.
        if !word.plain {
            return Some(Script { known: false, ..joined(&args[at..]) });
        }
        let option = word.value.as_str();
        if option == "--" || option == "-" {
            at += 1;
            break;
        }
        if let Some(long) = option.strip_prefix("--") {
            // Of bash's long options, these two take a value.
            at += if matches!(long, "rcfile" | "init-file") { 2 } else { 1 };
            continue;
        }
        let Some(cluster) = option.strip_prefix(['-', '+']).filter(|c| !c.is_empty()) else {
            break;
        };
        command |= option.starts_with('-') && cluster.contains('c');
        stdin |= option.starts_with('-') && cluster.contains('s');
        // `-o NAME` and `-O NAME` (also in a cluster, `-eo pipefail`) take the next word.
        at += 1 + cluster.chars().filter(|c| matches!(c, 'o' | 'O')).count();
    }
    if command {
        let script = args.get(at)?;
        let (text, raw) = (script.value.clone(), script.raw.clone());
        return Some(Script { text, known: script.plain, raw, stdin: false });
    }
    // No operand (or `-s`): the script is standard input. An operand is a script file, which
    // is not on the line to follow.
    (stdin || args.get(at).is_none()).then(|| Script {
        text: String::new(),
        known: false,
        raw: String::new(),
        stdin: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::parse;

    fn script(line: &str) -> Option<(String, bool)> {
        script_of(&parse(line).commands.last()?.words).map(|s| (s.text, s.known))
    }

    fn known(text: &str) -> Option<(String, bool)> {
        Some((text.to_owned(), true))
    }

    #[test]
    fn every_option_cluster_before_the_script_is_looked_past() {
        for line in [
            "sh -c 'rm x'",
            "sh -ec 'rm x'",
            "bash -lc 'rm x'",
            "sh -c -- 'rm x'",
            "bash -e -c 'rm x'",
            "bash -c -e 'rm x'",
            "bash --norc -c 'rm x'",
            "bash --rcfile f -c 'rm x'",
            "zsh -xc 'rm x'",
            "/usr/bin/dash -c 'rm x'",
            "bash -o pipefail -c 'rm x'",
            "bash -eo pipefail -c 'rm x'",
            "bash -c 'rm x' name arg",
        ] {
            assert_eq!(script(line), known("rm x"), "{line}");
        }
        assert_eq!(script("eval rm x"), known("rm x"));
        assert_eq!(script("eval -- 'rm  x'"), known("rm  x"));
    }

    #[test]
    fn a_shell_without_c_runs_a_file_or_its_standard_input() {
        assert_eq!(script("bash script.sh -c x"), None, "-c after the operand is its argument");
        assert_eq!(script("sh -e script.sh"), None);
        assert_eq!(script("ls -c"), None);
        assert_eq!(script("bash +c x"), None);
        assert_eq!(script("eval"), None);
        assert_eq!(script("sh -c"), None, "no script: nothing runs");
        let stdin = Some((String::new(), false));
        assert_eq!(script("sh"), stdin);
        assert_eq!(script("bash -ex"), stdin);
        assert_eq!(script("bash -s arg"), stdin);
    }

    #[test]
    fn a_script_or_an_option_known_only_when_it_runs_says_so() {
        assert_eq!(script("sh -c \"rm $X\""), Some(("rm $X".to_owned(), false)));
        assert_eq!(script("bash $FLAGS x"), Some(("$FLAGS x".to_owned(), false)));
        assert_eq!(script("eval \"$(ssh-agent)\""), Some(("$(ssh-agent)".to_owned(), false)));
    }
}
