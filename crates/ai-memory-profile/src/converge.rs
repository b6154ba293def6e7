//! Converge: statements grouped by topic across projects become entries.
//!
//! A group's ruling is its newest statement; restating it (the same thing, in any words) only
//! adds evidence. A group becomes an entry when a statement of its ruling was scoped as general,
//! or its ruling shows up in `min_projects` projects — the same sentence reaching several
//! projects within an hour counts once (one message fanned out to several checkouts, not a
//! habit). A team profile also needs two distinct operators. Entries someone edited by hand are
//! never rewritten; entries someone forgot come back only from evidence newer than the
//! forgetting. Converge never deletes an entry.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::entry::{Entry, Evidence, Learned, MAX_EVIDENCE};
use crate::sentence::Statement;
use crate::topic::Topic;

/// A fanned-out message: the same sentence in other projects within this many seconds.
pub const FAN_OUT_SECS: i64 = 3600;

/// A recorded statement and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Record order (ties at the same second).
    pub id: i64,
    /// The sentence it came from: one sentence backs at most one entry.
    pub sentence: String,
    pub statement: Statement,
    /// `workspace/project`.
    pub project: String,
    pub user: Option<i64>,
    /// Unix seconds.
    pub at: i64,
    /// `YYYY-MM-DD` of `at`.
    pub date: String,
    /// From a curated page, not a prompt (the fan-out rule is about messages).
    pub page: bool,
}

/// An entry removed with `profile forget`.
#[derive(Debug, Clone, PartialEq)]
pub struct Forgotten {
    pub path: String,
    /// The statement the entry stood on (its topic keeps it forgotten).
    pub statement: String,
    pub at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    pub min_projects: usize,
    /// A shared team profile: two distinct operators are needed too.
    pub team: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Write (create or rewrite) a learned entry.
    Write { entry: Entry, created: bool },
}

/// A habit not in the profile (yet), for `profile review`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pending {
    pub line: String,
    pub projects: usize,
    /// More projects it needs.
    pub needs_projects: usize,
    /// A team entry backed by one operator only.
    pub waiting_for_operator: bool,
    /// Forgotten: stays out until said again.
    pub forgotten: bool,
    pub evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub changes: Vec<Change>,
    pub pending: Vec<Pending>,
}

struct Group<'a> {
    /// The ruling: the newest statement that is not the same thing as the one before.
    ruling: &'a Candidate,
    members: Vec<&'a Candidate>,
    /// The existing entry the group is about, when a member names it: an LLM classifier
    /// attached it, or it is the statement the entry stands on.
    path: Option<String>,
}

impl Group<'_> {
    fn topic(&self) -> &Topic {
        &self.ruling.statement.topic
    }

    /// The members that say the ruling (in any words), oldest first. A statement an LLM
    /// attached to the entry counts: whether it changes the entry is the merge step's call.
    fn evidence(&self) -> Vec<&Candidate> {
        self.members
            .iter()
            .copied()
            .filter(|c| c.statement.entry.is_some() || c.statement.topic.same_thing(self.topic()))
            .collect()
    }
}

/// Groups candidates by topic, in time order: a statement naming an existing entry (or being
/// the one it stands on) joins that entry's group; others join the group on their topic.
fn group<'a>(candidates: &'a [Candidate], existing: &[Entry]) -> Vec<Group<'a>> {
    let mut sorted: Vec<&Candidate> = candidates.iter().collect();
    sorted.sort_by_key(|c| (c.at, c.id));
    let mut used_sentences = BTreeSet::new();
    let mut groups: Vec<Group<'a>> = Vec::new();
    for c in sorted {
        if !used_sentences.insert(c.sentence.as_str()) {
            continue;
        }
        let named = c
            .statement
            .entry
            .clone()
            .filter(|p| existing.iter().any(|e| &e.path == p))
            .or_else(|| {
                existing
                    .iter()
                    .find(|e| e.learned.as_ref().is_some_and(|l| l.statement == c.statement.text))
                    .map(|e| e.path.clone())
            });
        // The entry's group, else (the first statement that names it) the group on its topic.
        let at = named
            .as_ref()
            .and_then(|p| groups.iter().position(|g| g.path.as_ref() == Some(p)))
            .or_else(|| {
                groups.iter().position(|g| {
                    g.topic().same_topic(&c.statement.topic)
                        && (named.is_none() || g.path.is_none())
                })
            });
        match at.map(|i| &mut groups[i]) {
            Some(g) => {
                if g.path.is_none() {
                    g.path.clone_from(&named);
                }
                if c.statement.entry.is_some() || !c.statement.topic.same_thing(g.topic()) {
                    g.ruling = c;
                }
                g.members.push(c);
            }
            None => groups.push(Group { ruling: c, members: vec![c], path: named }),
        }
    }
    groups
}

