//! The whole-file turn (`delegation.edit_format = "whole"`): after the opening ran the check
//! and read the file to fix, aerix asks the model, in plain text on a context of its own, for
//! that whole file corrected in one code fence (Aider's "whole" edit format, the one it picks
//! for weak models), and hands the agent the fence's body as its `write` call. Bounded: one
//! file of at most `MAX_FILE` bytes, never a test file, a reply of at most `budget` tokens.

use std::path::Path;

use crate::runtime::Connection;
use aerix_tools::Cancel;
use caldrix_proto::{Constraint, Generate, Role, Sampling, Segment};

/// The largest file rewritten whole: a longer one costs a long reply and risks more than the
/// fix (the model's own `edit` remains for it).
pub(crate) const MAX_FILE: usize = 4096;
/// The check output's tail shown, in bytes.
const OUTPUT_TAIL: usize = 1500;
/// Tokens a reply may take beyond the file's own (a fence line, a few changed lines).
const SLACK: u32 = 64;

const SYSTEM: &str = "You fix bugs in code. You answer with code only.";

/// Why a reply gave no file.
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("the reply holds no code fence")]
    NoFence,
    #[error("the reply's code fence is not closed (cut at {0} tokens?)")]
    Unterminated(u32),
    #[error("the reply's file is {0} bytes, over the {MAX_FILE}-byte bound")]
    TooLong(usize),
    #[error("the reply's file is empty")]
    Empty,
    #[error("the reply is the file unchanged")]
    Unchanged,
    #[error("the reply's fence repeats the check's output")]
    Echo,
}

/// The tokens a reply to a `bytes`-byte file may take: about two bytes a token in code, and
/// `SLACK` more.
pub(crate) fn budget(bytes: usize) -> u32 {
    u32::try_from(bytes.min(MAX_FILE) / 2).unwrap_or(u32::MAX).saturating_add(SLACK)
}

/// The prompt: the failing check's output and the file, then the ask.
pub(crate) fn prompt(command: &str, output: &str, path: &str, text: &str) -> Vec<Segment> {
    let output = crate::delegate::checks::tail(output.trim(), OUTPUT_TAIL);
    let lang = Path::new(path).extension().and_then(|e| e.to_str()).map_or("", fence_language);
    let text = if text.ends_with('\n') { text.to_owned() } else { format!("{text}\n") };
    let user = format!(
        "The check `{command}` fails:\n```\n{output}\n```\n\n{path}:\n```{lang}\n{text}```\n\nWrite the corrected {path}, the whole file, in one code block."
    );
    vec![segment("system", Role::System, SYSTEM), segment("ask", Role::User, &user)]
}

fn segment(id: &str, role: Role, text: &str) -> Segment {
    Segment { id: id.to_owned(), role, text: text.to_owned(), pinned: false }
}

fn fence_language(extension: &str) -> &str {
    match extension {
        "py" => "python",
        "rs" => "rust",
        "sh" => "sh",
        "js" => "javascript",
        "ts" => "typescript",
        other => other,
    }
}

/// The body of the reply's first code fence that is a new file: the lines after a ```` ``` ````
/// line up to the next line that starts with ```` ``` ```` (a reply cut at its `budget` of
/// tokens has none closed). A fence that repeats `original` or a part of the prompt's `output`
/// is passed over: a small model often echoes the prompt's own fences first (seen on the
/// probe's cases). Not a file: more than `MAX_FILE` bytes, or blank.
pub(crate) fn parse(
    reply: &str,
    budget: u32,
    original: &str,
    output: &str,
) -> Result<String, Refused> {
    let mut rest = reply;
    let mut passed_over = None;
    loop {
        let (body, after) = match fence(rest) {
            Ok(found) => found,
            Err(Refused::Unterminated(_)) => {
                return Err(passed_over.unwrap_or(Refused::Unterminated(budget)));
            }
            Err(why) => return Err(passed_over.unwrap_or(why)),
        };
        rest = after;
        let refused = if body.len() > MAX_FILE {
            Refused::TooLong(body.len())
        } else if body.trim().is_empty() {
            Refused::Empty
        } else if body.trim_end() == original.trim_end() {
            Refused::Unchanged
        } else if output.contains(body.trim()) {
            Refused::Echo
        } else {
            return Ok(if body.ends_with('\n') { body.to_owned() } else { format!("{body}\n") });
        };
        passed_over.get_or_insert(refused);
    }
}

