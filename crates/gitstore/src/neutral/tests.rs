//! One test per program a configuration can name: a real repository whose configuration (or
//! hooks directory, or environment) names a program that appends to a marker file, the
//! gitstore call that would start it, and the marker checked absent. Where git can be made to
//! start it without a terminal, plain git (as this crate ran it before) is shown starting it
//! first, so each test is known to be able to fail.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::{FIXED, Neutral, Off};
use crate::{GIT_TIMEOUT, Repo, test_repo};

/// A repository with one commit (`a.txt`), and outside it a program that records each start.
struct Planted {
    dir: tempfile::TempDir,
    repo: Repo,
    /// Holds the program and the marker, outside the tree (never part of a snapshot).
    aside: tempfile::TempDir,
    program: String,
}

fn planted() -> Planted {
    let (dir, repo) = test_repo();
    let aside = tempfile::tempdir().unwrap();
    let program = aside.path().join("planted");
    let marker = aside.path().join("marker");
    let script = format!("#!/bin/sh\nprintf '%s\\n' \"$0 $*\" >> '{}'\nexit 1\n", marker.display());
    std::fs::write(&program, script).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = Planted { dir, repo, program: program.display().to_string(), aside };
    p.config("user.name", "t");
    p.config("user.email", "t@example.com");
    p.write("a.txt", "one\n");
    p.plain(&["add", "-A"]);
    p.plain(&["commit", "-qm", "first"]);
    p.forget();
    p
}

impl Planted {
    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn marker(&self) -> PathBuf {
        self.aside.path().join("marker")
    }

    /// Sets `key` in the repository's `.git/config`, as a planted file would.
    fn config(&self, key: &str, value: &str) {
        let out = self.plain(&["config", "--add", key, value]);
        assert!(out.status.success(), "git config {key}: {out:?}");
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// An executable hook script at `dir/name` that starts the program.
    fn hook(&self, dir: &Path, name: &str) {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\nexec '{}' hook {name} \"$@\"\n", self.program))
            .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// git as this crate ran it before: no pager, no prompt, stdin closed, nothing turned off;
    /// the test's own editor and pager variables removed, so the repository's are the ones.
    fn plain_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = Command::new("git");
        command.args(args).current_dir(self.path());
        let names = ["GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "EDITOR", "VISUAL", "GIT_ASKPASS"];
        for name in names.into_iter().chain(["GIT_CONFIG_NOSYSTEM", "GIT_EXTERNAL_DIFF"]) {
            command.env_remove(name);
        }
        command
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn plain(&self, args: &[&str]) -> Output {
        self.plain_env(args, &[])
    }

    /// The program's starts since the last look, and forgets them.
    fn started(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.marker()).ok();
        let _ = std::fs::remove_file(self.marker());
        text
    }

    fn forget(&self) {
        self.started();
    }

    /// Plain git started the program: the test can fail.
    fn plain_starts_it(&self, what: &str) {
        assert!(self.started().is_some(), "{what}: plain git never started the planted program");
    }

    fn nothing_started(&self, what: &str) {
        if let Some(starts) = self.started() {
            panic!("{what}: the planted program was started:\n{starts}");
        }
    }

    fn run(&self, args: &[&str]) -> Result<Vec<u8>, crate::GitError> {
        self.repo.run(args, GIT_TIMEOUT)
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Result<Vec<u8>, crate::GitError> {
        let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, OsStr::new(*v))).collect();
        self.repo.run_env(args, &env, GIT_TIMEOUT)
    }
}

/// A second repository with one commit of its own (`name` in it), to fetch from.
fn source(name: &str) -> (tempfile::TempDir, Repo) {
    let (dir, repo) = test_repo();
    std::fs::write(dir.path().join("s.txt"), name).unwrap();
    let ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"];
    repo.run(&["add", "-A"], GIT_TIMEOUT).unwrap();
    repo.run(&[&ident[..], &["commit", "-qm", "s"]].concat(), GIT_TIMEOUT).unwrap();
    (dir, repo)
}

