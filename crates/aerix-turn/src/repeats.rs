//! Calls that go nowhere (a deviation from the spec, `context.repeat_guard`): small models
//! repeat the same call. A call identical to an earlier one of the same agent (same tool, same
//! input) whose result cannot have changed since (no `write`, `edit`, `bash` or `agent` call in
//! between, successful or failed, and the earlier result still in the context as it was) is
//! answered with one short line pointing at that result instead of running again.
//!
//! The earlier result may be a failure: a pure call (`read`, `glob`, `grep`, `repo_map`) fails
//! the same way until something changes, and so does an `edit` or a `write` (an `old` not
//! found stays not found). The repeat gets a pointer naming the failed call. A failed `bash` is
//! never pointed at: a command may depend on time, the network, or what it did before it failed.
//!
//! `STUCK_REPEATS` calls in a row that go nowhere end the agent as failed, `stuck: ...` naming
//! the call: after a result that stands, that many repeats of it (the call ran once, then was
//! answered `STUCK_REPEATS` times); after a failure, that many calls counting the failed one
//! (it failed, then was answered `STUCK_REPEATS - 1` times), as OpenHands ends an agent whose
//! same action errors 3 times. Any call that runs ends the row.
//!
//! `repo_map`'s result is computed once per agent, so a successful one stands through changes.

use serde_json::Value;

/// Calls in a row that go nowhere before the agent ends (see the module's comment for how a
/// failure counts).
pub const STUCK_REPEATS: u32 = 3;

/// Tools whose result depends only on the files (and the working tree's file set): the same
/// call gives the same result, or fails the same way, until something changes them.
const PURE: [&str; 4] = ["read", "glob", "grep", "repo_map"];

/// Tools that may change what a pure call sees: `agent` runs implementers that edit and run
/// commands.
const CHANGING: [&str; 4] = ["write", "edit", "bash", "agent"];

/// Changing tools whose failure changed nothing and comes back the same until something else
/// changes (their refusals are checked before they write); `bash` is not one.
const FAIL_ALIKE: [&str; 2] = ["write", "edit"];

/// What to do with a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Run it.
    Fresh,
    /// Answer with a pointer to the call `earlier` (`failed`: it failed): this is the
    /// `streak`th repeat in a row.
    Repeat { earlier: String, streak: u32, failed: bool },
}

impl Seen {
    /// Whether this repeat ends the agent as stuck.
    pub fn is_stuck(&self) -> bool {
        match self {
            Seen::Fresh => false,
            // A failure counts itself: it went nowhere too.
            Seen::Repeat { streak, failed: true, .. } => streak + 1 >= STUCK_REPEATS,
            Seen::Repeat { streak, failed: false, .. } => *streak >= STUCK_REPEATS,
        }
    }
}

/// A call whose result stands.
#[derive(Clone, Debug)]
struct Standing {
    tool: String,
    input: Value,
    id: String,
    failed: bool,
}

/// One agent's calls since the last change.
#[derive(Clone, Debug, Default)]
pub struct Repeats {
    standing: Vec<Standing>,
    streak: u32,
}

impl Repeats {
    /// Looks at a call about to run; a repeat is not run, a fresh call is, and `ran` follows.
    pub fn check(&mut self, tool: &str, input: &Value) -> Seen {
        match self.find(tool, input).map(|s| (s.id.clone(), s.failed)) {
            Some((earlier, failed)) => {
                self.streak += 1;
                Seen::Repeat { earlier, streak: self.streak, failed }
            }
            None => {
                self.streak = 0;
                Seen::Fresh
            }
        }
    }

    /// The call whose result stands for this tool and input (a success or a failure), without
    /// counting a repeat.
    pub fn earlier(&self, tool: &str, input: &Value) -> Option<&str> {
        self.find(tool, input).map(|s| s.id.as_str())
    }

    fn find(&self, tool: &str, input: &Value) -> Option<&Standing> {
        self.standing.iter().find(|s| s.tool == tool && s.input == *input)
    }

