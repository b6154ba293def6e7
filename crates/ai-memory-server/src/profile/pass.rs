//! The harvest pass: read what is new since the last pass (prompts after the profile's cursor,
//! curated pages not recorded yet, stack sightings), record candidates, converge, and write the
//! entries that changed. Runs after startup, a few seconds after a session ends, and hourly
//! (`http::serve`); `ai-memory profile rebuild` runs one from the start.

use std::collections::BTreeSet;

use ai_memory_core::{PagePath, sanitize};
use ai_memory_index::{ProjectRow, SourcePrompt};
use ai_memory_profile::converge::{
    Candidate, Change, Forgotten, Outcome, Rules, StackSighting, converge, stack_entries,
};
use ai_memory_profile::entry::{Entry, scrub_evidence, short_hash};
use ai_memory_profile::sentence::{Statement, loose, rule_statement, statements};
use ai_memory_profile::topic::digest_line;
use ai_memory_store::CleanPage;

use super::{Home, llm};
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
    /// Curated pages read (those changed since the last pass).
    pub pages_read: usize,
    pub candidates: usize,
    /// Entries written (`workspace/project/path`).
    pub written: Vec<String>,
    /// Entries removed because every word behind them came from projects that opted out.
    pub removed: Vec<String>,
    /// Calls to the LLM provider, and those that failed (their batch went the zero-LLM way).
    pub llm_calls: usize,
    pub llm_failures: usize,
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
        let _one_at_a_time = self.lock_passes()?;
        if let Some(cutoff) = self.settings.capture.retention_cutoff(self.now()) {
            self.index().purge_prompts_before(cutoff)?;
            // Handoffs repeat captured prompts: the same retention.
            self.index().purge_handoffs_before(cutoff)?;
        }
        let mut report = PassReport::default();
        let homes = self.profile_homes()?;
        self.index().purge_opted_out()?;
        for home in &homes {
            self.pass_home(home, from_start, &mut report)?;
            report.profiles += 1;
        }
        Ok(report)
    }

    /// Holds off profile passes, in this process and in others (a hook with no server runs
    /// its own pass), until the guard is dropped: a pass, an export and an import each hold it.
    pub(crate) fn lock_passes(
        &self,
    ) -> Result<(std::sync::MutexGuard<'_, ()>, std::fs::File), MemoryError> {
        let guard = self.pass_lock();
        let lock_path = self.data_dir().join("profile-pass.lock");
        let lock = std::fs::File::create(&lock_path).map_err(|e| {
            MemoryError::Invalid(format!("cannot create {}: {e}", lock_path.display()))
        })?;
        lock.lock().map_err(|e| {
            MemoryError::Invalid(format!("cannot lock {}: {e}", lock_path.display()))
        })?;
        Ok((guard, lock))
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
        // The entries as the pass found them: what the classifier may attach sentences to, and
        // what converge rewrites (nothing writes them before converge).
        let entries = self.profile_entries(home)?;
        let known: Vec<(String, String)> =
            entries.iter().map(|e| (e.path.clone(), e.summary.clone())).collect();
        let mut after = if from_start { 0 } else { index.cursor(&row)? };
        loop {
            let batch = index.source_prompts(&home.sources, after, BATCH)?;
            let Some(last) = batch.last() else { break };
            after = last.id;
            self.harvest_prompts(&row, &batch, &known, report)?;
            report.prompts_read += batch.len();
        }
        index.set_cursor(&row, after.max(index.cursor(&row)?))?;
        // Harvest: curated pages changed since the last pass (each wording recorded once).
        let page_cursor = if from_start { 0 } else { index.page_cursor(&row)? };
        let pages = index.source_pages(&home.sources, page_cursor)?;
        let last_seq = pages.last().map(|p| p.seq);
        report.pages_read += pages.len();
        for page in pages {
            let Some(line) = page.summary.as_deref() else { continue };
            if auto_approved(&page.frontmatter) {
                continue;
            }
            let Some(statement) = rule_statement(line) else { continue };
            let json = serde_json::to_string(&statement).unwrap_or_default();
            let key = format!("{PAGE_KEY}{}:{}:{}", page.project_id, page.path, short_hash(line));
            // Dated by the page's own last change, not by this pass.
            let at = self.page_time(&page.project, &page.path);
            if index.add_candidate(&row, &key, &json, page.project_id, None, at)? {
                report.candidates += 1;
            }
        }
        if let Some(seq) = last_seq {
            index.set_page_cursor(&row, seq.max(page_cursor))?;
        }
        // A page deleted (or reworded, or auto-approved since) no longer says what it said:
        // its candidate goes, and with it its evidence on the entries.
        let withdrawn = self.withdraw_page_candidates(&row)?;
        let outcome = self.converge_home(home, &row, &entries)?;
        let mut changed: BTreeSet<String> = BTreeSet::new();
        for Change::Write { mut entry, created } in outcome.changes {
            if !created && !self.merge_ruling(&entries, &mut entry, report) {
                continue;
            }
            changed.insert(entry.path.clone());
            self.write_entry(home, &entry)?;
            report.written.push(format!("{}/{}/{}", home.workspace, home.project, entry.path));
        }
        // An opt-out takes back its evidence, also from entries no candidate backs any more.
        let opted_out = index.opted_out()?;
        for entry in entries.iter().filter(|e| !changed.contains(&e.path)) {
            let Some(learned) = &entry.learned else {
                // Edited by hand: the page stays the user's; only the harvester's own record
                // of evidence loses the opted-out projects' words.
                if entry.edited_by_hand {
                    self.scrub_hand_edited(home, &entry.path, &opted_out, report)?;
                }
                continue;
            };
            let gone = |e: &ai_memory_profile::entry::Evidence| {
                opted_out.contains(&e.project)
                    || withdrawn.contains(&(e.project.clone(), e.words.clone()))
            };
            if !learned.evidence.iter().any(gone) {
                continue;
            }
            let kept: Vec<_> = learned.evidence.iter().filter(|e| !gone(e)).cloned().collect();
            let path = PagePath::new(&entry.path)?;
            let Some(newest) = kept.first() else {
                self.remove_page(&home.location(&path), HARVEST_AUTHOR)?;
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
            self.write_entry(home, &scrubbed)?;
            report.written.push(format!("{}/{}/{}", home.workspace, home.project, entry.path));
        }
        Ok(())
    }

    /// When the page at `path` of `project` (`workspace/name`) last changed in git; now when
    /// that cannot be read.
    fn page_time(&self, project: &str, path: &str) -> i64 {
        let at = project.split_once('/').and_then(|(ws, name)| {
            Some(ai_memory_store::Location {
                workspace: ai_memory_core::WorkspaceName::new(ws).ok()?,
                project: ai_memory_core::ProjectName::new(name).ok()?,
                path: PagePath::new(path).ok()?,
            })
        });
        let time = at.and_then(|at| self.wiki().history(&at, 1).ok()?.first().map(|c| c.time));
        time.unwrap_or_else(|| self.now())
    }

    /// Deletes the page candidates whose page no longer says their line (deleted, reworded,
    /// or auto-approved since); returns what they said, `(project, words)`.
    fn withdraw_page_candidates(
        &self,
        row: &ProjectRow,
    ) -> Result<BTreeSet<(String, String)>, MemoryError> {
        let index = self.index();
        let mut out = BTreeSet::new();
        for (id, key, project, statement) in index.page_candidates(row)? {
            let parsed = key.strip_prefix(PAGE_KEY).and_then(|rest| {
                let (pid, rest) = rest.split_once(':')?;
                let (path, hash) = rest.rsplit_once(':')?;
                Some((pid.parse::<i64>().ok()?, path.to_owned(), hash.to_owned()))
            });
            let Some((pid, path, hash)) = parsed else { continue };
            let current = index.page_summary(pid, &path)?;
            let still = current.is_some_and(|(summary, fm)| {
                !auto_approved(&fm) && summary.is_some_and(|line| short_hash(&line) == hash)
            });
            if still {
                continue;
            }
            index.delete_candidate(id)?;
            if let Ok(s) = serde_json::from_str::<Statement>(&statement) {
                out.insert((project, s.text));
            }
        }
        Ok(out)
    }

    /// Records the statements of a batch of prompts: through the LLM classifier when one is
    /// configured (a failed call: the zero-LLM path for that batch), else the word lists.
    fn harvest_prompts(
        &self,
        row: &ProjectRow,
        prompts: &[SourcePrompt],
        known: &[(String, String)],
        report: &mut PassReport,
    ) -> Result<(), MemoryError> {
        let mut found: Vec<(&SourcePrompt, Statement)> = Vec::new();
        match self.profile_llm() {
            None => {
                for p in prompts {
                    found.extend(statements(&p.text).into_iter().map(|s| (p, s)));
                }
            }
            Some(llm) => {
                let sentences: Vec<(&SourcePrompt, String)> = prompts
                    .iter()
                    .flat_map(|p| loose(&p.text).into_iter().map(move |s| (p, s)))
                    .collect();
                for chunk in sentences.chunks(llm::CLASSIFY_BATCH) {
                    let texts: Vec<String> = chunk.iter().map(|(_, s)| s.clone()).collect();
                    report.llm_calls += 1;
                    match llm::classify(llm, &texts, known) {
                        Ok(kept) => found.extend(kept.into_iter().map(|(i, s)| (chunk[i].0, s))),
                        Err(e) => {
                            tracing::warn!(error = %e, "profile classify failed: the word lists decide this batch");
                            report.llm_failures += 1;
                            for (p, sentence) in chunk {
                                found.extend(statements(sentence).into_iter().map(|s| (*p, s)));
                            }
                        }
                    }
                }
            }
        }
        for (prompt, statement) in found {
            let json = serde_json::to_string(&statement).unwrap_or_default();
            // Keyed by the sentence: one sentence backs at most one entry, whichever path read it.
            let key = format!("prompt:{}:{}", prompt.id, short_hash(&statement.text));
            if self.index().add_candidate(
                row,
                &key,
                &json,
                prompt.project_id,
                prompt.user,
                prompt.at,
            )? {
                report.candidates += 1;
            }
        }
        Ok(())
    }

    /// A new ruling on an existing entry: with an LLM, the model says whether the newest words
    /// change the entry and restates it when they do; when they only confirm it, its line stays
    /// exactly as written (the new words are recorded as evidence, so the question is not asked
    /// again). Without one (or when the call fails), the newest statement wins. Returns whether
    /// to write.
    fn merge_ruling(&self, existing: &[Entry], entry: &mut Entry, report: &mut PassReport) -> bool {
        let Some(llm) = self.profile_llm() else { return true };
        let Some(old) = existing.iter().find(|e| e.path == entry.path) else { return true };
        let (Some(was), Some(now)) = (&old.learned, &entry.learned) else { return true };
        if was.statement == now.statement {
            return true;
        }
        let words: Vec<String> = now.evidence.iter().map(|e| e.words.clone()).collect();
        report.llm_calls += 1;
        match llm::merge(llm, &old.summary, &words) {
            Ok(Some(line)) => {
                entry.summary = line;
                true
            }
            Ok(None) => {
                entry.summary = old.summary.clone();
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "profile merge failed: the newest statement wins");
                report.llm_failures += 1;
                true
            }
        }
    }

    fn scrub_hand_edited(
        &self,
        home: &Home,
        path: &str,
        opted_out: &BTreeSet<String>,
        report: &mut PassReport,
    ) -> Result<(), MemoryError> {
        let page_path = PagePath::new(path)?;
        let at = home.location(&page_path);
        let Some(stored) = self.wiki().read(&at)? else { return Ok(()) };
        let scrubbed = scrub_evidence(path, &stored.text, &|p| opted_out.contains(p))
            .map_err(|e| MemoryError::Invalid(e.to_string()))?;
        if let Some(text) = scrubbed {
            let page = CleanPage::new(sanitize(&text))
                .map_err(|e| MemoryError::Invalid(format!("{path}: {e}")))?;
            self.store_page(&at, &page, HARVEST_AUTHOR)?;
            report.written.push(format!("{}/{}/{path}", home.workspace, home.project));
        }
        Ok(())
    }

    fn write_entry(&self, home: &Home, entry: &Entry) -> Result<(), MemoryError> {
        let path = PagePath::new(&entry.path)?;
        let text = entry.render().map_err(|e| MemoryError::Invalid(e.to_string()))?;
        let page = CleanPage::new(sanitize(&text))
            .map_err(|e| MemoryError::Invalid(format!("{}: {e}", entry.path)))?;
        self.store_page(&home.location(&path), &page, HARVEST_AUTHOR)?;
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
