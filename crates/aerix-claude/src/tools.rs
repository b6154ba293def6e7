//! Claude Code's view of aerix's tools: a hook written for Claude Code matches `Bash` and
//! reads `tool_input.command`, `Edit|Write` and `tool_input.file_path`. aerix's tools with a
//! twin in the registry (`aerix_turn::tools`: `bash`, `read`, `write`, `edit`, `glob`, `grep`)
//! are presented under the twin's name with its input fields ([`view`]), their results in its
//! `tool_response` shape ([`tool_response`]), and a hook's `updatedInput` is mapped back
//! ([`from_claude`]) and checked against aerix's input schema ([`check_input`]). aerix's other tools keep their names and
//! inputs. Hook payloads and the transcript projection both use this, so a hook reads the same
//! `tool_name`, `tool_input` and `tool_response` in both places.

use std::path::Path;

use aerix_turn::tools::{Carried, Twin};
use serde_json::{Map, Value, json};

/// Claude Code's name for an aerix tool, when it has a twin (`aerix_turn::tools`).
pub fn claude_name(tool: &str) -> Option<&'static str> {
    twin(tool).map(|t| t.name)
}

fn twin(tool: &str) -> Option<Twin> {
    aerix_turn::tool_named(tool)?.twin
}

/// A call as a hook sees it: `tool_name` and `tool_input`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolView {
    pub name: String,
    pub input: Value,
}

/// Paths are absolute in Claude Code's inputs (its tools require it).
fn absolute(path: &Value, cwd: &Path) -> Value {
    match path.as_str() {
        Some(p) if !Path::new(p).is_absolute() => json!(cwd.join(p).display().to_string()),
        _ => path.clone(),
    }
}

/// An aerix call in Claude Code's terms (a tool without a twin as it is).
pub fn view(tool: &str, input: &Value, cwd: &Path) -> ToolView {
    let (Some(twin), Some(object)) = (twin(tool), input.as_object()) else {
        return ToolView { name: tool.to_owned(), input: input.clone() };
    };
    let mut out = Map::new();
    for field in twin.fields {
        let Some(value) = object.get(field.aerix) else { continue };
        let value = match field.carried {
            Carried::Seconds => json!(value.as_u64().map_or(0, |s| s.saturating_mul(1000))),
            Carried::Path => absolute(value, cwd),
            Carried::AsIs => value.clone(),
        };
        out.insert(field.claude.to_owned(), value);
    }
    if tool == "edit" && !out.contains_key("replace_all") {
        out.insert("replace_all".into(), json!(false));
    }
    ToolView { name: twin.name.to_owned(), input: Value::Object(out) }
}

/// Claude Code's name for an aerix tool; a tool without a twin keeps its own name.
pub fn tool_name(tool: &str) -> &str {
    claude_name(tool).unwrap_or(tool)
}

/// A hook's `updatedInput` for an aerix call, as aerix's input: a twin's Claude Code fields
/// renamed back (a field aerix has no equivalent for is an error naming it), another tool's
/// input as it is.
pub fn from_claude(tool: &str, updated: &Value) -> Result<Value, String> {
    let Some(twin) = twin(tool) else {
        return Ok(updated.clone());
    };
    let name = twin.name;
    let Some(object) = updated.as_object() else {
        return Err(format!("the updatedInput for {name} is not an object"));
    };
    let mut out = Map::new();
    for (key, value) in object {
        if twin.descriptive.contains(&key.as_str()) {
            continue;
        }
        let Some(field) = twin.fields.iter().find(|f| f.claude == key) else {
            return Err(format!(
                "the updatedInput for {name} has `{key}`, which aerix's `{tool}` has no equivalent for"
            ));
        };
        let value = if field.carried == Carried::Seconds {
            // Milliseconds to whole seconds, rounded up (a timeout is never shortened to 0).
            match value.as_u64() {
                Some(ms) => json!(ms.div_ceil(1000)),
                None => {
                    return Err(format!(
                        "the updatedInput for {name} has `timeout` {value}: not a number of milliseconds"
                    ));
                }
            }
        } else {
            value.clone()
        };
        out.insert(field.aerix.to_owned(), value);
    }
    Ok(Value::Object(out))
}

