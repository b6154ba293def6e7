//! `aerix mcp list`: every declared server started as a run would start it (a project's only
//! when trusted), then each printed with its source, transport, state and tools, and ended.

use std::time::Duration;

use aerix_config::Settings;
use aerix_mcp::Servers;

use crate::exit::Exit;
use crate::startup::Trust;

pub async fn list(trust: &Trust, settings: &Settings) -> anyhow::Result<Exit> {
    let declared = trust.mcp();
    for note in &declared.notes {
        eprintln!("{note}");
    }
    if declared.specs.is_empty() {
        println!(
            "no MCP servers (declare them in [mcp.servers.<name>], .mcp.json or ~/.claude.json)"
        );
        return Ok(Exit::Done);
    }
    let lookup = |name: &str| std::env::var(name).ok();
    let mut servers = Servers::start(
        declared.specs.clone(),
        trust.allows(),
        &lookup,
        Duration::from_secs(settings.mcp.timeout_secs),
        aerix_mcp::STARTUP_TIMEOUT,
    )
    .await;
    for server in &servers.servers {
        let spec = &server.spec;
        println!(
            "{} ({} {}, {}): {}",
            spec.name,
            spec.transport.kind(),
            spec.transport.describe(),
            spec.source.display(),
            server.state
        );
        for tool in &server.tools {
            match &tool.schema {
                Ok(_) => println!("  {}", tool.full),
                Err(why) => println!("  {} (left out: {why})", tool.full),
            }
        }
    }
    servers.shutdown().await;
    Ok(Exit::Done)
}
