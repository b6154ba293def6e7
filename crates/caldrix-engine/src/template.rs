//! The model's own chat template (`tokenizer.chat_template`), rendered with minijinja the way
//! Hugging Face transformers renders it with Jinja2.

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error as JinjaError, ErrorKind};

/// One chat message. `role` is whatever the template understands (`system`, `user`,
/// `assistant`, `tool`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub content: String,
    /// An assistant message's tool calls, for a template that renders them itself
    /// ([`ChatTemplate::takes_tools`]).
    pub tool_calls: Vec<MessageToolCall>,
}

/// A call as chat templates read it (`message.tool_calls[i].function`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageToolCall {
    pub name: String,
    /// The arguments object.
    pub arguments: serde_json::Value,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message { role: role.into(), content: content.into(), tool_calls: Vec::new() }
    }
}

/// Whether the rendering ends with the header of an assistant turn to be generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenerationPrompt {
    Add,
    Omit,
}

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("the model has no chat template (no `tokenizer.chat_template` in its GGUF metadata)")]
    Missing,
    #[error("the model's chat template does not compile: {}", render_message(.0))]
    Compile(JinjaError),
    #[error("the model's chat template is unusable: {0}")]
    Unusable(String),
    #[error("the model's chat template failed to render: {}", render_message(.0))]
    Render(JinjaError),
    /// The template's own `raise_exception`: a rule of the model's format the conversation
    /// breaks (Gemma's alternating roles), which the caller can fix.
    #[error("the model's chat template refuses this conversation: {0}")]
    Refused(String),
}

/// minijinja's error without its alternate form, which dumps the template's source around
/// the failing line: the kind, the detail and where.
fn render_message(e: &JinjaError) -> String {
    let mut out = e.kind().to_string();
    if let Some(detail) = e.detail() {
        out.push_str(": ");
        out.push_str(detail);
    }
    if let (Some(name), Some(line)) = (e.name(), e.line()) {
        out.push_str(&format!(" (template `{name}`, line {line})"));
    }
    out
}

/// Carried as the source of the render error `raise_exception` makes, so the refusal is told
/// from a broken template.
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

/// A compiled chat template plus the special-token strings it refers to.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
    /// The template refuses two messages of one role in a row (Gemma's alternation) but takes
    /// them as one: consecutive messages of a role are rendered as one, joined by a blank line.
    /// Clients such as aerix keep instructions and the request in segments of their own.
    joins_runs: bool,
    /// The template reads a `tools` variable: it renders the tools offered (and, by the
    /// convention of Hugging Face's templates, calls and their results) as the model was
    /// trained.
    takes_tools: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").field("bos_token", &self.bos_token).finish_non_exhaustive()
    }
}

impl ChatTemplate {
    pub fn new(
        source: &str,
        bos_token: String,
        eos_token: String,
    ) -> Result<ChatTemplate, TemplateError> {
        // minijinja has no `{% generation %}` block (a training-time marker): drop the tags.
        let source = source
            .replace("{% generation %}", "")
            .replace("{%- generation %}", "")
            .replace("{% endgeneration %}", "")
            .replace("{%- endgeneration %}", "");
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(TemplateError::Compile)?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned("chat", source).map_err(TemplateError::Compile)?;
        let takes_tools = env
            .get_template("chat")
            .map_err(TemplateError::Compile)?
            .undeclared_variables(false)
            .contains("tools");
        let mut template =
            ChatTemplate { env, bos_token, eos_token, joins_runs: false, takes_tools };
        let run = [Message::new("user", "a"), Message::new("user", "b")];
        template.joins_runs =
            matches!(
                template.render_as_is(&run, &[], GenerationPrompt::Add),
                Err(TemplateError::Refused(_))
            ) && template.render_as_is(&join_runs(&run), &[], GenerationPrompt::Add).is_ok();
        Ok(template)
    }

    /// Whether the template renders tools itself (it reads a `tools` variable).
    pub fn takes_tools(&self) -> bool {
        self.takes_tools
    }

    /// Renders `messages` (consecutive messages of one role as one, for a template that
    /// refuses them apart: see `joins_runs`).
    pub fn render(
        &self,
        messages: &[Message],
        prompt: GenerationPrompt,
    ) -> Result<String, TemplateError> {
        self.render_with_tools(messages, &[], prompt)
    }

    /// [`ChatTemplate::render`] with the tools offered, as templates read them: each
    /// `{"type": "function", "function": {"name", "description", "parameters"}}`. Left out of
    /// the template's variables when there are none (templates test `if tools`).
    pub fn render_with_tools(
        &self,
        messages: &[Message],
        tools: &[serde_json::Value],
        prompt: GenerationPrompt,
    ) -> Result<String, TemplateError> {
        if self.joins_runs && messages.windows(2).any(|w| w[0].role == w[1].role) {
            return self.render_as_is(&join_runs(messages), tools, prompt);
        }
        self.render_as_is(messages, tools, prompt)
    }

