//! `aerix sessions list|rm`.

use std::path::Path;

use aerix_session::Store;

use crate::SessionsCommand;
use crate::exit::Exit;

pub fn run(data: &Path, root: &Path, command: &SessionsCommand) -> anyhow::Result<Exit> {
    let store = Store::new(data);
    let project = aerix_session::project_key(root);
    match command {
        SessionsCommand::List => {
            for entry in store.list(&project)? {
                let outcome = entry.outcome.as_deref().unwrap_or("-");
                // An imported session says where it came from before its title.
                let tag = entry.tag.as_deref().map(|t| format!("[{t}] ")).unwrap_or_default();
                println!(
                    "{}  {:<8}  {:>3}  {tag}{}",
                    entry.id, outcome, entry.requests, entry.title
                );
            }
        }
        SessionsCommand::Rm { id } => {
            store.remove(&project, id).map_err(|e| Exit::Usage.with(e.to_string()))?;
            println!("removed {id}");
        }
    }
    Ok(Exit::Done)
}