    /// A call ran with result `ok`. A pure call's result stands, a failure too. A changing
    /// call (even a failed one: a command may have written before it failed) clears every
    /// result but a successful `repo_map`'s; a failed `write` or `edit` then stands itself.
    pub fn ran(&mut self, tool: &str, input: &Value, id: &str, ok: bool) {
        let stands = if CHANGING.contains(&tool) {
            self.changed();
            !ok && FAIL_ALIKE.contains(&tool)
        } else {
            PURE.contains(&tool)
        };
        if stands {
            let (tool, input, id) = (tool.to_owned(), input.clone(), id.to_owned());
            self.standing.push(Standing { tool, input, id, failed: !ok });
        }
    }

    /// Something outside the agent's calls may have changed the files (a background job ran):
    /// every result but a successful `repo_map`'s is run again.
    pub fn changed(&mut self) {
        self.standing.retain(|s| s.tool == "repo_map" && !s.failed);
    }

    /// The result of call `id` left the context (compacted, dropped, summarized): a repeat of
    /// it is run again.
    pub fn forget(&mut self, id: &str) {
        self.standing.retain(|s| s.id != id);
    }

    /// The line a repeat gets instead of its result; `failed`: the earlier call failed.
    pub fn pointer(earlier: &str, failed: bool) -> String {
        if failed {
            format!(
                "[same call as {earlier}, which failed, and nothing has changed since: it would \
                 fail the same way. Read its error above and change the call, or do something \
                 else]"
            )
        } else {
            format!(
                "[same call as {earlier}, and nothing has changed since: its result above still \
                 stands. Use it, or do something else]"
            )
        }
    }

    /// Why an agent stuck repeating `tool` ends; `failed`: the call failed each time.
    pub fn stuck(tool: &str, input: &Value, earlier: &str, failed: bool) -> String {
        if failed {
            format!(
                "stuck: the same `{tool}` call ({input}) {STUCK_REPEATS} times in a row, each \
                 failing as {earlier} did"
            )
        } else {
            format!(
                "stuck: the same `{tool}` call ({input}) {STUCK_REPEATS} times in a row, first \
                 answered as {earlier}"
            )
        }
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
        let repeat = Seen::Repeat { earlier: "c1".into(), streak: 1, failed: false };
        assert_eq!(r.check("read", &read), repeat);
        // Another input is another call.
        assert_eq!(r.check("read", &json!({"path": "test.sh"})), Seen::Fresh);
        // An edit (or a failed bash) may change what read sees.
        r.ran("bash", &json!({"command": "sed -i s/-/+/ calc.sh"}), "c3", false);
        assert_eq!(r.check("read", &read), Seen::Fresh);
        // So may a piece of delegation, and a background job.
        r.ran("read", &read, "c4", true);
        r.ran("agent", &json!({"brief": "fix it", "check": "sh test.sh"}), "c5", true);
        assert_eq!(r.check("read", &read), Seen::Fresh, "a piece ran in between");
        r.ran("read", &read, "c6", true);
        r.changed();
        assert_eq!(r.check("read", &read), Seen::Fresh, "a background job ran meanwhile");
    }

    #[test]
    fn repeats_in_a_row_count_and_a_fresh_call_resets_them() {
        let mut r = Repeats::default();
        let map = json!({});
        r.ran("repo_map", &map, "c1", true);
        for streak in 1..=2 {
            let seen = r.check("repo_map", &map);
            assert_eq!(seen, Seen::Repeat { earlier: "c1".into(), streak, failed: false });
            assert!(!seen.is_stuck());
        }
        assert!(r.check("repo_map", &map).is_stuck(), "the third repeat, the fourth call");
        assert_eq!(r.check("glob", &json!({"pattern": "*.sh"})), Seen::Fresh);
        let seen = r.check("repo_map", &map);
        assert_eq!(seen, Seen::Repeat { earlier: "c1".into(), streak: 1, failed: false });
        // repo_map is computed once per agent: its result outlives a change.
        r.ran("edit", &json!({"path": "a", "old": "x", "new": "y"}), "c7", true);
        assert_eq!(r.earlier("repo_map", &map), Some("c1"));
        r.changed();
        assert_eq!(r.earlier("repo_map", &map), Some("c1"));
    }