    fn render_as_is(
        &self,
        messages: &[Message],
        tools: &[serde_json::Value],
        prompt: GenerationPrompt,
    ) -> Result<String, TemplateError> {
        let template = self.env.get_template("chat").map_err(TemplateError::Render)?;
        let messages: Vec<Value> = messages.iter().map(message_value).collect();
        let tools = (!tools.is_empty()).then(|| Value::from(minijinja::value::Serde(tools)));
        template
            .render(minijinja::context! {
                messages => messages,
                tools => tools,
                add_generation_prompt => prompt == GenerationPrompt::Add,
                bos_token => self.bos_token.clone(),
                eos_token => self.eos_token.clone(),
            })
            .map_err(|e| {
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    if let Some(raised) = s.downcast_ref::<Raised>() {
                        return TemplateError::Refused(raised.0.clone());
                    }
                    source = s.source();
                }
                TemplateError::Render(e)
            })
    }
}

/// A message as templates read it: `tool_calls` only when it has some.
fn message_value(m: &Message) -> Value {
    if m.tool_calls.is_empty() {
        return minijinja::context! { role => m.role.clone(), content => m.content.clone() };
    }
    let calls: Vec<serde_json::Value> = m
        .tool_calls
        .iter()
        .map(|c| {
            serde_json::json!({
                "type": "function",
                "function": { "name": c.name, "arguments": c.arguments },
            })
        })
        .collect();
    minijinja::context! {
        role => m.role.clone(),
        content => m.content.clone(),
        tool_calls => Value::from(minijinja::value::Serde(&calls)),
    }
}

/// Consecutive messages of one role as one, their contents joined by a blank line (a message
/// with tool calls is kept apart).
pub fn join_runs(messages: &[Message]) -> Vec<Message> {
    let mut joined: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages {
        match joined.last_mut() {
            Some(last)
                if last.role == m.role && last.tool_calls.is_empty() && m.tool_calls.is_empty() =>
            {
                last.content.push_str("\n\n");
                last.content.push_str(&m.content);
            }
            _ => joined.push(m.clone()),
        }
    }
    joined
}

fn raise_exception(message: String) -> Result<Value, JinjaError> {
    Err(JinjaError::new(ErrorKind::InvalidOperation, message.clone()).with_source(Raised(message)))
}

