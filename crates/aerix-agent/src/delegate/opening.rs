//! An implementer's opening, the turns aerix takes for it before its first own one: the check
//! run when it is a command, then the files the brief, the check and the check's output name,
//! read (as Aider shows the files added to its chat). A small model's first own turn then sees
//! what fails and the code, instead of guessing at both.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::runtime::{Connection, Opened};
use aerix_tools::Cancel;
use caldrix_proto::Sampling;
use serde_json::{Value, json};

use crate::delegate::{tests_kept, whole};

/// Files read in the opening, at most: the ones named first.
pub(crate) const FILES: usize = 3;
/// A file whose first this many bytes hold a NUL is not text, and is not read.
const SNIFF: usize = 8192;

pub(crate) struct Opening {
    /// The check, when it is a command the harness knows.
    command: Option<String>,
    brief: String,
    check: String,
    tree: PathBuf,
    step: Step,
    /// Set: after the reads, the whole-file turn (`whole.rs`) on the first file read that is
    /// no test and small enough.
    whole: Option<Whole>,
    /// The check's output, and the file the whole-file turn rewrites.
    output: String,
    target: Option<String>,
}

/// What the whole-file turn asks the pool with: the agent's member, sampling and cancel.
pub(crate) struct Whole {
    pub(crate) member: String,
    pub(crate) sampling: Option<Sampling>,
    pub(crate) cancel: Cancel,
}

#[derive(Clone, Copy, PartialEq)]
enum Step {
    Check,
    Read,
    Whole,
    Recheck,
    Done,
}

/// A whole-file turn's sampling seed, apart from the agent's own turns' (`seed + n`).
const WHOLE_SEED: u64 = 1 << 40;

impl Opening {
    pub(crate) fn new(command: Option<String>, brief: &str, check: &str, tree: &Path) -> Opening {
        Opening {
            command,
            brief: brief.to_owned(),
            check: check.to_owned(),
            tree: tree.to_owned(),
            step: Step::Check,
            whole: None,
            output: String::new(),
            target: None,
        }
    }

    /// With the whole-file turn after the reads (only with a command check).
    pub(crate) fn with_whole(mut self, whole: Whole) -> Opening {
        self.whole = Some(whole);
        self
    }

    fn reads(&mut self, results: &[String]) -> Option<(String, Vec<(String, Value)>)> {
        self.step = Step::Whole;
        // The check's output without its `[bash c1]` header.
        let first = results.first().map_or("", String::as_str);
        let body = first.split_once('\n').filter(|(head, _)| head.starts_with('['));
        self.output = body.map_or(first, |(_, body)| body).to_owned();
        // The brief and the check first: the first place to look for names.
        let text = format!("{}\n{}\n{}", self.brief, self.check, results.join("\n"));
        let files = named_files(&text, &self.tree, FILES);
        if files.is_empty() {
            return None;
        }
        self.target = files.iter().find(|f| self.rewritable(f)).cloned();
        let thought = format!("Then I read {}, named above.", list(&files));
        let calls = files.into_iter().map(|f| ("read".to_owned(), json!({"path": f}))).collect();
        Some((thought, calls))
    }

    /// A file the whole-file turn may rewrite: inside the tree, text, at most `MAX_FILE`
    /// bytes, and none the tests-kept rule counts as the check's tests.
    fn rewritable(&self, path: &str) -> bool {
        let within = named_files(path, &self.tree, 1).first().is_some_and(|p| p == path);
        within
            && !tests_kept::is_test_path(path)
            && !tests_kept::is_kept(path, &self.brief, &self.check)
            && self.tree.join(path).metadata().is_ok_and(|m| m.len() <= whole::MAX_FILE as u64)
    }

    async fn whole(&mut self, pool: &mut dyn Connection) -> Option<(String, Vec<(String, Value)>)> {
        self.step = Step::Done;
        let (Some(ask), Some(command), Some(path)) = (&self.whole, &self.command, &self.target)
        else {
            return None;
        };
        let original = std::fs::read_to_string(self.tree.join(path)).ok()?;
        let sampling =
            ask.sampling.map(|s| Sampling { seed: s.seed.wrapping_add(WHOLE_SEED), ..s });
        let segments = whole::prompt(command, &self.output, path, &original);
        // A reply that gives no file is no turn: the agent's own turns go on as without it.
        let content =
            whole::ask(pool, &ask.member, sampling, &ask.cancel, segments, &original, &self.output)
                .await
                .ok()?;
        let thought = format!("I write the corrected {path}, the whole file.");
        let call = ("write".to_owned(), json!({"path": path, "content": content}));
        self.step = Step::Recheck;
        Some((thought, vec![call]))
    }
}

