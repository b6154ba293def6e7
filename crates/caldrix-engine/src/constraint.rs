//! Constraints on what a generation may produce.

use llguidance::Matcher;
use llguidance::api::TopLevelGrammar;
use serde_json::Value;

use crate::error::EngineError;
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
    // protocol refuses whitespace around the value. A caller's own x-guidance options win.
    map.entry("x-guidance").or_insert_with(|| serde_json::json!({ "whitespace_flexible": false }));
    let factory = model.parser_factory()?;
    let parser = factory
        .create_parser(TopLevelGrammar::from_json_schema(Value::Object(map)))
        .map_err(|e| EngineError::BadSchema(format!("{e:#}")))?;
    let matcher = Matcher::new(Ok(parser));
    if let Some(err) = matcher.get_error() {
        return Err(EngineError::BadSchema(err));
    }
    Ok(matcher)
}

/// Checks OneOf options before any work is done.
pub(crate) fn check_options(options: &[String]) -> Result<(), EngineError> {
    if options.is_empty() {
        return Err(EngineError::EmptyOneOf);
    }
    for (i, option) in options.iter().enumerate() {
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
