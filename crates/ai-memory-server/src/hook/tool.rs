//! The files an edit or write tool call names, read from its input as a tool hook reports it
//! (Claude Code's `PostToolUse`, aerix's, Codex's, Kimi Code's; OpenCode through ai-memory's
//! plugin). Only the input is read: a tool's output never is.

use std::path::Path;

use serde_json::Value;

/// The most files one tool call reports.
pub const MAX_TOOL_FILES: usize = 50;
/// A longer path is not a file name anyone wants in a handoff: skipped.
pub const MAX_PATH_BYTES: usize = 300;

/// Keys holding the file an edit or write tool changes (Claude Code and aerix `file_path`,
/// `notebook_path`; OpenCode `filePath`; Kimi Code and others `path`).
const PATH_KEYS: &[&str] = &["file_path", "notebook_path", "filePath", "path"];
/// Keys that may hold an `apply_patch` patch (Codex: the tool's `input`, or a shell call's
/// `command`, a string or a list of arguments).
const PATCH_KEYS: &[&str] = &["input", "patch", "command"];
/// The headers of an `apply_patch` patch naming a file.
const PATCH_HEADERS: &[&str] =
    &["*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "];

/// Whether a tool's name says it changes files: `Write`, `Edit`, `MultiEdit`, `NotebookEdit`,
/// `apply_patch`, `StrReplaceFile`, ... Memory tools (`memory_write_page`, MCP tools) name wiki
/// pages, not files, and are left out.
fn edits_files(tool: &str) -> bool {
    let name: String = tool
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if tool.starts_with("mcp") || name.contains("memory") || name.contains("todo") {
        return false;
    }
    ["write", "edit", "patch", "replace"].iter().any(|w| name.contains(w))
}

/// The files a tool call changes, as its input names them (at most `MAX_TOOL_FILES`, each at
/// most `MAX_PATH_BYTES`, no control characters).
pub fn changed_files(tool: &str, input: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |p: &str| {
        let p = p.trim();
        if !p.is_empty()
            && p.len() <= MAX_PATH_BYTES
            && !p.chars().any(char::is_control)
            && !out.iter().any(|o| o == p)
            && out.len() < MAX_TOOL_FILES
        {
            out.push(p.to_owned());
        }
    };
    if edits_files(tool) {
        for key in PATH_KEYS {
            if let Some(p) = input.get(key).and_then(Value::as_str) {
                add(p);
                break;
            }
        }
    }
    // A patch names its files in its headers, whatever tool carried it.
    for key in PATCH_KEYS {
        let texts: Vec<&str> = match input.get(key) {
            Some(Value::String(s)) => vec![s],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        for text in texts.into_iter().filter(|t| t.contains("*** Begin Patch")) {
            for line in text.lines() {
                if let Some(p) = PATCH_HEADERS.iter().find_map(|h| line.strip_prefix(h)) {
                    add(p);
                }
            }
        }
    }
    out
}

/// `path` as the project knows it: relative to its root when inside it (a relative path is
/// taken from `cwd`), else as given.
pub fn relative_to(path: &str, root: &Path, cwd: &Path) -> String {
    let p = Path::new(path);
    let abs = if p.is_absolute() { p.to_owned() } else { cwd.join(p) };
    match abs.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
        _ => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn edit_and_write_tools_name_their_file_and_others_do_not() {
        let input = json!({"file_path": "/w/shop/src/a.rs", "old_string": "x", "new_string": "y"});
        assert_eq!(changed_files("Edit", &input), ["/w/shop/src/a.rs"]);
        assert_eq!(
            changed_files("NotebookEdit", &json!({"notebook_path": "n.ipynb"})),
            ["n.ipynb"]
        );
        assert_eq!(changed_files("edit", &json!({"filePath": "src/b.ts"})), ["src/b.ts"]);
        assert_eq!(changed_files("StrReplaceFile", &json!({"path": "c.py"})), ["c.py"]);
        assert!(changed_files("Read", &input).is_empty(), "a read changes nothing");
        assert!(changed_files("Grep", &json!({"path": "src"})).is_empty());
        assert!(changed_files("TodoWrite", &json!({"path": "x"})).is_empty());
        let page = json!({"path": "decisions/q.md", "body": "b"});
        assert!(changed_files("mcp__ai-memory__memory_write_page", &page).is_empty());
        assert!(changed_files("memory_write_page", &page).is_empty());
        let odd = json!({"file_path": "a\nb"});
        assert!(changed_files("Write", &odd).is_empty(), "no control characters");
        let long = json!({"file_path": "x".repeat(MAX_PATH_BYTES + 1)});
        assert!(changed_files("Write", &long).is_empty());
    }

    #[test]
    fn a_patch_names_its_files_in_its_headers() {
        let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Add File: \
                     docs/x.md\n+hi\n*** Update File: src/lib.rs\n*** End Patch";
        assert_eq!(
            changed_files("apply_patch", &json!({"input": patch})),
            ["src/lib.rs", "docs/x.md"]
        );
        assert_eq!(
            changed_files("shell", &json!({"command": ["apply_patch", patch]})),
            ["src/lib.rs", "docs/x.md"]
        );
        assert!(changed_files("Bash", &json!({"command": "ls src"})).is_empty());
        let many: String = (0..80).map(|i| format!("*** Add File: f{i}\n")).collect();
        let many = format!("*** Begin Patch\n{many}*** End Patch");
        assert_eq!(changed_files("apply_patch", &json!({"input": many})).len(), MAX_TOOL_FILES);
    }

    #[test]
    fn paths_inside_the_project_are_relative_to_its_root() {
        let root = Path::new("/w/shop");
        assert_eq!(relative_to("/w/shop/src/a.rs", root, root), "src/a.rs");
        assert_eq!(relative_to("a.rs", root, Path::new("/w/shop/src")), "src/a.rs");
        assert_eq!(relative_to("/etc/hosts", root, root), "/etc/hosts");
    }
}
