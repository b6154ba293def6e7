//! Constraints on what a generation may produce.

use llguidance::Matcher;
use llguidance::api::TopLevelGrammar;
use serde_json::Value;

use crate::error::EngineError;
use crate::limits;
use crate::model::Model;

/// The shape a generation must take.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    None,
    /// JSON valid against this schema, with no whitespace outside strings (so none before or
    /// after the top-level value).
    Json(Value),
    /// Exactly one of these strings, each scored.
    OneOf(Vec<String>),
    /// Text in the language of this llguidance grammar (its Lark syntax, `%json` schemas
    /// inline): the pool's tool calls.
    Grammar(String),
}

/// The matcher of a constraint that has one (a schema or a grammar).
pub(crate) fn matcher_of(model: &Model, c: &Constraint) -> Result<Option<Matcher>, EngineError> {
    match c {
        Constraint::Json(schema) => json_matcher(model, schema).map(Some),
        Constraint::Grammar(lark) => grammar_matcher(model, lark).map(Some),
        Constraint::None | Constraint::OneOf(_) => Ok(None),
    }
}

/// Compiles a grammar in llguidance's Lark syntax into a matcher over the model's vocabulary.
pub(crate) fn grammar_matcher(model: &Model, lark: &str) -> Result<Matcher, EngineError> {
    matcher(model, TopLevelGrammar::from_lark(lark.to_owned()))
}

/// Whether `schema` compiles as a JSON constraint for this model (a tool's arguments, checked
/// on its own so a refusal can name the tool).
pub fn check_schema(model: &Model, schema: &Value) -> Result<(), EngineError> {
    json_matcher(model, schema).map(|_| ())
}

/// Compiles a JSON schema into a matcher over the model's vocabulary.
pub(crate) fn json_matcher(model: &Model, schema: &Value) -> Result<Matcher, EngineError> {
    let Value::Object(map) = schema else {
        return Err(EngineError::BadSchema(format!(
            "a schema must be a JSON object, not {schema}"
        )));
    };
    let mut map = map.clone();
    // Compact JSON: a small model otherwise runs away in tabs and newlines, and the turn
    // protocol refuses whitespace around the value. A caller's own x-guidance options are
    // merged over this default (so `{"coerce_one_of": true}` keeps the compact output), and
    // win where they name the same option.
    match map.entry("x-guidance").or_insert_with(|| Value::Object(Default::default())) {
        Value::Object(options) => {
            options.entry("whitespace_flexible").or_insert(Value::Bool(false));
        }
        other => {
            return Err(EngineError::BadSchema(format!(
                "`x-guidance` must be an object of llguidance options, not {other}"
            )));
        }
    }
    matcher(model, TopLevelGrammar::from_json_schema(Value::Object(map)))
}

fn matcher(model: &Model, grammar: TopLevelGrammar) -> Result<Matcher, EngineError> {
    let factory = model.parser_factory()?;
    let parser = factory
        .create_parser(grammar)
        .map_err(|e| EngineError::BadSchema(one_line(&format!("{e:#}"))))?;
    let matcher = Matcher::new(Ok(parser));
    if let Some(err) = matcher.get_error() {
        return Err(EngineError::BadSchema(one_line(&err)));
    }
    Ok(matcher)
}

/// llguidance's messages may span lines (a cause chain, a grammar excerpt): one line each,
/// cut to a readable length, for an error reply a person reads.
fn one_line(message: &str) -> String {
    let joined = message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>();
    let mut line = joined.join("; ");
    if line.len() > 400 {
        let mut cut = 400;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push_str(" ...");
    }
    line
}

/// Checks OneOf options before any work is done.
pub(crate) fn check_options(options: &[String]) -> Result<(), EngineError> {
    if options.is_empty() {
        return Err(EngineError::EmptyOneOf);
    }
    if options.len() > limits::MAX_ONE_OF_OPTIONS {
        return Err(EngineError::TooManyOptions { count: options.len() });
    }
    for (i, option) in options.iter().enumerate() {
        if option.len() > limits::MAX_OPTION_BYTES {
            let mut start = 40.min(option.len());
            while !option.is_char_boundary(start) {
                start -= 1;
            }
            return Err(EngineError::BadOption {
                option: format!("{}...", &option[..start]),
                problem: format!(
                    "is {} bytes, more than the limit of {}",
                    option.len(),
                    limits::MAX_OPTION_BYTES
                ),
            });
        }
        if option.is_empty() {
            return Err(EngineError::BadOption {
                option: option.clone(),
                problem: "is empty".into(),
            });
        }
        if options[..i].contains(option) {
            return Err(EngineError::BadOption {
                option: option.clone(),
                problem: "is listed twice".into(),
            });
        }
    }
    Ok(())
}