#[test]
fn the_overrides_cover_every_driver_name_and_keep_an_equals_sign_in_one() {
    let listed = b"user.name\0filter.a=b.clean\0filter.lfs.process\0diff.my.driver.textconv\0\
        diff.word.xfuncname\0merge.ours.driver\0credential.https://x.helper\0gpg.ssh.program\0\
        protocol.file.allow\0pager.log\0submodule.sub.update\0difftool.kd.cmd\0\
        alias.st\0core.fsmonitor\0";
    let neutral = Neutral::for_listing(listed);
    let has = |key: &str, off: Off| neutral.overrides().contains(&(key.to_owned(), off));
    for (key, off) in FIXED {
        assert!(has(key, *off), "{key}");
    }
    for driver in ["a=b", "lfs"] {
        for variable in ["clean", "smudge", "process"] {
            assert!(has(&format!("filter.{driver}.{variable}"), Off::Empty), "{driver}");
        }
        assert!(has(&format!("filter.{driver}.required"), Off::False), "{driver}");
    }
    assert!(has("diff.my.driver.textconv", Off::Empty));
    assert!(has("merge.ours.driver", Off::Empty));
    assert!(has("credential.https://x.helper", Off::Empty));
    assert!(has("gpg.ssh.program", Off::Empty));
    assert!(has("protocol.file.allow", Off::Never));
    assert!(has("pager.log", Off::False));
    assert!(has("submodule.sub.update", Off::Checkout));
    assert!(has("difftool.kd.cmd", Off::Empty));
    let clone = ["-c", "a.b=c", "-C", "dir", "--bare", "clone", "x"];
    assert_eq!(super::subcommand(&clone), Some("clone"));
    assert_eq!(super::subcommand(&["-c", "clone=1", "status"]), Some("status"));
    // What names no program is left alone (`gpg.ssh.program` is a fixed one already).
    let extra = neutral.overrides().len() - FIXED.len();
    assert_eq!(extra, 4 + 4 + 7, "{:?}", neutral.overrides());
    // `--config-env` keeps the `=` of a driver's name in the key.
    let command = neutral.command(Path::new("/"), &["status"], &[]);
    let args: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    assert!(args.contains(&"--config-env=filter.a=b.clean=GITSTORE_OFF_EMPTY".to_owned()));
    assert_eq!(args.last().map(String::as_str), Some("status"));
}

#[test]
fn core_fsmonitor_starts_for_no_call() {
    let p = planted();
    p.config("core.fsmonitor", &p.program);
    p.write("a.txt", "changed\n");
    p.plain(&["status", "--porcelain"]);
    p.plain_starts_it("status");
    let base = p.repo.snapshot().unwrap().unwrap();
    p.write("a.txt", "changed again\n");
    p.repo.file_set().unwrap();
    p.repo.untracked().unwrap();
    let diff = p.repo.diff_since(&base, &[], false).unwrap();
    assert!(diff.contains("+changed again"), "{diff}");
    p.run(&["status", "--porcelain"]).unwrap();
    p.nothing_started("snapshot, file set, diff, status");
}

/// The repository's hooks (`.git/hooks`, where git looks by default, then a `core.hooksPath`
/// of its own) run for no call: `post-index-change` on the snapshot's `add`,
/// `reference-transaction` on a checkpoint, `post-checkout` on a worktree, the commit hooks.
#[test]
fn hooks_run_for_no_call_checkpoints_worktrees_and_commits_included() {
    let p = planted();
    let hooks = [
        "post-index-change",
        "reference-transaction",
        "post-checkout",
        "pre-commit",
        "commit-msg",
        "post-commit",
    ];
    let default = p.path().join(".git/hooks");
    let own = p.path().join("own-hooks");
    for name in hooks {
        p.hook(&default, name);
        p.hook(&own, name);
    }
    p.plain(&["update-ref", "refs/plain", "HEAD"]);
    p.plain_starts_it("update-ref");
    for round in ["default", "core.hooksPath"] {
        if round == "core.hooksPath" {
            p.config("core.hooksPath", &own.display().to_string());
            p.plain(&["commit", "--allow-empty", "-qm", "plain"]);
            p.plain_starts_it("commit with core.hooksPath");
        }
        p.write("a.txt", format!("{round}\n").as_str());
        let commit = p.repo.snapshot_commit().unwrap();
        p.repo.keep_checkpoint("s", 1, &commit, 3).unwrap();
        p.write("a.txt", "later\n");
        p.repo.restore_checkpoint("s", 1).unwrap();
        p.repo.remove_checkpoints("s").unwrap();
        let place = tempfile::tempdir().unwrap();
        let tree = place.path().join("wt");
        p.repo.worktree_add(&tree, &commit).unwrap();
        p.repo.worktree_remove(&tree).unwrap();
        p.run(&["commit", "--allow-empty", "-qm", round]).unwrap();
        p.nothing_started(round);
    }
}

