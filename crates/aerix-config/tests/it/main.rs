//! Settings files and instruction files on a real directory tree.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod agents;
mod capped;

use std::path::{Path, PathBuf};

use aerix_config::{Env, SettingsPaths, instruction_files, load, project_root};

pub(crate) fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("aerix-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn user_then_project_then_local_each_key_from_the_last_that_sets_it() {
    let dir = temp("layers");
    let env = Env { config_home: Some(dir.join("config")), ..Env::for_tests("/nowhere") };
    let project = dir.join("repo");
    write(
        &dir.join("config/aerix/settings.toml"),
        "max_turns = 10\n[members.main]\nmodel = \"user.gguf\"\nthreads = 2\n",
    );
    write(&project.join(".aerix/settings.toml"), "[members.main]\nmodel = \"project.gguf\"\n");
    write(&project.join(".aerix/settings.local.toml"), "[pool]\nmax_connections = 2\n");
    let settings = load(&SettingsPaths::standard(&env, &project), &env).unwrap();
    assert_eq!(settings.max_turns, 10);
    assert_eq!(settings.main.model, "project.gguf");
    assert_eq!(settings.main.threads, Some(2));
    assert_eq!(settings.pool.max_connections, 2);
    assert_eq!(settings.sources.len(), 3);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_broken_file_is_one_error_naming_file_line_and_key() {
    let dir = temp("broken");
    let env = Env::for_tests("/nowhere");
    let project = dir.join("repo");
    let path = project.join(".aerix/settings.toml");
    write(&path, "# team settings\n[context]\nmax_new_tokens = \"lots\"\n");
    let error = load(&SettingsPaths::standard(&env, &project), &env).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("{}:3: key `context.max_new_tokens`", path.display())),
        "{error}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn instruction_files_from_the_root_down_to_the_working_directory() {
    let dir = temp("instructions");
    let root = dir.join("repo");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let cwd = root.join("crates/core");
    write(&root.join("AGENTS.md"), "root agents");
    write(&root.join("CLAUDE.md"), "root claude");
    write(&root.join("crates/CLAUDE.md"), "crates claude");
    write(&cwd.join("AGENTS.md"), "core agents");
    write(&root.join("crates/other/AGENTS.md"), "not on the way down");
    assert_eq!(project_root(&cwd), root);
    let texts: Vec<String> =
        instruction_files(&root, &cwd).unwrap().files.into_iter().map(|f| f.text).collect();
    assert_eq!(texts, ["root agents", "root claude", "crates claude", "core agents"]);
    // Outside a repository only the working directory itself is read.
    let lone = dir.join("lone");
    write(&lone.join("AGENTS.md"), "lone");
    assert_eq!(project_root(&lone), lone);
    assert_eq!(instruction_files(&lone, &lone).unwrap().files.len(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}
