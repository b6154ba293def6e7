//! The harvest pass: read what is new since the last pass (prompts after the profile's cursor,
//! curated pages not recorded yet, stack sightings), record candidates, converge, and write the
//! entries that changed. Runs after startup, a few seconds after a session ends, and hourly
//! (`http::serve`); `ai-memory profile rebuild` runs one from the start.

use std::collections::BTreeSet;

use ai_memory_core::{PagePath, sanitize};
use ai_memory_index::ProjectRow;
use ai_memory_profile::converge::{
    Candidate, Change, Forgotten, Outcome, Rules, StackSighting, converge, stack_entries,
};
use ai_memory_profile::entry::Entry;
use ai_memory_profile::sentence::{Statement, rule_statement, statements};
use ai_memory_profile::topic::digest_line;
use ai_memory_store::CleanPage;
use sha2::{Digest as _, Sha256};

use super::Home;
use crate::error::MemoryError;
use crate::service::Memory;

/// Prompts read per query.
const BATCH: usize = 1_000;
pub const HARVEST_AUTHOR: &str = "profile-harvest";
/// How a curated page's candidate key starts (a prompt's is `prompt:`).
const PAGE_KEY: &str = "page:";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    pub profiles: usize,
    pub prompts_read: usize,
    pub candidates: usize,
    /// Entries written (`workspace/project/path`).
    pub written: Vec<String>,
    /// Entries removed because every word behind them came from projects that opted out.
    pub removed: Vec<String>,
}

fn short_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// A page the auto-improve scheduler approved is model output nobody reviewed: not curated.
fn auto_approved(frontmatter_json: &str) -> bool {
    let Ok(fm) = serde_json::from_str::<serde_json::Value>(frontmatter_json) else { return false };
    fm.get("auto_approved").and_then(|v| v.as_bool()) == Some(true)
        || fm.get("approved_by").and_then(|v| v.as_str()) == Some("auto-improve")
}

impl Memory {
    /// One pass over every profile; `from_start` re-reads every prompt (`profile rebuild`:
    /// recorded candidates keep their classification, nothing is removed).
    pub fn profile_pass(&self, from_start: bool) -> Result<PassReport, MemoryError> {
        let _one_at_a_time = self.pass_lock();
        let mut report = PassReport::default();
        let homes = self.profile_homes()?;
        self.index().purge_opted_out()?;
        for home in &homes {
            self.pass_home(home, from_start, &mut report)?;
            report.profiles += 1;
        }
        Ok(report)
    }