/// Checks `input` against a tool's input schema as aerix's tools give them (objects with
/// `properties`, `required`, `additionalProperties: false`; strings, integers, booleans with
/// their bounds; `const`, `enum`, `anyOf`): the first thing wrong, in words.
pub fn check_input(input: &Value, schema: &Value) -> Result<(), String> {
    check(input, schema, "input")
}

fn check(value: &Value, schema: &Value, at: &str) -> Result<(), String> {
    if let Some(branches) = schema.get("anyOf").and_then(Value::as_array) {
        let mut first = None;
        for branch in branches {
            match check(value, branch, at) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        return Err(first.unwrap_or_else(|| format!("{at} matches none of its forms")));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return Err(format!("{at} must be {constant}"));
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        return Err(format!("{at} must be one of {}", Value::Array(options.clone())));
    }
    let kind = schema.get("type").and_then(Value::as_str);
    match kind {
        Some("object") => {
            let Some(object) = value.as_object() else {
                return Err(format!("{at} must be an object"));
            };
            let properties = schema.get("properties").and_then(Value::as_object);
            for key in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                if let Some(key) = key.as_str()
                    && !object.contains_key(key)
                {
                    return Err(format!("{at} lacks `{key}`"));
                }
            }
            for (key, item) in object {
                match properties.and_then(|p| p.get(key)) {
                    Some(sub) => check(item, sub, &format!("`{key}`"))?,
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        return Err(format!("{at} has `{key}`, which the tool does not take"));
                    }
                    None => {}
                }
            }
        }
        Some("string") => {
            let Some(text) = value.as_str() else {
                return Err(format!("{at} must be a string"));
            };
            let chars = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && chars < min
            {
                return Err(format!("{at} must be at least {min} characters"));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && chars > max
            {
                return Err(format!("{at} must be at most {max} characters"));
            }
        }
        Some("integer") => {
            let Some(n) = value.as_i64() else {
                return Err(format!("{at} must be an integer"));
            };
            if let Some(min) = schema.get("minimum").and_then(Value::as_i64)
                && n < min
            {
                return Err(format!("{at} must be at least {min}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_i64)
                && n > max
            {
                return Err(format!("{at} must be at most {max}"));
            }
        }
        Some("boolean") if !value.is_boolean() => {
            return Err(format!("{at} must be true or false"));
        }
        Some("array") if !value.is_array() => return Err(format!("{at} must be an array")),
        _ => {}
    }
    Ok(())
}

/// A result as a transcript's `toolUseResult`: [`tool_response`], or for a call that failed
/// Claude Code's `Error: ...` string.
pub fn tool_use_result(tool: &str, input: &Value, text: &str, error: bool, cwd: &Path) -> Value {
    if error {
        json!(format!("Error: {}", text.strip_prefix("error: ").unwrap_or(text)))
    } else {
        tool_response(tool, input, text, cwd)
    }
}

/// A call's result in Claude Code's `tool_response` shape for a twin (from aerix's result text:
/// Bash's `stdout` holds the command's stdout and stderr together, its last `[exit N]` line
/// apart), the text itself for another tool.
pub fn tool_response(tool: &str, input: &Value, result: &str, cwd: &Path) -> Value {
    let path = || absolute(input.get("path").unwrap_or(&Value::Null), cwd);
    let lines = || result.lines().count();
    match tool {
        "bash" => {
            let (body, status) = match result.rsplit_once('\n') {
                Some((body, last)) if last.starts_with('[') => (body, last),
                _ if result.starts_with('[') => ("", result),
                _ => (result, ""),
            };
            let interrupted = status.contains("timeout") || status.contains("cancelled");
            json!({"stdout": body, "stderr": "", "interrupted": interrupted, "isImage": false})
        }
        "read" => json!({"type": "text", "file": {
            "filePath": path(),
            "content": result,
            "numLines": lines(),
            "startLine": input.get("offset").and_then(Value::as_u64).unwrap_or(1),
        }}),
        "write" => json!({
            "type": if result.starts_with("created") { "create" } else { "update" },
            "filePath": path(),
            "content": input.get("content").cloned().unwrap_or(Value::Null),
        }),
        "edit" => json!({
            "filePath": path(),
            "oldString": input.get("old").cloned().unwrap_or(Value::Null),
            "newString": input.get("new").cloned().unwrap_or(Value::Null),
            "replaceAll": input.get("replace_all").and_then(Value::as_bool).unwrap_or(false),
            "userModified": false,
        }),
        "glob" => {
            let filenames: Vec<&str> = if result.starts_with("no file matches") {
                Vec::new()
            } else {
                result.lines().collect()
            };
            json!({"filenames": filenames, "numFiles": filenames.len(), "truncated": false})
        }
        "grep" => json!({"mode": "content", "content": result, "numLines": lines()}),
        _ => json!(result),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::{check_input, from_claude, tool_response, view};

    #[test]
    fn calls_in_claude_codes_terms_and_back() {
        let cwd = Path::new("/w");
        let bash =
            view("bash", &json!({"command": "ls", "timeout_secs": 5, "background": true}), cwd);
        assert_eq!(bash.name, "Bash");
        assert_eq!(
            bash.input,
            json!({"command": "ls", "timeout": 5000, "run_in_background": true})
        );
        let edit = view("edit", &json!({"path": "a.rs", "old": "x", "new": "y"}), cwd);
        assert_eq!(
            (edit.name.as_str(), edit.input),
            (
                "Edit",
                json!({"file_path": "/w/a.rs", "old_string": "x", "new_string": "y", "replace_all": false})
            )
        );
        let read = view("read", &json!({"path": "/abs/f", "offset": 3, "limit": 9}), cwd);
        assert_eq!(read.input, json!({"file_path": "/abs/f", "offset": 3, "limit": 9}));
        assert_eq!(view("plan", &json!({"op": "read"}), cwd).name, "plan");

        assert_eq!(
            from_claude(
                "bash",
                &json!({"command": "ls -a", "timeout": 1500, "description": "list"})
            ),
            Ok(json!({"command": "ls -a", "timeout_secs": 2}))
        );
        assert_eq!(
            from_claude("grep", &json!({"pattern": "x", "-i": true})),
            Err("the updatedInput for Grep has `-i`, which aerix's `grep` has no equivalent for"
                .into())
        );
        assert_eq!(from_claude("plan", &json!({"op": "read"})), Ok(json!({"op": "read"})));
    }

    #[test]
    fn a_mapped_back_input_is_checked_against_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "command": {"type": "string", "minLength": 1, "maxLength": 10},
            "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 600},
        }, "required": ["command"], "additionalProperties": false});
        assert_eq!(check_input(&json!({"command": "ls"}), &schema), Ok(()));
        assert_eq!(check_input(&json!({}), &schema), Err("input lacks `command`".into()));
        assert_eq!(
            check_input(&json!({"command": ""}), &schema),
            Err("`command` must be at least 1 characters".into())
        );
        assert_eq!(
            check_input(&json!({"command": "ls", "timeout_secs": 900}), &schema),
            Err("`timeout_secs` must be at most 600".into())
        );
        let any = json!({"anyOf": [{"type": "object", "properties": {"op": {"const": "read"}}, "required": ["op"]}]});
        assert_eq!(check_input(&json!({"op": "write"}), &any), Err("`op` must be \"read\"".into()));
    }

    #[test]
    fn results_in_claude_codes_shape() {
        let cwd = Path::new("/w");
        assert_eq!(
            tool_response("bash", &json!({"command": "echo hi"}), "hi\n[exit 0]", cwd),
            json!({"stdout": "hi", "stderr": "", "interrupted": false, "isImage": false})
        );
        let write = tool_response(
            "write",
            &json!({"path": "n.txt", "content": "c"}),
            "created n.txt (1 lines, 1 bytes)",
            cwd,
        );
        assert_eq!(write, json!({"type": "create", "filePath": "/w/n.txt", "content": "c"}));
        assert_eq!(
            tool_response("glob", &json!({"pattern": "*.rs"}), "a.rs\nb.rs", cwd)["numFiles"],
            2
        );
    }
}
