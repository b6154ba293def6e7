//! The input schemas of the runtime's own tools (`plan`, `context`, `agent`, `skill`), and
//! the one-line description of any tool's input the system segment shows.
//!
//! Under the `Json` constraint the turn schema is the one thing a small model cannot get
//! wrong, so every argument rule a tool checks statically is in its schema: one branch per
//! operation where the fields differ, required fields required, non-empty strings where an
//! empty one is refused, bounds as `minimum`/`maximum`, and no field the tool ignores. The
//! branches are an `anyOf` (llguidance refuses a `oneOf` it cannot prove exclusive; these are
//! exclusive by their `op` constants anyway).

use serde_json::{Value, json};

/// The schema of a runtime tool's input, or `None` for another name.
pub fn runtime_input_schema(tool: &str) -> Option<Value> {
    Some(match tool {
        "plan" => json!({"anyOf": [
            object(json!({"op": {"const": "read"}}), &["op"]),
            object(json!({"op": {"const": "write"}, "text": text(4000)}), &["op", "text"]),
        ]}),
        "context" => context_schema(),
        // A check is one command or one observable behaviour: 500 characters (a small model
        // otherwise runs on in it past a turn's token limit).
        "agent" => object(
            json!({
                "brief": text(6000),
                "check": text(500),
                "definition": text(80),
                "member": text(80),
            }),
            &["brief", "check"],
        ),
        "skill" => json!({"anyOf": [
            object(json!({"list": {"const": true}}), &["list"]),
            object(json!({"name": text(80), "args": {"type": "string", "maxLength": 2000}}), &["name"]),
        ]}),
        _ => return None,
    })
}

/// Ids one `context` call names at most.
const MAX_IDS: usize = 32;

/// The context tool: `status` takes nothing; `drop`, `pin`, `unpin` at least one id;
/// `summarize` ids and the summary; `note` its text. (This is the tool's own schema, which the
/// tools section describes; a turn's schema narrows the ids to the context's, below.)
fn context_schema() -> Value {
    let ids = json!({
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": 40},
        "minItems": 1,
        "maxItems": MAX_IDS,
    });
    json!({"anyOf": [
        object(json!({"op": {"const": "status"}}), &["op"]),
        object(json!({"op": {"enum": ["drop", "pin", "unpin"]}, "ids": ids}), &["op", "ids"]),
        object(
            json!({"op": {"const": "summarize"}, "ids": ids, "text": text(4000)}),
            &["op", "ids", "text"],
        ),
        object(json!({"op": {"const": "note"}, "text": text(4000)}), &["op", "text"]),
    ]})
}

/// The segment ids a `context` call may name this turn: what the tool accepts (`calls.rs`
/// refuses an id no segment has, and a protected one for `drop` and `summarize`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ContextIds {
    /// Every segment's id: `pin` and `unpin` take any.
    pub all: Vec<String>,
    /// The ids `drop` and `summarize` take: every segment's but the protected ones'
    /// (system, instructions, scratchpad).
    pub droppable: Vec<String>,
}

/// The context tool's input for a turn: `ids` an enum of the segments there are, per op (a
/// small model fills `ids` with whatever it saw last, `parse.rs` or `c99`, and an id that does
/// not exist only earns a refusal). An op with no id to take is left out; `ids` holds at most
/// as many items as there are ids (so a model cannot run on repeating one).
fn context_schema_for(ids: &ContextIds) -> Value {
    let list = |ids: &[String]| {
        json!({
            "type": "array",
            "items": {"enum": ids},
            "minItems": 1,
            "maxItems": ids.len().min(MAX_IDS),
        })
    };
    let mut branches = vec![object(json!({"op": {"const": "status"}}), &["op"])];
    if !ids.droppable.is_empty() {
        let droppable = list(&ids.droppable);
        branches.push(object(json!({"op": {"const": "drop"}, "ids": droppable}), &["op", "ids"]));
        branches.push(object(
            json!({"op": {"const": "summarize"}, "ids": droppable, "text": text(4000)}),
            &["op", "ids", "text"],
        ));
    }
    if !ids.all.is_empty() {
        branches.push(object(
            json!({"op": {"enum": ["pin", "unpin"]}, "ids": list(&ids.all)}),
            &["op", "ids"],
        ));
    }
    branches.push(object(json!({"op": {"const": "note"}, "text": text(4000)}), &["op", "text"]));
    json!({"anyOf": branches})
}

