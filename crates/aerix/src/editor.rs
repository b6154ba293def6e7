//! The user's editor on a text: `aerix profile edit` and the screen's plan gate (`e`).

use anyhow::Context;

/// `$VISUAL`, else `$EDITOR` (an empty one counts as unset), else `vi`: the order git uses.
pub fn editor() -> String {
    ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "vi".to_owned())
}

/// Opens `text` in `editor()` as a temporary file named `file_name` and returns the text saved.
/// As git runs it, the value is a shell command (`code --wait` works) and the file its last
/// argument.
pub fn edit(file_name: &str, text: &str) -> anyhow::Result<String> {
    let editor = editor();
    let dir = tempfile::Builder::new()
        .prefix("aerix-edit-")
        .tempdir()
        .context("a temporary directory")?;
    let file = dir.path().join(file_name);
    std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("aerix-edit")
        .arg(&file)
        .status()
        .with_context(|| format!("running the editor `{editor}`"))?;
    anyhow::ensure!(status.success(), "the editor `{editor}` exited with {status}");
    std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))
}
