//! The turn contract: the tool registry (`tools.rs`: every tool once, with all aerix knows of
//! it), its JSON schema (the runtime tools' input schemas in `schemas.rs`), the system
//! segment's `# Tools` and `# Turns` sections that tell the model about it (rendered here, so
//! no prompt text can change the contract), and the parse rules. Pure: no pool, no files.

pub mod prompts;
pub mod repeats;
pub mod schemas;
pub mod tools;

use std::collections::HashMap;

use crate::prompts::Prompts;
use serde_json::{Value, json};

use crate::schemas::ContextIds;

/// A `thought` is cut to this many characters.
pub const THOUGHT_CHARS: usize = 600;
/// Calls kept per turn; the rest are dropped with a note.
pub const MAX_CALLS: usize = 8;
/// Re-asks for a turn that did not parse or was cut by the token limit.
pub const TURN_RETRIES: u32 = 2;

pub use tools::{ALL_TOOLS, TOOLS, Tool, tool_named};

/// Names every call of which is refused.
pub const RESERVED_TOOLS: [&str; 2] = ["web_fetch", "web_search"];

/// The only tools a verifier may call: it looks and runs, it never changes a file.
pub const VERIFIER_TOOLS: [&str; 5] = ["read", "bash", "grep", "glob", "repo_map"];

/// What an agent's `final` holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Answer {
    /// Text for its caller (the root's answer, an implementer's summary).
    #[default]
    Text,
    /// A verifier's `{"verdict": "pass"|"fail", "reason": "..."}`.
    Verdict,
}

/// The input schema of any tool of the set.
pub fn input_schema(tool: &str) -> Option<Value> {
    tool_named(tool).map(Tool::input_schema)
}

/// The JSON schema of a turn whose calls may name `tools`.
pub fn schema(tools: &[String]) -> Value {
    schema_for(tools, Answer::Text)
}

/// The JSON schema of a turn whose calls may name `tools` and whose `final` is `answer`; with
/// no tools, a turn that can only be a final.
pub fn schema_for(tools: &[String], answer: Answer) -> Value {
    schema_with(tools, answer, &|_| None)
}

/// `schema_for`, a tool not of the set taking its input schema from `external` (an MCP
/// server's tool; none: not offered).
pub fn schema_with(
    tools: &[String],
    answer: Answer,
    external: &dyn Fn(&str) -> Option<Value>,
) -> Value {
    let thought = json!({"type": "string", "maxLength": THOUGHT_CHARS});
    let last = json!({
        "type": "object",
        "properties": {"thought": thought, "final": final_schema(answer)},
        "required": ["thought", "final"],
        "additionalProperties": false,
    });
    let calls: Vec<Value> = tools
        .iter()
        .filter_map(|tool| {
            let input = input_schema(tool).or_else(|| external(tool))?;
            Some(json!({
                "type": "object",
                "properties": {"tool": {"const": tool}, "input": input},
                "required": ["tool", "input"],
                "additionalProperties": false,
            }))
        })
        .collect();
    if calls.is_empty() {
        return last;
    }
    json!({"oneOf": [
        {
            "type": "object",
            "properties": {
                "thought": thought,
                "calls": {"type": "array", "items": {"oneOf": calls}, "minItems": 1, "maxItems": MAX_CALLS},
            },
            "required": ["thought", "calls"],
            "additionalProperties": false,
        },
        last,
    ]})
}

/// Turn schemas as a runtime reuses them: the schema before the context's ids is built once per
/// tool set and kind of final; the ids change with nearly every turn (its own segment, its
/// results), so the text is rebuilt then, and reused while they stay the same.
#[derive(Clone, Debug, Default)]
pub struct SchemaCache {
    schemas: HashMap<(Vec<String>, Answer), Value>,
    /// The last text, for the next turn whose tools and ids are the same.
    last: Option<(TextKey, String)>,
}

/// What a schema's text depends on: the tools, the final, the context's ids.
type TextKey = (Vec<String>, Answer, ContextIds);