/// Each in turn is what plain git's diff runs: a driver's `textconv`, then (taking its place)
/// `GIT_EXTERNAL_DIFF`, `diff.external` and a driver's `command`.
#[test]
fn diff_external_its_variable_and_a_diff_driver_s_textconv_and_command_start_nothing() {
    let p = planted();
    p.write(".gitattributes", "*.txt diff=planted\n");
    p.write("a.txt", "two\n");
    let base = p.repo.snapshot().unwrap().unwrap();
    p.write("a.txt", "three\n");
    p.config("diff.planted.textconv", &p.program);
    p.plain(&["diff", &base]);
    p.plain_starts_it("textconv");
    p.plain_env(&["diff", &base], &[("GIT_EXTERNAL_DIFF", &p.program)]);
    p.plain_starts_it("GIT_EXTERNAL_DIFF");
    p.config("diff.external", &p.program);
    p.plain(&["diff", &base]);
    p.plain_starts_it("diff.external");
    p.config("diff.planted.command", &p.program);
    p.plain(&["diff", &base]);
    p.plain_starts_it("a driver's command");
    let env = [("GIT_EXTERNAL_DIFF", p.program.as_str())];
    let kept = [".gitattributes".to_owned()];
    let diff = p.repo.diff_since(&base, &kept, false).unwrap();
    assert!(diff.contains("-two") && diff.contains("+three"), "{diff}");
    assert_eq!(p.repo.diff_since(&base, &kept, true).unwrap(), "1\t1\ta.txt\n");
    // A call that asks for the external diff and textconv gets neither: no command to run.
    let asked = p.run_env(&["diff", "--ext-diff", "--textconv", &base], &env);
    assert!(asked.is_err(), "{asked:?}");
    p.nothing_started("diff_since, and a diff asking for them");
}

/// Filter drivers, `clean` and `smudge` and `process`, `required` too, one named `a=b` (which
/// `-c` would split wrongly): the snapshot's `add`, the restore's `checkout-index` and a
/// worktree's checkout write the bytes as they are.
#[test]
fn filter_drivers_start_nothing_on_snapshots_restores_or_worktrees() {
    let p = planted();
    p.write(".gitattributes", "*.txt filter=planted\n*.md filter=a=b\n");
    p.config("filter.planted.clean", &p.program);
    p.config("filter.planted.smudge", &p.program);
    p.config("filter.planted.required", "true");
    p.config("filter.a=b.process", &p.program);
    p.write("a.txt", "two\n");
    p.write("b.md", "bee\n");
    p.plain(&["add", "a.txt"]);
    p.plain_starts_it("clean");
    p.plain(&["add", "b.md"]);
    p.plain_starts_it("process");
    p.plain(&["reset", "-q"]);
    p.forget();
    let commit = p.repo.snapshot_commit().unwrap();
    let stored = p.run(&["cat-file", "-p", &format!("{commit}:a.txt")]).unwrap();
    assert_eq!(stored, b"two\n", "the bytes as they are");
    p.repo.keep_checkpoint("s", 1, &commit, 3).unwrap();
    p.write("a.txt", "three\n");
    std::fs::remove_file(p.path().join("b.md")).unwrap();
    p.repo.restore_checkpoint("s", 1).unwrap();
    assert_eq!(std::fs::read_to_string(p.path().join("a.txt")).unwrap(), "two\n");
    let place = tempfile::tempdir().unwrap();
    let tree = place.path().join("wt");
    p.repo.worktree_add(&tree, &commit).unwrap();
    assert_eq!(std::fs::read_to_string(tree.join("b.md")).unwrap(), "bee\n");
    p.nothing_started("snapshot, restore, worktree");
}