impl crate::runtime::Opening for Opening {
    fn next<'a>(&'a mut self, pool: &'a mut dyn Connection, got: &'a [String]) -> Opened<'a> {
        Box::pin(async move {
            match self.step {
                Step::Check => {
                    self.step = Step::Read;
                    if let Some(command) = &self.command {
                        let call = ("bash".to_owned(), json!({"command": command}));
                        let thought = "First I run the check, to see what fails.".to_owned();
                        return Some((thought, vec![call]));
                    }
                    self.reads(got)
                }
                Step::Read => self.reads(got),
                Step::Whole => self.whole(pool).await,
                Step::Recheck => {
                    self.step = Step::Done;
                    let command = self.command.clone()?;
                    let call = ("bash".to_owned(), json!({"command": command}));
                    Some(("Then I run the check again.".to_owned(), vec![call]))
                }
                Step::Done => None,
            }
        })
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list(files: &[String]) -> String {
    match files {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The text files of `tree` that `text` names, in the order first named, at most `max`: a
/// path relative to the tree, or an absolute one inside it (a traceback's); never one outside
/// it, under `.git`, through a symbolic link, or not text.
pub(crate) fn named_files(text: &str, tree: &Path, max: usize) -> Vec<String> {
    let trees: Vec<PathBuf> =
        [Some(tree.to_owned()), tree.canonicalize().ok()].into_iter().flatten().collect();
    let mut found: Vec<String> = Vec::new();
    for word in path_words(text) {
        if found.len() >= max {
            break;
        }
        let word = word.trim_end_matches('.');
        if !word.contains(['.', '/']) {
            continue;
        }
        let Some(relative) = inside(word, &trees) else { continue };
        let name = relative.to_string_lossy().into_owned();
        if !found.contains(&name) && is_text_file(tree, &relative) {
            found.push(name);
        }
    }
    found
}

/// The words of `text` that may be paths: runs of letters, digits and `_./-`.
pub(crate) fn path_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || "_./-".contains(c)))
}

/// `word` as a path relative to one of `trees`, if it is one and stays inside.
fn inside(word: &str, trees: &[PathBuf]) -> Option<PathBuf> {
    let path = Path::new(word);
    let relative = if path.is_absolute() {
        trees.iter().find_map(|t| path.strip_prefix(t).ok())?
    } else {
        path
    };
    let mut clean = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) if part != ".git" => clean.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!clean.as_os_str().is_empty()).then_some(clean)
}

