//! Tool arguments read strictly: every key must be one the tool's schema names, with the type it
//! gives, and a refusal is a sentence naming the key.
//!
//! rmcp's `Parameters` would hand serde's error to the client as a protocol error ("failed to
//! deserialize parameters: ..."), which a model cannot act on; MCP asks for input validation
//! failures to be tool errors (SEP-1303). The checks read the same schema `tools/list`
//! advertises, so what is refused and what is documented cannot drift apart.

use std::sync::Arc;

use rmcp::handler::server::common::{schema_for_input, schema_for_type};
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::MemoryError;

/// The input schema of a tool taking `T` (root `object`, properties, `additionalProperties:
/// false` from `deny_unknown_fields`).
pub fn input_schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    // The argument types are flat structs: their root is always an object.
    schema_for_input::<T>().unwrap_or_else(|_| schema_for_type::<T>())
}

/// Reads `tool`'s arguments as `T`, or says what is wrong with them.
pub fn parse<T: JsonSchema + DeserializeOwned + 'static>(
    tool: &str,
    args: JsonObject,
) -> Result<T, MemoryError> {
    check(tool, &input_schema::<T>(), &args).map_err(MemoryError::Invalid)?;
    // The schema checks catch what a caller gets wrong; serde's own message is the fallback.
    serde_json::from_value(Value::Object(args)).map_err(|e| {
        MemoryError::Invalid(format!("{tool}: the arguments are not valid: {}", strip_position(&e)))
    })
}

fn check(tool: &str, schema: &JsonObject, args: &JsonObject) -> Result<(), String> {
    let empty = JsonObject::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let names = || properties.keys().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    if let Some(key) = args.keys().find(|k| !properties.contains_key(*k)) {
        return Err(format!("{tool} has no argument `{key}`: it takes {}", names()));
    }
    let required = schema.get("required").and_then(Value::as_array).into_iter().flatten();
    if let Some(key) = required.filter_map(Value::as_str).find(|k| !args.contains_key(*k)) {
        return Err(format!("{tool} needs the argument `{key}`"));
    }
    for (key, value) in args {
        let Some(want) = properties.get(key).and_then(Value::as_object) else { continue };
        if let Some(problem) = mismatch(want, value) {
            return Err(format!("{tool}: `{key}` must be {problem}"));
        }
    }
    Ok(())
}

/// What `value` should have been, when it does not fit `schema` (types, items, a minimum).
fn mismatch(schema: &JsonObject, value: &Value) -> Option<String> {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let fits = |t: &str| match (t, value) {
        ("null", Value::Null) | ("boolean", Value::Bool(_)) | ("string", Value::String(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        ("number", Value::Number(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        _ => false,
    };
    let Some(&matched) = types.iter().find(|t| fits(t)) else {
        let wanted: Vec<&str> =
            types.iter().filter(|t| **t != "null").map(|t| article(t)).collect();
        return Some(format!("{} (not {})", wanted.join(" or "), article(kind(value))));
    };
    if matched == "integer"
        && let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && value.as_f64().is_some_and(|v| v < min)
    {
        return Some(format!("at least {min}"));
    }
    if let (Value::Array(items), Some(item)) =
        (value, schema.get("items").and_then(Value::as_object))
        && let Some(problem) = items.iter().find_map(|v| mismatch(item, v))
    {
        return Some(format!("a list whose items are each {problem}"));
    }
    None
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn article(json_type: &str) -> &'static str {
    match json_type {
        "null" => "null",
        "boolean" => "true or false",
        "integer" => "a whole number",
        "number" => "a number",
        "string" => "a string",
        "array" => "a list",
        "object" => "an object",
        _ => "another type",
    }
}

/// serde_json's message without its " at line 1 column 7", which means nothing to the caller.
pub(crate) fn strip_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) if text[i..].contains(" column ") => text[..i].to_owned(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{PageRef, Query, WritePage};

    fn refusal<T: JsonSchema + DeserializeOwned + 'static>(args: Value) -> String {
        let Value::Object(args) = args else { panic!("an object") };
        match parse::<T>("tool", args) {
            Ok(_) => "accepted".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unknown_missing_and_mistyped_arguments_are_named() {
        let cases = [
            (
                refusal::<WritePage>(
                    serde_json::json!({ "scop": "global", "path": "a.md", "body": "x" }),
                ),
                "tool has no argument `scop`: it takes `scope`, `path`, `body`, `applies_to`, `enforced_by`, `workspace`, `project`, `restricted`",
            ),
            (
                refusal::<WritePage>(serde_json::json!({ "path": "a.md" })),
                "tool needs the argument `body`",
            ),
            (
                refusal::<WritePage>(
                    serde_json::json!({ "path": "a.md", "body": "x", "restricted": "yes" }),
                ),
                "tool: `restricted` must be true or false (not a string)",
            ),
            (
                refusal::<WritePage>(
                    serde_json::json!({ "path": "a.md", "body": "x", "applies_to": ["rust", 3] }),
                ),
                "tool: `applies_to` must be a list whose items are each a string (not a whole number)",
            ),
            (
                refusal::<Query>(serde_json::json!({ "query": "q", "limit": -1 })),
                "tool: `limit` must be at least 0",
            ),
            (
                refusal::<Query>(serde_json::json!({ "query": "q", "limit": 2.5 })),
                "tool: `limit` must be a whole number (not a number)",
            ),
            (
                refusal::<PageRef>(serde_json::json!({ "path": 7 })),
                "tool: `path` must be a string (not a whole number)",
            ),
            (refusal::<PageRef>(serde_json::json!({ "path": "a.md", "scope": null })), "accepted"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn the_advertised_schema_refuses_other_keys_too() {
        for schema in
            [input_schema::<WritePage>(), input_schema::<PageRef>(), input_schema::<Query>()]
        {
            assert_eq!(schema.get("additionalProperties"), Some(&Value::Bool(false)), "{schema:?}");
        }
    }
}
