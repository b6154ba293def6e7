//! Every refusal a tool can return for a malformed input, against the turn schema: each is
//! either excluded by the schema (so a constrained model cannot make it) or listed with the
//! reason the schema cannot say it. A refusal added to a tool belongs in one of the two tables.

use serde_json::{Value, json};

use crate as turn;
use crate::ALL_TOOLS;

fn valid(tool: &str, input: &Value) -> bool {
    let schema = turn::input_schema(tool).unwrap();
    jsonschema::validator_for(&schema).unwrap().is_valid(input)
}

/// (tool, input, the tool's refusal): the schema refuses each input.
const EXCLUDED: &[(&str, &str, &str)] = &[
    ("read", r#"{}"#, "missing `path`"),
    ("read", r#"{"path": ""}"#, "cannot read : No such file"),
    ("read", r#"{"path": "a", "offset": 0}"#, "offset below 1 (clamped)"),
    ("read", r#"{"path": "a", "limit": 5000}"#, "limit past 2000"),
    ("read", r#"{"path": "a", "lines": 3}"#, "bad input: unknown field"),
    ("write", r#"{"path": "a"}"#, "missing `content`"),
    ("write", r#"{"path": "", "content": "x"}"#, "cannot write : No such file"),
    ("edit", r#"{"path": "a", "old": "", "new": "x"}"#, "`old` is empty"),
    ("edit", r#"{"path": "a", "new": "x"}"#, "missing `old`"),
    ("bash", r#"{"command": ""}"#, "the command is empty"),
    ("bash", r#"{"command": "ls", "timeout_secs": 0}"#, "timeout_secs is 0"),
    ("bash", r#"{"command": "ls", "timeout_secs": 601}"#, "timeout_secs is 601"),
    ("bash", r#"{"command": "ls", "cwd": "/"}"#, "bad input: unknown field"),
    ("glob", r#"{"pattern": ""}"#, "an empty pattern"),
    ("glob", r#"{"pattern": "*", "path": ""}"#, "does not exist"),
    ("grep", r#"{"pattern": "x", "max_matches": 0}"#, "max_matches below 1 (clamped)"),
    ("grep", r#"{"pattern": "x", "glob": ""}"#, "an empty glob"),
    ("repo_map", r#"{"path": "src"}"#, "an ignored field"),
    ("plan", r#"{"op": "write"}"#, "`write` needs the plan's `text`"),
    ("plan", r#"{"op": "write", "text": ""}"#, "`write` needs the plan's `text`"),
    ("plan", r#"{"op": "delete"}"#, "`op` is `read` or `write`"),
    ("plan", r#"{"op": "read", "text": "x"}"#, "an ignored field"),
    ("context", r#"{"op": "drop"}"#, "`drop` needs the segment `ids`"),
    ("context", r#"{"op": "drop", "ids": []}"#, "`drop` needs the segment `ids`"),
    ("context", r#"{"op": "pin", "ids": [""]}"#, "no segment ``"),
    ("context", r#"{"op": "summarize", "ids": ["c1"]}"#, "`summarize` needs the summary `text`"),
    ("context", r#"{"op": "note"}"#, "`note` needs `text`"),
    ("context", r#"{"op": "note", "text": ""}"#, "`note` needs `text`"),
    ("context", r#"{"op": "status", "ids": ["c1"]}"#, "an ignored field"),
    ("context", r#"{"op": "drop", "ids": ["c1"], "text": "x"}"#, "an ignored field"),
    ("context", r#"{"op": "forget", "ids": ["c1"]}"#, "an unknown op"),
    ("agent", r#"{"brief": "", "check": "sh test.sh"}"#, "an empty brief"),
    ("agent", r#"{"brief": "Fix it."}"#, "missing `check`"),
    ("skill", r#"{"name": ""}"#, "no skill named ``"),
    ("skill", r#"{"list": false}"#, "an empty request"),
];

/// (tool, input, the refusal, why the schema cannot exclude it): valid against the schema.
const RUNTIME_ONLY: &[(&str, &str, &str, &str)] = &[
    ("read", r#"{"path": "missing.txt"}"#, "cannot read", "the file system is not in the schema"),
    (
        "read",
        r#"{"path": "a", "offset": 900}"#,
        "offset is past the end",
        "a file's length is not known",
    ),
    (
        "edit",
        r#"{"path": "a", "old": "x", "new": "x"}"#,
        "`old` and `new` are the same",
        "JSON Schema cannot compare two fields",
    ),
    (
        "edit",
        r#"{"path": "a", "old": "nowhere", "new": "y"}"#,
        "`old` was not found",
        "the file's text is not known",
    ),
    (
        "bash",
        r#"{"command": "   "}"#,
        "the command is empty",
        "only a pattern could say it, a cost in grammar size on every turn for a rare case",
    ),
    ("glob", r#"{"pattern": "["}"#, "bad glob", "glob syntax is a language of its own"),
    (
        "grep",
        r#"{"pattern": "\\w{1000}{1000}"}"#,
        "bad regex",
        "a regex's compiled size is not in the schema (one that does not parse is searched as text)",
    ),
    (
        "plan",
        r#"{"op": "write", "text": "  "}"#,
        "`write` needs the plan's `text`",
        "as for bash: spaces only",
    ),
    (
        "context",
        r#"{"op": "drop", "ids": ["c99"]}"#,
        "no segment `c99`",
        "not in the tool's own schema: each turn's schema narrows `ids` to the context's segments (restrict_context_call, tested below)",
    ),
    (
        "context",
        r#"{"op": "drop", "ids": ["system"]}"#,
        "cannot be dropped or summarized",
        "as above: the turn's `drop` and `summarize` take only the unprotected segments",
    ),
    (
        "agent",
        r#"{"brief": "b", "check": "c", "definition": "nobody"}"#,
        "no agent definition",
        "not in the tool's own schema: the request's turn schema narrows it to the loaded definitions (restrict_agent_call, tested below)",
    ),
    (
        "skill",
        r#"{"name": "deploy"}"#,
        "no skill named",
        "not in the tool's own schema: the turn schema narrows `name` to the loaded skills (restrict_skill_call, tested below)",
    ),
];

#[test]
fn every_statically_checkable_refusal_is_excluded_by_the_schema() {
    for (tool, input, refusal) in EXCLUDED {
        let input: Value = serde_json::from_str(input).unwrap();
        assert!(!valid(tool, &input), "{tool} {input} ({refusal}) passes the schema");
    }
}

#[test]
fn the_refusals_the_schema_cannot_state_are_valid_inputs_with_a_reason() {
    for (tool, input, refusal, why) in RUNTIME_ONLY {
        let input: Value = serde_json::from_str(input).unwrap();
        assert!(valid(tool, &input), "{tool} {input}: expected valid ({refusal}: {why})");
        assert!(!why.is_empty());
    }
}

#[test]
fn every_tool_s_well_formed_inputs_pass() {
    let good = [
        ("read", json!({"path": "src/main.rs", "offset": 1, "limit": 80})),
        ("write", json!({"path": "a.txt", "content": ""})),
        ("edit", json!({"path": "a", "old": "x", "new": "", "replace_all": true})),
        ("bash", json!({"command": "sh test.sh", "timeout_secs": 600, "background": false})),
        ("glob", json!({"pattern": "**/*.rs"})),
        ("grep", json!({"pattern": "fn main", "path": "src", "glob": "*.rs", "max_matches": 10})),
        ("repo_map", json!({})),
        ("plan", json!({"op": "read"})),
        ("plan", json!({"op": "write", "text": "1. read"})),
        ("context", json!({"op": "status"})),
        ("context", json!({"op": "unpin", "ids": ["c1", "c2"]})),
        ("context", json!({"op": "summarize", "ids": ["c1"], "text": "read a.txt: 3 lines"})),
        ("context", json!({"op": "note", "text": "the bug is in add()"})),
        ("agent", json!({"brief": "Fix add().", "check": "sh test.sh", "definition": "fixer"})),
        ("skill", json!({"list": true})),
        ("skill", json!({"name": "review", "args": "src/"})),
    ];
    for (tool, input) in good {
        assert!(valid(tool, &input), "{tool} {input}");
    }
    for tool in ALL_TOOLS {
        assert!(turn::input_schema(tool).is_some(), "{tool}");
    }
}

/// A tool the agent may not call, and the reserved web tools, cannot be named at all.
#[test]
fn only_the_agent_s_tools_can_be_called() {
    let tools: Vec<String> = ["read", "bash"].map(String::from).to_vec();
    let schema = turn::schema(&tools);
    let validator = jsonschema::validator_for(&schema).unwrap();
    let turn = |tool: &str| json!({"thought": "t", "calls": [{"tool": tool, "input": {"command": "ls", "path": "a"}}]});
    assert!(validator.is_valid(
        &json!({"thought": "t", "calls": [{"tool": "bash", "input": {"command": "ls"}}]})
    ));
    for tool in ["write", "agent", "web_fetch", "web_search"] {
        assert!(!validator.is_valid(&turn(tool)), "{tool}");
    }
}

#[test]
fn the_tools_section_shows_each_operation_s_fields() {
    let context = super::describe(&turn::input_schema("context").unwrap());
    assert_eq!(
        context,
        r#"{op: "status"} or {op: "drop"|"pin"|"unpin", ids} or {op: "summarize", ids, text} or {op: "note", text}"#
    );
    let read = super::describe(&turn::input_schema("read").unwrap());
    assert_eq!(read, "{path, offset?, limit?}");
}

#[test]
fn a_skill_call_names_only_skills_that_exist() {
    let tools: Vec<String> = ["skill"].map(String::from).to_vec();
    let call = |input: Value| json!({"thought": "t", "calls": [{"tool": "skill", "input": input}]});
    let mut schema = turn::schema(&tools);
    super::restrict_skill_call(&mut schema, &["review".into(), "tools:fmt".into()]);
    let v = jsonschema::validator_for(&schema).unwrap();
    assert!(v.is_valid(&call(json!({"name": "tools:fmt", "args": "src/"}))));
    assert!(v.is_valid(&call(json!({"list": true}))));
    assert!(!v.is_valid(&call(json!({"name": "deploy"}))));
}

#[test]
fn an_agent_call_names_only_definitions_and_members_that_exist() {
    let tools: Vec<String> = ["agent"].map(String::from).to_vec();
    let call = |input: Value| json!({"thought": "t", "calls": [{"tool": "agent", "input": input}]});
    let brief = |extra: Value| {
        let mut input = json!({"brief": "Fix add().", "check": "sh test.sh"});
        input.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        call(input)
    };
    let mut none = turn::schema(&tools);
    super::restrict_agent_call(&mut none, &[], &["main".into()], &[]);
    let v = jsonschema::validator_for(&none).unwrap();
    assert!(v.is_valid(&brief(json!({}))));
    assert!(!v.is_valid(&brief(json!({"definition": "parse.rs"}))), "no definitions: no field");
    assert!(!v.is_valid(&brief(json!({"member": "main"}))), "one member: no field");
    let mut some = turn::schema(&tools);
    super::restrict_agent_call(&mut some, &["fixer".into()], &["main".into(), "big".into()], &[]);
    let v = jsonschema::validator_for(&some).unwrap();
    assert!(v.is_valid(&brief(json!({"definition": "fixer", "member": "big"}))));
    assert!(!v.is_valid(&brief(json!({"definition": "nobody"}))));
    assert!(!v.is_valid(&brief(json!({"member": "parse.rs"}))));
}

/// With test commands known, a piece's `check` is one of them (offered first) or prose, never
/// empty and never past 500 characters.
#[test]
fn an_agent_calls_check_offers_the_known_commands_first() {
    let tools: Vec<String> = ["agent"].map(String::from).to_vec();
    let checks: Vec<String> = ["sh test.sh", "make test"].map(String::from).to_vec();
    let mut schema = turn::schema(&tools);
    super::restrict_agent_call(&mut schema, &[], &[], &checks);
    let agent = &schema.pointer("/oneOf/0/properties/calls/items/oneOf").unwrap()[0];
    let check = &agent["properties"]["input"]["properties"]["check"];
    assert_eq!(check["anyOf"][0]["enum"], json!(checks), "the commands, first");
    let v = jsonschema::validator_for(&schema).unwrap();
    let call = |check: &str| json!({"thought": "t", "calls": [{"tool": "agent", "input": {"brief": "b", "check": check}}]});
    assert!(v.is_valid(&call("make test")));
    assert!(v.is_valid(&call("the page shows the total")), "prose still serves");
    assert!(!v.is_valid(&call("")));
    assert!(!v.is_valid(&call(&"x".repeat(501))));
    let mut without = turn::schema(&tools);
    super::restrict_agent_call(&mut without, &[], &[], &[]);
    let agent = &without.pointer("/oneOf/0/properties/calls/items/oneOf").unwrap()[0];
    assert!(agent["properties"]["input"]["properties"]["check"]["anyOf"].is_null());
}

/// The turn's `context` call names only segments there are, and `drop`/`summarize` only those
/// the tool lets go: each refusal of an id is excluded, each id the tool takes is offered.
#[test]
fn a_context_call_names_only_the_segments_there_are() {
    let tools: Vec<String> = ["context"].map(String::from).to_vec();
    let call =
        |input: Value| json!({"thought": "t", "calls": [{"tool": "context", "input": input}]});
    let owned = |ids: &[&str]| ids.iter().map(|i| (*i).to_owned()).collect::<Vec<_>>();
    let ids = super::ContextIds {
        all: owned(&["system", "instructions", "p1", "t1", "c1", "scratchpad"]),
        droppable: owned(&["p1", "t1", "c1"]),
    };
    let mut schema = turn::schema(&tools);
    super::restrict_context_call(&mut schema, &ids);
    let v = jsonschema::validator_for(&schema).unwrap();
    let ok = |input: Value| v.is_valid(&call(input));
    for id in &ids.droppable {
        assert!(ok(json!({"op": "drop", "ids": [id]})), "drop {id}");
        assert!(ok(json!({"op": "summarize", "ids": [id], "text": "s"})), "summarize {id}");
    }
    for id in &ids.all {
        assert!(ok(json!({"op": "pin", "ids": [id]})) && ok(json!({"op": "unpin", "ids": [id]})));
    }
    for id in ["system", "instructions", "scratchpad", "c99", "parse.rs"] {
        assert!(!ok(json!({"op": "drop", "ids": [id]})), "drop {id}");
        assert!(!ok(json!({"op": "summarize", "ids": [id], "text": "s"})), "summarize {id}");
    }
    assert!(!ok(json!({"op": "pin", "ids": ["c99"]})));
    assert!(!ok(json!({"op": "drop", "ids": []})));
    assert!(ok(json!({"op": "drop", "ids": ["p1", "t1", "c1"]})));
    assert!(!ok(json!({"op": "drop", "ids": ["c1", "c1", "c1", "c1"]})), "more ids than exist");
    assert!(ok(json!({"op": "status"})) && ok(json!({"op": "note", "text": "n"})));
    // Nothing to drop: only status, pin, unpin and note are offered.
    let only = super::ContextIds { all: owned(&["system"]), droppable: vec![] };
    let mut schema = turn::schema(&tools);
    super::restrict_context_call(&mut schema, &only);
    let v = jsonschema::validator_for(&schema).unwrap();
    assert!(!v.is_valid(&call(json!({"op": "drop", "ids": ["system"]}))));
    assert!(v.is_valid(&call(json!({"op": "pin", "ids": ["system"]}))));
}
