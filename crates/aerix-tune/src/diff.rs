//! Unified diffs of revisions (`--dry-run`, and the reconcile prompt's release diff).

/// `old` → `new` as a unified diff with 3 lines of context, headed `a/<path>` and `b/<path>`.
pub fn unified(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_changed_line_with_its_headers() {
        let diff = super::unified("system.md", "one\ntwo\nthree\n", "one\n2\nthree\n");
        assert_eq!(
            diff,
            "--- a/system.md\n+++ b/system.md\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
        );
    }
}
