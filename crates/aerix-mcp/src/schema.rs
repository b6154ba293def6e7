//! Whether an MCP tool's input schema can join the turn schema: the pool compiles it with
//! llguidance, which refuses keywords it does not implement (`docs/protocol.md`, "JSON
//! schemas"), and a refused turn schema would fail every turn. So a tool whose schema holds one
//! is left out, with the reason; annotations are dropped (they constrain nothing).

use serde_json::{Map, Value};

/// Keywords llguidance implements (`$ref` left out: the schema is nested in the turn schema,
/// so a `#/...` pointer would name the wrong document; `oneOf` left out: refused unless its
/// branches are provably exclusive).
const KEYWORDS: [&str; 25] = [
    "anyOf",
    "allOf",
    "const",
    "enum",
    "type",
    "items",
    "additionalItems",
    "prefixItems",
    "minItems",
    "maxItems",
    "properties",
    "additionalProperties",
    "patternProperties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];
/// Annotations: dropped.
const ANNOTATIONS: [&str; 11] = [
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];
const FORMATS: [&str; 11] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
    "uri",
    "unknown",
];
/// Formats schema generators put on numbers (schemars' `uint` for a `usize`): JSON Schema
/// applies formats to strings only, so on a number they are annotations, dropped.
const NUMBER_FORMATS: [&str; 12] = [
    "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64",
    "float", "double",
];
/// Nesting a schema may have.
const MAX_DEPTH: usize = 16;

/// The schema as the turn schema holds it, or why it cannot be.
pub fn fit(schema: &Map<String, Value>) -> Result<Value, String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("its input schema is not `\"type\": \"object\"`".to_owned());
    }
    clean(&Value::Object(schema.clone()), 0)
}

fn clean(schema: &Value, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("its input schema nests deeper than {MAX_DEPTH}"));
    }
    let Some(object) = schema.as_object() else {
        return match schema {
            Value::Bool(_) => Ok(schema.clone()),
            _ => Err(format!("a schema is {schema}, not an object")),
        };
    };
    let mut out = Map::new();
    for (key, value) in object {
        if ANNOTATIONS.contains(&key.as_str()) {
            continue;
        }
        if key == "format" && value.as_str().is_some_and(|f| NUMBER_FORMATS.contains(&f)) {
            continue;
        }
        if !KEYWORDS.contains(&key.as_str()) {
            return Err(format!(
                "its input schema uses `{key}`, which the constraint does not take"
            ));
        }
        let value = match key.as_str() {
            "properties" | "patternProperties" => {
                let Some(props) = value.as_object() else {
                    return Err(format!("`{key}` is not an object"));
                };
                let mut cleaned = Map::new();
                for (name, sub) in props {
                    cleaned.insert(name.clone(), clean(sub, depth + 1)?);
                }
                Value::Object(cleaned)
            }
            "anyOf" | "allOf" | "prefixItems" => match value.as_array() {
                Some(list) => Value::Array(
                    list.iter().map(|s| clean(s, depth + 1)).collect::<Result<_, _>>()?,
                ),
                None => return Err(format!("`{key}` is not a list")),
            },
            "items" | "additionalItems" | "additionalProperties" => clean(value, depth + 1)?,
            "format" => match value.as_str() {
                Some(f) if FORMATS.contains(&f) => value.clone(),
                _ => {
                    return Err(format!(
                        "its input schema has format {value}, which the constraint does not take"
                    ));
                }
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fit_value(v: Value) -> Result<Value, String> {
        fit(v.as_object().unwrap())
    }

    #[test]
    fn annotations_go_and_constraints_stay() {
        let s = json!({"type": "object", "$schema": "x", "properties": {
            "q": {"type": "string", "description": "the query", "maxLength": 10},
            "n": {"type": "integer", "format": "uint", "minimum": 1, "default": 3},
        }, "required": ["q"]});
        let got = fit_value(s).unwrap();
        assert_eq!(
            got,
            json!({"type": "object", "properties": {
            "q": {"type": "string", "maxLength": 10}, "n": {"type": "integer", "minimum": 1},
        }, "required": ["q"]})
        );
    }

    #[test]
    fn a_keyword_the_constraint_refuses_is_named() {
        let e =
            fit_value(json!({"type": "object", "properties": {"a": {"not": {"type": "null"}}}}));
        assert!(e.unwrap_err().contains("`not`"));
        let e = fit_value(json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}}));
        assert!(e.unwrap_err().contains("`$ref`"));
        let e = fit_value(
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}),
        );
        assert!(e.unwrap_err().contains("regex"));
        assert!(fit_value(json!({"type": "array"})).is_err());
    }
}