    fn pass_home(
        &self,
        home: &Home,
        from_start: bool,
        report: &mut PassReport,
    ) -> Result<(), MemoryError> {
        let index = self.index();
        let row = index.ensure_project(
            &home.workspace,
            &home.project,
            home.owner.is_some(),
            home.owner,
        )?;
        // Harvest: the user's prompts since the cursor.
        let mut after = if from_start { 0 } else { index.cursor(&row)? };
        loop {
            let batch = index.source_prompts(&home.sources, after, BATCH)?;
            let Some(last) = batch.last() else { break };
            after = last.id;
            for prompt in &batch {
                for (n, statement) in statements(&prompt.text).into_iter().enumerate() {
                    let json = serde_json::to_string(&statement).unwrap_or_default();
                    let key = format!("prompt:{}:{n}", prompt.id);
                    if index.add_candidate(
                        &row,
                        &key,
                        &json,
                        prompt.project_id,
                        prompt.user,
                        prompt.at,
                    )? {
                        report.candidates += 1;
                    }
                }
            }
            report.prompts_read += batch.len();
        }
        index.set_cursor(&row, after.max(index.cursor(&row)?))?;
        // Harvest: curated pages' rule lines (recorded once per wording).
        for page in index.source_pages(&home.sources)? {
            let Some(line) = page.summary.as_deref() else { continue };
            if auto_approved(&page.frontmatter) {
                continue;
            }
            let Some(statement) = rule_statement(line) else { continue };
            let json = serde_json::to_string(&statement).unwrap_or_default();
            let key = format!("{PAGE_KEY}{}:{}:{}", page.project_id, page.path, short_hash(line));
            if index.add_candidate(&row, &key, &json, page.project_id, None, self.now())? {
                report.candidates += 1;
            }
        }
        let entries = self.profile_entries(home)?;
        let outcome = self.converge_home(home, &row, &entries)?;
        let mut changed: BTreeSet<String> = BTreeSet::new();
        for Change::Write { entry, .. } in outcome.changes {
            changed.insert(entry.path.clone());
            self.write_entry(home, &row, &entry)?;
            report.written.push(format!("{}/{}/{}", home.workspace, home.project, entry.path));
        }
        // An opt-out takes back its evidence, also from entries no candidate backs any more.
        let opted_out = index.opted_out()?;
        for entry in entries.iter().filter(|e| !changed.contains(&e.path)) {
            let Some(learned) = &entry.learned else { continue };
            if !learned.evidence.iter().any(|e| opted_out.contains(&e.project)) {
                continue;
            }
            let kept: Vec<_> = learned
                .evidence
                .iter()
                .filter(|e| !opted_out.contains(&e.project))
                .cloned()
                .collect();
            let path = PagePath::new(&entry.path)?;
            let Some(newest) = kept.first() else {
                self.wiki().delete(&home.location(&path), HARVEST_AUTHOR)?;
                index.delete_page(&row, &path)?;
                report.removed.push(format!("{}/{}/{}", home.workspace, home.project, entry.path));
                continue;
            };
            let mut scrubbed = entry.clone();
            if let Some(l) = scrubbed.learned.as_mut() {
                if !kept.iter().any(|e| e.words == l.statement) {
                    l.statement = newest.words.clone();
                    scrubbed.summary = digest_line(&newest.words);
                }
                l.evidence = kept;
            }
            self.write_entry(home, &row, &scrubbed)?;
            report.written.push(format!("{}/{}/{}", home.workspace, home.project, entry.path));
        }
        Ok(())
    }

    fn write_entry(&self, home: &Home, row: &ProjectRow, entry: &Entry) -> Result<(), MemoryError> {
        let path = PagePath::new(&entry.path)?;
        let text = entry.render().map_err(|e| MemoryError::Invalid(e.to_string()))?;
        let page = CleanPage::new(sanitize(&text))
            .map_err(|e| MemoryError::Invalid(format!("{}: {e}", entry.path)))?;
        self.store_page(row, &home.location(&path), &page, HARVEST_AUTHOR)?;
        Ok(())
    }

    /// What converge makes of a profile's records now (entries to write, habits pending).
    pub(crate) fn converge_home(
        &self,
        home: &Home,
        row: &ProjectRow,
        entries: &[Entry],
    ) -> Result<Outcome, MemoryError> {
        let index = self.index();
        let candidates: Vec<Candidate> = index
            .candidates(row)?
            .into_iter()
            .filter_map(|c| {
                // A record this version cannot read is skipped, not fatal.
                let statement: Statement = serde_json::from_str(&c.statement).ok()?;
                Some(Candidate {
                    page: c.sentence.starts_with(PAGE_KEY),
                    id: c.id,
                    sentence: c.sentence,
                    statement,
                    project: c.project,
                    user: c.user,
                    at: c.at,
                    date: c.date,
                })
            })
            .collect();
        let forgotten: Vec<Forgotten> = index
            .forgotten(row)?
            .into_iter()
            .map(|(path, statement, at)| Forgotten { path, statement, at })
            .collect();
        let min_projects = self.settings.profile.min_projects();
        let mut outcome =
            converge(&candidates, entries, &forgotten, Rules { min_projects, team: home.team });
        let sightings: Vec<StackSighting> = index
            .source_stacks(&home.sources)?
            .into_iter()
            .map(|(project, tag, date)| StackSighting { project, tag, date })
            .collect();
        outcome.changes.extend(stack_entries(&sightings, entries, &forgotten, min_projects));
        Ok(outcome)
    }
}