/// Python's `json.dumps` as transformers' `tojson` calls it: `ensure_ascii=False`, separators
/// `", "`/`": "` (`","` between items when indenting), keys in insertion order. minijinja's own
/// filter HTML-escapes quotes and angle brackets, which would change the prompt's tokens.
fn tojson(value: Value, indent: Option<usize>, kwargs: Kwargs) -> Result<Value, JinjaError> {
    let indent = match indent {
        Some(i) => Some(i),
        None => kwargs.get::<Option<usize>>("indent")?,
    };
    let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
    let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let json = serde_json::to_value(&value)
        .map_err(|e| JinjaError::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let (item_sep, key_sep) = match separators.as_deref() {
        Some([item, key]) => (item.clone(), key.clone()),
        _ if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        _ => (", ".to_owned(), ": ".to_owned()),
    };
    let style = JsonStyle { indent, item_sep, key_sep, ensure_ascii, sort_keys };
    let mut out = String::new();
    style.write(&json, 0, &mut out);
    Ok(Value::from_safe_string(out))
}

struct JsonStyle {
    indent: Option<usize>,
    item_sep: String,
    key_sep: String,
    ensure_ascii: bool,
    sort_keys: bool,
}

impl JsonStyle {
    fn newline(&self, depth: usize, out: &mut String) {
        if let Some(n) = self.indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * depth));
        }
    }

    fn write(&self, v: &serde_json::Value, depth: usize, out: &mut String) {
        use serde_json::Value as J;
        match v {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Number(n) => out.push_str(&n.to_string()),
            J::String(s) => self.string(s, out),
            J::Array(items) if items.is_empty() => out.push_str("[]"),
            J::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&self.item_sep);
                    }
                    self.newline(depth + 1, out);
                    self.write(item, depth + 1, out);
                }
                self.newline(depth, out);
                out.push(']');
            }
            J::Object(map) if map.is_empty() => out.push_str("{}"),
            J::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                if self.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                }
                out.push('{');
                for (i, (key, item)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push_str(&self.item_sep);
                    }
                    self.newline(depth + 1, out);
                    self.string(key, out);
                    out.push_str(&self.key_sep);
                    self.write(item, depth + 1, out);
                }
                self.newline(depth, out);
                out.push('}');
            }
        }
    }

    fn string(&self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{08}' => out.push_str("\\b"),
                '\u{0c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && !c.is_ascii()) => {
                    let mut buf = [0u16; 2];
                    for unit in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// `strftime_now(format)`, which some templates call for today's date (UTC here).
fn strftime_now(format: String) -> Result<Value, JinjaError> {
    strftime(&format, chrono::Utc::now()).map(Value::from)
}

/// `format` at `now`, Python's directives `%Y %m %d %B %b %H %M %S %%` (any other is an error,
/// a lone `%` at the end is itself); the calendar is chrono's.
fn strftime(format: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String, JinjaError> {
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&chrono::Datelike::year(&now).to_string()),
            Some(d @ ('m' | 'd' | 'B' | 'b' | 'H' | 'M' | 'S')) => {
                out.push_str(&now.format(&format!("%{d}")).to_string());
            }
            Some('%') => out.push('%'),
            Some(other) => {
                return Err(JinjaError::new(
                    ErrorKind::InvalidOperation,
                    format!("strftime_now: unsupported directive %{other}"),
                ));
            }
            None => out.push('%'),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: &str, messages: &[Message]) -> String {
        ChatTemplate::new(source, "<s>".into(), "</s>".into())
            .unwrap()
            .render(messages, GenerationPrompt::Add)
            .unwrap()
    }

    #[test]
    fn tojson_matches_python_json_dumps() {
        let out = render(
            "{{ {'a': \"it's <b> & é\", 'n': [1, 2], 'e': {}} | tojson }}|{{ [1, {'k': 2}] | tojson(indent=2) }}",
            &[],
        );
        assert_eq!(
            out,
            "{\"a\": \"it's <b> & é\", \"n\": [1, 2], \"e\": {}}|[\n  1,\n  {\n    \"k\": 2\n  }\n]"
        );
    }

    #[test]
    fn a_template_refusing_runs_of_a_role_renders_them_as_one_message() {
        let gemma = include_str!("templates/gemma.jinja");
        let m = |role: &str, text: &str| Message::new(role, text);
        // aerix's root context: system, instructions and the request, both user segments.
        let apart = [m("system", "Be brief."), m("user", "# Instructions"), m("user", "Fix it.")];
        let joined = [m("system", "Be brief."), m("user", "# Instructions\n\nFix it.")];
        assert_eq!(render(gemma, &apart), render(gemma, &joined));
        assert!(render(gemma, &apart).contains("# Instructions\n\nFix it."));
        // Its other rule still holds: a system message after the first turn is refused.
        let t = ChatTemplate::new(gemma, "<bos>".into(), "<eos>".into()).unwrap();
        let late = [m("user", "Hi."), m("assistant", "Hello."), m("system", "Be brief.")];
        let err = t.render(&late, GenerationPrompt::Add).unwrap_err();
        assert!(matches!(err, TemplateError::Refused(_)), "{err:?}");
        // A template that takes runs renders each message as it is.
        let plain = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}";
        assert_eq!(render(plain, &[m("user", "a"), m("user", "b")]), "[user]a[user]b");
    }

    #[test]
    fn raise_exception_is_a_render_error() {
        let t = ChatTemplate::new(
            "{{ raise_exception('no system role') }}",
            String::new(),
            String::new(),
        )
        .unwrap();
        let err = t.render(&[], GenerationPrompt::Omit).unwrap_err();
        assert!(matches!(&err, TemplateError::Refused(m) if m == "no system role"), "{err:?}");
        assert_eq!(
            err.to_string(),
            "the model's chat template refuses this conversation: no system role"
        );
    }

    #[test]
    fn a_render_failure_is_one_line_without_the_template_source() {
        let t = ChatTemplate::new(
            "line one\n{{ messages[0].content | nosuchfilter }}",
            String::new(),
            String::new(),
        );
        let err = match t {
            Ok(t) => t.render(&[Message::new("user", "hi")], GenerationPrompt::Omit).unwrap_err(),
            Err(e) => e,
        };
        let text = err.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("nosuchfilter"), "{text}");
    }

    #[test]
    fn strftime_knows_python_s_common_directives_and_refuses_the_others() {
        let at = |secs| chrono::DateTime::from_timestamp(secs, 0).unwrap();
        let format = "%d %B %Y (%b %m) %H:%M:%S %%";
        assert_eq!(strftime(format, at(0)).unwrap(), "01 January 1970 (Jan 01) 00:00:00 %");
        assert_eq!(
            strftime(format, at(1_796_012_112)).unwrap(),
            "30 November 2026 (Nov 11) 04:15:12 %"
        );
        assert_eq!(strftime("100%", at(0)).unwrap(), "100%");
        let err = strftime("%j", at(0)).unwrap_err().to_string();
        assert!(err.contains("unsupported directive %j"), "{err}");
    }
}