#[test]
fn a_merge_driver_starts_for_no_merge() {
    let p = planted();
    p.write(".gitattributes", "*.txt merge=planted\n");
    p.write("a.txt", "a\nb\nc\n");
    p.plain(&["add", "-A"]);
    p.plain(&["commit", "-qm", "base"]);
    p.plain(&["branch", "side"]);
    p.write("a.txt", "A\nb\nc\n");
    p.plain(&["commit", "-qam", "main"]);
    p.plain(&["checkout", "-q", "side"]);
    p.write("a.txt", "a\nb\nC\n");
    p.plain(&["commit", "-qam", "side"]);
    p.plain(&["checkout", "-q", "-"]);
    p.config("merge.planted.driver", &p.program);
    p.plain(&["merge", "--no-edit", "side"]);
    p.plain_starts_it("merge");
    p.plain(&["merge", "--abort"]);
    p.plain(&["reset", "-q", "--hard"]);
    // Its driver has no command: the merge fails rather than start it.
    let _ = p.run(&["merge", "--no-edit", "side"]);
    let merged = p.repo.merge_file(b"A\nb\nc\n", b"a\nb\nc\n", b"a\nb\nC\n").unwrap();
    assert_eq!(merged.as_deref(), Some(&b"A\nb\nC\n"[..]));
    p.nothing_started("merge, merge_file");
}

/// No transport is allowed, so none of the programs a transport starts can be: a remote's
/// `uploadpack` and `receivepack` (whose first value wins, so no override can replace them),
/// `ext::` (allowed by the repository, or reached through `url.<base>.insteadOf`), a remote
/// helper (`remote.<name>.vcs`).
#[test]
fn every_transport_is_refused_so_no_transport_program_starts() {
    let p = planted();
    let (source_dir, _source) = source("source");
    let source = source_dir.path().display().to_string();
    p.config("remote.up.url", &source);
    p.config("remote.up.uploadpack", &p.program);
    p.config("remote.up.receivepack", &p.program);
    p.config("protocol.ext.allow", "always");
    p.config("remote.ext.url", &format!("ext::{} %S", p.program));
    p.config(&format!("url.ext::{} %S.insteadOf", p.program), "https://planted.invalid/");
    p.config("remote.rewritten.url", "https://planted.invalid/x");
    p.config("remote.helped.url", "planted://x");
    p.config("remote.helped.vcs", "planted");
    p.config("protocol.planted.allow", "always");
    let helpers = p.aside.path().join("bin");
    std::fs::create_dir_all(&helpers).unwrap();
    std::os::unix::fs::symlink(&p.program, helpers.join("git-remote-planted")).unwrap();
    let path = format!("{}:{}", helpers.display(), std::env::var("PATH").unwrap_or_default());
    let path = [("PATH", path.as_str())];
    let fetches: [&[&str]; 5] = [
        &["fetch", "up"],
        &["push", "up", "HEAD:refs/heads/pushed"],
        &["fetch", "ext"],
        &["fetch", "rewritten"],
        &["fetch", "helped"],
    ];
    for args in fetches {
        p.plain_env(args, &path);
        p.plain_starts_it(&args.join(" "));
        let error = p.run_env(args, &path).unwrap_err().to_string();
        assert!(error.contains("not allowed"), "{args:?}: {error}");
        p.nothing_started(&args.join(" "));
    }
}

