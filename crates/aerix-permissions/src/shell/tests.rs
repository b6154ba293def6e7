use super::*;

fn commands(line: &str) -> Vec<String> {
    let parsed = parse(line);
    assert_eq!(parsed.unparsed, None, "{line}");
    parsed.commands.iter().map(Simple::text).collect()
}

fn values(line: &str) -> Vec<(String, bool)> {
    let parsed = parse(line);
    parsed.commands[0].words.iter().map(|w| (w.value.clone(), w.plain)).collect()
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
    // `sh` reading the pipe runs a script the line does not show: a command nobody can name.
    assert_eq!(
        commands("echo \"$(curl e | sh)\""),
        ["curl e", "its standard input", "sh", "echo \"$(curl e | sh)\""]
    );
    assert_eq!(commands("diff <(ls a) >(wc -l) b"), ["ls a", "wc -l", "diff <(ls a) >(wc -l) b"]);
    assert_eq!(commands("(cd x && rm y)"), ["cd x", "rm y"]);
    assert_eq!(commands("echo ${X:-$(id)}"), ["id", "echo ${X:-$(id)}"]);
    assert_eq!(commands("echo $((1 + $(id -u)))"), ["id -u", "echo $((1 + $(id -u)))"]);
    assert_eq!(commands("X=$(id) ls"), ["id", "X=$(id) ls"]);
    assert_eq!(commands("a[$(id)]=1"), ["id", "a[$(id)]=1"]);
    assert_eq!(commands("echo `echo \\`id\\``"), ["id", "echo `id`", "echo `echo \\`id\\``"]);
}

#[test]
fn compound_commands_and_functions_give_the_commands_they_run() {
    assert_eq!(commands("for f in a $(ls); do rm $f; done"), ["ls", "rm $f"]);
    assert_eq!(
        commands("if true; then rm x; elif id; then :; else ls; fi"),
        ["true", "rm x", "id", ":", "ls"]
    );
    assert_eq!(commands("{ rm x; }"), ["rm x"]);
    assert_eq!(commands("while read l; do echo $l; done < f"), ["read l", "echo $l"]);
    assert_eq!(commands("case $(id) in a) rm x;; *) ls;; esac"), ["id", "rm x", "ls"]);
    assert_eq!(commands("f() { rm x; }; f"), ["rm x", "f"]);
    assert_eq!(commands("[[ -f $(id) ]] && ls"), ["id", "ls"]);
    assert_eq!(commands("((x = $(id))); ! ls"), ["id", "ls"]);
    assert_eq!(commands("time ls | wc"), ["ls", "wc"]);
}

#[test]
fn redirections_leave_the_command_and_output_targets_are_writes() {
    let parsed = parse("git log > out.txt 2>&1 < in.txt 2>/dev/null &>> all.log >& both >&2");
    assert_eq!(parsed.commands.iter().map(Simple::text).collect::<Vec<_>>(), ["git log"]);
    let writes: Vec<&str> = parsed.writes.iter().map(|w| w.value.as_str()).collect();
    assert_eq!(writes, ["out.txt", "all.log", "both"]);
    let parsed = parse("echo x >| a <> b > \"$(pwd)/c\"");
    let writes: Vec<(&str, bool)> =
        parsed.writes.iter().map(|w| (w.raw.as_str(), w.plain)).collect();
    assert_eq!(writes, [("a", true), ("b", true), ("\"$(pwd)/c\"", false)]);
    assert_eq!(parsed.commands[0].text(), "pwd");
}

#[test]
fn an_unquoted_here_document_runs_its_substitutions_and_a_quoted_one_runs_none() {
    assert_eq!(commands("cat <<EOF\n$(touch x)\nEOF"), ["touch x", "cat"]);
    assert_eq!(commands("cat <<EOF\na `touch x` b\nEOF\nls"), ["touch x", "cat", "ls"]);
    assert_eq!(commands("cat <<-EOF\n\t${X:-$(touch x)}\n\tEOF"), ["touch x", "cat"]);
    assert_eq!(commands("cat <<'EOF' > f\n$(rm -rf /)\nEOF\nls"), ["cat", "ls"]);
    assert_eq!(commands("cat <<\"EOF\"\n`rm x`\nEOF"), ["cat"]);
    assert_eq!(commands("cat <<<\"$(touch x)\""), ["touch x", "cat"]);
    assert_eq!(
        commands("echo $(cat <<EOF\n$(id)\nEOF\n)"),
        ["id", "cat", "echo $(cat <<EOF\n$(id)\nEOF\n)"]
    );
}

