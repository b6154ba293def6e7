//! `aerix trust [DIR]`, `aerix trust --list`, `aerix trust --revoke DIR`.

use std::path::Path;

use aerix_config::{Env, SettingsPaths};

use crate::exit::Exit;
use crate::startup::{self, Trust};

/// What the project at `dir` would run, as the startup lists it.
fn survey(env: &Env, dir: &Path) -> anyhow::Result<Trust> {
    let root = aerix_config::project_root(dir);
    let layered = aerix_config::load_layered(&SettingsPaths::standard(env, &root), env)?;
    Ok(Trust::survey(&layered, env, (&root, dir), false))
}

fn canonical(dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    dir.canonicalize().map_err(|e| Exit::Usage.with(format!("{}: {e}", dir.display())).into())
}

/// Trusts the project of `dir` with what it would run now, listing it.
pub fn trust(env: &Env, dir: &Path) -> anyhow::Result<Exit> {
    let mut trust = survey(env, &canonical(dir)?)?;
    let items = trust.items();
    trust.trust()?;
    println!("trusted {}", trust.root().display());
    if items.is_empty() {
        println!("  (it brings nothing that runs today; a hook or plugin it adds asks again)");
    }
    for item in items {
        println!("  {item}");
    }
    Ok(Exit::Done)
}

/// Every trusted root: when, how many parts, and whether what it would run still matches.
pub fn list(env: &Env) -> anyhow::Result<Exit> {
    let record = startup::record(env)?;
    let mut any = false;
    for (root, entry) in record.roots() {
        any = true;
        let path = Path::new(root);
        let now = if !path.is_dir() {
            "gone".to_owned()
        } else {
            match survey(env, path) {
                Ok(trust) if trust.allows() => "current".to_owned(),
                Ok(_) => "changed since: it asks again".to_owned(),
                Err(e) => format!("unreadable settings: {e}"),
            }
        };
        println!("{root}  trusted {}  {} part(s)  {now}", entry.trusted_at, entry.items.len());
        for item in &entry.items {
            println!("  {item}");
        }
    }
    if !any {
        println!("no project is trusted ({})", record.path().display());
    }
    Ok(Exit::Done)
}

/// Forgets the trust of `dir`'s project root.
pub fn revoke(env: &Env, dir: &Path) -> anyhow::Result<Exit> {
    let mut record = startup::record(env)?;
    // The record keys a root by its canonical path; a root that is gone is taken as written.
    let root = match dir.canonicalize() {
        Ok(dir) => aerix_config::project_root(&dir).canonicalize().unwrap_or(dir),
        Err(_) => dir.to_owned(),
    };
    if !record.revoke(&root) {
        return Err(Exit::Usage.with(format!("{} is not trusted", root.display())).into());
    }
    record.save()?;
    println!("revoked {}", root.display());
    Ok(Exit::Done)
}
