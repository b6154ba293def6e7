//! Checkpoints before each request (the working tree kept under
//! `refs/aerix/checkpoints/<session>/<n>`) and the rewind (`aerix rewind`, the screen's
//! `/rewind`): the files and the conversation put back to before a request.

use std::path::Path;

use aerix_session::{Event, Request, Store, read_log, requests};
use gitstore::{CHECKPOINT_CAP, Repo, RestoreError};

use crate::exit::Exit;

/// Keeps the working tree before request `request` of `session`: `base` is the request's
/// snapshot when it has one (the same commit its diff is taken against). The event says what
/// was kept, or why nothing was (outside a git repository there are no checkpoints); the
/// second value is a failure to keep one, for the user.
pub fn take(
    root: &Path,
    session: &str,
    request: u32,
    base: Option<&str>,
) -> (Event, Option<String>) {
    let event =
        |commit, pruned, note: Option<String>| Event::Checkpoint { request, commit, pruned, note };
    let Some(top) = Repo::toplevel(root) else {
        let note = Some("not a git repository: no checkpoint".to_owned());
        return (event(None, Vec::new(), note), None);
    };
    let repo = Repo::at(&top);
    let kept = match base {
        Some(base) => Ok(base.to_owned()),
        None => repo.snapshot_commit(),
    }
    .and_then(|commit| repo.keep_checkpoint(session, request, &commit, CHECKPOINT_CAP));
    match kept {
        Ok(kept) => (event(Some(kept.commit), kept.pruned, None), None),
        Err(e) => {
            (event(None, Vec::new(), Some(format!("no checkpoint: {e}"))), Some(e.to_string()))
        }
    }
}

/// The number the next request of a session gets (its `session.start`s so far, plus one).
pub fn next_request(events: &[Event]) -> u32 {
    requests(events).len() as u32 + 1
}

/// The screen's `/rewind [N]`: the listing, or the rewind's outcome, as one note's text; and
/// whether a rewind was written.
pub fn screen(
    store: &Store,
    project: &str,
    id: &str,
    root: &Path,
    arg: Option<&str>,
) -> (String, bool) {
    let Some(arg) = arg else {
        let listed = store
            .existing(project, id)
            .map_err(anyhow::Error::from)
            .and_then(|path| Ok(requests(&read_log(&path)?.events)));
        let text = match listed {
            Ok(listed) if listed.is_empty() => "no request to rewind yet".to_owned(),
            Ok(listed) => {
                let lines: Vec<String> = listed.iter().map(list_line).collect();
                format!("requests (/rewind N goes back to before N):\n{}", lines.join("\n"))
            }
            Err(e) => format!("the session's requests cannot be read: {e:#}"),
        };
        return (text, false);
    };
    let Ok(to) = arg.parse::<u32>() else {
        return (format!("/rewind N: `{arg}` is not a request number (/rewind lists them)"), false);
    };
    match rewind_session(store, project, id, root, Some(to), false) {
        Ok(done) => (done, true),
        Err(e) => (format!("not rewound: {e:#}"), false),
    }
}

/// Restores the files (in a repository) and records the rewind; what was done, as a line.
pub fn rewind_session(
    store: &Store,
    project: &str,
    id: &str,
    root: &Path,
    to: Option<u32>,
    files_only: bool,
) -> anyhow::Result<String> {
    let usage = |message: String| anyhow::anyhow!(Exit::Usage.with(message));
    let path = store.existing(project, id).map_err(|e| usage(e.to_string()))?;
    let listed = requests(&read_log(&path)?.events);
    let live: Vec<u32> = listed.iter().filter(|r| !r.rewound).map(|r| r.number).collect();
    let Some(&last) = live.last() else {
        return Err(usage(format!("session {id} has no request to rewind")));
    };
    let to = to.unwrap_or(last);
    if !live.contains(&to) {
        let rewound: Vec<String> =
            listed.iter().filter(|r| r.rewound).map(|r| r.number.to_string()).collect();
        let rewound = match rewound.is_empty() {
            true => String::new(),
            false => format!("; rewound already: {}", rewound.join(", ")),
        };
        return Err(usage(format!(
            "--to {to}: session {id}'s requests are 1 to {}{rewound} (`aerix rewind --list`)",
            listed.len()
        )));
    }
    let files = match Repo::toplevel(root) {
        Some(top) => match Repo::at(&top).restore_checkpoint(id, to) {
            Ok(()) => true,
            Err(e @ RestoreError::Obstructed { .. }) => return Err(e.into()),
            Err(e) => return Err(anyhow::anyhow!("the files are not restored: {e}")),
        },
        None if files_only => {
            return Err(usage("not a git repository: there are no checkpoints".to_owned()));
        }
        None => false,
    };
    let conversation = !files_only;
    store.append(project, id, &Event::Rewind { to, files, conversation })?;
    let what = match (files, conversation) {
        (true, true) => "files and conversation",
        (true, false) => "files",
        (false, _) => {
            "conversation; not a git repository: no checkpoints, the files are as they are"
        }
    };
    Ok(format!("rewound session {id} to before request {to} ({what})"))
}

/// `N  prompt's first line`, `(rewound)` before a rewound one's.
pub fn list_line(request: &Request) -> String {
    let first = request.prompt.lines().next().unwrap_or_default();
    let first: String = first.chars().take(100).collect();
    let mark = if request.rewound { "(rewound) " } else { "" };
    format!("{:>3}  {mark}{first}", request.number)
}

/// `aerix sessions rm`: the session's checkpoints go with it.
pub fn remove(root: &Path, session: &str) -> anyhow::Result<usize> {
    match Repo::toplevel(root) {
        Some(top) => Ok(Repo::at(&top).remove_checkpoints(session)?),
        None => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_repository_the_event_says_there_is_no_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Repo::toplevel(dir.path()).is_none(), "the temporary directory is in a repository");
        let (event, failed) = take(dir.path(), "s1", 1, None);
        assert_eq!(failed, None);
        let Event::Checkpoint { request, commit, note, .. } = event else { panic!("{event:?}") };
        assert_eq!((request, commit), (1, None));
        assert_eq!(note.as_deref(), Some("not a git repository: no checkpoint"));
    }

    #[test]
    fn in_a_repository_without_a_commit_the_tree_is_kept_under_the_ref() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::at(dir.path());
        repo.run(&["init", "-q"], gitstore::GIT_TIMEOUT).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let (event, failed) = take(dir.path(), "s1", 3, None);
        assert_eq!(failed, None);
        let Event::Checkpoint { commit: Some(commit), note: None, .. } = event else {
            panic!("{event:?}")
        };
        assert_eq!(repo.checkpoints("s1").unwrap(), vec![3]);
        let shown = repo.run(&["show", &format!("{commit}:a.txt")], gitstore::GIT_TIMEOUT);
        assert_eq!(shown.unwrap(), b"a\n");
    }
}