impl SchemaCache {
    /// The turn schema's text for `tools`, `answer` and the context's `ids` (which only a
    /// `context` call names); `external` gives the schema of a tool not of the set (an MCP
    /// tool's); `restrict` narrows a new schema to the names there are.
    pub fn text(
        &mut self,
        tools: &[String],
        answer: Answer,
        ids: ContextIds,
        external: &dyn Fn(&str) -> Option<Value>,
        restrict: impl FnOnce(&mut Value),
    ) -> String {
        let context = tools.iter().any(|t| t == "context");
        let key = (tools.to_vec(), answer, if context { ids } else { Default::default() });
        if let Some((last, text)) = &self.last
            && *last == key
        {
            return text.clone();
        }
        let mut schema = self
            .schemas
            .entry((tools.to_vec(), answer))
            .or_insert_with(|| {
                let mut schema = schema_with(tools, answer, external);
                restrict(&mut schema);
                schema
            })
            .clone();
        if context {
            schemas::restrict_context_call(&mut schema, &key.2);
        }
        let text = schema.to_string();
        self.last = Some((key, text.clone()));
        text
    }
}

fn final_schema(answer: Answer) -> Value {
    match answer {
        Answer::Text => json!({"type": "string"}),
        // The reason first, then the verdict: under the constraint the model writes what it
        // ran and saw before it concludes (the same object as `{"verdict", "reason"}`).
        Answer::Verdict => json!({
            "type": "object",
            "properties": {"reason": {"type": "string"}, "verdict": {"enum": ["pass", "fail"]}},
            "required": ["reason", "verdict"],
            "additionalProperties": false,
        }),
    }
}

/// One line per tool: its description and its input's fields (`?` for optional ones); no
/// `skill` with `no_skills`.
pub fn tools_section(prompts: &Prompts, no_skills: bool) -> String {
    let mut out = String::from("# Tools\n");
    for tool in ALL_TOOLS.iter().filter(|t| !(no_skills && **t == "skill")) {
        let fields = input_schema(tool).map(|s| crate::schemas::describe(&s)).unwrap_or_default();
        out.push_str(&format!(
            "\n{}\ninput: {fields}\n",
            prompts.get(&format!("tools/{tool}.md")).trim()
        ));
    }
    out
}

/// The system segment: `system.md`, every tool, the skills' listing, and the turn contract
/// (code-rendered, last). Without a listing there is no `skill` tool to describe.
pub fn system_segment(prompts: &Prompts, skills: Option<&str>) -> String {
    system_segment_with(prompts, skills, None)
}

/// The system segment with the external (MCP) tools' section after the skills.
pub fn system_segment_with(
    prompts: &Prompts,
    skills: Option<&str>,
    external: Option<&str>,
) -> String {
    let no_skills = skills.is_none();
    let skills = skills.map(|s| format!("{}\n\n", s.trim())).unwrap_or_default();
    let external = external.map(|s| format!("{}\n\n", s.trim())).unwrap_or_default();
    format!(
        "{}\n\n{}\n{skills}{external}{}",
        prompts.get("system.md").trim(),
        tools_section(prompts, no_skills),
        turns_section()
    )
}

/// The `# Turns` section: the shape of every answer, and an example.
pub fn turns_section() -> String {
    format!(
        r#"# Turns

Answer every turn with exactly one JSON object, nothing before or after it. Either call tools:

{{"thought": "<what you know and what you do next>", "calls": [{{"tool": "<tool>", "input": {{...}}}}]}}

or end the request:

{{"thought": "<what you found>", "final": "<your answer to the user>"}}

- `thought` is at most {THOUGHT_CHARS} characters.
- `calls` run in order, at most {MAX_CALLS} a turn. Each result comes back as a user message headed `[<tool> <id>]` (ids c1, c2, ...); an error is a result too.
- `final` ends your work on the request: say what you did and how you checked it.

Example of a first turn, before anything is known:

{{"thought": "I have not seen the code yet: list the files, and find where the task's name is.", "calls": [{{"tool": "glob", "input": {{"pattern": "**/*"}}}}, {{"tool": "grep", "input": {{"pattern": "<a name the task mentions>"}}}}]}}
"#
    )
}