/// `core.sshCommand`, `GIT_SSH`, `GIT_SSH_COMMAND`: off even for a call that allows ssh.
#[test]
fn ssh_programs_start_nothing_even_where_a_call_allows_ssh() {
    let p = planted();
    p.config("remote.origin.url", "ssh://127.0.0.1:1/x");
    p.config("core.sshCommand", &p.program);
    p.plain(&["fetch", "origin"]);
    p.plain_starts_it("core.sshCommand");
    let fetch = ["-c", "protocol.ssh.allow=always", "fetch", "origin"];
    p.run(&fetch).unwrap_err();
    p.run_env(&fetch, &[("GIT_SSH_COMMAND", &p.program)]).unwrap_err();
    p.run_env(&fetch, &[("GIT_SSH", &p.program)]).unwrap_err();
    p.nothing_started("fetch over ssh");
}

/// `core.gitProxy` keeps its first match whatever comes later: `GIT_PROXY_COMMAND` set empty
/// is what turns it off.
#[test]
fn core_git_proxy_starts_nothing_even_where_a_call_allows_git() {
    let p = planted();
    p.config("remote.origin.url", "git://127.0.0.1:1/x");
    p.config("core.gitProxy", &p.program);
    p.plain(&["fetch", "origin"]);
    p.plain_starts_it("core.gitProxy");
    p.run(&["-c", "protocol.git.allow=always", "fetch", "origin"]).unwrap_err();
    p.nothing_started("fetch over git://");
}

/// A server that answers every request 401, so git asks for a credential.
fn unauthorized() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            use std::io::{Read, Write};
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    format!("http://127.0.0.1:{port}/x")
}

/// `credential.helper` (and a URL's own), `core.askPass`, `GIT_ASKPASS`, `SSH_ASKPASS`: off
/// even for a call that allows http.
#[test]
fn credential_helpers_and_askpass_start_nothing_even_where_a_call_allows_http() {
    let p = planted();
    let url = unauthorized();
    let direct = [("NO_PROXY", "*"), ("no_proxy", "*")];
    p.config("credential.helper", &p.program);
    p.plain_env(&["ls-remote", &url], &direct);
    p.plain_starts_it("credential.helper");
    p.plain_env(
        &["-c", "credential.helper=", "ls-remote", &url],
        &[("GIT_ASKPASS", &p.program), direct[0], direct[1]],
    );
    p.plain_starts_it("GIT_ASKPASS");
    p.config(&format!("credential.{url}.helper"), &p.program);
    p.config("core.askPass", &p.program);
    let ls = ["-c", "protocol.http.allow=always", "ls-remote", &url];
    p.run_env(&ls, &direct).unwrap_err();
    let askpass =
        [("GIT_ASKPASS", p.program.as_str()), ("SSH_ASKPASS", p.program.as_str()), direct[0]];
    p.run_env(&ls, &askpass).unwrap_err();
    p.nothing_started("ls-remote over http");
}

/// `core.alternateRefsCommand` runs where a fetch looks at the repository's alternates.
#[test]
fn core_alternate_refs_command_starts_nothing_even_where_a_call_allows_file() {
    let p = planted();
    let (alternate, _) = source("alternate");
    let objects = alternate.path().join(".git/objects");
    p.write(".git/objects/info/alternates", &format!("{}\n", objects.display()));
    p.config("core.alternateRefsCommand", &p.program);
    // Each fetch brings commits the repository does not have yet.
    let (first, _) = source("first");
    p.plain(&["fetch", "-q", &first.path().display().to_string()]);
    p.plain_starts_it("core.alternateRefsCommand");
    let (second, _) = source("second");
    let second = second.path().display().to_string();
    p.run(&["-c", "protocol.file.allow=always", "fetch", "-q", &second]).unwrap();
    p.run(&["cat-file", "-e", "FETCH_HEAD"]).unwrap();
    p.nothing_started("fetch with alternates");
}

