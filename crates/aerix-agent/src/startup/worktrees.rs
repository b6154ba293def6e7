//! Step 1, for the pieces: where their worktrees live, what a dead run left there (removed
//! now), and the repository's test commands their checks may name.

use std::path::Path;

use crate::delegate::WorktreePlace;
use aerix_config::Settings;

/// The worktrees' place (`None` outside a git work tree, or when it cannot be used) and the
/// notes to show: what was swept, or why pieces run in place.
pub(crate) fn place(
    settings: &Settings,
    root: &Path,
    data: &Path,
    project: &str,
) -> (Option<WorktreePlace>, Vec<String>) {
    let delegates = settings.delegation.depth > 0;
    let in_place = "pieces run in place, one at a time, and a change reaches the tree before its check has passed";
    match aerix_worktrees::Store::open(root, data, project) {
        Ok(Some(store)) => {
            let mut notes = Vec::new();
            match store.sweep() {
                Ok(removed) if !removed.is_empty() => notes.push(format!(
                    "removed {} worktree(s) a stopped run of aerix left: {}",
                    removed.len(),
                    removed.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                )),
                Ok(_) => {}
                Err(e) => notes.push(format!("worktrees a stopped run left: {e}")),
            }
            let place =
                WorktreePlace { data_home: data.to_owned(), project_key: project.to_owned() };
            (Some(place), notes)
        }
        Ok(None) if delegates => {
            (None, vec![format!("{} is not a git work tree: {in_place}", root.display())])
        }
        Ok(None) => (None, Vec::new()),
        Err(e) => (None, vec![format!("worktrees cannot be used ({e}): {in_place}")]),
    }
}
