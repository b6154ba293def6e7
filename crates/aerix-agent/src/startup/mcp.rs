//! The MCP servers of a run: declared by aerix's settings and Claude Code's files (listed in
//! the trust survey) and by the front end's client (`aerix acp`), started in parallel once the
//! project's trust is known, their notes told like every startup note, ended with the run.

use std::path::Path;
use std::time::Duration;

use aerix_config::{Env, Layered, Settings};
use aerix_mcp::{Declared, Servers, Spec};

use super::{Files, Front, Trust};

/// Every source's servers; a project settings file's are those the user's files do not
/// declare the same.
pub fn declared(layered: &Layered, env: &Env, root: &Path) -> Declared {
    let user_file = env.config_home().map(|c| c.join("aerix/settings.toml")).unwrap_or_default();
    let user = &layered.user().mcp.servers.0;
    let project: std::collections::BTreeMap<_, _> = layered
        .all()
        .mcp
        .servers
        .0
        .iter()
        .filter(|(name, server)| user.get(*name) != Some(server))
        .map(|(n, s)| (n.clone(), s.clone()))
        .collect();
    let settings =
        [(user_file, false, user.clone()), (root.join(".aerix/settings.toml"), true, project)];
    aerix_mcp::declared(env.home.as_deref(), root, &settings)
}

/// The declared servers and the client's, a client's replacing a declared one of its name.
fn joined(declared: &[Spec], client: &[Spec]) -> Vec<Spec> {
    let replaced = |spec: &&Spec| !client.iter().any(|c| c.name == spec.name);
    declared.iter().filter(replaced).chain(client).cloned().collect()
}

/// The run's servers, started (a project's only when trusted), with `client`'s (the front
/// end's client's, replacing a declared server of the same name); `None` when the run is
/// cancelled first. Every server that is not ready and every tool left out is a note.
pub async fn start(
    trust: &Trust,
    settings: &Settings,
    client: &[Spec],
    files: &mut Files,
    front: &mut impl Front,
) -> Option<Servers> {
    let declared = trust.mcp();
    files.tell(front, declared.notes.iter().cloned());
    let specs = joined(&declared.specs, client);
    if specs.is_empty() {
        return Some(Servers::none());
    }
    let lookup = |name: &str| std::env::var(name).ok();
    let timeout = Duration::from_secs(settings.mcp.timeout_secs);
    let starting =
        Servers::start(specs, trust.allows(), &lookup, timeout, aerix_mcp::STARTUP_TIMEOUT);
    let servers = front.step(starting).await?;
    files.tell(front, servers.notes());
    Some(servers)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use aerix_mcp::{Spec, Transport};

    fn spec(name: &str, command: &str, source: &str) -> Spec {
        let transport =
            Transport::Stdio { command: command.into(), args: Vec::new(), env: BTreeMap::new() };
        Spec { name: name.into(), source: PathBuf::from(source), project: false, transport }
    }

    #[test]
    fn a_clients_server_replaces_a_declared_one_of_its_name_and_joins_the_rest() {
        let declared =
            [spec("memory", "ai-memory", "settings"), spec("git", "git-mcp", "settings")];
        let client = [spec("memory", "editor-memory", "client")];
        let joined = super::joined(&declared, &client);
        let named: Vec<(&str, String)> =
            joined.iter().map(|s| (s.name.as_str(), s.transport.describe())).collect();
        assert_eq!(named, [("git", "git-mcp".to_owned()), ("memory", "editor-memory".to_owned())]);
    }
}
