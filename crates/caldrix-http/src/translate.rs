//! What the three APIs share: a request's pool-facing form (`Spec`), the finished generation
//! (`Outcome`), and the readers of the JSON pieces alike in each (sampling, stop strings, tool
//! definitions, tool choice), each error naming the field.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use caldrix_proto::{
    Constraint, MAX_TOOLS, Role, Sampling, Segment, TokenLogprob, Tool, ToolCall, ToolChoice,
    valid_tool_name,
};
use serde_json::{Map, Value};

use crate::error::ApiError;

/// The most stop strings one request may give, and the longest one in bytes.
pub const MAX_STOPS: usize = 16;
pub const MAX_STOP_BYTES: usize = 1024;

/// A request as the pool will run it.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// As the client wrote it (answered back in `model`).
    pub model: String,
    pub segments: Vec<Segment>,
    pub tools: Vec<Tool>,
    pub constraint: Constraint,
    /// Absent: the rest of the window.
    pub max_tokens: Option<u32>,
    pub sampling: Sampling,
    pub logprobs: Option<u32>,
    pub stop: Vec<String>,
    pub stream: bool,
}

impl Spec {
    /// Whether the reply may be a tool call (its text is held back while it may be one).
    pub fn may_call(&self) -> bool {
        matches!(&self.constraint, Constraint::Tools { choice, .. } if *choice != ToolChoice::None {})
    }
}

/// Why a generation ended, in the front's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// The model ended its turn (or a constraint's value was complete).
    EndTurn,
    /// `max_tokens` or the window.
    Length,
    ToolCalls,
    /// A stop string was met: the text is cut before it.
    Stop(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub prompt: u32,
    pub completion: u32,
    /// Prompt rows that came from the prefix store.
    pub cached: u32,
}

/// A finished generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The answer's text (cut at a stop string; empty when the reply is calls).
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish: Finish,
    pub usage: Usage,
    pub logprobs: Option<Vec<TokenLogprob>>,
}

/// What is known once the context exists, before a token: the stream's headers go out then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub prompt_tokens: u32,
}

/// A fresh id: `prefix` and 24 hex digits (the clock at start and a counter; unique for the
/// process, which is all a response id needs).
pub fn new_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let start = start_nanos();
    format!("{prefix}{:08x}{:016x}", (start >> 16) as u32, splitmix(start ^ n))
}

/// Seconds since the epoch (`created`).
pub fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn start_nanos() -> u64 {
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *START.get_or_init(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
    })
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A seed for a request that gives none: a different one each time, as the APIs behave.
fn fresh_seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64);
    splitmix(now.unwrap_or(0) ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(32))
}

/// The body as a JSON object.
pub fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad("the body must be a JSON object")),
        Err(e) => Err(ApiError::bad(format!("the body is not JSON: {e}"))),
    }
}

/// Typed reads of a JSON object's fields, each error naming the field's path. `null` reads as
/// absent.
#[derive(Debug, Clone, Copy)]
pub struct Obj<'a> {
    pub map: &'a Map<String, Value>,
    pub path: &'a str,
}

impl<'a> Obj<'a> {
    pub fn new(map: &'a Map<String, Value>, path: &'a str) -> Obj<'a> {
        Obj { map, path }
    }

    pub fn name(&self, key: &str) -> String {
        if self.path.is_empty() { key.to_owned() } else { format!("{}.{key}", self.path) }
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn wrong(&self, key: &str, what: &str) -> ApiError {
        ApiError::field(self.name(key), format!("`{}` must be {what}", self.name(key)))
    }

    pub fn str(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.wrong(key, "a string")),
        }
    }

    pub fn required_str(&self, key: &str) -> Result<&'a str, ApiError> {
        self.str(key)?.ok_or_else(|| self.missing(key))
    }

    pub fn missing(&self, key: &str) -> ApiError {
        ApiError::field(self.name(key), format!("`{}` is required", self.name(key)))
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.wrong(key, "true or false")),
        }
    }

    pub fn f64(&self, key: &str) -> Result<Option<f64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| self.wrong(key, "a number")),
        }
    }

    pub fn u32(&self, key: &str) -> Result<Option<u32>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a whole number from 0 to 4294967295")),
        }
    }

    pub fn u64(&self, key: &str) -> Result<Option<u64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            // OpenAI's seed may be negative: its bits are the seed.
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_i64().map(|i| i as u64))
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a whole number")),
        }
    }

    pub fn array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(_) => Err(self.wrong(key, "an array")),
        }
    }

    pub fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(_) => Err(self.wrong(key, "an object")),
        }
    }
}