#[test]
fn shell_scripts_and_eval_are_parsed_as_lines_of_their_own() {
    assert_eq!(commands("sh -ec 'rm x; ls'"), ["rm x", "ls", "sh -ec 'rm x; ls'"]);
    assert_eq!(commands("timeout 5 bash -c -- 'rm x'"), ["rm x", "timeout 5 bash -c -- 'rm x'"]);
    assert_eq!(commands("eval 'rm  x' y"), ["rm x y", "eval 'rm  x' y"]);
    // A script known only when it runs is also a command nobody can name.
    let parsed = parse("sh -c \"rm $X\"");
    let unknown = parsed.commands.iter().find(|c| c.runs.is_some());
    let unknown = unknown.map(|c| (c.text(), c.words[0].plain, c.runs.clone()));
    assert_eq!(
        unknown,
        Some(("`\"rm $X\"`".to_owned(), false, Some("sh -c \"rm $X\"".to_owned())))
    );
    assert_eq!(parsed.commands[0].text(), "rm $X");
}

#[test]
fn words_are_quote_removed_and_know_whether_they_say_what_runs() {
    assert_eq!(
        values("rm 'a b' c* $HOME ~/x \\t\"o\"''uch {a,b}"),
        [
            ("rm".to_owned(), true),
            ("a b".to_owned(), true),
            ("c*".to_owned(), false),
            ("$HOME".to_owned(), false),
            ("~/x".to_owned(), false),
            ("touch".to_owned(), true),
            ("{a,b}".to_owned(), false),
        ]
    );
    // Brackets and braces that expand nothing are text: `[` is the test command.
    assert_eq!(
        values("[ -f x ] {}"),
        [
            ("[".to_owned(), true),
            ("-f".to_owned(), true),
            ("x".to_owned(), true),
            ("]".to_owned(), true),
            ("{}".to_owned(), true),
        ]
    );
    assert_eq!(values("$'a b' $'\\x74ouch'")[1], ("$'\\x74ouch'".to_owned(), false));
    let heads: Vec<String> = parse("to$(echo uch) \"$HOME\"/x ./bin/$X '*'*")
        .commands
        .last()
        .map(|c| c.words.iter().map(|w| w.head.clone()).collect())
        .unwrap_or_default();
    assert_eq!(heads, ["to", "", "./bin/", ""]);
}

#[test]
fn what_cannot_be_followed_is_unparsed_and_says_why() {
    let why = |line: &str| parse(line).unparsed;
    assert!(matches!(why("ls; echo 'open"), Some(Unparsed::Syntax(w)) if w.contains("quote")));
    assert!(matches!(why("echo $(ls"), Some(Unparsed::Syntax(_))));
    assert!(matches!(why("ls &&"), Some(Unparsed::Syntax(_))));
    assert!(matches!(why("ls @(a|b)"), Some(Unparsed::Syntax(_))), "no extended globs");
    assert_eq!(why(&"x".repeat(MAX_LINE + 1)), Some(Unparsed::TooLong));
}

#[test]
fn nesting_is_bounded_before_the_parser_recurses() {
    let nested = |n: usize| format!("{}ls{}", "$(".repeat(n), ")".repeat(n));
    assert_eq!(parse(&nested(2000)).unparsed, Some(Unparsed::TooDeep));
    assert_eq!(parse(&nested(MAX_DEPTH + 1)).unparsed, Some(Unparsed::TooDeep));
    // At the bound it is followed to its end, on a test thread's stack.
    assert_eq!(parse(&nested(MAX_DEPTH)).commands.len(), MAX_DEPTH + 1);
    let ifs = |n: usize| format!("{}ls{}", "if true; then ".repeat(n), "; fi".repeat(n));
    assert_eq!(parse(&ifs(MAX_COMPOUND + 1)).unparsed, Some(Unparsed::TooManyCompounds));
    assert_eq!(parse(&ifs(MAX_COMPOUND)).unparsed, None);
    // Sequences are not nesting, nor are a case's patterns or words in quotes.
    assert_eq!(parse(&"if a; then b; fi; ".repeat(40)).unparsed, None);
    assert_eq!(parse(&format!("echo '{}'", "if while for ".repeat(20))).unparsed, None);
    let cases = format!("{}ls{}", "case x in a) ".repeat(17), ";; esac".repeat(17));
    assert_eq!(parse(&cases).unparsed, Some(Unparsed::TooManyCompounds));
    let scripts = "sh -c \"sh -c 'sh -c \\\"sh -c ls\\\"'\"";
    assert_eq!(parse(scripts).unparsed, Some(Unparsed::TooManyScripts));
}
