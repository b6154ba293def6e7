//! The runtime a request runs on, from the settings: the runtime's `Options`, the file tools'
//! roots, `bash`'s sandbox, compaction and delegation wired in.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::runtime::{Connection, Options, Prompts, Runtime, Sink};
use aerix_config::Settings;
use aerix_tools::{Cancel, Roots, Sandbox};

/// Where a request acts: the working directory, the directories added to it
/// (`permissions.additionalDirectories`), where its pieces' worktrees live (`None`: not a git
/// work tree, pieces run in place) and the repository's test commands.
pub(crate) struct Place<'a> {
    pub(crate) cwd: &'a Path,
    pub(crate) additional: &'a [PathBuf],
    pub(crate) worktrees: Option<&'a crate::delegate::WorktreePlace>,
    pub(crate) checks: &'a [String],
}

/// A request's runtime: `Runtime::new` with the settings' options, compaction and delegation;
/// the file tools' roots are the tree and the added directories.
pub(crate) fn runtime<'a>(
    client: &'a mut dyn Connection,
    sink: &'a mut dyn Sink,
    settings: &Settings,
    prompts: Arc<Prompts>,
    place: Place<'a>,
    cancel: Cancel,
) -> Runtime<'a> {
    let context = &settings.context;
    let compactor = crate::compact::Compactor {
        ratios: crate::compact::Ratios {
            soft_ratio: context.soft_ratio,
            target_ratio: context.target_ratio,
        },
    };
    let delegation = &settings.delegation;
    let delegator = crate::delegate::Delegator {
        pool: Arc::new(crate::runtime::PoolSocket(settings.pool.socket.clone())),
        parallel: delegation.parallel,
        retries: delegation.retries,
        max_turns: delegation.max_turns,
        depth: delegation.depth,
        attempts: attempts(settings),
        temperature: delegation.attempt_temperature,
        seed: delegation.seed.unwrap_or_else(random_seed),
        whole: delegation.edit_format == aerix_config::EditFormat::Whole,
        review: settings.verify.review,
        worktrees: place.worktrees.cloned(),
    };
    // The file tools act in the repository (or the working directory outside one).
    let roots = place
        .additional
        .iter()
        .fold(Roots::new(&aerix_config::project_root(place.cwd)), |roots, dir| roots.with_dir(dir));
    Runtime::new(client, sink, options(settings), prompts, place.cwd, cancel)
        .with_roots(roots)
        .with_sandbox(sandbox(settings))
        .with_checks(place.checks.to_vec())
        .with_compaction(Arc::new(compactor))
        .with_delegation(Arc::new(delegator))
}

/// `delegation.attempts`, else `LOCAL_ATTEMPTS` on a local main member and 1 on a remote one
/// (whose every attempt is paid for, and whose engine samples its own way).
pub(crate) fn attempts(settings: &Settings) -> u32 {
    settings.delegation.attempts.unwrap_or(if settings.main.is_remote() {
        1
    } else {
        aerix_config::LOCAL_ATTEMPTS
    })
}

/// A request's seed when `delegation.seed` is unset: the clock's nanoseconds and the process
/// id (a seed needs to differ between runs, not to be secret; the log keeps each attempt's).
fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    #[allow(clippy::cast_possible_truncation, reason = "the low bits are the varying ones")]
    let low = nanos as u64;
    low ^ (u64::from(std::process::id()) << 32)
}

/// `bash`'s sandbox, when `sandbox.enabled` is set. The pool's socket directory and
/// `$XDG_RUNTIME_DIR` are hidden inside: a command without network must not reach the pool (and
/// through it a remote member's endpoint, with the user's key) nor the desktop's sockets.
pub(crate) fn sandbox(settings: &Settings) -> Option<Sandbox> {
    let own = &settings.sandbox;
    own.enabled.then(|| Sandbox {
        network: own.network,
        hidden: settings
            .pool
            .socket
            .parent()
            .map(Path::to_path_buf)
            .into_iter()
            .chain(aerix_config::Env::from_process().runtime_dir)
            .collect(),
        allow_unix_sockets: own.allow_unix_sockets.iter().map(PathBuf::from).collect(),
    })
}

/// What the runtime reads of the settings.
pub(crate) fn options(settings: &Settings) -> Options {
    let context = &settings.context;
    Options {
        max_new_tokens: context.max_new_tokens,
        repeat_guard: context.repeat_guard,
        last_turn_final: context.last_turn_final,
        tool_caps: context.tool_caps.clone(),
        default_tool_cap: context.tool_cap("default"),
        skills_chars: context.skills_chars,
        planner_tools: settings.delegation.planner_tools.clone(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_options_carry_the_settings_caps() {
        let mut settings = aerix_config::defaults(&aerix_config::Env::for_tests("/nowhere"));
        settings.context.tool_caps.insert("read".into(), 123);
        let options = super::options(&settings);
        assert_eq!(options.tool_cap("read"), 123);
        assert_eq!(options.tool_cap("grep"), settings.context.tool_cap("grep"));
        assert_eq!(options.tool_cap("bash"), settings.context.tool_cap("bash"));
    }

    #[test]
    fn the_sandbox_hides_the_pool_s_socket_directory_and_binds_the_sockets_allowed() {
        use std::path::PathBuf;
        let mut settings = aerix_config::defaults(&aerix_config::Env::for_tests("/nowhere"));
        assert_eq!(super::sandbox(&settings), None);
        settings.sandbox.enabled = true;
        settings.pool.socket = PathBuf::from("/somewhere/caldrix/pool.sock");
        settings.sandbox.allow_unix_sockets = vec!["/run/user/1/agent.sock".to_owned()];
        let sandbox = super::sandbox(&settings).unwrap();
        assert_eq!(sandbox.hidden[0], PathBuf::from("/somewhere/caldrix"));
        assert_eq!(sandbox.allow_unix_sockets, [PathBuf::from("/run/user/1/agent.sock")]);
    }
}
