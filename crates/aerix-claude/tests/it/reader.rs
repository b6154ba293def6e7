//! A reader of Claude Code transcripts written from its documented format (community
//! descriptions of `~/.claude/projects/<dir>/<session>.jsonl`): it checks what hooks and tools
//! that read transcripts rely on, and fails on anything else.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

/// A transcript as such a reader sees it.
#[derive(Debug, Default)]
pub struct Transcript {
    pub lines: Vec<Value>,
    /// `tool_use` ids → tool name, in order.
    pub calls: Vec<(String, String)>,
    /// `tool_result` ids, in order.
    pub results: Vec<String>,
}

impl Transcript {
    /// The text of every `text` block of the assistant lines, in order.
    pub fn assistant_texts(&self) -> Vec<String> {
        self.of("assistant")
            .iter()
            .flat_map(|l| l["message"]["content"].as_array().unwrap().clone())
            .filter(|b| b["type"] == "text")
            .map(|b| b["text"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The user prompts (user lines whose content is a string).
    pub fn prompts(&self) -> Vec<String> {
        self.of("user")
            .iter()
            .filter_map(|l| l["message"]["content"].as_str().map(str::to_owned))
            .collect()
    }

    pub fn of(&self, kind: &str) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["type"] == kind).collect()
    }
}

/// Reads one transcript file's text; panics naming the line and the rule it breaks.
pub fn read(text: &str, session: &str, sidechain: bool) -> Transcript {
    let mut out = Transcript::default();
    let mut uuids = HashSet::new();
    let mut tool_uses: HashMap<String, String> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line: Value = serde_json::from_str(raw).unwrap_or_else(|e| panic!("line {n}: {e}"));
        let kind = line["type"].as_str().unwrap_or_else(|| panic!("line {n}: no type"));
        assert!(["user", "assistant", "system"].contains(&kind), "line {n}: type {kind}");
        let uuid = line["uuid"].as_str().unwrap_or_else(|| panic!("line {n}: no uuid"));
        assert_eq!(uuid.len(), 36, "line {n}: uuid {uuid}");
        assert!(uuids.insert(uuid.to_owned()), "line {n}: uuid {uuid} twice");
        // The chain: null at a root (and at a compaction's boundary, whose logical parent
        // is an earlier line), else an earlier line.
        match &line["parentUuid"] {
            Value::Null => {
                if kind == "system" {
                    assert_eq!(line["subtype"], "compact_boundary", "line {n}");
                    let logical = line["logicalParentUuid"].as_str().unwrap();
                    assert!(uuids.contains(logical), "line {n}: logical parent");
                    let meta = &line["compactMetadata"];
                    assert!(meta["trigger"].is_string() && meta["preTokens"].is_u64(), "{meta}");
                } else {
                    assert_eq!(out.lines.len(), 0, "line {n}: a second root");
                }
            }
            Value::String(parent) => assert!(uuids.contains(parent), "line {n}: parent {parent}"),
            other => panic!("line {n}: parentUuid {other}"),
        }
        assert_eq!(line["sessionId"], session, "line {n}");
        assert!(line["cwd"].as_str().is_some_and(|c| c.starts_with('/')), "line {n}: cwd");
        assert!(line["version"].is_string(), "line {n}: version");
        assert_eq!(line["isSidechain"], sidechain, "line {n}");
        assert_eq!(line["userType"], "external", "line {n}");
        assert_iso8601(line["timestamp"].as_str().unwrap_or(""), n);
        if kind != "system" {
            let message = &line["message"];
            assert_eq!(message["role"], kind, "line {n}: role");
            match &message["content"] {
                Value::String(_) => assert_eq!(kind, "user", "line {n}"),
                Value::Array(blocks) => {
                    for block in blocks {
                        match block["type"].as_str().unwrap_or("") {
                            "text" => assert!(block["text"].is_string(), "line {n}"),
                            "thinking" => assert!(block["thinking"].is_string(), "line {n}"),
                            "tool_use" => {
                                assert_eq!(kind, "assistant", "line {n}");
                                let id = block["id"].as_str().unwrap().to_owned();
                                let name = block["name"].as_str().unwrap().to_owned();
                                assert!(block["input"].is_object(), "line {n}: input");
                                assert!(tool_uses.insert(id.clone(), name.clone()).is_none());
                                out.calls.push((id, name));
                            }
                            "tool_result" => {
                                assert_eq!(kind, "user", "line {n}");
                                // One result a line, after its call, with `toolUseResult`.
                                assert_eq!(blocks.len(), 1, "line {n}");
                                let id = block["tool_use_id"].as_str().unwrap();
                                assert!(tool_uses.contains_key(id), "line {n}: result of {id}");
                                assert!(block["content"].is_string(), "line {n}");
                                assert!(!line["toolUseResult"].is_null(), "line {n}");
                                out.results.push(id.to_owned());
                            }
                            other => panic!("line {n}: block {other}"),
                        }
                    }
                }
                other => panic!("line {n}: content {other}"),
            }
            if kind == "assistant" {
                let usage = &message["usage"];
                if !usage.is_null() {
                    for key in ["input_tokens", "output_tokens", "cache_read_input_tokens"] {
                        assert!(usage[key].is_u64(), "line {n}: usage.{key}");
                    }
                }
                assert!(message["stop_reason"].is_string(), "line {n}");
            }
        }
        out.lines.push(line);
    }
    out
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z`, with fields in range.
fn assert_iso8601(ts: &str, n: usize) {
    let b = ts.as_bytes();
    let shaped = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && ts.ends_with('Z');
    assert!(shaped, "line {n}: timestamp {ts}");
    let field = |r: std::ops::Range<usize>| ts[r].parse::<u32>().unwrap();
    assert!((1..=12).contains(&field(5..7)) && (1..=31).contains(&field(8..10)), "{ts}");
    assert!(field(11..13) < 24 && field(14..16) < 60 && field(17..19) < 61, "{ts}");
}
