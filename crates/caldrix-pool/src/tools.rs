//! A context's tools: checked when the context is made, rendered through the chat template
//! (the template's own `tools` variable when it reads one, else the form written below), and
//! the grammar a `tools` generation runs under, whose every completion is a plain answer or
//! calls in the protocol's text form (`caldrix_proto::tools`) with arguments valid against
//! their schemas.

use caldrix_engine::{Message, MessageToolCall, Model};
use caldrix_proto::{
    CALL_CLOSE, CALL_OPEN, CALL_SEPARATOR, ErrorKind, MAX_TOOLS, Role, Segment, Tool, ToolChoice,
    parse_tool_calls, valid_tool_name,
};
use serde_json::{Value, json};

use crate::PoolError;

/// The longest description of one tool, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 16 << 10;

/// A context's tools, checked: each with its schema parsed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tools {
    tools: Vec<(Tool, Value)>,
    /// The tools as chat templates read them.
    template: Vec<Value>,
}

fn bad(message: String) -> PoolError {
    PoolError::new(ErrorKind::BadRequest, message)
}

impl Tools {
    /// Checks `tools`: at most `MAX_TOOLS`, names valid and distinct, descriptions bounded,
    /// each schema a JSON object within the schema bound that the model's constraint compiles
    /// (a refusal names the tool).
    pub(crate) fn check(tools: Vec<Tool>, model: Option<&Model>) -> Result<Tools, PoolError> {
        if tools.len() > MAX_TOOLS {
            return Err(bad(format!(
                "{} tools offered, more than the limit of {MAX_TOOLS}",
                tools.len()
            )));
        }
        let mut checked: Vec<(Tool, Value)> = Vec::with_capacity(tools.len());
        for tool in tools {
            if !valid_tool_name(&tool.name) {
                return Err(bad(format!(
                    "the tool name {:?} is not 1 to 64 letters, digits, `_` or `-`",
                    tool.name.chars().take(64).collect::<String>()
                )));
            }
            if checked.iter().any(|(t, _)| t.name == tool.name) {
                return Err(bad(format!("the tool `{}` is offered twice", tool.name)));
            }
            if tool.description.len() > MAX_DESCRIPTION_BYTES {
                return Err(bad(format!(
                    "the description of tool `{}` is {} bytes, more than the limit of \
                     {MAX_DESCRIPTION_BYTES}",
                    tool.name,
                    tool.description.len()
                )));
            }
            let schema = parameters(&tool)?;
            if let Some(model) = model {
                caldrix_engine::check_schema(model, &call_schema(&tool.name, &schema)).map_err(
                    |e| {
                        PoolError::new(
                            ErrorKind::BadConstraint,
                            format!(
                                "the schema of tool `{}` cannot be a constraint: {e}",
                                tool.name
                            ),
                        )
                    },
                )?;
            }
            checked.push((tool, schema));
        }
        let template = checked.iter().map(|(tool, schema)| template_tool(tool, schema)).collect();
        Ok(Tools { tools: checked, template })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools as chat templates read them.
    pub(crate) fn for_template(&self) -> &[Value] {
        &self.template
    }

    /// The messages the template renders. `native`: the template reads `tools` itself, so an
    /// assistant's calls go to it as `tool_calls` and results as `tool` messages. Otherwise the
    /// tools are described in the system message (the first one, or a new one first), calls
    /// stay in their text form, and each result is a user message wrapped in
    /// `<tool_response>` tags.
    pub(crate) fn messages(&self, segments: &[Segment], native: bool) -> Vec<Message> {
        let mut messages: Vec<Message> = Vec::with_capacity(segments.len() + 1);
        for s in segments {
            let message = match s.role {
                Role::Assistant if native => match parse_tool_calls(&s.text) {
                    Some(calls) => Message {
                        role: "assistant".into(),
                        content: String::new(),
                        tool_calls: calls
                            .into_iter()
                            .map(|c| MessageToolCall {
                                arguments: serde_json::from_str(&c.arguments)
                                    .unwrap_or(Value::Null),
                                name: c.name,
                            })
                            .collect(),
                    },
                    None => Message::new("assistant", s.text.as_str()),
                },
                Role::Tool if !native => {
                    Message::new("user", format!("<tool_response>\n{}\n</tool_response>", s.text))
                }
                role => Message::new(role.as_str(), s.text.as_str()),
            };
            messages.push(message);
        }
        if !native && !self.is_empty() {
            let block = self.described();
            match messages.first_mut() {
                Some(first) if first.role == "system" => {
                    first.content.push_str("\n\n");
                    first.content.push_str(&block);
                }
                _ => messages.insert(0, Message::new("system", block)),
            }
        }
        messages
    }

    /// The tools and the call form, for a template that does not render tools itself (the
    /// wording of Hermes-style templates, which small models have most often seen).
    fn described(&self) -> String {
        let mut out = String::from(
            "# Tools\n\nYou may call one or more of these tools. Their signatures are inside \
             <tools></tools>:\n<tools>\n",
        );
        for (tool, schema) in &self.tools {
            let line = json!({
                "name": tool.name,
                "description": tool.description,
                "parameters": schema,
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
        out.push_str(
            "</tools>\n\nTo call tools, reply with nothing but the calls, each a JSON object \
             inside <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <tool name>, \
             \"arguments\": <its arguments as a JSON object>}\n</tool_call>",
        );
        out
    }

    /// The llguidance grammar of a reply under `choice`: a plain answer (any text that does
    /// not open with a call), and/or calls (one, or several one per line when `parallel`),
    /// each `{"name": ..., "arguments": ...}` valid against its tool's schema.
    pub(crate) fn grammar(&self, choice: &ToolChoice, parallel: bool) -> Result<String, PoolError> {
        let offered: Vec<&(Tool, Value)> = match choice {
            ToolChoice::Named { name } => {
                let named: Vec<_> = self.tools.iter().filter(|(t, _)| &t.name == name).collect();
                if named.is_empty() {
                    return Err(PoolError::new(
                        ErrorKind::BadConstraint,
                        format!("tool_choice names `{}`, which the context does not offer", name),
                    ));
                }
                named
            }
            ToolChoice::None {} => Vec::new(),
            _ => self.tools.iter().collect(),
        };
        if offered.is_empty() && matches!(choice, ToolChoice::Required {}) {
            return Err(PoolError::new(
                ErrorKind::BadConstraint,
                "tool_choice requires a call, but the context offers no tools",
            ));
        }
        let mut g = String::from("%llguidance {}\n");
        let answer =
            matches!(choice, ToolChoice::Auto {} | ToolChoice::None {}) || offered.is_empty();
        let calls = !offered.is_empty() && !matches!(choice, ToolChoice::None {});
        g.push_str(match (answer, calls) {
            (true, true) => "start: TEXT | calls\n",
            (true, false) => "start: TEXT\n",
            _ => "start: calls\n",
        });
        // Whitespace, then anything but a call's opening tag: a reply that opens a call is a
        // call and nothing else.
        g.push_str("TEXT: /(?s:.*)/ & ~/(?s:\\s*<tool_call>.*)/\n");
        if calls {
            let open = json!(CALL_OPEN.to_string()).to_string();
            let close = json!(CALL_CLOSE.to_string()).to_string();
            let sep = json!(CALL_SEPARATOR.to_string()).to_string();
            if parallel {
                g.push_str(&format!("calls: call ({sep} call)*\n"));
            } else {
                g.push_str("calls: call\n");
            }
            let names: Vec<String> = (0..offered.len()).map(|i| format!("tool{i}")).collect();
            g.push_str(&format!("call: {open} ({}) {close}\n", names.join(" | ")));
            for (rule, (tool, schema)) in names.iter().zip(&offered) {
                g.push_str(&format!("{rule}: %json {}\n", call_schema(&tool.name, schema)));
            }
        }
        Ok(g)
    }
}

fn template_tool(tool: &Tool, schema: &Value) -> Value {
    json!({
        "type": "function",
        "function": { "name": tool.name, "description": tool.description, "parameters": schema },
    })
}

/// A tool's schema, parsed: a JSON object within the schema bound.
fn parameters(tool: &Tool) -> Result<Value, PoolError> {
    let limit = caldrix_engine::limits::MAX_SCHEMA_BYTES;
    if tool.parameters.len() > limit {
        return Err(PoolError::new(
            ErrorKind::BadConstraint,
            format!(
                "the schema of tool `{}` is {} bytes, more than the limit of {limit}",
                tool.name,
                tool.parameters.len()
            ),
        ));
    }
    match serde_json::from_str::<Value>(&tool.parameters) {
        Ok(schema @ Value::Object(_)) => Ok(schema),
        Ok(other) => Err(PoolError::new(
            ErrorKind::BadConstraint,
            format!("the schema of tool `{}` is not a JSON object: {}", tool.name, type_of(&other)),
        )),
        Err(e) => Err(PoolError::new(
            ErrorKind::BadConstraint,
            format!("the schema of tool `{}` is not JSON: {e}", tool.name),
        )),
    }
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The schema of one call's JSON: the tool's name, then its arguments, nothing else, written
/// compactly (as the turn constraint is: a small model runs away in whitespace otherwise).
fn call_schema(name: &str, arguments: &Value) -> Value {
    // A schema with no `type` takes any value; the call's arguments are an object.
    let mut arguments = arguments.clone();
    bound_integers(&mut arguments);
    if let Value::Object(map) = &mut arguments
        && !map.contains_key("type")
    {
        map.insert("type".into(), json!("object"));
    }
    json!({
        "type": "object",
        "properties": { "name": { "const": name }, "arguments": arguments },
        "required": ["name", "arguments"],
        "additionalProperties": false,
        "x-guidance": { "whitespace_flexible": false },
    })
}

/// JSON's safe integers (±(2^53 − 1)): what every client, JavaScript's included, reads exactly.
const SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Bounds every integer the schema leaves unbounded to the safe range: without a bound the
/// grammar admits any number of digits, and a small model sampled hot writes digits until the
/// tokens run out, so the call never closes (seen on SmolLM2: 2 seeds of 20).
fn bound_integers(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let integer = match map.get("type") {
                Some(Value::String(t)) => t == "integer",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
                _ => false,
            };
            if integer {
                if !map.contains_key("maximum") && !map.contains_key("exclusiveMaximum") {
                    map.insert("maximum".into(), json!(SAFE_INTEGER));
                }
                if !map.contains_key("minimum") && !map.contains_key("exclusiveMinimum") {
                    map.insert("minimum".into(), json!(-SAFE_INTEGER));
                }
            }
            for (key, value) in map.iter_mut() {
                // Values, not schemas: left as written.
                if !matches!(key.as_str(), "const" | "enum" | "default" | "examples") {
                    bound_integers(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(bound_integers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, schema: &str) -> Tool {
        Tool { name: name.into(), description: format!("does {name}"), parameters: schema.into() }
    }

    fn seg(role: Role, text: &str) -> Segment {
        Segment { id: format!("{}", text.len()), role, text: text.into(), pinned: false }
    }

    const READ: &str =
        r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#;

    #[test]
    fn unbounded_integers_get_the_safe_range_and_values_stay_as_written() {
        let mut schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"},
            "m": {"type": ["integer", "null"], "minimum": 1},
            "k": {"type": "integer", "exclusiveMaximum": 10},
            "c": {"const": {"type": "integer"}},
            "items": {"type": "array", "items": {"anyOf": [{"type": "integer"}]}},
        }});
        bound_integers(&mut schema);
        let p = &schema["properties"];
        assert_eq!(p["n"]["maximum"], json!(SAFE_INTEGER));
        assert_eq!(p["n"]["minimum"], json!(-SAFE_INTEGER));
        assert_eq!(p["m"]["minimum"], json!(1));
        assert_eq!(p["m"]["maximum"], json!(SAFE_INTEGER));
        assert!(p["k"].get("maximum").is_none());
        assert_eq!(p["c"]["const"], json!({"type": "integer"}));
        assert_eq!(p["items"]["items"]["anyOf"][0]["maximum"], json!(SAFE_INTEGER));
    }

    #[test]
    fn bad_tools_are_refused_by_name() {
        let named = |tools: Vec<Tool>| Tools::check(tools, None).unwrap_err().message;
        assert!(named(vec![tool("a b", READ)]).contains("\"a b\""));
        assert!(
            named(vec![tool("read", READ), tool("read", READ)]).contains("`read` is offered twice")
        );
        assert!(named(vec![tool("read", "[1]")]).contains("tool `read` is not a JSON object"));
        assert!(named(vec![tool("read", "{")]).contains("tool `read` is not JSON"));
        let many = (0..=MAX_TOOLS).map(|i| tool(&format!("t{i}"), READ)).collect();
        assert!(named(many).contains("more than the limit"));
    }

    #[test]
    fn a_template_without_tools_gets_them_in_the_system_message_and_results_as_user_turns() {
        let tools = Tools::check(vec![tool("read", READ)], None).unwrap();
        let call = r#"<tool_call>
{"name":"read","arguments":{"path":"a"}}
</tool_call>"#;
        let segments = [
            seg(Role::System, "Be brief."),
            seg(Role::User, "read a"),
            seg(Role::Assistant, call),
            seg(Role::Tool, "hello"),
        ];
        let m = tools.messages(&segments, false);
        assert_eq!(m.len(), 4);
        assert!(m[0].content.starts_with("Be brief.\n\n# Tools"), "{}", m[0].content);
        assert!(m[0].content.contains(r#"{"name":"read","description":"does read""#));
        assert_eq!(m[2].content, call);
        assert_eq!(
            (m[3].role.as_str(), m[3].content.as_str()),
            ("user", "<tool_response>\nhello\n</tool_response>")
        );
        // No system segment: one is made first.
        let m = tools.messages(&segments[1..], false);
        assert_eq!(m[0].role, "system");
    }

    #[test]
    fn a_template_with_tools_gets_calls_and_results_as_it_reads_them() {
        let tools = Tools::check(vec![tool("read", READ)], None).unwrap();
        let call = "<tool_call>\n{\"name\":\"read\",\"arguments\":{\"path\":\"a\"}}\n</tool_call>";
        let m = tools.messages(&[seg(Role::Assistant, call), seg(Role::Tool, "hi")], true);
        assert_eq!(m[0].content, "");
        assert_eq!(
            m[0].tool_calls,
            vec![MessageToolCall { name: "read".into(), arguments: json!({"path": "a"}) }]
        );
        assert_eq!((m[1].role.as_str(), m[1].content.as_str()), ("tool", "hi"));
        assert_eq!(tools.for_template()[0]["function"]["name"], "read");
    }

    #[test]
    fn the_grammar_offers_what_the_choice_admits() {
        let tools = Tools::check(vec![tool("read", READ), tool("ls", "{}")], None).unwrap();
        let auto = tools.grammar(&ToolChoice::Auto {}, true).unwrap();
        assert!(auto.contains("start: TEXT | calls"), "{auto}");
        assert!(auto.contains("calls: call (\"\\n\" call)*"), "{auto}");
        assert!(auto.contains("(tool0 | tool1)"), "{auto}");
        let required = tools.grammar(&ToolChoice::Required {}, false).unwrap();
        assert!(required.contains("start: calls\n") && required.contains("calls: call\n"));
        let none = tools.grammar(&ToolChoice::None {}, true).unwrap();
        assert!(none.contains("start: TEXT\n") && !none.contains("tool0"));
        let named = tools.grammar(&ToolChoice::Named { name: "ls".into() }, true).unwrap();
        assert!(named.contains("\"const\":\"ls\"") && !named.contains("\"const\":\"read\""));
        let unknown = tools.grammar(&ToolChoice::Named { name: "rm".into() }, true).unwrap_err();
        assert!(unknown.message.contains("`rm`"));
    }
}
