//! "Always for this project" answers: allow rules kept per user, never in the repository (a
//! repository's file would pre-approve calls for everyone who clones it), in
//! `$XDG_DATA_HOME/aerix/permissions/<project key>.json`, in Claude Code's settings shape
//! (`{"permissions": {"allow": [...]}}`) so the loader reads it as it reads Claude Code's files.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Where a project's answers are kept: `data_home` is `$XDG_DATA_HOME` (`~/.local/share`),
/// `project_key` the session store's key of the project root (`aerix_session::project_key`).
pub fn store_path(data_home: &Path, project_key: &str) -> PathBuf {
    data_home.join("aerix/permissions").join(format!("{project_key}.json"))
}

/// Adds `rules` to the file's allow list (each once), written to a temporary file and renamed
/// over it, so a reader never sees half of it.
pub(crate) fn append(path: &Path, rules: &[String]) -> std::io::Result<()> {
    let mut value: Value = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|_| json!({})),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(e),
    };
    if !value.is_object() {
        value = json!({});
    }
    let permissions = value
        .as_object_mut()
        .map(|o| o.entry("permissions").or_insert_with(|| json!({})))
        .filter(|p| p.is_object());
    let Some(permissions) = permissions.and_then(Value::as_object_mut) else {
        return Err(std::io::Error::other("`permissions` is not an object"));
    };
    let allow = permissions.entry("allow").or_insert_with(|| json!([]));
    if !allow.is_array() {
        *allow = json!([]);
    }
    if let Some(list) = allow.as_array_mut() {
        for rule in rules {
            if !list.iter().any(|r| r.as_str() == Some(rule)) {
                list.push(json!(rule));
            }
        }
    }
    let dir = path.parent().ok_or_else(|| std::io::Error::other("no directory"))?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.{}.tmp", std::process::id(), rand_suffix()));
    let mut file = std::fs::File::create(&tmp)?;
    let text = serde_json::to_string_pretty(&value).map_err(std::io::Error::other)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Tells apart two writers of one process (the nanoseconds of now).
fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_added_once_and_the_file_s_other_keys_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = store_path(dir.path(), "proj-abc");
        assert!(path.ends_with("aerix/permissions/proj-abc.json"));
        append(&path, &["Bash(git status)".to_owned()]).unwrap();
        append(&path, &["Bash(git status)".to_owned(), "Edit(//x)".to_owned()]).unwrap();
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(value, json!({"permissions": {"allow": ["Bash(git status)", "Edit(//x)"]}}));
        std::fs::write(&path, r#"{"note": 1, "permissions": {"deny": ["Bash"]}}"#).unwrap();
        append(&path, &["Read".to_owned()]).unwrap();
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(value, json!({"note": 1, "permissions": {"deny": ["Bash"], "allow": ["Read"]}}));
    }
}
