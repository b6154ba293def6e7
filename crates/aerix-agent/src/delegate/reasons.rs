//! Why a round's attempts failed, as the next round's brief and the piece's summary quote it:
//! a reason several attempts gave once (attempts that changed nothing all fail the same way),
//! and all of them within a budget (eight whole output tails would crowd a small window).

use crate::delegate::checks;

/// Bytes the reasons of one round take together (each distinct one an equal share).
const BUDGET: usize = 3_000;
/// The least share one reason gets, however many there are.
const LEAST: usize = 400;

/// One reason and the attempts (numbered from 1, in the round's order) that gave it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) attempts: Vec<usize>,
    pub(crate) reason: String,
}

/// The distinct reasons in the order first given, each cut to its share of the budget.
pub(crate) fn group(reasons: &[String]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for (n, reason) in reasons.iter().enumerate() {
        match groups.iter_mut().find(|g| g.reason == *reason) {
            Some(group) => group.attempts.push(n + 1),
            None => groups.push(Group { attempts: vec![n + 1], reason: reason.clone() }),
        }
    }
    let share = (BUDGET / groups.len().max(1)).max(LEAST);
    for group in &mut groups {
        group.reason = within(&group.reason, share);
    }
    groups
}

impl Group {
    /// `attempt 2` or `attempts 1, 3 and 4`.
    pub(crate) fn label(&self) -> String {
        let numbers: Vec<String> = self.attempts.iter().map(ToString::to_string).collect();
        match numbers.as_slice() {
            [one] => format!("attempt {one}"),
            [rest @ .., last] => format!("attempts {} and {last}", rest.join(", ")),
            [] => "no attempt".to_owned(),
        }
    }
}

/// The round's reasons as one text: each distinct one under the attempts that gave it.
pub(crate) fn summary(groups: &[Group]) -> String {
    if let [only] = groups {
        return only.reason.clone();
    }
    let parts: Vec<String> =
        groups.iter().map(|g| format!("{}: {}", g.label(), g.reason)).collect();
    parts.join("\n\n")
}

/// `reason` within `cap` bytes (about): its first line, which names the check and how it
/// ended, and as many of its last whole lines as fit, where a test's output says what failed.
fn within(reason: &str, cap: usize) -> String {
    if reason.len() <= cap {
        return reason.to_owned();
    }
    let (first, rest) = reason.split_once('\n').unwrap_or((reason, ""));
    let first = &first[..first.floor_char_boundary(cap / 2)];
    format!("{first}\n{}", checks::tail(rest, cap.saturating_sub(first.len() + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(n: usize) -> String {
        let lines: Vec<String> = (0..200).map(|i| format!("line {i} of output {n}")).collect();
        format!("`sh test.sh` exited 1. Its output ends:\n{}", lines.join("\n"))
    }

    #[test]
    fn the_same_reason_is_quoted_once_under_every_attempt_that_gave_it() {
        let reasons = vec!["a".to_owned(), "b".to_owned(), "a".to_owned(), "a".to_owned()];
        let groups = group(&reasons);
        assert_eq!(
            groups,
            vec![
                Group { attempts: vec![1, 3, 4], reason: "a".into() },
                Group { attempts: vec![2], reason: "b".into() },
            ]
        );
        assert_eq!(groups[0].label(), "attempts 1, 3 and 4");
        assert_eq!(groups[1].label(), "attempt 2");
        assert_eq!(summary(&groups), "attempts 1, 3 and 4: a\n\nattempt 2: b");
        assert_eq!(summary(&group(&["a".to_owned(), "a".to_owned()])), "a");
    }

    #[test]
    fn eight_long_reasons_fit_the_budget_keeping_each_first_and_last_lines() {
        let reasons: Vec<String> = (1..=8).map(reason).collect();
        let groups = group(&reasons);
        assert_eq!(groups.len(), 8);
        // Each within its share, give or take `tail`'s `[...]` line.
        let total: usize = groups.iter().map(|g| g.reason.len()).sum();
        assert!(total <= 8 * (LEAST.max(BUDGET / 8) + "[...]\n".len()), "{total}");
        for (n, g) in groups.iter().enumerate() {
            assert!(g.reason.starts_with("`sh test.sh` exited 1."), "{}", g.reason);
            assert!(g.reason.contains("\n[...]\n"));
            assert!(g.reason.ends_with(&format!("line 199 of output {}", n + 1)), "{}", g.reason);
        }
        // A short one is whole.
        assert_eq!(within("short\nreason", 100), "short\nreason");
    }
}