    #[test]
    fn a_pure_call_that_failed_is_pointed_at_and_its_third_time_is_stuck() {
        let mut r = Repeats::default();
        let grep = json!({"pattern": "(", "path": "nowhere"});
        assert_eq!(r.check("grep", &grep), Seen::Fresh);
        r.ran("grep", &grep, "c1", false);
        let second = r.check("grep", &grep);
        assert_eq!(second, Seen::Repeat { earlier: "c1".into(), streak: 1, failed: true });
        assert!(!second.is_stuck(), "the second gets a pointer");
        assert!(r.check("grep", &grep).is_stuck(), "the third in a row ends the agent");
        let pointer = Repeats::pointer("c1", true);
        assert!(pointer.starts_with("[same call as c1, which failed,"), "{pointer}");
        let stuck = Repeats::stuck("grep", &grep, "c1", true);
        assert!(stuck.starts_with("stuck: the same `grep` call"), "{stuck}");
        assert!(stuck.ends_with("3 times in a row, each failing as c1 did"), "{stuck}");
        // A call that runs in between ends the row; a change lets the call run again.
        r.check("read", &json!({"path": "a"}));
        assert!(!r.check("grep", &grep).is_stuck());
        r.ran("write", &json!({"path": "nowhere/a", "content": ""}), "c5", true);
        assert_eq!(r.check("grep", &grep), Seen::Fresh);
    }

    #[test]
    fn a_failed_edit_or_write_fails_alike_and_a_failed_bash_does_not() {
        let mut r = Repeats::default();
        let edit = json!({"path": "calc.sh", "old": "$1 - $2", "new": "$1 + $2"});
        r.ran("read", &json!({"path": "calc.sh"}), "c1", true);
        r.ran("edit", &edit, "c2", false);
        // Failed or not, an edit is a change: the read runs again.
        assert_eq!(r.check("read", &json!({"path": "calc.sh"})), Seen::Fresh);
        r.ran("read", &json!({"path": "calc.sh"}), "c3", true);
        let seen = r.check("edit", &edit);
        assert_eq!(seen, Seen::Repeat { earlier: "c2".into(), streak: 1, failed: true });
        let write = json!({"path": "/etc/passwd", "content": "x"});
        r.ran("write", &write, "c5", false);
        assert_eq!(r.check("edit", &edit), Seen::Fresh, "the write cleared the failed edit");
        assert_eq!(r.earlier("write", &write), Some("c5"));
        // A successful edit or write never stands: the same edit again is another change.
        r.ran("edit", &edit, "c7", true);
        assert_eq!(r.check("edit", &edit), Seen::Fresh);
        let test = json!({"command": "sh test.sh"});
        r.ran("bash", &test, "c8", false);
        assert_eq!(r.check("bash", &test), Seen::Fresh, "a failed command may pass next time");
    }

    #[test]
    fn impure_and_forgotten_calls_never_stand() {
        let mut r = Repeats::default();
        let status = json!({"op": "status"});
        r.ran("context", &status, "c2", true);
        assert_eq!(r.check("context", &status), Seen::Fresh, "the context changes by itself");
        r.ran("context", &json!({"op": "nope"}), "c3", false);
        assert_eq!(r.check("context", &json!({"op": "nope"})), Seen::Fresh);
        let ok = json!({"path": "calc.sh"});
        r.ran("read", &ok, "c4", true);
        r.forget("c4");
        assert_eq!(r.check("read", &ok), Seen::Fresh, "its result was compacted away");
        assert!(
            Repeats::stuck("read", &ok, "c4", false).starts_with("stuck: the same `read` call")
        );
        r.ran("read", &json!({"path": "missing"}), "c5", false);
        r.changed();
        assert_eq!(r.check("read", &json!({"path": "missing"})), Seen::Fresh);
    }
}
