//! One `SKILL.md` (or legacy command file): Claude Code's frontmatter, every key optional,
//! unknown keys ignored. A file is never refused for its frontmatter: bad YAML, or a key of the
//! wrong type, loads the skill without those fields and gives one note.

use aerix_config::{NoFrontmatter, split_frontmatter};
use serde_yaml_ng::{Mapping, Value};

/// Descriptions are cut to this many characters (in the listing and in `list`).
pub const DESCRIPTION_CHARS: usize = 250;

/// The fields a file gives; `None` where it gives none (or one that could not be used).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    pub name: Option<String>,
    pub description: Option<String>,
    pub argument_hint: Option<String>,
    /// Tool names as written (Claude Code's or aerix's); aerix grants nothing by them.
    pub allowed_tools: Vec<String>,
    pub disable_model_invocation: bool,
    pub user_invocable: bool,
}

/// A parsed file: its fields, its body, and what was wrong (one line's text, no file name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub fields: Fields,
    pub body: String,
    pub problem: Option<String>,
}

/// Splits and reads the frontmatter of `text`. Without a first line `---` the whole text is
/// the body.
pub fn parse(text: &str) -> Parsed {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let default = Fields { user_invocable: true, ..Fields::default() };
    let (yaml, body) = match split_frontmatter(text) {
        Ok(split) => split,
        Err(NoFrontmatter::Missing) => {
            return Parsed { fields: default, body: text.to_owned(), problem: None };
        }
        Err(NoFrontmatter::Unclosed) => {
            let problem = "the frontmatter has no closing `---` line; read as no fields";
            return Parsed { fields: default, body: String::new(), problem: Some(problem.into()) };
        }
    };
    let mut fields = default;
    let map = match serde_yaml_ng::from_str::<Value>(yaml) {
        Ok(Value::Mapping(map)) => map,
        Ok(Value::Null) => Mapping::new(),
        Ok(_) => {
            let problem =
                Some("the frontmatter is not a mapping of keys; read as no fields".into());
            return Parsed { fields, body: body.to_owned(), problem };
        }
        Err(e) => {
            let first = e.to_string().lines().next().unwrap_or_default().to_owned();
            let problem = Some(format!("the frontmatter is not YAML ({first}); read as no fields"));
            return Parsed { fields, body: body.to_owned(), problem };
        }
    };
    let mut wrong = Vec::new();
    fields.name = string(&map, "name", &mut wrong);
    fields.description = string(&map, "description", &mut wrong);
    fields.argument_hint = string(&map, "argument-hint", &mut wrong);
    fields.allowed_tools = tools(&map, "allowed-tools", &mut wrong);
    fields.disable_model_invocation =
        boolean(&map, "disable-model-invocation", &mut wrong).unwrap_or(false);
    fields.user_invocable = boolean(&map, "user-invocable", &mut wrong).unwrap_or(true);
    let problem = (!wrong.is_empty()).then(|| format!("{} ignored", wrong.join(", ")));
    Parsed { fields, body: body.to_owned(), problem }
}

fn string(map: &Mapping, key: &str, wrong: &mut Vec<String>) -> Option<String> {
    match map.get(key)? {
        Value::String(s) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
        Value::Null => None,
        // `argument-hint: [file]` is YAML for a list; Claude Code shows it as written.
        Value::Sequence(items) if key == "argument-hint" => {
            let items: Vec<String> = items.iter().filter_map(scalar).collect();
            Some(format!("[{}]", items.join(", ")))
        }
        Value::Number(_) | Value::Bool(_) => map.get(key).and_then(scalar),
        _ => {
            wrong.push(format!("key `{key}` is not text"));
            None
        }
    }
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn boolean(map: &Mapping, key: &str, wrong: &mut Vec<String>) -> Option<bool> {
    match map.get(key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s == "true" || s == "false" => Some(s == "true"),
        Value::Null => None,
        _ => {
            wrong.push(format!("key `{key}` is not true or false"));
            None
        }
    }
}

/// A comma-separated string or a list (both are Claude Code's).
fn tools(map: &Mapping, key: &str, wrong: &mut Vec<String>) -> Vec<String> {
    let split = |s: &str| -> Vec<String> {
        s.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect()
    };
    match map.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => split(s),
        Some(Value::Sequence(items)) => items.iter().filter_map(scalar).collect(),
        Some(_) => {
            wrong.push(format!("key `{key}` is not a list of tools"));
            Vec::new()
        }
    }
}

/// The first line of the body that says something (a heading's `#`s dropped), for a skill
/// without a `description`.
pub fn first_line(body: &str) -> Option<String> {
    body.lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}

/// `text` cut to `max` characters, `…` marking a cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn claude_code_frontmatter_is_read_and_unknown_keys_ignored() {
        let p = parse(
            "---\nname: review\ndescription: Reviews a diff.\nallowed-tools: Read, Bash(git diff:*)\n\
             argument-hint: [path]\ndisable-model-invocation: true\nuser-invocable: false\n\
             license: MIT\nmetadata: {a: 1}\n---\n\nLook at $ARGUMENTS.\n",
        );
        assert_eq!(p.problem, None);
        assert_eq!(p.fields.name.as_deref(), Some("review"));
        assert_eq!(p.fields.description.as_deref(), Some("Reviews a diff."));
        assert_eq!(p.fields.allowed_tools, ["Read", "Bash(git diff:*)"]);
        assert_eq!(p.fields.argument_hint.as_deref(), Some("[path]"));
        assert!(p.fields.disable_model_invocation && !p.fields.user_invocable);
        assert_eq!(p.body, "Look at $ARGUMENTS.\n");
    }

    #[test]
    fn no_frontmatter_is_all_body_and_an_empty_one_is_no_fields() {
        let p = parse("# Deploy\nRun it.\n");
        assert_eq!((p.body.as_str(), p.problem), ("# Deploy\nRun it.\n", None));
        assert_eq!(p.fields, Fields { user_invocable: true, ..Fields::default() });
        let p = parse("---\n---\nbody");
        assert_eq!((p.body.as_str(), p.problem), ("body", None));
        assert_eq!(first_line("\n\n## Deploy the app\nx"), Some("Deploy the app".to_owned()));
    }

    #[test]
    fn bad_frontmatter_loads_with_no_fields_and_one_problem() {
        for (text, problem, body) in [
            ("---\nname: [x\n---\nbody", "not YAML", "body"),
            ("---\n- a\n---\nbody", "not a mapping", "body"),
            ("---\nname: x\nbody", "no closing `---`", ""),
        ] {
            let p = parse(text);
            assert!(p.problem.as_deref().unwrap_or_default().contains(problem), "{text:?}: {p:?}");
            assert_eq!(p.fields.name, None, "{text:?}");
            assert_eq!(p.body, body, "{text:?}");
        }
        let p = parse("---\nname: {a: 1}\nuser-invocable: maybe\ndescription: d\n---\n");
        assert_eq!(p.fields.name, None);
        assert_eq!(p.fields.description.as_deref(), Some("d"));
        assert!(p.fields.user_invocable, "a bad value keeps the default");
        let problem = p.problem.unwrap();
        assert!(problem.contains("`name` is not text"), "{problem}");
        assert!(problem.contains("`user-invocable` is not true or false"), "{problem}");
    }

    #[test]
    fn cut_marks_the_cut() {
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