/// The projects evidence counts for: a prompt sentence already seen in another project less
/// than an hour before is the same message fanned out, not another project.
pub fn counted_projects(evidence: &[&Candidate]) -> BTreeSet<String> {
    let mut seen: Vec<&Candidate> = Vec::new();
    let mut projects = BTreeSet::new();
    let norm = |c: &Candidate| c.statement.text.to_lowercase();
    for &c in evidence {
        let fanned = !c.page
            && seen.iter().any(|s| {
                !s.page
                    && s.project != c.project
                    && c.at - s.at <= FAN_OUT_SECS
                    && norm(s) == norm(c)
            });
        if !fanned {
            projects.insert(c.project.clone());
        }
        seen.push(c);
    }
    projects
}

fn confidence(projects: usize, general: bool, min_projects: usize) -> &'static str {
    if projects > min_projects || (general && projects >= min_projects) {
        "high"
    } else if projects >= min_projects || general {
        "medium"
    } else {
        "low"
    }
}

fn evidence_of(members: &[&Candidate]) -> Vec<Evidence> {
    members
        .iter()
        .rev()
        .take(MAX_EVIDENCE)
        .map(|c| Evidence {
            project: c.project.clone(),
            date: c.date.clone(),
            words: c.statement.text.clone(),
        })
        .collect()
}

/// The entries the candidates make or change, and the habits still short of the bar.
/// `existing`: the profile's entries now; `forgotten`: the ledger.
pub fn converge(
    candidates: &[Candidate],
    existing: &[Entry],
    forgotten: &[Forgotten],
    rules: Rules,
) -> Outcome {
    let mut out = Outcome::default();
    let mut taken: BTreeSet<String> = existing.iter().map(|e| e.path.clone()).collect();
    // Entries a group has already spoken for this pass: one group writes an entry.
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    for g in group(candidates, existing) {
        let evidence = g.evidence();
        let projects = counted_projects(&evidence);
        let operators: BTreeSet<i64> = evidence.iter().filter_map(|c| c.user).collect();
        let general = evidence.iter().any(|c| c.statement.general);
        let latest = g.members.iter().map(|c| c.at).max().unwrap_or(0);
        // The entry this group already has: one standing on any statement the group holds.
        let current = match &g.path {
            Some(p) => existing.iter().find(|e| &e.path == p),
            None => existing.iter().find(|e| {
                let said = e.learned.as_ref().map_or(e.summary.as_str(), |l| l.statement.as_str());
                let topic = Topic::of(said);
                g.members
                    .iter()
                    .any(|c| c.statement.text == said || c.statement.topic.same_thing(&topic))
            }),
        };
        // Restating only adds evidence: an entry whose statement is still the ruling keeps its
        // line and statement exactly (an LLM's restatement or a merge's decision included).
        let kept = current.and_then(|e| e.learned.as_ref().map(|l| (e, l))).filter(|(_, l)| {
            l.statement == g.ruling.statement.text || Topic::of(&l.statement).same_thing(g.topic())
        });
        let (statement, line) = match kept {
            Some((e, l)) => (l.statement.clone(), e.summary.clone()),
            None => (g.ruling.statement.text.clone(), g.ruling.statement.line()),
        };
        let pending = |needs_projects, waiting_for_operator, forgotten| Pending {
            line: line.clone(),
            projects: projects.len(),
            needs_projects,
            waiting_for_operator,
            forgotten,
            evidence: evidence_of(&evidence),
        };
        if let Some(entry) = current {
            // Edited by hand (or written by a person): theirs, never rewritten.
            if entry.learned.is_none() || !claimed.insert(entry.path.clone()) {
                continue;
            }
            // A team entry changes only on a ruling two operators back, like any team entry.
            if kept.is_none() && rules.team && operators.len() < 2 {
                out.pending.push(pending(0, true, false));
                continue;
            }
        } else {
            let was_forgotten = forgotten.iter().find(|f| {
                Topic::of(&f.statement).same_topic(g.topic())
                    || f.path == path_for(g.topic(), &BTreeSet::new())
            });
            if let Some(f) = was_forgotten
                && latest <= f.at
            {
                out.pending.push(pending(0, false, true));
                continue;
            }
            let needs = rules.min_projects.saturating_sub(projects.len());
            if needs > 0 && !general {
                out.pending.push(pending(needs, false, false));
                continue;
            }
            if rules.team && operators.len() < 2 {
                out.pending.push(pending(0, true, false));
                continue;
            }
        }
        let learned = Learned {
            statement,
            general,
            projects: projects.len(),
            operators: operators.len(),
            confidence: confidence(projects.len(), general, rules.min_projects).into(),
            evidence: evidence_of(&evidence),
        };
        let (path, enforced_by) = match current {
            Some(e) => (e.path.clone(), e.enforced_by.clone()),
            None => (path_for(g.topic(), &taken), None),
        };
        taken.insert(path.clone());
        let entry = Entry {
            path,
            summary: line,
            applies_to: g.topic().stack.iter().cloned().collect(),
            enforced_by,
            learned: Some(learned),
            edited_by_hand: false,
        };
        if current != Some(&entry) {
            out.changes.push(Change::Write { entry, created: current.is_none() });
        }
    }
    out
}