/// `uploadpack.packObjectsHook` is honoured from the user's own configuration only (git ignores
/// a repository's); the fetch that would start it is refused.
#[test]
fn a_users_pack_objects_hook_starts_nothing() {
    let p = planted();
    let (source_dir, _source) = source("source");
    let global = p.aside.path().join("global");
    std::fs::write(&global, format!("[uploadpack]\n\tpackObjectsHook = {}\n", p.program)).unwrap();
    let global = global.display().to_string();
    p.config("remote.up.url", &source_dir.path().display().to_string());
    p.plain_env(&["fetch", "-q", "up"], &[("GIT_CONFIG_GLOBAL", &global)]);
    p.plain_starts_it("packObjectsHook");
    p.run_env(&["fetch", "-q", "up"], &[("GIT_CONFIG_GLOBAL", &global)]).unwrap_err();
    p.nothing_started("fetch");
}

/// Every signing program, for each format: commits and tags are not signed (`commit.gpgSign`,
/// `tag.gpgSign` off), and a call that asks to sign (`-S`) finds no program to run.
#[test]
fn signing_programs_start_nothing_on_commits_or_tags() {
    let p = planted();
    p.config("commit.gpgSign", "true");
    p.config("tag.gpgSign", "true");
    p.config("user.signingKey", "planted");
    for (format, key) in [
        ("openpgp", "gpg.program"),
        ("openpgp", "gpg.openpgp.program"),
        ("x509", "gpg.x509.program"),
        ("ssh", "gpg.ssh.program"),
    ] {
        let _ = p.plain(&["config", "--unset-all", "gpg.program"]);
        p.plain(&["config", "gpg.format", format]);
        p.plain(&["config", key, &p.program]);
        p.plain(&["commit", "--allow-empty", "-qm", "plain"]);
        p.plain_starts_it(key);
        p.run(&["commit", "--allow-empty", "-qm", key]).unwrap();
        p.run(&["tag", "-a", "-m", key, &format!("t-{}", key.replace('.', "-"))]).unwrap();
        p.run(&["commit", "-S", "--allow-empty", "-qm", key]).unwrap_err();
        p.nothing_started(key);
    }
    // Without a signing key, ssh signing asks `gpg.ssh.defaultKeyCommand` for one.
    p.plain(&["config", "--unset", "user.signingKey"]);
    p.config("gpg.ssh.defaultKeyCommand", &p.program);
    p.plain(&["commit", "--allow-empty", "-qm", "plain"]);
    p.plain_starts_it("gpg.ssh.defaultKeyCommand");
    p.run(&["commit", "--allow-empty", "-qm", "default key"]).unwrap();
    p.run(&["commit", "-S", "--allow-empty", "-qm", "default key"]).unwrap_err();
    p.nothing_started("gpg.ssh.defaultKeyCommand");
}

/// A signed commit (a signature git cannot check, made by hand) is never verified by a
/// program: not by `log.showSignature` or `merge.verifySignatures` of the repository's, and a
/// call that asks (`--show-signature`, `verify-commit`) finds no program to run.
#[test]
fn signatures_are_verified_by_no_program() {
    let p = planted();
    let tree = p.repo.text(&["rev-parse", "HEAD^{tree}"], GIT_TIMEOUT).unwrap();
    let head = p.repo.head().unwrap();
    let object = format!(
        "tree {tree}\nparent {head}\nauthor t <t@example.com> 1700000000 +0000\n\
         committer t <t@example.com> 1700000000 +0000\n\
         gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\
         \nsigned\n"
    );
    let file = p.aside.path().join("signed-commit");
    std::fs::write(&file, object).unwrap();
    let file = file.display().to_string();
    let signed = p.repo.text(&["hash-object", "-t", "commit", "-w", &file], GIT_TIMEOUT).unwrap();
    p.plain(&["branch", "signed", &signed]);
    p.config("gpg.program", &p.program);
    p.config("log.showSignature", "true");
    p.config("merge.verifySignatures", "true");
    p.plain(&["log", "-1", &signed]);
    p.plain_starts_it("log.showSignature");
    p.plain(&["merge", "--no-edit", "signed"]);
    p.plain_starts_it("merge.verifySignatures");
    p.run(&["log", "-1", &signed]).unwrap();
    let _ = p.run(&["log", "-1", "--show-signature", &signed]);
    p.run(&["verify-commit", &signed]).unwrap_err();
    p.run(&["merge", "--no-edit", "signed"]).unwrap();
    p.nothing_started("log, verify-commit, merge");
}