/// An array element as an object, or a 400 naming it.
pub fn element<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ApiError> {
    v.as_object().ok_or_else(|| ApiError::field(path, format!("`{path}` must be an object")))
}

/// Sampling from `temperature` (absent: 1.0, the APIs' default; 0: greedy, as the pool takes
/// it), `top_p` (absent: 1.0) and `seed` (absent: a fresh one per request).
pub fn sampling(o: &Obj, max_temperature: f64) -> Result<Sampling, ApiError> {
    let temperature = o.f64("temperature")?.unwrap_or(1.0);
    if !(0.0..=max_temperature).contains(&temperature) {
        return Err(ApiError::field(
            "temperature",
            format!("`temperature` must be from 0 to {max_temperature}, not {temperature}"),
        ));
    }
    let top_p = o.f64("top_p")?.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::field(
            "top_p",
            format!("`top_p` must be above 0 and at most 1, not {top_p}"),
        ));
    }
    let seed = match o.u64("seed")? {
        Some(s) => s,
        None => fresh_seed(),
    };
    Ok(Sampling { temperature: temperature as f32, top_p: top_p as f32, seed })
}

/// Stop strings: `key` as one string or an array of them.
pub fn stops(o: &Obj, key: &str) -> Result<Vec<String>, ApiError> {
    let list: Vec<&Value> = match o.get(key) {
        None => return Ok(Vec::new()),
        Some(v @ Value::String(_)) => vec![v],
        Some(Value::Array(a)) => a.iter().collect(),
        Some(_) => return Err(o.wrong(key, "a string or an array of strings")),
    };
    if list.len() > MAX_STOPS {
        return Err(ApiError::field(
            key,
            format!("`{key}` has {} strings, more than the limit of {MAX_STOPS}", list.len()),
        ));
    }
    list.into_iter()
        .map(|v| match v.as_str() {
            Some("") => Err(ApiError::field(key, format!("`{key}` holds an empty string"))),
            Some(s) if s.len() > MAX_STOP_BYTES => Err(ApiError::field(
                key,
                format!(
                    "a `{key}` string is {} bytes, over the limit of {MAX_STOP_BYTES}",
                    s.len()
                ),
            )),
            Some(s) => Ok(s.to_owned()),
            None => Err(o.wrong(key, "a string or an array of strings")),
        })
        .collect()
}

/// A tool's definition, its name checked and its schema kept as JSON text.
pub fn tool(
    name: Option<&str>,
    description: Option<&str>,
    schema: Option<&Value>,
    path: &str,
) -> Result<Tool, ApiError> {
    let name = name.ok_or_else(|| {
        ApiError::field(format!("{path}.name"), format!("`{path}.name` is required"))
    })?;
    if !valid_tool_name(name) {
        return Err(ApiError::field(
            format!("{path}.name"),
            format!("the tool name {name:?} is not valid: 1 to 64 letters, digits, `_` or `-`"),
        ));
    }
    let parameters = match schema {
        // No schema: any arguments object.
        None => r#"{"type":"object"}"#.to_owned(),
        Some(v @ Value::Object(_)) => v.to_string(),
        Some(_) => {
            return Err(ApiError::field(
                path,
                format!("the schema of tool `{name}` must be a JSON object"),
            ));
        }
    };
    Ok(Tool {
        name: name.to_owned(),
        description: description.unwrap_or("").to_owned(),
        parameters,
    })
}

/// Refuses more tools than a context takes, and the same name twice.
pub fn check_tools(tools: &[Tool], key: &str) -> Result<(), ApiError> {
    if tools.len() > MAX_TOOLS {
        return Err(ApiError::field(
            key,
            format!("{} tools, more than the limit of {MAX_TOOLS}", tools.len()),
        ));
    }
    for (i, t) in tools.iter().enumerate() {
        if tools[..i].iter().any(|u| u.name == t.name) {
            return Err(ApiError::field(key, format!("the tool `{}` is defined twice", t.name)));
        }
    }
    Ok(())
}

