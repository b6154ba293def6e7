//! What every git call runs with so that git runs no program a configuration names: not the
//! repository's `.git/config` (a `write`, a sandboxed command or an archive may have planted
//! it), not a file it includes, not the user's own. `Repo::output`, the one place this crate
//! starts git, builds every command with [`Neutral::command`], so no call can leave it out.
//!
//! Three parts, each checked against git 2.47 by this module's tests:
//! - fixed overrides on every call (`FIXED`): the keys whose names are known
//!   (`core.fsmonitor`, `core.hooksPath`, the signing programs, ...);
//! - overrides of the keys a configuration holds under names of its own choosing
//!   (`filter.<driver>.clean`, `diff.<driver>.textconv`, ...), listed just before the call
//!   with `git config --list --includes --name-only -z` (which reads files and runs nothing):
//!   [`Neutral::for_listing`];
//! - the environment: the variables that name a program are set to "none" or removed, and the
//!   system's configuration is not read.
//!
//! Every override is `--config-env=<key>=<variable>`, never `-c <key>=<value>`: `-c` splits at
//! the first `=`, so a driver named `a=b` (a valid subsection) would escape it, while
//! `--config-env` splits at the last. Overrides are command-line configuration, read after
//! every file (`include.path` and `includeIf` included), so they win over a file's value.
//!
//! Not overridable by configuration, and why they still run nothing: `core.gitProxy` and
//! `remote.<name>.uploadpack`/`receivepack` keep their first value (a later one is ignored);
//! the proxy is off through `GIT_PROXY_COMMAND` set empty, and every transport is refused
//! (`protocol.allow=never`), which is also what stops `remote.<name>.vcs` helpers,
//! `url.<base>.insteadOf` rewrites to `ext::` and a user's `uploadpack.packObjectsHook`.
//! One exception: `clone` may use the local transport (`aerix tune --eval` copies a profile
//! so). A clone's configuration is a new repository's, holding no remote but the one it makes
//! from its arguments, and a local source is served by git's own `upload-pack`, which takes
//! no program from the source's configuration. `alias.*` cannot shadow the built-in commands
//! this crate runs.
//!
//! The listing and the call read the configuration a moment apart: a driver named in between
//! by a concurrent writer of `.git/config` would run. aerix's own writers cannot: the file
//! tools refuse `.git`, and `sandbox.enabled` binds it read-only. Nor is a submodule's own
//! configuration listed; no call here goes into a submodule (`submodule.recurse` off).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// The listing of the configured keys, run before each call.
pub(crate) const LIST: [&str; 5] = ["config", "--list", "--includes", "--name-only", "-z"];

/// A value an override gives, through the variable `--config-env` reads it from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Off {
    /// No command: git then runs nothing for the key (where it needed one it fails, "cannot
    /// run : No such file or directory"); a filter driver with none is no filter.
    Empty,
    False,
    Never,
    /// `core.hooksPath`: a directory no hook can be in (the repository's `.git/hooks`, or a
    /// hooks path of its own, are then never looked at).
    DevNull,
    /// An editor git does not start.
    Colon,
    /// A pager git does not start.
    Cat,
    /// `submodule.<name>.update` without its `!command`.
    Checkout,
    Zero,
}

impl Off {
    const ALL: [Off; 8] = [
        Off::Empty,
        Off::False,
        Off::Never,
        Off::DevNull,
        Off::Colon,
        Off::Cat,
        Off::Checkout,
        Off::Zero,
    ];