/// A regular file (not a link, whose every directory on the way is no link either) whose first
/// bytes hold no NUL.
fn is_text_file(tree: &Path, relative: &Path) -> bool {
    let mut path = tree.to_owned();
    for part in relative.components() {
        path.push(part);
        match path.symlink_metadata() {
            Ok(meta) if !meta.file_type().is_symlink() => {}
            _ => return false,
        }
    }
    if !path.symlink_metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::with_capacity(SNIFF);
    let read = std::fs::File::open(&path).and_then(|f| f.take(SNIFF as u64).read_to_end(&mut head));
    read.is_ok() && !head.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{CoreError, Opening as _, Pending};
    use caldrix_client::Counts;
    use caldrix_proto::{ContextId, Done, Edit, Generate, MemberInfo, Segment, StopReason, Usage};

    /// A pool that answers every generation with `reply` and keeps the prompts it was asked.
    #[derive(Default)]
    struct Pool {
        reply: String,
        asked: Vec<(String, Vec<Segment>, Option<Sampling>, u32)>,
        dropped: u32,
    }

    impl Connection for Pool {
        fn create_context(&mut self, member: &str, segments: Vec<Segment>) -> Pending<'_, Counts> {
            self.asked.push((member.to_owned(), segments, None, 0));
            Box::pin(async { Ok(Counts { context: 7, segments: Vec::new(), total_tokens: 0 }) })
        }
        fn edit_context(&mut self, _: ContextId, _: Vec<Edit>) -> Pending<'_, Counts> {
            Box::pin(async { Err(CoreError::Failed("not used".into())) })
        }
        fn context_counts(&mut self, _: ContextId) -> Pending<'_, Counts> {
            Box::pin(async { Err(CoreError::Failed("not used".into())) })
        }
        fn drop_context(&mut self, _: ContextId) -> Pending<'_, ()> {
            self.dropped += 1;
            Box::pin(async { Ok(()) })
        }
        fn members(&mut self) -> Pending<'_, Vec<MemberInfo>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn generate<'a>(
            &'a mut self,
            generate: Generate,
            _: &'a Cancel,
            _: &'a mut (dyn FnMut() + Send),
        ) -> Pending<'a, Done> {
            if let Some(last) = self.asked.last_mut() {
                last.2 = generate.sampling;
                last.3 = generate.max_new_tokens;
            }
            let usage = Usage {
                prompt_tokens: 0,
                completion_tokens: 0,
                recomputed_from: None,
                prefill_ms: 0.0,
                decode_ms: 0.0,
            };
            let done = Done {
                text: self.reply.clone(),
                stop: StopReason::EndOfTurn,
                usage,
                one_of: None,
                logprobs: None,
                tool_calls: Vec::new(),
                counts: None,
            };
            Box::pin(async { Ok(done) })
        }
    }

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("calc.sh"), "echo $(( $1 - $2 ))\n").unwrap();
        std::fs::write(dir.path().join("test.sh"), "sh calc.sh 2 3\n").unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(dir.path().join("blob.bin"), b"\x7fELF\0\0\0").unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
        dir
    }

    fn next(
        opening: &mut Opening,
        pool: &mut Pool,
        got: &[String],
    ) -> Option<(String, Vec<(String, Value)>)> {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(opening.next(pool, got))
    }

    fn whole(sampling: Option<Sampling>) -> Whole {
        Whole { member: "main".into(), sampling, cancel: Cancel::default() }
    }

    #[test]
    fn names_are_found_in_order_inside_the_tree_and_text_only() {
        let dir = tree();
        let abs = dir.path().join("src/lib.rs");
        let text = format!(
            "`sh test.sh` fails. Fix calc.sh.\nFile \"{}\", line 1\n../etc/passwd /etc/passwd blob.bin .git/config test.sh ./calc.sh nothing.txt",
            abs.display()
        );
        assert_eq!(named_files(&text, dir.path(), 5), ["test.sh", "calc.sh", "src/lib.rs"]);
        assert_eq!(named_files(&text, dir.path(), 2), ["test.sh", "calc.sh"]);
        assert_eq!(named_files("src/lib.rs:1:5 error", dir.path(), 3), ["src/lib.rs"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_is_never_followed() {
        let dir = tree();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "key\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("s.txt"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        assert!(named_files("s.txt out/secret.txt", dir.path(), 3).is_empty());
    }

    #[test]
    fn a_command_check_is_run_then_the_files_read() {
        let dir = tree();
        let mut pool = Pool::default();
        let mut opening =
            Opening::new(Some("sh test.sh".into()), "Fix calc.sh.", "sh test.sh", dir.path());
        let (_, calls) = next(&mut opening, &mut pool, &[]).unwrap();
        assert_eq!(calls, [("bash".to_owned(), json!({"command": "sh test.sh"}))]);
        let output = ["[bash c1]\nsrc/lib.rs: exit 1".to_owned()];
        let (thought, calls) = next(&mut opening, &mut pool, &output).unwrap();
        let paths: Vec<_> = calls.iter().map(|(_, i)| i["path"].as_str().unwrap()).collect();
        assert_eq!(paths, ["calc.sh", "test.sh", "src/lib.rs"]);
        assert_eq!(thought, "Then I read calc.sh, test.sh and src/lib.rs, named above.");
        assert!(next(&mut opening, &mut pool, &[]).is_none());
        assert!(pool.asked.is_empty(), "the json format asks the pool nothing");
    }

    #[test]
    fn a_prose_check_only_reads_and_nothing_named_is_no_opening() {
        let dir = tree();
        let mut pool = Pool::default();
        let mut opening =
            Opening::new(None, "Fix calc.sh.", "it adds", dir.path()).with_whole(whole(None));
        let (_, calls) = next(&mut opening, &mut pool, &[]).unwrap();
        assert_eq!(calls, [("read".to_owned(), json!({"path": "calc.sh"}))]);
        assert!(next(&mut opening, &mut pool, &[]).is_none());
        assert!(pool.asked.is_empty(), "no whole-file turn without a command check");
        let mut none = Opening::new(None, "Make it faster.", "it is faster", dir.path());
        assert!(next(&mut none, &mut pool, &[]).is_none());
    }

    #[test]
    fn the_whole_file_turn_writes_the_first_file_read_that_is_no_test_then_checks_again() {
        let dir = tree();
        let mut pool = Pool {
            reply: "Here:\n```sh\necho $(( $1 + $2 ))\n```\nDone.".into(),
            ..Pool::default()
        };
        let sampling = Sampling { temperature: 0.8, top_p: 1.0, seed: 5 };
        let brief = "sh test.sh fails. Fix calc.sh.";
        let mut opening = Opening::new(Some("sh test.sh".into()), brief, "sh test.sh", dir.path())
            .with_whole(whole(Some(sampling)));
        next(&mut opening, &mut pool, &[]).unwrap();
        let output = ["[bash c1]\nFAIL: got -1, want 5".to_owned()];
        let (_, reads) = next(&mut opening, &mut pool, &output).unwrap();
        assert_eq!(reads.len(), 2, "test.sh and calc.sh read");
        let (thought, calls) = next(&mut opening, &mut pool, &[]).unwrap();
        assert_eq!(thought, "I write the corrected calc.sh, the whole file.");
        assert_eq!(
            calls,
            [("write".to_owned(), json!({"path": "calc.sh", "content": "echo $(( $1 + $2 ))\n"}))]
        );
        let (member, segments, asked_sampling, budget) = &pool.asked[0];
        assert_eq!(member, "main");
        assert!(segments[1].text.contains("```\nFAIL: got -1, want 5\n```"), "no header");
        assert!(segments[1].text.contains("calc.sh:\n```sh\necho $(( $1 - $2 ))\n```"));
        assert_eq!(asked_sampling.unwrap().seed, 5 + WHOLE_SEED, "a seed of its own, replayed");
        assert_eq!(*budget, whole::budget(20));
        assert_eq!(pool.dropped, 1, "its context is dropped");
        let (_, calls) = next(&mut opening, &mut pool, &["[write c4]\nwrote".into()]).unwrap();
        assert_eq!(calls, [("bash".to_owned(), json!({"command": "sh test.sh"}))]);
        assert!(next(&mut opening, &mut pool, &[]).is_none());
    }

    #[test]
    fn a_test_file_or_a_large_one_is_never_rewritten_and_a_bad_reply_is_no_turn() {
        let dir = tree();
        let mut pool = Pool { reply: "```sh\nexit 0\n```\n".into(), ..Pool::default() };
        // Only the check's test file is named: nothing may be rewritten.
        let mut opening =
            Opening::new(Some("sh test.sh".into()), "sh test.sh fails.", "sh test.sh", dir.path())
                .with_whole(whole(None));
        next(&mut opening, &mut pool, &[]).unwrap();
        let (_, reads) = next(&mut opening, &mut pool, &["[bash c1]\nexit 1".into()]).unwrap();
        assert_eq!(reads.len(), 1);
        assert!(next(&mut opening, &mut pool, &[]).is_none());
        assert!(pool.asked.is_empty());
        // Over `MAX_FILE` bytes: no ask either.
        std::fs::write(dir.path().join("calc.sh"), "#\n".repeat(whole::MAX_FILE)).unwrap();
        let brief = "sh test.sh fails. Fix calc.sh.";
        let mut opening = Opening::new(Some("sh test.sh".into()), brief, "sh test.sh", dir.path())
            .with_whole(whole(None));
        next(&mut opening, &mut pool, &[]).unwrap();
        next(&mut opening, &mut pool, &["[bash c1]\nexit 1".into()]).unwrap();
        assert!(next(&mut opening, &mut pool, &[]).is_none());
        assert!(pool.asked.is_empty());
        // A reply with no fence: asked, but no turn, and the opening ends.
        std::fs::write(dir.path().join("calc.sh"), "echo $(( $1 - $2 ))\n").unwrap();
        pool.reply = "echo $(( $1 + $2 ))".into();
        let mut opening = Opening::new(Some("sh test.sh".into()), brief, "sh test.sh", dir.path())
            .with_whole(whole(None));
        next(&mut opening, &mut pool, &[]).unwrap();
        next(&mut opening, &mut pool, &["[bash c1]\nexit 1".into()]).unwrap();
        assert!(next(&mut opening, &mut pool, &[]).is_none());
        assert_eq!(pool.asked.len(), 1);
        assert!(next(&mut opening, &mut pool, &[]).is_none());
    }

    #[test]
    fn a_path_outside_the_tree_is_not_rewritable() {
        let dir = tree();
        let opening = Opening::new(Some("sh test.sh".into()), "x", "sh test.sh", dir.path());
        assert!(opening.rewritable("calc.sh"));
        assert!(!opening.rewritable("../calc.sh"));
        assert!(!opening.rewritable("/etc/passwd"));
        assert!(!opening.rewritable(".git/config"));
        assert!(!opening.rewritable("test.sh"));
        assert!(!opening.rewritable("blob.bin"));
    }
}