/// `profile/<category>/<slug>.md`, numbered when the slug is taken.
fn path_for(topic: &Topic, taken: &BTreeSet<String>) -> String {
    let base = format!("profile/{}/{}", topic.category.as_str(), topic.slug());
    let mut path = format!("{base}.md");
    let mut n = 2;
    while taken.contains(&path) {
        path = format!("{base}-{n}.md");
        n += 1;
    }
    path
}

/// A language seen in a project: `profile/stack/<language>.md` once `min_projects` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct StackSighting {
    pub project: String,
    pub tag: String,
    pub date: String,
}

/// Stack entries: a language used in at least `min_projects` projects (the plain project
/// threshold, also for a team profile: file names are not anyone's opinion).
pub fn stack_entries(
    sightings: &[StackSighting],
    existing: &[Entry],
    forgotten: &[Forgotten],
    min_projects: usize,
) -> Vec<Change> {
    let mut by_tag: BTreeMap<&str, Vec<&StackSighting>> = BTreeMap::new();
    for s in sightings {
        by_tag.entry(s.tag.as_str()).or_default().push(s);
    }
    let mut changes = Vec::new();
    for (tag, seen) in by_tag {
        let projects: BTreeSet<&str> = seen.iter().map(|s| s.project.as_str()).collect();
        let path = format!("profile/stack/{tag}.md");
        let current = existing.iter().find(|e| e.path == path);
        if current.is_some_and(|e| e.learned.is_none())
            || (current.is_none() && projects.len() < min_projects)
            || (current.is_none() && forgotten.iter().any(|f| f.path == path))
        {
            continue;
        }
        let mut recent: Vec<&&StackSighting> = seen.iter().collect();
        recent.sort_by(|a, b| (&b.date, &b.project).cmp(&(&a.date, &a.project)));
        let learned = Learned {
            statement: format!("You often work in {}.", display(tag)),
            general: false,
            projects: projects.len(),
            operators: 0,
            confidence: confidence(projects.len(), false, min_projects).into(),
            evidence: recent
                .iter()
                .take(MAX_EVIDENCE)
                .map(|s| Evidence {
                    project: s.project.clone(),
                    date: s.date.clone(),
                    words: format!("{} files", display(tag)),
                })
                .collect(),
        };
        let entry = Entry {
            path,
            summary: learned.statement.clone(),
            applies_to: vec![tag.to_owned()],
            enforced_by: current.and_then(|e| e.enforced_by.clone()),
            learned: Some(learned),
            edited_by_hand: false,
        };
        if current != Some(&entry) {
            changes.push(Change::Write { entry, created: current.is_none() });
        }
    }
    changes
}