    fn variable(self) -> &'static str {
        match self {
            Off::Empty => "GITSTORE_OFF_EMPTY",
            Off::False => "GITSTORE_OFF_FALSE",
            Off::Never => "GITSTORE_OFF_NEVER",
            Off::DevNull => "GITSTORE_OFF_DEVNULL",
            Off::Colon => "GITSTORE_OFF_COLON",
            Off::Cat => "GITSTORE_OFF_CAT",
            Off::Checkout => "GITSTORE_OFF_CHECKOUT",
            Off::Zero => "GITSTORE_OFF_ZERO",
        }
    }

    fn value(self) -> &'static str {
        match self {
            Off::Empty => "",
            Off::False => "false",
            Off::Never => "never",
            Off::DevNull => "/dev/null",
            Off::Colon => ":",
            Off::Cat => "cat",
            Off::Checkout => "checkout",
            Off::Zero => "0",
        }
    }
}

/// The keys overridden on every call, whatever the configuration holds (`man git-config`
/// lists each as naming a program, or as what makes git start one).
pub(crate) const FIXED: &[(&str, Off)] = &[
    ("core.fsmonitor", Off::False),
    ("core.hooksPath", Off::DevNull),
    ("core.sshCommand", Off::Empty),
    ("core.askPass", Off::Empty),
    ("core.editor", Off::Colon),
    ("sequence.editor", Off::Colon),
    ("core.pager", Off::Cat),
    ("core.alternateRefsCommand", Off::Empty),
    ("diff.external", Off::Empty),
    // An empty helper resets the list: the ones before it (`credential.<url>.helper` too) go.
    ("credential.helper", Off::Empty),
    ("gpg.program", Off::Empty),
    ("gpg.openpgp.program", Off::Empty),
    ("gpg.x509.program", Off::Empty),
    ("gpg.ssh.program", Off::Empty),
    ("gpg.ssh.defaultKeyCommand", Off::Empty),
    ("commit.gpgSign", Off::False),
    ("tag.gpgSign", Off::False),
    ("push.gpgSign", Off::False),
    ("log.showSignature", Off::False),
    ("merge.verifySignatures", Off::False),
    ("interactive.diffFilter", Off::Empty),
    // For an `upload-pack` run here; a transport's serving side does not get command-line
    // configuration (git clears it), which is why transports are refused.
    ("uploadpack.packObjectsHook", Off::Empty),
    // No transport at all: this crate fetches and pushes nothing, and a transport runs the
    // programs a configuration names that no later value can replace (see the module's doc).
    ("protocol.allow", Off::Never),
    ("protocol.ext.allow", Off::Never),
    // A submodule's own configuration is not listed here: never go into one.
    ("submodule.recurse", Off::False),
    // A mistyped command is named, never run as a guess.
    ("help.autoCorrect", Off::Zero),
];

/// The environment of every call: programs named by variables are turned off.
const ENV_SET: &[(&str, &str)] = &[
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    // git takes `cat` as no pager, `:` as no editor.
    ("GIT_PAGER", "cat"),
    ("GIT_EDITOR", ":"),
    ("GIT_SEQUENCE_EDITOR", ":"),
    // Set and empty: no askpass, and neither `core.askPass` nor `SSH_ASKPASS` is looked at.
    ("GIT_ASKPASS", ""),
    // Set and empty: no proxy, and `core.gitProxy` (whose first match wins) is not read.
    ("GIT_PROXY_COMMAND", ""),
    // Never wait on, or take, a lock a reader does not need.
    ("GIT_OPTIONAL_LOCKS", "0"),
];

/// Variables removed: each names a program (or would allow a transport back).
const ENV_REMOVED: &[&str] =
    &["GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "SSH_ASKPASS", "GIT_ALLOW_PROTOCOL"];

/// The overrides one call runs with.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Neutral {
    overrides: BTreeSet<(String, Off)>,
}

impl Neutral {
    /// No override: only for the listing of the keys (`git config` runs nothing).
    pub(crate) fn listing() -> Neutral {
        Neutral::default()
    }

    /// The fixed overrides and one for each executing key of `listed` (the output of
    /// [`LIST`]: keys, each ended by a NUL).
    pub(crate) fn for_listing(listed: &[u8]) -> Neutral {
        let mut overrides: BTreeSet<(String, Off)> =
            FIXED.iter().map(|(key, off)| ((*key).to_owned(), *off)).collect();
        for key in listed.split(|b| *b == 0).filter(|k| !k.is_empty()) {
            overrides.extend(overrides_of(&String::from_utf8_lossy(key)));
        }
        Neutral { overrides }
    }

