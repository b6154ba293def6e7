//! `aerix sessions list|rm`.

use std::path::Path;

use aerix_profile::{Profile, ProfileError};
use aerix_session::{Store, read_log};

use crate::SessionsCommand;
use crate::attach;
use crate::exit::Exit;

pub fn run(
    data: &Path,
    root: &Path,
    profile: Option<&str>,
    command: &SessionsCommand,
) -> anyhow::Result<Exit> {
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
            let path = store.existing(&project, id).map_err(|e| Exit::Usage.with(e.to_string()))?;
            // The branch first: a profile that cannot be written leaves the session whole.
            let recorded = read_log(&path).ok().and_then(|read| attach::recorded(&read.events));
            let name = match (profile, recorded) {
                (Some(flag), _) => Some(flag.to_owned()),
                (None, Some((name, _))) => Some(name),
                // A session that recorded no profile has no branch.
                (None, None) => None,
            };
            if let Some(name) = name {
                match Profile::open(data, &name) {
                    Ok(profile) => {
                        profile.remove_session(id)?;
                    }
                    Err(ProfileError::Missing { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            let checkpoints = crate::checkpoint::remove(root, id)?;
            store.remove(&project, id).map_err(|e| Exit::Usage.with(e.to_string()))?;
            match checkpoints {
                0 => println!("removed {id}"),
                n => println!("removed {id} and its {n} checkpoint(s)"),
            }
        }
    }
    Ok(Exit::Done)
}
