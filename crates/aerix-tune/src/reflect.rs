//! The reflection: the prompts `tune/reflect.md` and `tune/reconcile.md` with their data, the
//! answer's schema and its reading, and the pool member that answers (one generation on a
//! throwaway context under the `Json` constraint).

use caldrix_client::Client;
use caldrix_proto::{Constraint, Generate, Role, Segment};
use serde_json::Value;

use crate::{Item, Reflector, TuneError};

/// `aerix tune`'s answer.
pub const REFLECT_SCHEMA: &str = r#"{"type":"object","properties":{"revise":{"type":"boolean"},"text":{"type":"string"},"why":{"type":"string"}},"required":["revise","text","why"],"additionalProperties":false}"#;
/// `aerix profile sync`'s answer.
pub const RECONCILE_SCHEMA: &str = r#"{"type":"object","properties":{"text":{"type":"string"},"why":{"type":"string"}},"required":["text","why"],"additionalProperties":false}"#;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reflection {
    pub revise: bool,
    pub text: String,
    pub why: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reconciled {
    pub text: String,
    pub why: String,
}

/// The reflection's data: the artifact's text and its evidence.
pub(crate) fn reflect_input(path: &str, text: &str, items: &[Item], sessions: usize) -> String {
    let mut out =
        format!("# The prompt `{path}`\n\n{text}\n\n# Evidence from {sessions} session(s)\n\n");
    for item in items {
        out.push_str(&format!("- [{}] {}\n", label(item), item.text.replace('\n', " ")));
    }
    out
}

/// The reconciliation's data.
pub(crate) fn reconcile_input(path: &str, old: &str, diff: &str, tuned: &str) -> String {
    format!(
        "# The old release text of `{path}`\n\n{old}\n\n# The diff to the new release text\n\n{diff}\n\n# The tuned text\n\n{tuned}\n"
    )
}

fn label(item: &Item) -> &'static str {
    match item.source {
        crate::Source::User => "the user",
        crate::Source::Harness => "aerix",
        crate::Source::ToolOutput => "tool output",
        crate::Source::ToolError => "tool error",
        crate::Source::VerifierReason => "verifier",
        crate::Source::Model => "model output",
    }
}

/// `{"revise", "text", "why"}`, or why the answer is not that.
pub fn parse_reflection(answer: &str) -> Result<Reflection, String> {
    let value = object(answer)?;
    let revise = value.get("revise").and_then(Value::as_bool).ok_or("no boolean `revise`")?;
    Ok(Reflection { revise, text: string(&value, "text")?, why: string(&value, "why")? })
}

/// `{"text", "why"}`, or why the answer is not that.
pub fn parse_reconciled(answer: &str) -> Result<Reconciled, String> {
    let value = object(answer)?;
    Ok(Reconciled { text: string(&value, "text")?, why: string(&value, "why")? })
}

fn object(answer: &str) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_str::<Value>(answer.trim()) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("the answer is not a JSON object".into()),
        Err(e) => Err(format!("the answer is not JSON ({e})")),
    }
}

fn string(value: &serde_json::Map<String, Value>, key: &str) -> Result<String, String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("no string `{key}`"))
}

/// A pool member as the reflection member.
pub struct PoolReflector<'a> {
    pub client: &'a mut Client,
    /// Its alias in the pool.
    pub alias: String,
    /// Its model reference.
    pub reference: String,
    /// Whether it takes the `Json` constraint (without it, the answer is parsed as it comes).
    pub json: bool,
    /// `context.max_new_tokens`.
    pub max_new_tokens: u32,
}

impl Reflector for PoolReflector<'_> {
    fn member(&self) -> &str {
        &self.reference
    }

    async fn ask(&mut self, system: &str, user: &str, schema: &str) -> Result<String, TuneError> {
        let pool = |e: caldrix_client::ClientError| TuneError::Pool(e.to_string());
        let segments = vec![
            Segment {
                id: "prompt".into(),
                role: Role::System,
                text: system.to_owned(),
                pinned: true,
            },
            Segment { id: "data".into(), role: Role::User, text: user.to_owned(), pinned: false },
        ];
        let counts = self.client.create_context(&self.alias, segments).await.map_err(pool)?;
        let constraint = if self.json {
            Constraint::Json { schema: schema.to_owned() }
        } else {
            Constraint::None
        };
        let generate = Generate {
            context: counts.context,
            constraint,
            max_new_tokens: self.max_new_tokens,
            sampling: None,
            logprobs: None,
            append_as: None,
        };
        let done = self.client.generate(generate, |_| {}).await;
        // The throwaway context goes whatever happened.
        let _ = self.client.drop_context(counts.context).await;
        Ok(done.map_err(pool)?.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_strictly() {
        let r = parse_reflection(r#"{"revise":true,"text":"T","why":"W"}"#).unwrap();
        assert_eq!(r, Reflection { revise: true, text: "T".into(), why: "W".into() });
        assert_eq!(
            parse_reflection(r#"{"text":"T","why":"W"}"#).unwrap_err(),
            "no boolean `revise`"
        );
        assert!(
            parse_reflection("{\"revise\":true,\"te")
                .unwrap_err()
                .starts_with("the answer is not JSON")
        );
        assert_eq!(parse_reconciled(r#"{"text":"T","why":"W"}"#).unwrap().text, "T");
        for schema in [REFLECT_SCHEMA, RECONCILE_SCHEMA] {
            serde_json::from_str::<Value>(schema).unwrap();
        }
    }
}
