//! `aerix rewind`: the files and the conversation of a session put back to before a request
//! (`aerix_agent::checkpoint`), or its requests listed.

use std::path::Path;

use aerix_session::{Store, read_log, requests};

use crate::checkpoint;
use crate::exit::Exit;

/// What `aerix rewind` was asked.
pub struct Rewind<'a> {
    pub session: Option<&'a str>,
    pub to: Option<u32>,
    pub files_only: bool,
    pub list: bool,
}

pub fn run(data: &Path, root: &Path, ask: &Rewind) -> anyhow::Result<Exit> {
    let usage = |message: String| anyhow::anyhow!(Exit::Usage.with(message));
    let store = Store::new(data);
    let project = aerix_session::project_key(root);
    let id = match ask.session {
        Some(id) => id.to_owned(),
        None => store
            .latest(&project)?
            .ok_or_else(|| usage("no session to rewind in this project".to_owned()))?,
    };
    if ask.list {
        let path = store.existing(&project, &id).map_err(|e| usage(e.to_string()))?;
        for request in &requests(&read_log(&path)?.events) {
            println!("{}", checkpoint::list_line(request));
        }
        return Ok(Exit::Done);
    }
    println!(
        "{}",
        checkpoint::rewind_session(&store, &project, &id, root, ask.to, ask.files_only)?
    );
    Ok(Exit::Done)
}
