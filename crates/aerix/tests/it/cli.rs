//! Usage errors, settings errors, and `aerix sessions`.

use crate::{World, final_turn, stderr, stdout};

#[test]
fn usage_and_settings_errors_have_their_own_exit_codes() {
    let world = World::new("cli", "unused.gguf", "");
    let out = world.aerix(&[]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("aerix -p"), "{}", stderr(&out));
    let out = world.aerix(&["-p", "x", "--resume", "../../etc/passwd"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("not a session id"), "{}", stderr(&out));
    let out = world.aerix(&["-p", "x", "--continue"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("no session to continue"), "{}", stderr(&out));
    let out = world.aerix(&["-p", "x", "--max-turns", "0"]);
    assert_eq!(out.status.code(), Some(64));
    let settings = world.repo.join(".aerix/settings.toml");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "[delegation]\nparallel = \"four\"\n").unwrap();
    let out = world.aerix(&["-p", "x"]);
    assert_eq!(out.status.code(), Some(78));
    let message = stderr(&out);
    assert!(
        message.contains(&format!("{}:2: key `delegation.parallel`", settings.display())),
        "{message}"
    );
}

#[test]
fn sessions_are_listed_and_removed() {
    let replies = vec!["answer".to_owned(), final_turn("Nothing to do.", "hello")];
    let world = World::scripted("sessions", &replies, true);
    let out = world.aerix(&["-p", "Say hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list = stdout(&world.aerix(&["sessions", "list"]));
    let id = list.split_whitespace().next().unwrap().to_owned();
    assert!(list.contains("done") && list.contains("Say hello"), "{list}");
    let log = world.log_path();
    let out = world.aerix(&["sessions", "rm", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!log.exists());
    assert_eq!(stdout(&world.aerix(&["sessions", "list"])), "");
    let out = world.aerix(&["sessions", "rm", &id]);
    assert_eq!(out.status.code(), Some(64));
}