/// A parsed turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    pub thought: String,
    pub body: Body,
    /// What parsing changed (a cut thought, dropped calls), to tell the model.
    pub notes: Vec<String>,
    /// Whether the text had to be normalized (the stored turn is replaced by `to_json`).
    pub changed: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Calls(Vec<Call>),
    Final(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub id: String,
    pub tool: String,
    pub input: Value,
}

impl Turn {
    /// The turn as the context keeps it.
    pub fn to_json(&self) -> String {
        let body = match &self.body {
            Body::Calls(calls) => json!({
                "thought": self.thought,
                "calls": calls.iter().map(|c| json!({"tool": c.tool, "input": c.input})).collect::<Vec<_>>(),
            }),
            Body::Final(text) => json!({"thought": self.thought, "final": text}),
        };
        body.to_string()
    }
}

/// Why a turn could not be read: given back to the model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

const SHAPE: &str = r#"Answer with one JSON object: {"thought": "...", "calls": [{"tool": "...", "input": {...}}]} or {"thought": "...", "final": "..."}."#;

/// Reads a turn. Calls are numbered from `*next_call` (which advances).
pub fn parse(text: &str, next_call: &mut u32) -> Result<Turn, ParseError> {
    parse_as(text, next_call, Answer::Text)
}

/// Reads a turn whose `final` is `answer`. A verdict's final comes back as its JSON text (or
/// the string the member gave: the caller reads the verdict, and no verdict is a `fail`).
pub fn parse_as(text: &str, next_call: &mut u32, answer: Answer) -> Result<Turn, ParseError> {
    let trimmed = strip_fence(text.trim());
    let value: Value = serde_json::from_str(trimmed)
        .map_err(|e| ParseError(format!("Your turn is not valid JSON ({e}). {SHAPE}")))?;
    let Value::Object(object) = value else {
        return Err(ParseError(format!("Your turn is JSON but not an object. {SHAPE}")));
    };
    let mut changed = trimmed.len() != text.len();
    let mut notes = Vec::new();
    let mut thought = match object.get("thought") {
        Some(Value::String(s)) => s.clone(),
        None => {
            changed = true;
            String::new()
        }
        Some(_) => return Err(ParseError(format!("`thought` must be a string. {SHAPE}"))),
    };
    if let Some((cut, _)) = thought.char_indices().nth(THOUGHT_CHARS) {
        thought.truncate(cut);
        changed = true;
        notes.push(format!("Your thought was cut to {THOUGHT_CHARS} characters."));
    }
    if let Some(key) = object.keys().find(|k| !["thought", "calls", "final"].contains(&k.as_str()))
    {
        return Err(ParseError(format!("Unknown key `{key}` in your turn. {SHAPE}")));
    }
    let body = match (object.get("calls"), object.get("final")) {
        (Some(_), Some(_)) => {
            return Err(ParseError(format!("A turn has `calls` or `final`, not both. {SHAPE}")));
        }
        (None, None) => {
            return Err(ParseError(format!("Your turn has neither `calls` nor `final`. {SHAPE}")));
        }
        (None, Some(Value::String(text))) => Body::Final(text.clone()),
        (None, Some(verdict @ Value::Object(_))) if answer == Answer::Verdict => {
            Body::Final(verdict.to_string())
        }
        (None, Some(_)) => return Err(ParseError(format!("`final` must be a string. {SHAPE}"))),
        (Some(Value::Array(calls)), None) => {
            if calls.is_empty() {
                return Err(ParseError(format!(
                    "`calls` is empty: call a tool or give `final`. {SHAPE}"
                )));
            }
            let mut parsed = Vec::new();
            for (i, call) in calls.iter().enumerate() {
                let tool = call.get("tool").and_then(Value::as_str).ok_or_else(|| {
                    ParseError(format!("Call {} has no `tool` name. {SHAPE}", i + 1))
                })?;
                let input = call.get("input").cloned().unwrap_or(Value::Object(Default::default()));
                if !input.is_object() {
                    return Err(ParseError(format!(
                        "The `input` of call {} ({tool}) must be an object.",
                        i + 1
                    )));
                }
                parsed.push((tool.to_owned(), input));
            }
            if parsed.len() > MAX_CALLS {
                let dropped: Vec<String> =
                    parsed.drain(MAX_CALLS..).map(|(tool, _)| tool).collect();
                changed = true;
                notes.push(format!(
                    "Only {MAX_CALLS} calls run per turn: {} more were dropped ({}). Call them again next turn if you still need them.",
                    dropped.len(),
                    dropped.join(", ")
                ));
            }
            Body::Calls(
                parsed
                    .into_iter()
                    .map(|(tool, input)| {
                        *next_call += 1;
                        Call { id: format!("c{next_call}"), tool, input }
                    })
                    .collect(),
            )
        }
        (Some(_), None) => return Err(ParseError(format!("`calls` must be a list. {SHAPE}"))),
    };
    Ok(Turn { thought, body, notes, changed })
}