/// The constraint of a request with `tools` and a choice, or of one without tools (`plain`:
/// its response format's constraint). A named tool must be one of the tools.
pub fn tools_constraint(
    tools: &[Tool],
    choice: Option<ToolChoice>,
    parallel: bool,
    plain: Constraint,
    choice_key: &str,
) -> Result<Constraint, ApiError> {
    if let Some(ToolChoice::Named { name }) = &choice
        && !tools.iter().any(|t| &t.name == name)
    {
        return Err(ApiError::field(
            choice_key,
            format!("`{choice_key}` names the tool `{name}`, which the request does not define"),
        ));
    }
    if tools.is_empty() {
        return match choice {
            None | Some(ToolChoice::None {}) | Some(ToolChoice::Auto {}) => Ok(plain),
            Some(_) => Err(ApiError::field(
                choice_key,
                format!("`{choice_key}` asks for a tool call but the request defines no tools"),
            )),
        };
    }
    if plain != Constraint::None {
        return Err(ApiError::bad(
            "a structured output format together with tools is not supported: send one or the other",
        ));
    }
    Ok(Constraint::Tools { choice: choice.unwrap_or(ToolChoice::Auto {}), parallel })
}

/// OpenAI's `tool_choice` (chat: `{"type":"function","function":{"name"}}`; Responses:
/// `{"type":"function","name"}`).
pub fn openai_tool_choice(v: Option<&Value>, key: &str) -> Result<Option<ToolChoice>, ApiError> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(None) };
    let wrong = || {
        ApiError::field(
            key,
            format!("`{key}` must be \"auto\", \"required\", \"none\" or a function to call"),
        )
    };
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(Some(ToolChoice::Auto {})),
            "required" => Ok(Some(ToolChoice::Required {})),
            "none" => Ok(Some(ToolChoice::None {})),
            _ => Err(wrong()),
        },
        Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("function") => {
            let name = m
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| m.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(wrong)?;
            Ok(Some(ToolChoice::Named { name: name.to_owned() }))
        }
        _ => Err(wrong()),
    }
}

/// A JSON output format (`response_format` / Responses' `text.format`): `text`, `json_object`,
/// or `json_schema` with the schema either under `json_schema` (chat) or beside `type`
/// (Responses).
pub fn format_constraint(v: Option<&Value>, key: &str) -> Result<Constraint, ApiError> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(Constraint::None) };
    let m = element(v, key)?;
    match m.get("type").and_then(Value::as_str) {
        Some("text") => Ok(Constraint::None),
        Some("json_object") => Ok(Constraint::Json { schema: r#"{"type":"object"}"#.into() }),
        Some("json_schema") => {
            let holder = m.get("json_schema").and_then(Value::as_object).unwrap_or(m);
            let schema = holder.get("schema").filter(|s| s.is_object()).ok_or_else(|| {
                ApiError::field(key, format!("`{key}` of type json_schema needs a `schema` object"))
            })?;
            Ok(Constraint::Json { schema: schema.to_string() })
        }
        _ => Err(ApiError::field(
            key,
            format!("`{key}` must be of type text, json_object or json_schema"),
        )),
    }
}

/// The segments of a conversation, ids `m0`, `m1`, ... in order.
#[derive(Debug, Default)]
pub struct Segments(pub Vec<Segment>);

impl Segments {
    pub fn push(&mut self, role: Role, text: String) {
        let id = format!("m{}", self.0.len());
        self.0.push(Segment { id, role, text, pinned: false });
    }

    /// Calls made by the assistant: appended to its segment when it is the last one (its text
    /// then its calls), else a segment of their own.
    pub fn push_calls(&mut self, calls: &[ToolCall]) {
        if calls.is_empty() {
            return;
        }
        let text = caldrix_proto::write_tool_calls(calls);
        match self.0.last_mut() {
            Some(last)
                if last.role == Role::Assistant
                    && !last.text.contains(caldrix_proto::CALL_OPEN) =>
            {
                if !last.text.is_empty() {
                    last.text.push('\n');
                }
                last.text.push_str(&text);
            }
            _ => self.push(Role::Assistant, text),
        }
    }

    /// Refuses more than `max` segments, naming the field the count came from.
    pub fn check(&self, max: usize, key: &str) -> Result<(), ApiError> {
        if self.0.len() > max {
            return Err(ApiError::field(
                key,
                format!("{} messages, more than the limit of {max}", self.0.len()),
            ));
        }
        if self.0.is_empty() {
            return Err(ApiError::field(key, format!("`{key}` holds no message")));
        }
        Ok(())
    }
}

/// The text of a content value: a string, or an array of text parts (`part_types` are the
/// text kinds; `ignored` kinds are left out; any other kind is refused by name).
pub fn content_text(
    v: Option<&Value>,
    path: &str,
    part_types: &[&str],
    ignored: &[&str],
) -> Result<String, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (i, part) in parts.iter().enumerate() {
                let at = format!("{path}[{i}]");
                let m = element(part, &at)?;
                let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
                if part_types.contains(&kind) {
                    let text = m.get("text").and_then(Value::as_str).ok_or_else(|| {
                        ApiError::field(&at, format!("`{at}.text` must be a string"))
                    })?;
                    texts.push(text);
                } else if !ignored.contains(&kind) {
                    return Err(refused_part(kind, &at));
                }
            }
            Ok(texts.join("\n"))
        }
        Some(_) => {
            Err(ApiError::field(path, format!("`{path}` must be a string or an array of parts")))
        }
    }
}

