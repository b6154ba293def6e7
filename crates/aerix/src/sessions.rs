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
                println!("{}  {:<8}  {:>3}  {}", entry.id, outcome, entry.requests, entry.title);
            }
        }
        SessionsCommand::Rm { id } => {
            store.remove(&project, id).map_err(|e| Exit::Usage.with(e.to_string()))?;
            println!("removed {id}");
        }
    }
    Ok(Exit::Done)
}
