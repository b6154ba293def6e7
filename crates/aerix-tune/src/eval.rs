//! `aerix tune --eval`: the figures of one replayed request, read from its session log, and the
//! side-by-side table of the base commit's and the tuned commit's runs. The replay itself (a
//! scratch worktree, an `aerix -p` per request and commit) is the binary's.

use aerix_session::{Event, Label, Outcome, Role};
use serde_json::Value;

/// What one run of a request shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    /// `done`, `failed`, ... (`none` when the log has no `session.end`).
    pub outcome: String,
    pub verdicts: u32,
    pub passed: u32,
    pub tool_calls: u32,
    pub tool_errors: u32,
    /// Turns dropped and asked again (a parse error, a turn cut by `max_new_tokens`).
    pub retries: u32,
    /// Generations of every agent.
    pub turns: u32,
    /// Prompt and completion tokens of every generation.
    pub tokens: u64,
}

impl Figures {
    /// The figures of a session's events.
    pub fn of(events: &[Event]) -> Figures {
        let mut f = Figures { outcome: "none".into(), ..Figures::default() };
        let mut verifiers = std::collections::BTreeSet::new();
        for event in events {
            match event {
                Event::AgentSpawn { agent, kind, .. } if kind == "verifier" => {
                    verifiers.insert(agent.clone());
                }
                Event::AgentEnd { agent, outcome, final_text, .. } if verifiers.contains(agent) => {
                    f.verdicts += 1;
                    let verdict: Value = final_text
                        .as_deref()
                        .and_then(|t| serde_json::from_str(t.trim()).ok())
                        .unwrap_or(Value::Null);
                    if *outcome == Outcome::Done && verdict.get("verdict") == Some(&"pass".into()) {
                        f.passed += 1;
                    }
                }
                Event::Message { role: Role::Assistant, usage, .. } => {
                    f.turns += 1;
                    if let Some(u) = usage {
                        f.tokens += u64::from(u.prompt_tokens) + u64::from(u.completion_tokens);
                    }
                }
                Event::Message { role: Role::Tool, error, .. } => {
                    f.tool_calls += 1;
                    if *error == Some(true) {
                        f.tool_errors += 1;
                    }
                }
                Event::Segment { label: Some(Label::Note), text: Some(text), .. }
                    if (text.starts_with("[parse error]")
                        || text.starts_with("Your last turn reached the limit")) =>
                {
                    f.retries += 1;
                }
                Event::SessionEnd { outcome, .. } => f.outcome = outcome.as_str().to_owned(),
                _ => {}
            }
        }
        f
    }

    fn add(&mut self, other: &Figures) {
        self.verdicts += other.verdicts;
        self.passed += other.passed;
        self.tool_calls += other.tool_calls;
        self.tool_errors += other.tool_errors;
        self.retries += other.retries;
        self.turns += other.turns;
        self.tokens += other.tokens;
    }

    fn cells(&self) -> [String; 6] {
        [
            self.outcome.clone(),
            rate(self.passed, self.verdicts),
            rate(self.tool_errors, self.tool_calls),
            self.retries.to_string(),
            self.turns.to_string(),
            self.tokens.to_string(),
        ]
    }
}

/// `n/d` as a percentage with its counts, `-` when there is nothing to count.
fn rate(n: u32, d: u32) -> String {
    match (n * 100).checked_div(d) {
        Some(pct) => format!("{pct}% ({n}/{d})"),
        None => "-".to_owned(),
    }
}

/// One replayed request: its label (session and request number, the prompt's start) and both
/// runs' figures.
#[derive(Clone, Debug)]
pub struct Compared {
    pub label: String,
    pub base: Figures,
    pub tuned: Figures,
}

/// The table: a header, one `base` and one `tuned` row per request, then the totals (the
/// outcome column of a total counts `done` runs).
pub fn table(base: &str, tuned: &str, rows: &[Compared]) -> String {
    let head =
        ["", "commit", "outcome", "verifier pass", "tool errors", "retries", "turns", "tokens"];
    let mut lines: Vec<[String; 8]> = vec![head.map(str::to_owned)];
    let mut totals = (Figures::default(), Figures::default(), 0u32, 0u32);
    for row in rows {
        for (which, figures) in [(base, &row.base), (tuned, &row.tuned)] {
            let c = figures.cells();
            let label =
                if std::ptr::eq(figures, &row.base) { row.label.clone() } else { String::new() };
            lines.push([
                label,
                short(which),
                c[0].clone(),
                c[1].clone(),
                c[2].clone(),
                c[3].clone(),
                c[4].clone(),
                c[5].clone(),
            ]);
        }
        totals.0.add(&row.base);
        totals.1.add(&row.tuned);
        totals.2 += u32::from(row.base.outcome == "done");
        totals.3 += u32::from(row.tuned.outcome == "done");
    }
    let n = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    totals.0.outcome = format!("{}/{n} done", totals.2);
    totals.1.outcome = format!("{}/{n} done", totals.3);
    for (i, (which, figures)) in [(base, &totals.0), (tuned, &totals.1)].into_iter().enumerate() {
        let c = figures.cells();
        let label = if i == 0 { "total".to_owned() } else { String::new() };
        lines.push([
            label,
            short(which),
            c[0].clone(),
            c[1].clone(),
            c[2].clone(),
            c[3].clone(),
            c[4].clone(),
            c[5].clone(),
        ]);
    }
    let widths: Vec<usize> =
        (0..8).map(|i| lines.iter().map(|l| l[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for line in &lines {
        let cells: Vec<String> =
            line.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn short(commit: &str) -> String {
    commit.chars().take(12).collect()
}