/// How a stack tag reads in a sentence.
fn display(tag: &str) -> String {
    match tag {
        "cpp" => "C++".into(),
        "csharp" => "C#".into(),
        "javascript" => "JavaScript".into(),
        "typescript" => "TypeScript".into(),
        "ocaml" => "OCaml".into(),
        "php" => "PHP".into(),
        other => {
            let mut c = other.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sentence::statements;

    fn cand(id: i64, project: &str, user: Option<i64>, at: i64, text: &str) -> Candidate {
        let statement = statements(text).into_iter().next().expect("a statement");
        Candidate {
            id,
            sentence: format!("prompt:{id}:0"),
            statement,
            project: project.into(),
            user,
            at,
            date: "2026-11-02".into(),
            page: false,
        }
    }

    const RULES: Rules = Rules { min_projects: 2, team: false };
    const H: i64 = 3600;

    fn written(out: &Outcome) -> Vec<(String, String)> {
        out.changes
            .iter()
            .map(|Change::Write { entry, .. }| (entry.path.clone(), entry.summary.clone()))
            .collect()
    }

    #[test]
    fn a_message_fanned_out_within_the_hour_counts_once() {
        let text = "Always squash commits before merging.";
        let fanned = [cand(1, "a", None, 0, text), cand(2, "b", None, 600, text)];
        let out = converge(&fanned, &[], &[], RULES);
        assert!(out.changes.is_empty());
        assert_eq!(out.pending[0].projects, 1);
        assert_eq!(out.pending[0].needs_projects, 1);
        // The same words a day later in another project: a habit.
        let habit = [cand(1, "a", None, 0, text), cand(2, "b", None, 24 * H, text)];
        let out = converge(&habit, &[], &[], RULES);
        assert_eq!(written(&out), [("profile/workflow/commit-merging.md".into(), text.into())]);
        // A page's rule line is not a message: no fan-out for it.
        let mut pages = fanned.clone();
        pages.iter_mut().for_each(|c| c.page = true);
        assert_eq!(converge(&pages, &[], &[], RULES).changes.len(), 1);
    }

    #[test]
    fn general_statements_admit_at_once_and_one_sentence_backs_one_entry() {
        let general = cand(1, "a", None, 0, "In all my projects, use ruff for linting.");
        let out = converge(std::slice::from_ref(&general), &[], &[], RULES);
        let Change::Write { entry, created } = &out.changes[0];
        assert!(*created && entry.learned.as_ref().is_some_and(|l| l.general));
        assert_eq!(entry.applies_to, ["python"]);
        // A second record of the same sentence (as a classifier splitting it would make) adds
        // nothing: it neither backs another entry nor counts again.
        let mut twice = cand(2, "b", None, 0, "Always keep the changelog updated.");
        twice.sentence = general.sentence.clone();
        let out = converge(&[general, twice], &[], &[], RULES);
        assert_eq!(out.changes.len(), 1);
        assert!(out.pending.is_empty());
    }

    #[test]
    fn a_team_profile_waits_for_a_second_operator() {
        let text = "Always run the formatter before committing.";
        let team = Rules { min_projects: 2, team: true };
        let one = [cand(1, "a", Some(1), 0, text), cand(2, "b", Some(1), 24 * H, text)];
        let out = converge(&one, &[], &[], team);
        assert!(out.changes.is_empty() && out.pending[0].waiting_for_operator);
        let two = [cand(1, "a", Some(1), 0, text), cand(2, "b", Some(2), 24 * H, text)];
        let out = converge(&two, &[], &[], team);
        let Change::Write { entry, .. } = &out.changes[0];
        assert_eq!(entry.learned.as_ref().map(|l| l.operators), Some(2));
    }

    #[test]
    fn restating_adds_evidence_and_a_new_ruling_replaces_the_line() {
        let first = [
            cand(1, "a", None, 0, "Always use pnpm, not npm."),
            cand(2, "b", None, 24 * H, "Use pnpm, not npm, please."),
        ];
        let out = converge(&first, &[], &[], RULES);
        let Change::Write { entry, .. } = out.changes[0].clone();
        assert_eq!(entry.summary, "Always use pnpm, not npm.", "the first wording stays");
        assert_eq!(entry.learned.as_ref().map(|l| l.evidence.len()), Some(2));
        let mut later = first.to_vec();
        later.push(cand(3, "c", None, 48 * H, "Use bun instead of pnpm from now on."));
        let out = converge(&later, std::slice::from_ref(&entry), &[], RULES);
        let Change::Write { entry: ruled, created } = &out.changes[0];
        assert!(!created);
        assert_eq!(
            (ruled.path.as_str(), ruled.summary.as_str()),
            (entry.path.as_str(), "Use bun instead of pnpm.")
        );
        // Nothing new: nothing to write.
        assert!(converge(&later, std::slice::from_ref(ruled), &[], RULES).changes.is_empty());
    }

    #[test]
    fn a_team_entry_changes_only_on_a_ruling_two_operators_back() {
        let team = Rules { min_projects: 2, team: true };
        let first = [
            cand(1, "a", Some(1), 0, "Always use pnpm, not npm."),
            cand(2, "b", Some(2), 24 * H, "Always use pnpm, not npm."),
        ];
        let Change::Write { entry, .. } = converge(&first, &[], &[], team).changes[0].clone();
        let mut later = first.to_vec();
        later.push(cand(3, "c", Some(1), 48 * H, "Use bun instead of pnpm from now on."));
        let out = converge(&later, std::slice::from_ref(&entry), &[], team);
        assert!(out.changes.is_empty() && out.pending[0].waiting_for_operator, "{out:?}");
        later.push(cand(4, "d", Some(2), 72 * H, "Use bun instead of pnpm from now on."));
        let out = converge(&later, std::slice::from_ref(&entry), &[], team);
        let Change::Write { entry: ruled, .. } = &out.changes[0];
        assert_eq!(ruled.summary, "Use bun instead of pnpm.");
    }

    #[test]
    fn forgotten_and_hand_edited_entries_are_left_alone() {
        let text = "In all my projects, use ruff for linting.";
        let said = [cand(1, "a", None, 10, text)];
        let forgotten = [Forgotten {
            path: "profile/tools/ruff-linting.md".into(),
            statement: text.into(),
            at: 20,
        }];
        let out = converge(&said, &[], &forgotten, RULES);
        assert!(out.changes.is_empty() && out.pending[0].forgotten);
        let again = [cand(1, "a", None, 10, text), cand(2, "b", None, 30, text)];
        assert_eq!(converge(&again, &[], &forgotten, RULES).changes.len(), 1, "said again later");

        let Change::Write { entry, .. } = converge(&said, &[], &[], RULES).changes[0].clone();
        let edited = Entry { learned: None, edited_by_hand: true, ..entry };
        assert!(converge(&again, &[edited], &[], RULES).changes.is_empty());
    }

    #[test]
    fn a_language_in_min_projects_projects_is_a_stack_entry() {
        let seen = |p: &str| StackSighting {
            project: p.into(),
            tag: "rust".into(),
            date: "2026-11-02".into(),
        };
        assert!(stack_entries(&[seen("a")], &[], &[], 2).is_empty());
        let changes = stack_entries(&[seen("a"), seen("b")], &[], &[], 2);
        let Change::Write { entry, .. } = &changes[0];
        assert_eq!(
            (entry.path.as_str(), entry.summary.as_str()),
            ("profile/stack/rust.md", "You often work in Rust.")
        );
        assert_eq!(entry.applies_to, ["rust"]);
    }
}
