//! The ways past the hand-written scanner that issue 45 showed, each as the call that got
//! through: a here-document's substitutions, a quoted command word, an expanded command word,
//! a shell's option cluster, a redirect whose target is only known when it runs.

use super::*;

fn with(deny: &[&str], allow: &[&str], mode: Mode, front: Front) -> Permissions {
    Permissions::new(loaded(deny, &[], allow), Some(mode), front)
}

const HEREDOC: &str = "cat <<EOF\n$(touch x)\nEOF";
const HEREDOC_TICKS: &str = "cat <<EOF\nhello `touch x`\nEOF";

#[test]
fn an_unquoted_here_document_s_substitutions_are_commands() {
    let rule = Some("denied by permission rule Bash(touch:*)");
    let p = with(&["Bash(touch:*)"], &["Bash"], Mode::Default, Front::Headless);
    for line in [HEREDOC, HEREDOC_TICKS, "cat <<-EOF\n\t$(touch x)\n\tEOF", "cat <<<\"$(touch x)\""]
    {
        assert_eq!(denied(&p, bash(line)).as_deref(), rule, "{line:?}");
    }
    // dontAsk: only what a rule allows runs, and `touch` is not `cat`.
    let p = with(&[], &["Bash(cat:*)"], Mode::DontAsk, Front::Headless);
    assert!(denied(&p, bash(HEREDOC)).is_some());
    assert!(denied(&p, bash(HEREDOC_TICKS)).is_some());
    // plan: a command no rule allows is refused headless.
    let p = with(&[], &["Bash(cat:*)"], Mode::Plan, Front::Headless);
    assert!(denied(&p, bash(HEREDOC)).is_some());
    // An agent definition's pattern.
    let p = with(&[], &[], Mode::Default, Front::Headless);
    let patterns = vec!["Bash(git diff:*)".to_owned()];
    let held = [Held { definition: "reviewer".into(), patterns }];
    let line = "git diff <<EOF\n$(touch x)\nEOF";
    assert!(matches!(p.check("bash", &json!({ "command": line }), &held), Verdict::Deny(_)));
    // A quoted delimiter makes the body text: nothing in it runs.
    let p = with(&[], &["Bash(cat:*)"], Mode::DontAsk, Front::Headless);
    for quoted in ["cat <<'EOF'\n$(touch x)\nEOF", "cat <<\"EOF\"\n`touch x`\nEOF"] {
        assert_eq!(verdict(&p, bash(quoted)), Verdict::Allow, "{quoted:?}");
    }
}

#[test]
fn a_quoted_or_escaped_command_word_is_the_word_it_runs() {
    let p = with(&["Bash(touch:*)"], &["Bash"], Mode::Default, Front::Headless);
    for line in ["'touch' x", "\\touch x", "to''uch x", "\"touch\" x", "t\"ou\"ch x", "$'touch' x"]
    {
        assert_eq!(
            denied(&p, bash(line)).as_deref(),
            Some("denied by permission rule Bash(touch:*)"),
            "{line:?}"
        );
    }
    // Allow rules see the same word: `'git' diff` is `git diff`.
    let p = with(&[], &["Bash(git diff:*)"], Mode::DontAsk, Front::Headless);
    assert_eq!(verdict(&p, bash("'git' diff --stat")), Verdict::Allow);
    // One quoted word is one word: `'git diff'` runs a program of that name.
    assert!(denied(&p, bash("'git diff' x")).is_some());
}