#[test]
fn editors_start_nothing() {
    let p = planted();
    p.config("core.editor", &p.program);
    p.config("sequence.editor", &p.program);
    p.plain(&["commit", "--allow-empty"]);
    p.plain_starts_it("core.editor");
    p.plain(&["rebase", "-i", "HEAD"]);
    p.plain_starts_it("sequence.editor");
    p.plain(&["rebase", "--abort"]);
    p.forget();
    // No message: the commit is refused, not edited.
    p.run(&["commit", "--allow-empty"]).unwrap_err();
    p.run_env(&["commit", "--allow-empty"], &[("GIT_EDITOR", &p.program)]).unwrap_err();
    let _ = p.run(&["rebase", "-i", "HEAD"]);
    let _ = p.run(&["rebase", "--abort"]);
    p.nothing_started("commit, rebase -i");
}

/// A pager starts only on a terminal, which no call has: this shows `core.pager`, `pager.<cmd>`,
/// `GIT_PAGER` and `PAGER` stay off (plain git cannot be shown starting one without a terminal).
#[test]
fn pagers_start_nothing() {
    let p = planted();
    p.config("core.pager", &p.program);
    p.config("pager.log", &p.program);
    p.config("pager.diff", &p.program);
    p.run(&["log", "-1"]).unwrap();
    p.run(&["-p", "diff", "HEAD"]).unwrap();
    p.run_env(&["log", "-1"], &[("GIT_PAGER", &p.program), ("PAGER", &p.program)]).unwrap();
    p.nothing_started("log, diff");
}

#[test]
fn interactive_diff_filter_starts_nothing() {
    let p = planted();
    p.config("interactive.diffFilter", &p.program);
    p.write("a.txt", "changed\n");
    let add = ["-c", "color.ui=always", "add", "-p"];
    p.plain(&add);
    p.plain_starts_it("interactive.diffFilter");
    let _ = p.run(&add);
    p.nothing_started("add -p");
}

/// `submodule.<name>.update = !command` (only a configuration file can say it, never
/// `.gitmodules`).
#[test]
fn a_submodule_update_command_starts_nothing() {
    let p = planted();
    let (source_dir, source) = source("source");
    let ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"];
    source
        .run(&[&ident[..], &["commit", "--allow-empty", "-qm", "two"]].concat(), GIT_TIMEOUT)
        .unwrap();
    let url = source_dir.path().display().to_string();
    let allow = ["-c", "protocol.file.allow=always"];
    p.run(&[&allow[..], &["submodule", "add", "-q", &url, "sub"]].concat()).unwrap();
    p.run(&[&ident[..], &["commit", "-qm", "sub"]].concat()).unwrap();
    let sub = Repo::at(&p.path().join("sub"));
    let tip = sub.text(&["rev-parse", "HEAD"], GIT_TIMEOUT).unwrap();
    p.config("submodule.sub.update", &format!("!{}", p.program));
    let update = [&allow[..], &["submodule", "update"]].concat();
    sub.run(&["checkout", "-q", "HEAD~1"], GIT_TIMEOUT).unwrap();
    p.plain(&update);
    p.plain_starts_it("submodule.sub.update");
    p.run(&update).unwrap();
    assert_eq!(sub.text(&["rev-parse", "HEAD"], GIT_TIMEOUT).unwrap(), tip, "checked out");
    p.nothing_started("submodule update");
}

