//! aerix's tools as Claude Code presents its own: names, inputs and results. Hook payloads and
//! the transcript projection both use this, so a hook written for Claude Code reads the same
//! `tool_name`, `tool_input` and `tool_response` in both places.

use std::path::Path;

use serde_json::{Map, Value, json};

/// aerix's tools that have a Claude Code twin, with its name.
const TWINS: [(&str, &str); 6] = [
    ("bash", "Bash"),
    ("read", "Read"),
    ("write", "Write"),
    ("edit", "Edit"),
    ("glob", "Glob"),
    ("grep", "Grep"),
];

/// Claude Code's name for an aerix tool; a tool without a twin keeps its own name.
pub fn tool_name(tool: &str) -> &str {
    TWINS.iter().find(|(aerix, _)| *aerix == tool).map_or(tool, |(_, claude)| claude)
}

/// The aerix tool behind a Claude Code name (`None`: not one of the twins).
pub fn aerix_tool(name: &str) -> Option<&'static str> {
    TWINS.iter().find(|(_, claude)| *claude == name).map(|(aerix, _)| *aerix)
}

/// An aerix call's input with Claude Code's field names: `path` becomes an absolute
/// `file_path` (relative paths are taken from `cwd`, as the tools take them), `old`/`new`
/// become `old_string`/`new_string`, `timeout_secs` becomes `timeout` in milliseconds,
/// `background` becomes `run_in_background`, grep's `max_matches` becomes `head_limit`. Fields
/// it does not know are kept; tools without a twin keep their input as it is.
pub fn tool_input(tool: &str, input: &Value, cwd: &Path) -> Value {
    let Value::Object(fields) = input else { return input.clone() };
    let absolute = |v: &Value| match v.as_str() {
        Some(p) if !Path::new(p).is_absolute() => json!(cwd.join(p).display().to_string()),
        _ => v.clone(),
    };
    let mut out = Map::new();
    for (key, value) in fields {
        let (key, value) = match (tool, key.as_str()) {
            ("read" | "write" | "edit", "path") => ("file_path", absolute(value)),
            ("glob" | "grep", "path") => ("path", absolute(value)),
            ("edit", "old") => ("old_string", value.clone()),
            ("edit", "new") => ("new_string", value.clone()),
            ("bash", "timeout_secs") => {
                ("timeout", value.as_u64().map_or(value.clone(), |s| json!(s * 1000)))
            }
            ("bash", "background") => ("run_in_background", value.clone()),
            ("grep", "max_matches") => ("head_limit", value.clone()),
            (_, key) => (key, value.clone()),
        };
        out.insert(key.to_owned(), value);
    }
    Value::Object(out)
}

/// A Claude Code input back in aerix's field names (for a hook's `updatedInput`): the inverse
/// of [`tool_input`] for the twins (a timeout in milliseconds is rounded up to seconds), and
/// the input as it is for any other tool.
pub fn aerix_input(tool: &str, input: &Value) -> Value {
    let Value::Object(fields) = input else { return input.clone() };
    let mut out = Map::new();
    for (key, value) in fields {
        let (key, value) = match (tool, key.as_str()) {
            ("read" | "write" | "edit", "file_path") => ("path", value.clone()),
            ("edit", "old_string") => ("old", value.clone()),
            ("edit", "new_string") => ("new", value.clone()),
            ("bash", "timeout") => (
                "timeout_secs",
                value.as_u64().map_or(value.clone(), |ms| json!(ms.div_ceil(1000))),
            ),
            ("bash", "run_in_background") => ("background", value.clone()),
            ("grep", "head_limit") => ("max_matches", value.clone()),
            (_, key) => (key, value.clone()),
        };
        out.insert(key.to_owned(), value);
    }
    Value::Object(out)
}

/// A call's result in the shape Claude Code gives its own tool's (`tool_response` in hooks,
/// `toolUseResult` in transcripts). `text` is what aerix gave the model; `input` the call's
/// aerix input. An error is Claude Code's `Error: ...` string.
pub fn tool_response(tool: &str, input: &Value, text: &str, error: bool, cwd: &Path) -> Value {
    if error {
        return json!(format!("Error: {}", text.strip_prefix("error: ").unwrap_or(text)));
    }
    let cc = tool_input(tool, input, cwd);
    let file_path = cc.get("file_path").cloned().unwrap_or(Value::Null);
    match tool {
        // aerix gives one stream, ending with how the command ended.
        "bash" => json!({"stdout": text, "stderr": "", "interrupted": false, "isImage": false}),
        "read" => json!({
            "type": "text",
            "file": {"filePath": file_path, "content": text, "numLines": text.lines().count()},
        }),
        "write" => json!({
            "type": if text.starts_with("created") { "create" } else { "update" },
            "filePath": file_path,
            "content": input.get("content").cloned().unwrap_or(Value::Null),
        }),
        "edit" => json!({
            "filePath": file_path,
            "oldString": input.get("old").cloned().unwrap_or(Value::Null),
            "newString": input.get("new").cloned().unwrap_or(Value::Null),
            "replaceAll": input.get("replace_all").and_then(Value::as_bool).unwrap_or(false),
        }),
        "glob" => {
            let filenames: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
            json!({"filenames": filenames, "numFiles": filenames.len(), "truncated": false})
        }
        "grep" => json!({"mode": "content", "content": text, "numLines": text.lines().count()}),
        _ => json!(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twins_take_claude_codes_names_and_fields_and_come_back() {
        let cwd = Path::new("/work/repo");
        assert_eq!((tool_name("bash"), tool_name("plan")), ("Bash", "plan"));
        assert_eq!((aerix_tool("Edit"), aerix_tool("WebFetch")), (Some("edit"), None));
        let edit = json!({"path": "src/a.rs", "old": "x", "new": "y", "replace_all": true});
        let cc = tool_input("edit", &edit, cwd);
        assert_eq!(
            cc,
            json!({"file_path": "/work/repo/src/a.rs", "old_string": "x", "new_string": "y", "replace_all": true})
        );
        assert_eq!(aerix_input("edit", &cc)["old"], "x");
        let bash = json!({"command": "ls", "timeout_secs": 5, "background": true});
        let cc = tool_input("bash", &bash, cwd);
        assert_eq!(cc, json!({"command": "ls", "timeout": 5000, "run_in_background": true}));
        assert_eq!(
            aerix_input("bash", &json!({"command": "ls", "timeout": 1500})),
            json!({"command": "ls", "timeout_secs": 2})
        );
        assert_eq!(tool_input("plan", &json!({"text": "t"}), cwd), json!({"text": "t"}));
    }

    #[test]
    fn results_take_claude_codes_shapes() {
        let cwd = Path::new("/r");
        let bash = tool_response("bash", &json!({"command": "ls"}), "a\n[exit 0]", false, cwd);
        assert_eq!(bash["stdout"], "a\n[exit 0]");
        let write = json!({"path": "f", "content": "hi"});
        let created = tool_response("write", &write, "created f (1 lines, 2 bytes)", false, cwd);
        assert_eq!((&created["type"], &created["filePath"]), (&json!("create"), &json!("/r/f")));
        let failed =
            tool_response("read", &json!({"path": "f"}), "error: cannot read f", true, cwd);
        assert_eq!(failed, "Error: cannot read f");
    }
}