/// Narrows the `context` call of a turn schema to the segment ids there are (rebuilt each
/// turn: the ids change with every turn and result).
pub fn restrict_context_call(turn_schema: &mut Value, ids: &ContextIds) {
    let Some(calls) = calls_of(turn_schema) else { return };
    for call in calls {
        if call["properties"]["tool"]["const"] == "context" {
            call["properties"]["input"] = context_schema_for(ids);
        }
    }
}

/// Narrows the `agent` call of a turn schema to what exists: `definition` an enum of the
/// loaded definitions (left out when there are none), `member` an enum of the pool's members
/// (left out with one or none: the caller's serves). A small model fills every field it is
/// offered, and a name that does not exist only earns a refusal. With test commands known,
/// `check` is one of them or prose (the commands first: a small model otherwise copies the
/// request into it, and only a command's exit status can decide without a model).
pub fn restrict_agent_call(
    turn_schema: &mut Value,
    definitions: &[String],
    members: &[String],
    checks: &[String],
) {
    let Some(calls) = calls_of(turn_schema) else { return };
    for call in calls {
        if call["properties"]["tool"]["const"] != "agent" {
            continue;
        }
        let Some(props) = call["properties"]["input"]["properties"].as_object_mut() else {
            continue;
        };
        if !checks.is_empty() {
            props.insert("check".to_owned(), json!({"anyOf": [{"enum": checks}, text(500)]}));
        }
        for (field, names) in [("definition", definitions), ("member", members)] {
            let least = if field == "member" { 2 } else { 1 };
            if names.len() < least {
                props.remove(field);
            } else {
                props.insert(field.to_owned(), json!({"enum": names}));
            }
        }
    }
}

/// The call shapes of a turn schema (none in a final-only one).
fn calls_of(turn_schema: &mut Value) -> Option<&mut Vec<Value>> {
    turn_schema.pointer_mut("/oneOf/0/properties/calls/items/oneOf")?.as_array_mut()
}

/// Narrows the `skill` call of a turn schema to the skills the model may load: `name` an enum
/// of them (with none the tool is not offered, so there is nothing to narrow).
pub fn restrict_skill_call(turn_schema: &mut Value, names: &[String]) {
    if names.is_empty() {
        return;
    }
    let Some(calls) = calls_of(turn_schema) else { return };
    for call in calls {
        if call["properties"]["tool"]["const"] != "skill" {
            continue;
        }
        for branch in call["properties"]["input"]["anyOf"].as_array_mut().into_iter().flatten() {
            if let Some(props) = branch["properties"].as_object_mut()
                && props.contains_key("name")
            {
                props.insert("name".to_owned(), json!({"enum": names}));
            }
        }
    }
}

/// A string that must say something (an empty one is refused by the tool).
fn text(max: u32) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max})
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// `{path, offset?, limit?}` for an object; its branches joined by ` or ` for an `anyOf`, a
/// constant or closed set shown as its values (`{op: "drop"|"pin"|"unpin", ids}`).
pub fn describe(schema: &Value) -> String {
    if let Some(branches) = schema["anyOf"].as_array() {
        return branches.iter().map(describe).collect::<Vec<_>>().join(" or ");
    }
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = schema["properties"]
        .as_object()
        .map(|p| {
            p.iter()
                .map(|(k, v)| {
                    let values = match (&v["const"], v["enum"].as_array()) {
                        (c, _) if !c.is_null() => Some(c.to_string()),
                        (_, Some(e)) => {
                            Some(e.iter().map(Value::to_string).collect::<Vec<_>>().join("|"))
                        }
                        _ => None,
                    };
                    let optional = if required.contains(&k.as_str()) { "" } else { "?" };
                    match values {
                        Some(values) => format!("{k}{optional}: {values}"),
                        None => format!("{k}{optional}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    format!("{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests;