    /// `git ARGS` in `dir` with `env`. The overrides go before `args` and the environment is
    /// set after `env`, so a call's environment cannot name a program back in. (A call's own
    /// `-c` comes later and wins: that is aerix's code choosing, as the tests do to show that
    /// each override holds where a transport is allowed again.)
    pub(crate) fn command(&self, dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> Command {
        let mut command = Command::new("git");
        command.arg("--no-pager");
        for (key, off) in &self.overrides {
            command.arg(format!("--config-env={key}={}", off.variable()));
        }
        // The one transport allowed: see the module's doc.
        if subcommand(args) == Some("clone") {
            command.args(["-c", "protocol.file.allow=always"]);
        }
        command.args(args).envs(env.iter().copied()).current_dir(dir);
        for off in Off::ALL {
            command.env(off.variable(), off.value());
        }
        command.envs(ENV_SET.iter().copied());
        for name in ENV_REMOVED {
            command.env_remove(name);
        }
        command
    }

    #[cfg(test)]
    pub(crate) fn overrides(&self) -> &BTreeSet<(String, Off)> {
        &self.overrides
    }
}

/// The git command `args` run: the first argument that is not an option or an option's value.
fn subcommand<'a>(args: &[&'a str]) -> Option<&'a str> {
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match *arg {
            // The global options that take their value as the next argument.
            "-c" | "-C" | "--config-env" | "--git-dir" | "--work-tree" | "--namespace" => {
                args.next();
            }
            option if option.starts_with('-') => {}
            command => return Some(command),
        }
    }
    None
}

/// The overrides a configured key needs (none for most). git lists the section and the
/// variable in lower case and the subsection as written, and the subsection may hold dots: the
/// section ends at the first dot, the variable starts after the last.
fn overrides_of(key: &str) -> Vec<(String, Off)> {
    let (Some(first), Some(last)) = (key.find('.'), key.rfind('.')) else { return Vec::new() };
    let section = &key[..first];
    let variable = &key[last + 1..];
    let subsection = (first < last).then(|| &key[first + 1..last]);
    let one = |off| vec![(key.to_owned(), off)];
    match (section, subsection, variable) {
        // A driver without a command is no filter; `required` would then refuse the file.
        ("filter", Some(driver), "clean" | "smudge" | "process" | "required") => vec![
            (format!("filter.{driver}.clean"), Off::Empty),
            (format!("filter.{driver}.smudge"), Off::Empty),
            (format!("filter.{driver}.process"), Off::Empty),
            (format!("filter.{driver}.required"), Off::False),
        ],
        ("diff", Some(_), "textconv" | "command") => one(Off::Empty),
        ("merge", Some(_), "driver") => one(Off::Empty),
        ("credential", Some(_), "helper") => one(Off::Empty),
        ("gpg", Some(_), "program") => one(Off::Empty),
        ("protocol", Some(_), "allow") => one(Off::Never),
        ("pager", None, _) => one(Off::False),
        ("submodule", Some(_), "update") => one(Off::Checkout),
        // Configuration-defined hooks of later git releases (not in 2.47, so not tested).
        ("hook", Some(_), "command") => one(Off::Empty),
        // Read only by porcelain this crate does not run (difftool, mergetool, help,
        // web--browse, git gui, send-email, imap-send): off all the same.
        ("difftool" | "mergetool" | "browser" | "man", Some(_), "cmd" | "path") => one(Off::Empty),
        ("guitool", Some(_), "cmd") => one(Off::Empty),
        ("sendemail", _, "sendmailcmd" | "tocmd" | "cccmd" | "headercmd") => one(Off::Empty),
        ("imap", None, "tunnel") => one(Off::Empty),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
