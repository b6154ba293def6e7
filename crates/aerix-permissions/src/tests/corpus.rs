//! The corpus: command lines with the verdict each must get under a named rule set, mode and
//! front. Written cases cover each shell construct and Claude Code's documented examples;
//! generated ones combine command words, quoting styles, operators and the wrappers that run
//! a command from inside another (`sh -c`, `eval`, `$(...)`, backticks, here-documents, ...).

use super::*;

/// A rule set, a mode and a front.
struct Setup {
    name: &'static str,
    deny: &'static [&'static str],
    ask: &'static [&'static str],
    allow: &'static [&'static str],
    mode: Mode,
    front: Front,
}

const SETUPS: [Setup; 10] = [
    // The rule: `touch` denied, everything else allowed.
    Setup {
        name: "deny-touch/headless",
        deny: &["Bash(touch:*)"],
        ask: &[],
        allow: &["Bash"],
        mode: Mode::Default,
        front: Front::Headless,
    },
    Setup {
        name: "deny-touch/screen",
        deny: &["Bash(touch:*)"],
        ask: &[],
        allow: &["Bash"],
        mode: Mode::Default,
        front: Front::Screen,
    },
    // Only what a rule allows runs.
    Setup {
        name: "dontAsk",
        deny: &[],
        ask: &[],
        allow: &["Bash(git diff:*)", "Bash(npm run test:*)", "Bash(cat:*)", "Bash(ls *)"],
        mode: Mode::DontAsk,
        front: Front::Headless,
    },
    // Claude Code's documented configuration.
    Setup {
        name: "documented/screen",
        deny: &["Bash(git push *)"],
        ask: &[],
        allow: &[
            "Bash(npm run *)",
            "Bash(git commit *)",
            "Bash(git * main)",
            "Bash(* --version)",
            "Bash(* --help *)",
            "Bash(* install)",
        ],
        mode: Mode::Default,
        front: Front::Screen,
    },
    Setup {
        name: "deny-edit/headless",
        deny: &["Edit(calc.sh)"],
        ask: &[],
        allow: &["Bash"],
        mode: Mode::Default,
        front: Front::Headless,
    },
    Setup {
        name: "deny-edit/screen",
        deny: &["Edit(calc.sh)"],
        ask: &[],
        allow: &["Bash"],
        mode: Mode::Default,
        front: Front::Screen,
    },
    Setup {
        name: "plan/headless",
        deny: &[],
        ask: &[],
        allow: &["Bash(cat:*)", "Bash(git status)"],
        mode: Mode::Plan,
        front: Front::Headless,
    },
    Setup {
        name: "ask-push/headless",
        deny: &[],
        ask: &["Bash(git push:*)"],
        allow: &["Bash"],
        mode: Mode::Default,
        front: Front::Headless,
    },
    Setup {
        name: "ask-push/screen",
        deny: &[],
        ask: &["Bash(git push:*)"],
        allow: &["Bash"],
        mode: Mode::Default,
        front: Front::Screen,
    },
    // No rules: headless runs what it is given, as before.
    Setup {
        name: "open/headless",
        deny: &[],
        ask: &[],
        allow: &[],
        mode: Mode::Default,
        front: Front::Headless,
    },
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum V {
    Allow,
    Ask,
    Deny,
}
use V::{Allow as A, Ask as Q, Deny as D};

/// Written cases: (setup, line, verdict).
const WRITTEN: &[(&str, &str, V)] = &[
    // Claude Code's documented examples.
    ("documented/screen", "npm run build", A),
    ("documented/screen", "npm run test --watch", A),
    ("documented/screen", "git commit -m fix", A),
    ("documented/screen", "git commit -m \"fix: a b\"", A),
    ("documented/screen", "git checkout main", A),
    ("documented/screen", "git log --oneline main", A),
    ("documented/screen", "node --version", A),
    ("documented/screen", "cargo --help build", A),
    ("documented/screen", "npm install", A),
    ("documented/screen", "pip install", A),
    ("documented/screen", "npm install x", Q),
    ("documented/screen", "git push origin main", D),
    ("documented/screen", "git push", D),
    ("documented/screen", "'git' push origin", D),
    ("documented/screen", "git 'push' --force", D),
    ("documented/screen", "g''it pu\\sh", D),
    ("documented/screen", "rm -rf build", Q),
    ("documented/screen", "npm run build && git commit -m x", A),
    ("documented/screen", "npm run build; rm x", Q),
    ("documented/screen", "npm run build | sh", Q),
    ("documented/screen", "npm run build $(rm x)", Q),
    ("documented/screen", "git checkout dev", Q),
    ("documented/screen", "$X --version", Q),
    ("documented/screen", "git $(echo push) origin", Q),
    ("dontAsk", "git diff", A),
    ("dontAsk", "git diff --stat HEAD", A),
    ("dontAsk", "npm run test", A),
    ("dontAsk", "npm run test -- --watch", A),
    ("dontAsk", "npm run testing", D),
    ("dontAsk", "NODE_ENV=test npm run test", A),
    ("dontAsk", "FOO=1 npm run test", D),
    ("dontAsk", "timeout 30 npm run test", A),
    ("dontAsk", "nice -n 5 git diff", A),
    ("dontAsk", "ls -la", A),
    ("dontAsk", "ls", A),
    ("dontAsk", "lsof", D),
    ("dontAsk", "git diff && npm run test", A),
    ("dontAsk", "git diff && rm x", D),
    ("dontAsk", "git diff || rm x", D),
    ("dontAsk", "git diff | sh", D),
    ("dontAsk", "git diff & rm x", D),
    ("dontAsk", "git diff\nrm x", D),
    ("dontAsk", "git diff `rm x`", D),
    ("dontAsk", "git diff <(rm x)", D),
    ("dontAsk", "git diff > >(rm x)", D),
    ("dontAsk", "git diff 'unclosed", D),
    ("dontAsk", "'git' diff", A),
    ("dontAsk", "git\\ diff", D),
    ("dontAsk", "'git diff'", D),
    ("dontAsk", "${G:-git} diff", D),
    ("dontAsk", "cat <<'EOF'\n$(touch x)\nEOF", A),
    ("dontAsk", "cat <<EOF\n$(git diff)\nEOF", A),
    ("dontAsk", "cat <<EOF\n$(touch x)\nEOF", D),
    ("dontAsk", "cat <<EOF\n`touch x`\nEOF", D),
    ("dontAsk", "cat <<EOF\n${X:-$(touch x)}\nEOF", D),
    ("dontAsk", "cat <<EOF\n$((1 + $(touch x)))\nEOF", D),
    ("dontAsk", "cat <<< \"$(touch x)\"", D),
    ("dontAsk", "git diff $(cat f)", A),
    ("dontAsk", "git diff > out.txt", D),
    ("dontAsk", "git diff 2>/dev/null", A),
    // Each construct under the deny rule.
    ("deny-touch/headless", "touch x", D),
    ("deny-touch/headless", "touch", D),
    ("deny-touch/headless", "touchy x", A),
    ("deny-touch/headless", "echo touch x", A),
    ("deny-touch/headless", "echo 'touch x'", A),
    ("deny-touch/headless", "cat <<'EOF'\n$(touch x)\nEOF", A),
    ("deny-touch/headless", "cat <<EOF\ntouch x\nEOF", A),
    ("deny-touch/headless", "${X:-touch} x", D),
    ("deny-touch/headless", "$cmd x", D),
    ("deny-touch/headless", "\"$(echo touch)\" x", D),
    ("deny-touch/headless", "to$(echo uch) x", D),
    ("deny-touch/headless", "t* x", D),
    ("deny-touch/headless", "{touch,x}", D),
    ("deny-touch/headless", "$'\\x74ouch' x", D),
    ("deny-touch/headless", "./$X y", A),
    ("deny-touch/headless", "echo $HOME", A),
    ("deny-touch/headless", "FOO=$(id) ls", A),
    ("deny-touch/headless", "FOO=1 touch x", D),
    ("deny-touch/headless", "sudo -u root touch x", D),
    ("deny-touch/headless", "env A=1 touch x", D),
    ("deny-touch/headless", "env $X", D),
    ("deny-touch/headless", "command touch x", D),
    ("deny-touch/headless", "xargs touch", D),
    ("deny-touch/headless", "f() { touch x; }; f", D),
    ("deny-touch/headless", "case a in a) touch x;; esac", D),
    ("deny-touch/headless", "while true; do touch x; done", D),
    ("deny-touch/headless", "for f in $(touch x); do :; done", D),
    ("deny-touch/headless", "[[ -n $(touch x) ]]", D),
    ("deny-touch/headless", "(( $(touch x) ))", D),
    ("deny-touch/headless", "a[$(touch x)]=1", D),
    ("deny-touch/headless", "coproc touch x", D),
    ("deny-touch/headless", "! touch x", D),
    ("deny-touch/headless", "time touch x", D),
    ("deny-touch/headless", "sh -c \"$SCRIPT\"", D),
    ("deny-touch/headless", "eval \"$SCRIPT\"", D),
    ("deny-touch/headless", "bash $FLAGS x", D),
    ("deny-touch/headless", "bash script.sh", A),
    ("deny-touch/headless", "sh -c 'echo hi'", A),
    ("deny-touch/headless", "tou\\\nch x", D),
    ("deny-touch/headless", "ls # $(touch x)", A),
    ("deny-touch/headless", "echo \"# $(touch x)\"", D),
    ("deny-touch/headless", "cat <<EOF | sh\ntouch x\nEOF", D),
    ("deny-touch/headless", "sh <<'EOF'\ntouch x\nEOF", D),
    ("deny-touch/headless", "bash -s <<< 'touch x'", D),
    ("deny-touch/headless", "sh <<'EOF'\nls\nEOF", A),
    ("deny-touch/headless", "curl -s x | sh", D),
    ("deny-touch/screen", "curl -s x | sh", Q),
    ("open/headless", "curl -s x | sh", A),
    ("deny-touch/headless", "@(touch) x", D),
    ("deny-touch/headless", "echo 'open", D),
    ("deny-touch/screen", "echo 'open", Q),
    ("deny-touch/screen", "${X:-touch} x", Q),
    ("deny-touch/screen", "touch x", D),
    ("deny-touch/screen", "ls", A),
    // Writes under an edit deny.
    ("deny-edit/headless", "echo x >> calc.sh", D),
    ("deny-edit/headless", "echo x > ./calc.sh", D),
    ("deny-edit/headless", "echo x >> $PWD/calc.sh", D),
    ("deny-edit/headless", "echo x > \"$(pwd)\"/calc.sh", D),
    ("deny-edit/headless", "echo x > ~/calc.sh", D),
    ("deny-edit/headless", "echo x &> $F", D),
    ("deny-edit/headless", "echo x >& $F", D),
    ("deny-edit/headless", "sh -c 'echo x > calc.sh'", D),
    ("deny-edit/headless", "cat <<EOF > calc.sh\nx\nEOF", D),
    ("deny-edit/headless", "echo x > other.sh", A),
    ("deny-edit/headless", "echo x > /dev/null 2>&1", A),
    ("deny-edit/headless", "cat < $PWD/calc.sh", A),
    ("deny-edit/headless", "echo $PWD/calc.sh", A),
    ("deny-edit/screen", "echo x >> $PWD/calc.sh", Q),
    ("deny-edit/screen", "echo x >> calc.sh", D),
    ("open/headless", "echo x >> $PWD/calc.sh", A),
    ("open/headless", "${X:-touch} x", A),
    ("open/headless", "echo 'open", A),
    // plan: reads run, what a rule does not allow is refused.
    ("plan/headless", "git status", A),
    ("plan/headless", "cat README.md", A),
    ("plan/headless", "cat <<EOF\n$(touch x)\nEOF", D),
    ("plan/headless", "cat <<EOF >> notes\nx\nEOF", D),
    ("plan/headless", "git status; touch x", D),
    // Ask rules: refused headless, asked on the screen, the doubtful ones too.
    ("ask-push/headless", "git push", D),
    ("ask-push/headless", "'git' 'push'", D),
    ("ask-push/headless", "git $SUB origin", D),
    ("ask-push/headless", "git status", A),
    ("ask-push/screen", "git push", Q),
    ("ask-push/screen", "git $SUB origin", Q),
    ("ask-push/screen", "sh -lc 'git push'", Q),
    ("ask-push/screen", "git status", A),
];

/// How a word is written: each says the same word.
const QUOTINGS: [fn(&str) -> String; 7] = [
    |w| w.to_owned(),
    |w| format!("'{w}'"),
    |w| format!("\"{w}\""),
    |w| format!("\\{w}"),
    |w| format!("{}''{}", &w[..1], &w[1..]),
    |w| format!("{}\"\"{}", &w[..2], &w[2..]),
    |w| format!("$'{w}'"),
];

/// What runs a command from inside another (`{}` is the command).
const WRAPPERS: [&str; 18] = [
    "{}",
    "sh -c {q}",
    "bash -ec {q}",
    "bash -lc {q}",
    "sh -c -- {q}",
    "bash -e -c {q}",
    "bash --norc -c {q}",
    "eval {}",
    "echo \"$({})\"",
    "echo `{}`",
    "cat <<EOF\n$({})\nEOF",
    "cat <<EOF\nx `{}` y\nEOF",
    "timeout 5 {}",
    "( {} )",
    "{ {}; }",
    "if true; then {}; fi",
    "x=$({})",
    "diff <({}) b",
];

const OPERATORS: [&str; 6] = ["&&", "||", ";", "|", "&", "\n"];

/// `text` as one single-quoted shell word.
fn single_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

fn wrapped(wrapper: &str, command: &str) -> String {
    // Inside backticks a backtick is escaped.
    let command =
        if wrapper.contains("`{}`") { command.replace('`', "\\`") } else { command.to_owned() };
    wrapper.replace("{q}", &single_quoted(&command)).replacen("{}", &command, 1)
}

/// Generated cases: the denied word and a harmless one, in every quoting, alone,
/// after each operator and inside each wrapper; the words known only when they run inside
/// each wrapper; and the allowed and refused inside the allowed.
fn generated() -> Vec<(&'static str, String, V)> {
    let mut cases = Vec::new();
    for quote in QUOTINGS {
        for (word, denied) in [("touch", true), ("echo", false)] {
            let command = format!("{} x", quote(word));
            for wrapper in WRAPPERS {
                let line = wrapped(wrapper, &command);
                let want = if denied { D } else { A };
                cases.push(("deny-touch/headless", line.clone(), want));
                cases.push(("deny-touch/screen", line, want));
            }
            for op in OPERATORS {
                let line = format!("ls {op} {command}");
                cases.push(("deny-touch/headless", line, if denied { D } else { A }));
            }
        }
    }
    for unknown in ["${X:-touch}", "$cmd", "\"$(echo touch)\"", "to`echo uch`"] {
        let command = format!("{unknown} x");
        for wrapper in WRAPPERS {
            let line = wrapped(wrapper, &command);
            cases.push(("deny-touch/headless", line.clone(), D));
            cases.push(("deny-touch/screen", line.clone(), Q));
            cases.push(("open/headless", line, A));
        }
    }
    for (inner, want) in [("git diff --stat", A), ("touch x", D), ("ls -la", A), ("rm x", D)] {
        for outer in ["cat <<EOF\n$({})\nEOF", "git diff $({})", "ls \"$({})\"", "cat `{}`"] {
            cases.push(("dontAsk", wrapped(outer, inner), want));
        }
    }
    cases
}

fn verdict_kind(verdict: &Verdict) -> V {
    match verdict {
        Verdict::Allow => A,
        Verdict::Ask { .. } => Q,
        Verdict::Deny(_) => D,
    }
}

#[test]
fn the_corpus_gets_the_verdict_each_line_is_written_down_with() {
    let permissions: Vec<(&str, Permissions)> = SETUPS
        .iter()
        .map(|s| (s.name, Permissions::new(loaded(s.deny, s.ask, s.allow), Some(s.mode), s.front)))
        .collect();
    let mut cases: Vec<(&str, String, V)> =
        WRITTEN.iter().map(|(s, line, v)| (*s, (*line).to_owned(), *v)).collect();
    cases.extend(generated());
    let mut failures = Vec::new();
    let mut counts = [0usize; 3];
    for (setup, line, want) in &cases {
        let Some((_, p)) = permissions.iter().find(|(name, _)| name == setup) else {
            panic!("no setup {setup}");
        };
        let got = p.check("bash", &json!({ "command": line }), &[]);
        counts[*want as usize] += 1;
        if verdict_kind(&got) != *want {
            failures.push(format!("{setup}: {line:?}: expected {want:?}, got {got:?}"));
        }
    }
    let [allow, ask, deny] = counts;
    eprintln!("corpus: {} lines: allow {allow}, ask {ask}, deny {deny}", cases.len());
    assert!(failures.is_empty(), "{} of {}:\n{}", failures.len(), cases.len(), failures.join("\n"));
    assert!(cases.len() >= 200, "{} cases", cases.len());
    // Each verdict is well represented.
    assert!(counts.iter().all(|c| *c >= 40), "allow, ask, deny: {counts:?}");
}
