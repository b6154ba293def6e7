//! Agent definitions and instruction files are capped like skills: a file over
//! `MAX_FILE_BYTES`, or one that is not a regular file, is one note naming it and the cap, and
//! is skipped without being read whole (a FIFO would hang the read: it is refused at once).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use aerix_config::{AgentDirs, Env, MAX_FILE_BYTES, instruction_files, load_agents};

use crate::{temp, write};

fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// `f`'s value, or a failure when it takes over 5 s (a FIFO's read would never end).
fn at_once<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| panic!("{what} hung"))
}

/// A definition of `name` padded to `bytes`.
fn definition(name: &str, bytes: usize) -> String {
    let head = format!("---\nname: {name}\ndescription: d\n---\n");
    format!("{head}{}\n", "x".repeat(bytes.saturating_sub(head.len() + 1)))
}

#[test]
fn an_oversized_or_special_agent_definition_is_a_note_and_skipped() {
    let dir = temp("agents-capped");
    let env = Env::for_tests(&dir.join("home").display().to_string());
    let agents = dir.join(".aerix/agents");
    let cap = usize::try_from(MAX_FILE_BYTES).unwrap();
    write(&agents.join("at-cap.md"), &definition("at-cap", cap));
    let big = agents.join("big.md");
    write(&big, &definition("big", cap + 1));
    let fifo = agents.join("pipe.md");
    mkfifo(&fifo);
    let d = dir.clone();
    let loaded = at_once("loading definitions beside a FIFO", move || {
        load_agents(&AgentDirs::standard(&env, &d, &d))
    });
    let names: Vec<&str> = loaded.definitions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["at-cap"]);
    assert_eq!(
        loaded.notes,
        [
            format!("agents: {}: 262145 bytes, over the 256 KiB limit; skipped", big.display()),
            format!("agents: {}: not a regular file; skipped", fifo.display()),
        ]
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_oversized_or_special_instruction_file_is_a_note_and_skipped() {
    let dir = temp("instructions-capped");
    let root = dir.join("repo");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let cwd = root.join("sub");
    let big = root.join("AGENTS.md");
    write(&big, &"x".repeat(usize::try_from(MAX_FILE_BYTES).unwrap() + 1));
    write(&root.join("CLAUDE.md"), "kept");
    let fifo = cwd.join("AGENTS.md");
    mkfifo(&fifo);
    let (r, c) = (root.clone(), cwd.clone());
    let read = at_once("reading instructions beside a FIFO", move || instruction_files(&r, &c));
    let read = read.unwrap();
    let texts: Vec<&str> = read.files.iter().map(|f| f.text.as_str()).collect();
    assert_eq!(texts, ["kept"]);
    assert_eq!(
        read.notes,
        [
            format!(
                "instructions: {}: 262145 bytes, over the 256 KiB limit; skipped",
                big.display()
            ),
            format!("instructions: {}: not a regular file; skipped", fifo.display()),
        ]
    );
    std::fs::remove_dir_all(dir).unwrap();
}