/// The first fence of `text`: its body, and the text after its closing line; `NoFence` when
/// none opens, `Unterminated` when it does not close.
fn fence(text: &str) -> Result<(&str, &str), Refused> {
    let Some(open) = text.find("```") else { return Err(Refused::NoFence) };
    let Some(newline) = text[open..].find('\n') else { return Err(Refused::Unterminated(0)) };
    let start = open + newline + 1;
    let mut at = start;
    for line in text[start..].split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            return Ok((&text[start..at], &text[at + line.len()..]));
        }
        at += line.len();
    }
    Err(Refused::Unterminated(0))
}

/// Asks `member` on a context of its own (dropped after) and parses the reply: the file, or
/// why there is none (the pool's error, or the reply's).
pub(crate) async fn ask(
    pool: &mut dyn Connection,
    member: &str,
    sampling: Option<Sampling>,
    cancel: &Cancel,
    segments: Vec<Segment>,
    original: &str,
    output: &str,
) -> Result<String, String> {
    let counts = pool.create_context(member, segments).await.map_err(|e| e.to_string())?;
    let max_new_tokens = budget(original.len());
    let generate = Generate {
        context: counts.context,
        constraint: Constraint::None,
        max_new_tokens,
        sampling,
        logprobs: None,
        append_as: None,
    };
    let done = pool.generate(generate, cancel, &mut || {}).await;
    let _ = pool.drop_context(counts.context).await;
    let done = done.map_err(|e| e.to_string())?;
    parse(&done.text, max_new_tokens, original, output).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "add() {\n  echo $(($1 - $2))\n}\n";

    #[test]
    fn the_first_fence_body_is_the_file() {
        let reply = "Sure:\n```sh\nadd() {\n  echo $(($1 + $2))\n}\n```\nAnd more:\n```\nx\n```";
        assert_eq!(parse(reply, 80, OLD, "").unwrap(), "add() {\n  echo $(($1 + $2))\n}\n");
        // A closing fence indented, and a body without its last newline.
        assert_eq!(parse("```\nadd() { :; }\n  ```", 80, OLD, "").unwrap(), "add() { :; }\n");
    }

    #[test]
    fn no_fence_an_unterminated_one_an_empty_or_unchanged_file_give_none() {
        assert_eq!(parse("add() {\n  echo $(($1 + $2))\n}\n", 80, OLD, ""), Err(Refused::NoFence));
        assert_eq!(parse("```sh\nadd() {\n  echo", 80, OLD, ""), Err(Refused::Unterminated(80)));
        assert_eq!(parse("```sh", 80, OLD, ""), Err(Refused::Unterminated(80)));
        assert_eq!(parse("```sh\n\n```\n", 80, OLD, ""), Err(Refused::Empty));
        assert_eq!(parse(&format!("```sh\n{OLD}```"), 80, OLD, ""), Err(Refused::Unchanged));
    }

    #[test]
    fn fences_that_echo_the_prompt_are_passed_over() {
        let output = "FAIL: add 2 3 gave -1, want 5";
        let echo = format!("The check fails:\n```\n{output}\n```\n\ncalc.sh:\n```sh\n{OLD}```\n");
        assert_eq!(parse(&echo, 80, OLD, output), Err(Refused::Echo));
        let fixed = format!("{echo}```sh\nadd() {{\n  echo $(($1 + $2))\n}}\n```\n");
        assert_eq!(parse(&fixed, 80, OLD, output).unwrap(), "add() {\n  echo $(($1 + $2))\n}\n");
        // An echo, then a fence cut at the bound: the first reason is said.
        assert_eq!(parse(&format!("{echo}```sh\nadd"), 80, OLD, output), Err(Refused::Echo));
    }

    #[test]
    fn an_over_long_reply_is_refused_and_the_budget_is_bounded() {
        let long = format!("```\n{}```\n", "x\n".repeat(MAX_FILE));
        assert_eq!(parse(&long, 80, OLD, ""), Err(Refused::TooLong(2 * MAX_FILE)));
        assert_eq!(budget(100), 50 + SLACK);
        assert_eq!(budget(1 << 30), budget(MAX_FILE), "a token bound whatever the file");
    }

    #[test]
    fn the_prompt_shows_the_output_tail_and_the_file() {
        let output = format!("{}FAIL: add 2 3 gave -1, want 5", "é".repeat(2000));
        let segments = prompt("sh test.sh", &output, "calc.sh", OLD);
        assert_eq!(segments[0].role, Role::System);
        let ask = &segments[1].text;
        assert!(ask.starts_with("The check `sh test.sh` fails:\n```\n"));
        assert!(ask.contains("FAIL: add 2 3 gave -1, want 5\n```"));
        assert!(ask.len() < OUTPUT_TAIL + 400, "the output's tail only");
        assert!(ask.contains(&format!("calc.sh:\n```sh\n{OLD}```")));
        assert!(ask.ends_with("Write the corrected calc.sh, the whole file, in one code block."));
    }
}