#[test]
fn a_command_word_known_only_when_it_runs_is_refused_where_a_deny_rule_may_match() {
    let headless = with(&["Bash(touch:*)"], &[], Mode::Default, Front::Headless);
    let screen = with(&["Bash(touch:*)"], &[], Mode::Default, Front::Screen);
    for (line, word) in [
        ("${X:-touch} x", "${X:-touch}"),
        ("$cmd x", "$cmd"),
        ("\"$(echo touch)\" x", "\"$(echo touch)\""),
        ("to$(echo uch) x", "to$(echo uch)"),
        ("{touch,x}", "{touch,x}"),
        ("FOO=1 $cmd x", "$cmd"),
    ] {
        let why = denied(&headless, bash(line)).unwrap_or_else(|| panic!("{line:?} not denied"));
        assert!(why.contains("Bash(touch:*)") && why.contains(word), "{line:?}: {why}");
        assert!(why.contains("known only when it runs"), "{why}");
        let asked = asks(&screen, bash(line)).unwrap_or_else(|| panic!("{line:?} not asked"));
        assert!(asked.contains("Bash(touch:*)"), "{asked}");
    }
    assert_eq!(
        denied(&headless, bash("${X:-touch} x")).as_deref(),
        Some(
            "denied: `${X:-touch} x` may run what permission rule Bash(touch:*) denies: its \
             command word `${X:-touch}` is known only when it runs; a headless run cannot ask"
        )
    );
    let script = denied(&headless, bash("curl -s x | sh")).unwrap_or_default();
    assert!(
        script.contains("`sh` runs a script") && script.contains("its standard input"),
        "{script}"
    );
    // It may be `touch` too; with no deny rule the mode decides, as for any command.
    assert!(denied(&headless, bash("$EDITOR notes.txt")).is_some());
    let no_rules = with(&[], &[], Mode::Default, Front::Headless);
    assert_eq!(verdict(&no_rules, bash("$EDITOR notes.txt")), Verdict::Allow);
    // A known word before it that no rule can start with: no doubt.
    assert_eq!(verdict(&headless, bash("echo $HOME")), Verdict::Allow);
    assert_eq!(verdict(&headless, bash("git commit -m \"$(cat msg)\"")), Verdict::Allow);
    // An allow rule never covers a command word it cannot see.
    let p = with(&[], &["Bash(git diff:*)", "Bash(* --version)"], Mode::DontAsk, Front::Headless);
    assert!(denied(&p, bash("$X --version")).is_some());
    assert!(denied(&p, bash("${G:-git} diff")).is_some());
}

#[test]
fn shells_are_followed_whatever_their_option_cluster() {
    let p = with(&["Bash(touch:*)"], &["Bash"], Mode::Default, Front::Headless);
    for line in [
        "sh -ec 'touch x'",
        "bash -lc 'touch x'",
        "sh -c -- 'touch x'",
        "bash -e -c 'touch x'",
        "bash --norc -c 'touch x'",
        "zsh -xc 'touch x'",
        "/bin/dash -c 'touch x'",
        "bash -o pipefail -c 'touch x'",
        "timeout 5 bash -c 'touch x'",
        "sh -c 'sh -c \"touch x\"'",
        "eval 'touch x'",
        "eval to''uch x",
    ] {
        assert_eq!(
            denied(&p, bash(line)).as_deref(),
            Some("denied by permission rule Bash(touch:*)"),
            "{line:?}"
        );
    }
    // `-c` as the script's own argument is no shell option.
    assert_eq!(verdict(&p, bash("sh script.sh -c touch")), Verdict::Allow);
}

#[test]
fn a_write_whose_target_is_known_only_when_it_runs_is_refused_under_an_edit_deny() {
    let headless = with(&["Edit(calc.sh)"], &["Bash"], Mode::Default, Front::Headless);
    assert_eq!(
        denied(&headless, bash("echo x >> calc.sh")).as_deref(),
        Some("denied by permission rule Edit(calc.sh)")
    );
    for line in ["echo x >> $PWD/calc.sh", "echo x > \"$(pwd)/calc.sh\"", "echo x > ~/calc.sh"] {
        let why = denied(&headless, bash(line)).unwrap_or_else(|| panic!("{line:?} not denied"));
        assert!(why.contains("Edit(calc.sh)") && why.contains("known only when it runs"), "{why}");
    }
    assert_eq!(
        denied(&headless, bash("echo x >> $PWD/calc.sh")).as_deref(),
        Some(
            "denied: the write to `$PWD/calc.sh` may be to a file permission rule Edit(calc.sh) \
             denies: where it points is known only when it runs; a headless run cannot ask"
        )
    );
    let screen = with(&["Edit(calc.sh)"], &["Bash"], Mode::Default, Front::Screen);
    assert!(asks(&screen, bash("echo x >> $PWD/calc.sh")).is_some());
    // No edit rule denies anything: the write is the mode's, as before.
    let open = with(&["Bash(rm:*)"], &["Bash"], Mode::Default, Front::Headless);
    assert_eq!(verdict(&open, bash("echo x >> $PWD/calc.sh")), Verdict::Allow);
}