/// A content part or item of a kind caldrix does not take.
pub fn refused_part(kind: &str, at: &str) -> ApiError {
    ApiError::field(
        at,
        format!("content of type {kind:?} (at `{at}`) is not supported by caldrix: text only"),
    )
}

/// Logprobs of the tokens that make up the first `len` bytes of the text (a cut at a stop
/// string leaves the tokens after it out).
pub fn cut_logprobs(lps: Vec<TokenLogprob>, len: usize) -> Vec<TokenLogprob> {
    let mut at = 0;
    lps.into_iter()
        .take_while(|t| {
            let starts_inside = at < len;
            at += t.text.len();
            starts_inside
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn sampling_defaults_to_the_api_s_and_checks_ranges() {
        let m = map(json!({}));
        let s = sampling(&Obj::new(&m, ""), 2.0).unwrap();
        assert_eq!((s.temperature, s.top_p), (1.0, 1.0));
        let m = map(json!({"temperature": 0, "seed": 7}));
        let s = sampling(&Obj::new(&m, ""), 2.0).unwrap();
        assert_eq!((s.temperature, s.seed), (0.0, 7));
        let m = map(json!({"temperature": 1.5}));
        let e = sampling(&Obj::new(&m, ""), 1.0).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("temperature"));
        let m = map(json!({"top_p": 0}));
        assert!(sampling(&Obj::new(&m, ""), 2.0).is_err());
        let m = map(json!({"seed": -1}));
        assert_eq!(sampling(&Obj::new(&m, ""), 2.0).unwrap().seed, u64::MAX);
    }

    #[test]
    fn stops_are_a_string_or_a_bounded_list() {
        let m =
            map(json!({"stop": "\n\n", "x": ["a", "b"], "e": [""], "n": 3, "many": vec!["s"; 17]}));
        let o = Obj::new(&m, "");
        assert_eq!(stops(&o, "stop").unwrap(), ["\n\n"]);
        assert_eq!(stops(&o, "x").unwrap(), ["a", "b"]);
        assert!(stops(&o, "e").unwrap_err().message.contains("empty"));
        assert!(stops(&o, "n").is_err());
        assert!(stops(&o, "many").unwrap_err().message.contains("limit of 16"));
        assert!(stops(&o, "absent").unwrap().is_empty());
    }

    #[test]
    fn tools_are_checked_and_constrained() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
        let t = tool(Some("read"), Some("Reads"), Some(&schema), "tools[0]").unwrap();
        assert_eq!(t.parameters, schema.to_string());
        let e = tool(Some("a b"), None, None, "tools[1]").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("tools[1].name"));
        assert!(tool(None, None, None, "tools[2]").is_err());
        assert!(
            check_tools(&[t.clone(), t.clone()], "tools").unwrap_err().message.contains("twice")
        );

        let tools = vec![t];
        let c = tools_constraint(&tools, None, true, Constraint::None, "tool_choice").unwrap();
        assert_eq!(c, Constraint::Tools { choice: ToolChoice::Auto {}, parallel: true });
        let named = Some(ToolChoice::Named { name: "write".into() });
        let e = tools_constraint(&tools, named, true, Constraint::None, "tool_choice").unwrap_err();
        assert!(e.message.contains("`write`"), "{}", e.message);
        let e = tools_constraint(&[], Some(ToolChoice::Required {}), true, Constraint::None, "tc");
        assert!(e.is_err());
        let json = Constraint::Json { schema: "{}".into() };
        assert_eq!(tools_constraint(&[], None, true, json.clone(), "tc").unwrap(), json);
        assert!(tools_constraint(&tools, None, true, json, "tc").is_err());
    }

    #[test]
    fn openai_tool_choices_read() {
        let read = |v: Value| openai_tool_choice(Some(&v), "tool_choice");
        assert_eq!(read(json!("required")).unwrap(), Some(ToolChoice::Required {}));
        assert_eq!(read(json!("none")).unwrap(), Some(ToolChoice::None {}));
        let chat = json!({"type": "function", "function": {"name": "read"}});
        assert_eq!(read(chat).unwrap(), Some(ToolChoice::Named { name: "read".into() }));
        let responses = json!({"type": "function", "name": "read"});
        assert_eq!(read(responses).unwrap(), Some(ToolChoice::Named { name: "read".into() }));
        assert!(read(json!("sometimes")).is_err());
        assert_eq!(openai_tool_choice(None, "x").unwrap(), None);
    }

    #[test]
    fn formats_become_json_constraints() {
        let read = |v: Value| format_constraint(Some(&v), "response_format");
        assert_eq!(read(json!({"type": "text"})).unwrap(), Constraint::None);
        assert_eq!(
            read(json!({"type": "json_object"})).unwrap(),
            Constraint::Json { schema: r#"{"type":"object"}"#.into() }
        );
        let chat = json!({"type": "json_schema", "json_schema": {"name": "x", "strict": true,
            "schema": {"type": "integer"}}});
        assert_eq!(
            read(chat).unwrap(),
            Constraint::Json { schema: r#"{"type":"integer"}"#.into() }
        );
        let responses = json!({"type": "json_schema", "name": "x", "schema": {"type": "integer"}});
        assert_eq!(
            read(responses).unwrap(),
            Constraint::Json { schema: r#"{"type":"integer"}"#.into() }
        );
        assert!(read(json!({"type": "json_schema", "json_schema": {}})).is_err());
        assert!(read(json!({"type": "yaml"})).is_err());
    }

    #[test]
    fn calls_join_the_assistant_s_text() {
        let mut s = Segments::default();
        s.push(Role::User, "hi".into());
        s.push(Role::Assistant, "Let me look.".into());
        let call = ToolCall { name: "read".into(), arguments: r#"{"path":"a"}"#.into() };
        s.push_calls(std::slice::from_ref(&call));
        assert_eq!(s.0.len(), 2);
        assert!(s.0[1].text.starts_with("Let me look.\n<tool_call>\n"), "{}", s.0[1].text);
        s.push(Role::Tool, "contents".into());
        s.push_calls(&[call]);
        assert_eq!(s.0.len(), 4);
        assert_eq!(s.0[3].role, Role::Assistant);
        assert_eq!(s.0.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), ["m0", "m1", "m2", "m3"]);
        assert!(s.check(3, "messages").unwrap_err().message.contains("limit of 3"));
        assert!(Segments::default().check(3, "messages").is_err());
    }

    #[test]
    fn content_is_text_or_text_parts() {
        let parts = json!([{"type": "text", "text": "a"}, {"type": "refusal"}, {"type": "text", "text": "b"}]);
        assert_eq!(content_text(Some(&parts), "m", &["text"], &["refusal"]).unwrap(), "a\nb");
        let image = json!([{"type": "image_url", "image_url": {}}]);
        let e = content_text(Some(&image), "messages[0].content", &["text"], &[]).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].content[0]"));
        assert!(e.message.contains("\"image_url\""), "{}", e.message);
    }

    #[test]
    fn ids_differ() {
        let (a, b) = (new_id("call_"), new_id("call_"));
        assert_ne!(a, b);
        assert!(a.starts_with("call_") && a.len() == 5 + 24, "{a}");
    }

    #[test]
    fn logprobs_are_cut_with_the_text() {
        let t =
            |text: &str| TokenLogprob { token: 0, text: text.into(), logprob: -0.5, top: vec![] };
        let cut = cut_logprobs(vec![t("Hel"), t("lo"), t("\n\n"), t("x")], 5);
        assert_eq!(cut.len(), 2);
    }
}