/// A model without the constraint may wrap its JSON in a markdown fence.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<Turn, ParseError> {
        let mut next = 0;
        parse(text, &mut next)
    }

    #[test]
    fn a_long_thought_is_cut_and_ten_calls_become_eight() {
        let calls: Vec<String> =
            (0..10).map(|i| format!(r#"{{"tool":"read","input":{{"path":"f{i}"}}}}"#)).collect();
        let text = format!(r#"{{"thought":"{}","calls":[{}]}}"#, "é".repeat(700), calls.join(","));
        let mut next = 4;
        let turn = parse(&text, &mut next).unwrap();
        assert_eq!(turn.thought.chars().count(), 600);
        let Body::Calls(calls) = &turn.body else { panic!() };
        assert_eq!(calls.len(), 8);
        assert_eq!((calls[0].id.as_str(), calls[7].id.as_str()), ("c5", "c12"));
        assert_eq!(next, 12);
        assert!(turn.changed);
        assert_eq!(turn.notes.len(), 2);
        assert!(turn.notes[1].contains("2 more were dropped"), "{:?}", turn.notes);
    }

    #[test]
    fn shapes_that_are_refused_say_why() {
        let cases = [
            ("not json", "not valid JSON"),
            ("[1]", "not an object"),
            (r#"{"thought":"t"}"#, "neither"),
            (r#"{"thought":"t","final":"a","calls":[]}"#, "not both"),
            (r#"{"thought":"t","calls":[]}"#, "empty"),
            (r#"{"thought":"t","calls":[{"input":{}}]}"#, "no `tool`"),
            (r#"{"thought":"t","final":"x","extra":1}"#, "Unknown key `extra`"),
        ];
        for (text, expected) in cases {
            let error = check(text).unwrap_err().0;
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn a_fenced_turn_reads() {
        let turn = check("```json\n{\"thought\":\"t\",\"final\":\"done\"}\n```").unwrap();
        assert_eq!(turn.body, Body::Final("done".into()));
        assert!(turn.changed);
    }

    #[test]
    fn the_schema_holds_one_call_shape_per_allowed_tool() {
        let tools: Vec<String> = ["read", "plan"].map(String::from).to_vec();
        let schema = schema(&tools);
        let items = &schema["oneOf"][0]["properties"]["calls"]["items"]["oneOf"];
        assert_eq!(items.as_array().unwrap().len(), 2);
        assert_eq!(items[1]["properties"]["tool"]["const"], "plan");
        for tool in ALL_TOOLS {
            assert!(input_schema(tool).is_some(), "{tool}");
        }
    }
}
