//! Calls that go nowhere (a deviation from the spec, `context.repeat_guard`): small models
//! repeat the same call. A call identical to an earlier one of the same agent (same tool, same
//! input) whose result cannot have changed since (no `write`, `edit` or `bash` in between, and
//! the earlier result still in the context as it was) is answered with one short line pointing
//! at that result instead of the whole result again; `STUCK_REPEATS` such repeats in a row end
//! the agent as failed, `stuck: ...` naming the call.

use serde_json::Value;

/// Repeats in a row that end the agent.
pub const STUCK_REPEATS: u32 = 3;

/// Tools whose result depends only on the files (and the working tree's file set): the same
/// call gives the same result until something changes them.
const PURE: [&str; 4] = ["read", "glob", "grep", "repo_map"];

/// Tools that may change what a pure call sees.
const CHANGING: [&str; 3] = ["write", "edit", "bash"];

/// What to do with a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Run it.
    Fresh,
    /// Answer with a pointer to the call `earlier`: this is the `streak`th repeat in a row.
    Repeat { earlier: String, streak: u32 },
}

/// One agent's calls since the last change.
#[derive(Clone, Debug, Default)]
pub struct Repeats {
    /// (tool, input, call id) of pure calls whose results stand.
    standing: Vec<(String, Value, String)>,
    streak: u32,
}

impl Repeats {
    /// Looks at a call about to run; a repeat is not run, a fresh call is, and `ran` follows.
    pub fn check(&mut self, tool: &str, input: &Value) -> Seen {
        match self.earlier(tool, input).map(str::to_owned) {
            Some(earlier) => {
                self.streak += 1;
                Seen::Repeat { earlier, streak: self.streak }
            }
            None => {
                self.streak = 0;
                Seen::Fresh
            }
        }
    }

    /// The call whose result stands for this tool and input, without counting a repeat.
    pub fn earlier(&self, tool: &str, input: &Value) -> Option<&str> {
        self.standing.iter().find(|(t, i, _)| t == tool && i == input).map(|(_, _, id)| id.as_str())
    }

    /// A call ran with result `ok`: a pure call's result stands; a changing one (even a
    /// failed one: a command may have written before it failed) clears every result.
    pub fn ran(&mut self, tool: &str, input: &Value, id: &str, ok: bool) {
        if CHANGING.contains(&tool) {
            self.standing.clear();
        } else if ok && PURE.contains(&tool) {
            self.standing.push((tool.to_owned(), input.clone(), id.to_owned()));
        }
    }

    /// The result of call `id` left the context (compacted, dropped, summarized): a repeat of
    /// it is run again.
    pub fn forget(&mut self, id: &str) {
        self.standing.retain(|(_, _, i)| i != id);
    }

    /// The line a repeat gets instead of its result.
    pub fn pointer(earlier: &str) -> String {
        format!(
            "[same call as {earlier}, and nothing has changed since: its result above still \
             stands. Use it, or do something else]"
        )
    }

    /// Why an agent stuck repeating `tool` ends.
    pub fn stuck(tool: &str, input: &Value, earlier: &str) -> String {
        format!(
            "stuck: the same `{tool}` call ({input}) {STUCK_REPEATS} times in a row, first \
             answered as {earlier}"
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pure_call_repeated_points_at_the_first_until_something_changes() {
        let mut r = Repeats::default();
        let read = json!({"path": "calc.sh"});
        assert_eq!(r.check("read", &read), Seen::Fresh);
        r.ran("read", &read, "c1", true);
        assert_eq!(r.check("read", &read), Seen::Repeat { earlier: "c1".into(), streak: 1 });
        // Another input is another call.
        assert_eq!(r.check("read", &json!({"path": "test.sh"})), Seen::Fresh);
        // An edit (or a failed bash) may change what read sees.
        r.ran("bash", &json!({"command": "sed -i s/-/+/ calc.sh"}), "c3", false);
        assert_eq!(r.check("read", &read), Seen::Fresh);
    }

    #[test]
    fn repeats_in_a_row_count_and_a_fresh_call_resets_them() {
        let mut r = Repeats::default();
        let map = json!({});
        r.ran("repo_map", &map, "c1", true);
        for streak in 1..=2 {
            assert_eq!(r.check("repo_map", &map), Seen::Repeat { earlier: "c1".into(), streak });
        }
        assert_eq!(r.check("glob", &json!({"pattern": "*.sh"})), Seen::Fresh);
        assert_eq!(r.check("repo_map", &map), Seen::Repeat { earlier: "c1".into(), streak: 1 });
    }

    #[test]
    fn failed_impure_and_forgotten_calls_never_stand() {
        let mut r = Repeats::default();
        let read = json!({"path": "missing"});
        r.ran("read", &read, "c1", false);
        assert_eq!(r.check("read", &read), Seen::Fresh, "a failed call is tried again");
        let status = json!({"op": "status"});
        r.ran("context", &status, "c2", true);
        assert_eq!(r.check("context", &status), Seen::Fresh, "the context changes by itself");
        let ok = json!({"path": "calc.sh"});
        r.ran("read", &ok, "c3", true);
        r.forget("c3");
        assert_eq!(r.check("read", &ok), Seen::Fresh, "its result was compacted away");
        assert!(Repeats::stuck("read", &ok, "c3").starts_with("stuck: the same `read` call"));
    }
}