/// An `include.path` (here to a file inside the tree, which a `write` could make) and an
/// `includeIf` are read before the overrides, which win over them.
#[test]
fn included_configuration_is_turned_off_too() {
    let p = planted();
    p.write("planted.cfg", &format!("[core]\n\tfsmonitor = {}\n", p.program));
    p.write("if.cfg", &format!("[filter \"inc\"]\n\tclean = {}\n", p.program));
    p.write(".gitattributes", "*.txt filter=inc\n");
    p.config("include.path", "../planted.cfg");
    let gitdir = p.path().join(".git").display().to_string();
    p.config(&format!("includeIf.gitdir:{gitdir}.path"), "../if.cfg");
    p.write("a.txt", "changed\n");
    p.plain(&["status", "--porcelain"]);
    p.plain_starts_it("included core.fsmonitor");
    p.plain(&["-c", "core.fsmonitor=false", "add", "-A"]);
    p.plain_starts_it("includeIf's filter");
    p.plain(&["-c", "core.fsmonitor=false", "reset", "-q"]);
    p.forget();
    p.repo.snapshot().unwrap().unwrap();
    p.run(&["status", "--porcelain"]).unwrap();
    p.nothing_started("snapshot, status");
}

/// The system's configuration is never read (`GIT_CONFIG_SYSTEM` names one for the test).
#[test]
fn the_system_configuration_is_not_read() {
    let p = planted();
    let system = p.aside.path().join("system");
    std::fs::write(&system, format!("[core]\n\tfsmonitor = {}\n", p.program)).unwrap();
    let system = [("GIT_CONFIG_SYSTEM", system.to_str().unwrap())];
    let out = p.plain_env(&["config", "core.fsmonitor"], &system);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), p.program);
    let read = p.run_env(&["config", "--get", "core.fsmonitor"], &system).unwrap();
    assert_eq!(String::from_utf8_lossy(&read).trim(), "false", "the override, not the system's");
    let listed = p.run_env(&["config", "--list", "--show-scope"], &system).unwrap();
    let listed = String::from_utf8_lossy(&listed);
    assert!(!listed.lines().any(|l| l.starts_with("system")), "the system file was read");
}

/// A clone may use the local transport (`aerix tune --eval` copies a profile so), and its
/// checkout runs no filter the user's configuration names; a fetch from the same place is
/// still refused.
#[test]
fn a_clone_uses_the_local_transport_and_its_checkout_runs_nothing() {
    let p = planted();
    let global = p.aside.path().join("global");
    let filter = format!("[filter \"planted\"]\n\tsmudge = {}\n\trequired = true\n", p.program);
    std::fs::write(&global, filter).unwrap();
    let global = [("GIT_CONFIG_GLOBAL", global.to_str().unwrap())];
    p.write(".gitattributes", "*.txt filter=planted\n");
    p.plain(&["add", "-A"]);
    p.plain(&["commit", "-qm", "attributes"]);
    let place = tempfile::tempdir().unwrap();
    let from = p.path().display().to_string();
    let plain = place.path().join("plain").display().to_string();
    p.plain_env(&["clone", "-q", &from, &plain], &global);
    p.plain_starts_it("a clone's smudge");
    let to = place.path().join("copy");
    let outside = Repo::at(place.path());
    let to_arg = to.display().to_string();
    let env: Vec<(&str, &OsStr)> = global.iter().map(|(k, v)| (*k, OsStr::new(*v))).collect();
    outside.run_env(&["clone", "-q", &from, &to_arg], &env, GIT_TIMEOUT).unwrap();
    assert_eq!(std::fs::read_to_string(to.join("a.txt")).unwrap(), "one\n");
    // As `aerix tune --eval` copies a profile: a bare clone of a bare repository.
    let bare = place.path().join("bare.git").display().to_string();
    let again = place.path().join("again.git").display().to_string();
    outside.run(&["clone", "--bare", "--quiet", &from, &bare], GIT_TIMEOUT).unwrap();
    outside.run(&["clone", "--bare", "--quiet", &bare, &again], GIT_TIMEOUT).unwrap();
    let error = Repo::at(&to).run(&["fetch", "-q", &from], GIT_TIMEOUT).unwrap_err();
    assert!(error.to_string().contains("not allowed"), "{error}");
    p.nothing_started("clone");
}
