//! `ai-memory import PATH`: an export of this format, or basic-memory's JSON memories. Every
//! line is read and checked first (JSON, the format and its version, each record's fields,
//! names, page paths, frontmatter, sizes), and the import refuses as a whole, naming each bad
//! line, before anything is written. Then, under the profile pass lock: the pages in one wiki
//! commit (a compare-and-swap on the commit the plan was made against), and the database's
//! records in one transaction.
//!
//! Conflicts: a page already here with other text is kept and reported (`replace`: the
//! export's is written; git keeps the old one); an identical one is left as it is, so an
//! import can be run again. Operators keep their ids: one whose id or name another operator
//! holds here refuses the import, as does a project restricted on one side and open on the
//! other.

use std::collections::BTreeMap;

use ai_memory_core::{PagePath, ProjectName, WorkspaceName, sanitize};
use ai_memory_index::{IndexState, Level, Merged};
use ai_memory_store::{Batch, CleanPage, Location, ProjectMeta};

use super::{FORMAT, Record, VERSION, read_lines};
use crate::error::MemoryError;
use crate::handoff::HANDOFF_MAX_BYTES;
use crate::service::Memory;

/// How many bad lines an import names before it stops reading.
const MAX_PROBLEMS: usize = 20;
/// How many times the pages are planned again when another writer moved the wiki meanwhile.
const PLAN_ATTEMPTS: usize = 5;
const AUTHOR: &str = "import";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Write the file's page where a page of the same path holds other text.
    pub replace: bool,
    /// Where basic-memory's entities go (an export names its own projects).
    pub workspace: Option<WorkspaceName>,
    pub project: Option<ProjectName>,
    /// The current directory's project: where basic-memory's entities go when no place is
    /// named.
    pub here: Option<(WorkspaceName, ProjectName)>,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    /// `ai-memory export` or `basic-memory JSON`.
    pub format: &'static str,
    pub commit: Option<String>,
    pub pages_new: usize,
    pub pages_replaced: usize,
    pub pages_unchanged: usize,
    /// Pages (and database records) kept as they were here instead of the file's, named.
    pub kept: Vec<String>,
    /// The database's records (an export only).
    pub merged: Option<Merged>,
    /// basic-memory: entities and relations read.
    pub entities: usize,
    pub relations: usize,
}

/// A page to store, with the line it came from.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub line: usize,
    pub at: Location,
    pub page: CleanPage,
}

/// Problems found while reading, each naming its line.
#[derive(Default)]
pub(crate) struct Problems(Vec<String>);

impl Problems {
    pub(crate) fn push(&mut self, line: usize, what: impl std::fmt::Display) {
        if self.0.len() < MAX_PROBLEMS {
            self.0.push(format!("line {line}: {what}"));
        }
    }

    pub(crate) fn full(&self) -> bool {
        self.0.len() >= MAX_PROBLEMS
    }

    pub(crate) fn into_result(self, file: &std::path::Path) -> Result<(), MemoryError> {
        if self.0.is_empty() {
            return Ok(());
        }
        let more = if self.0.len() >= MAX_PROBLEMS { "\n(and maybe more)" } else { "" };
        Err(MemoryError::Invalid(format!(
            "{} was not imported (nothing was written):\n{}{more}",
            file.display(),
            self.0.join("\n")
        )))
    }
}

impl Memory {
    pub fn import_from(
        &self,
        file: &std::path::Path,
        options: &ImportOptions,
    ) -> Result<Imported, MemoryError> {
        let lines = read_lines(file)?;
        let Some((first_line, first)) = lines.first() else {
            return Err(MemoryError::Invalid(format!("{} is empty", file.display())));
        };
        let head: serde_json::Value = serde_json::from_str(first).map_err(|e| {
            MemoryError::Invalid(format!("{}, line {first_line}: not JSON ({e})", file.display()))
        })?;
        if head.get("format").is_some() {
            if options.workspace.is_some() || options.project.is_some() {
                return Err(MemoryError::Invalid(
                    "--workspace and --project place basic-memory's entities; an ai-memory export names its own projects".into(),
                ));
            }
            check_header(&head).map_err(|e| {
                MemoryError::Invalid(format!("{}, line {first_line}: {e}", file.display()))
            })?;
            let (pages, state) = read_export(file, &lines[1..])?;
            self.import_export(pages, &state, options.replace)
        } else if matches!(head.get("type").and_then(|t| t.as_str()), Some("entity" | "relation")) {
            let here = options.here.clone();
            let workspace = options
                .workspace
                .clone()
                .or_else(|| here.as_ref().map(|h| h.0.clone()))
                .unwrap_or_else(WorkspaceName::default_workspace);
            let project =
                options.project.clone().or_else(|| here.map(|h| h.1)).ok_or_else(|| {
                    MemoryError::Invalid("basic-memory's entities need a project: --project".into())
                })?;
            let read = super::basic::read(file, &lines, &workspace, &project)?;
            let _no_pass = self.lock_passes()?;
            let mut out = self.store_incoming(read.pages, Vec::new(), options.replace)?;
            out.format = "basic-memory JSON";
            out.entities = read.entities;
            out.relations = read.relations;
            Ok(out)
        } else {
            Err(MemoryError::Invalid(format!(
                "{}, line {first_line}: neither an ai-memory export (its first line has `\"format\": \"{FORMAT}\"`) nor basic-memory's JSON memories (lines with `\"type\": \"entity\"` or `\"relation\"`)",
                file.display()
            )))
        }
    }

    fn import_export(
        &self,
        pages: Vec<Incoming>,
        state: &IndexState,
        replace: bool,
    ) -> Result<Imported, MemoryError> {
        let _no_pass = self.lock_passes()?;
        let problems = self.index().merge_problems(state)?;
        if !problems.is_empty() {
            return Err(MemoryError::Invalid(format!(
                "not imported (nothing was written):\n{}",
                problems.join("\n")
            )));
        }
        // A new project's settings (its access mode) go in the pages' commit.
        let mut metas = Vec::new();
        for p in &state.projects {
            let meta = ProjectMeta { restricted: p.restricted, creator: p.creator };
            let (ws, name) = (WorkspaceName::new(&p.workspace)?, ProjectName::new(&p.name)?);
            if meta != ProjectMeta::default() && self.index().project(&ws, &name)?.is_none() {
                metas.push((ws, name, meta));
            }
        }
        let mut out = self.store_incoming(pages, metas, replace)?;
        let merged = self.index().merge_state(state, replace)?;
        out.kept.extend(merged.kept.iter().cloned());
        out.format = "ai-memory export";
        out.merged = Some(merged);
        Ok(out)
    }

    /// Writes the pages that are new here (and, with `replace`, those whose text differs) in
    /// one commit with `metas`, then brings the index to it. The caller holds the pass lock.
    pub(crate) fn store_incoming(
        &self,
        pages: Vec<Incoming>,
        metas: Vec<(WorkspaceName, ProjectName, ProjectMeta)>,
        replace: bool,
    ) -> Result<Imported, MemoryError> {
        for _ in 0..PLAN_ATTEMPTS {
            let head = self.wiki().head()?;
            let mut out = Imported::default();
            let mut batch = Batch::default();
            let files = self.wiki().files_at(head.as_deref())?;
            for incoming in &pages {
                match files.page(&incoming.at) {
                    None => out.pages_new += 1,
                    Some(text) if text == incoming.page.text().as_bytes() => {
                        out.pages_unchanged += 1;
                        continue;
                    }
                    Some(_) if replace => out.pages_replaced += 1,
                    Some(_) => {
                        out.kept.push(format!(
                            "{} (line {}): a page of that path is here with other text; kept (--replace writes the file's)",
                            incoming.at, incoming.line
                        ));
                        continue;
                    }
                }
                batch.pages.push((incoming.at.clone(), incoming.page.clone()));
            }
            for (ws, project, meta) in &metas {
                if !files.has_meta(ws, project) {
                    batch.metas.push((ws.clone(), project.clone(), meta.clone()));
                }
            }
            let message = format!("import: {} pages", batch.pages.len());
            // `None`: another writer moved the wiki since `head`; nothing was written.
            if let Some(commit) =
                self.wiki().commit_batch(head.as_deref(), &batch, &message, AUTHOR)?
            {
                self.sync_index()?;
                out.commit = Some(commit).filter(|c| Some(c) != head.as_ref());
                return Ok(out);
            }
        }
        Err(MemoryError::Invalid(
            "the wiki kept changing while the import was planned; nothing was written: try again"
                .into(),
        ))
    }
}

fn check_header(head: &serde_json::Value) -> Result<(), String> {
    let format = head.get("format").and_then(|f| f.as_str()).unwrap_or_default();
    if format != FORMAT {
        return Err(format!("`format` is `{format}`, not `{FORMAT}`"));
    }
    match head.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) => {
            return Err(format!(
                "an export of version {v}; this ai-memory reads version {VERSION}"
            ));
        }
        None => return Err("the header has no `version`".into()),
    }
    serde_json::from_value::<super::Header>(head.clone())
        .map(|_| ())
        .map_err(|e| format!("not a valid header: {e}"))
}

/// Reads and checks every record of an export (after its header).
fn read_export(
    file: &std::path::Path,
    lines: &[(usize, String)],
) -> Result<(Vec<Incoming>, IndexState), MemoryError> {
    let mut problems = Problems::default();
    let mut pages = Vec::new();
    let mut seen: BTreeMap<Location, usize> = BTreeMap::new();
    let mut state = IndexState::default();
    for (line, text) in lines {
        let line = *line;
        if problems.full() {
            break;
        }
        let record: Record = match serde_json::from_str(text) {
            Ok(r) => r,
            Err(e) => {
                match serde_json::from_str::<serde_json::Value>(text) {
                    Err(_) => problems.push(line, format!("not JSON ({e})")),
                    Ok(_) => problems.push(line, format!("not a valid record: {e}")),
                }
                continue;
            }
        };
        let names = |ws: &str, project: &str| -> Result<(), String> {
            WorkspaceName::new(ws).map_err(|e| e.to_string())?;
            ProjectName::new(project).map_err(|e| e.to_string())?;
            Ok(())
        };
        let checked = match record {
            Record::Page(p) => {
                let item = format!("page {}/{}/{}", p.workspace, p.project, p.path);
                match page(&p) {
                    Ok(incoming) => {
                        if let Some(first) = seen.insert(incoming.0.clone(), line) {
                            Err(format!("{item} appears twice (also line {first})"))
                        } else {
                            pages.push(Incoming { line, at: incoming.0, page: incoming.1 });
                            Ok(())
                        }
                    }
                    Err(e) => Err(format!("{item}: {e}")),
                }
            }
            Record::Project(p) => {
                let r = names(&p.workspace, &p.name);
                state.projects.push(p);
                r
            }
            Record::Operator(o) => {
                let r = if o.name.is_empty() || o.token_sha256.len() != 64 {
                    Err(format!("operator `{}`: needs a name and a 64-digit SHA-256", o.name))
                } else {
                    Ok(())
                };
                state.operators.push(o);
                r
            }
            Record::Grant(g) => {
                let r = names(&g.workspace, &g.project)
                    .and_then(|()| Level::parse(&g.level).map(|_| ()).map_err(|e| e.to_string()));
                state.grants.push(g);
                r
            }
            Record::Session(s) => {
                let r = names(&s.workspace, &s.project).and_then(|()| captured_in(&s.project));
                state.sessions.push(s);
                r
            }
            Record::Prompt(mut p) => {
                let r = names(&p.workspace, &p.project).and_then(|()| captured_in(&p.project));
                // Stored text is sanitized text, whoever wrote the file.
                p.text = sanitize(&p.text).as_str().to_owned();
                state.prompts.push(p);
                r
            }
            Record::Candidate(c) => {
                let r = names(&c.workspace, &c.project)
                    .and_then(|()| names(&c.profile.workspace, &c.profile.project));
                state.candidates.push(c);
                r
            }
            Record::Cursor(c) => {
                let r = names(&c.profile.workspace, &c.profile.project);
                state.cursors.push(c);
                r
            }
            Record::Forgotten(f) => {
                let r = names(&f.profile.workspace, &f.profile.project);
                state.forgotten.push(f);
                r
            }
            Record::Stack(s) => {
                let r = names(&s.workspace, &s.project);
                state.stacks.push(s);
                r
            }
            Record::Handoff(mut h) => {
                let r = names(&h.workspace, &h.project).and_then(|()| captured_in(&h.project));
                let (bytes, (w, p)) = (h.text.len(), (&h.workspace, &h.project));
                let too_long = (bytes > HANDOFF_MAX_BYTES).then(|| {
                    format!("handoff of {w}/{p}: {bytes} bytes, a handoff holds at most {HANDOFF_MAX_BYTES}")
                });
                let r = r.and_then(|()| too_long.map_or(Ok(()), Err));
                // Stored text is sanitized text, whoever wrote the file.
                h.text = sanitize(&h.text).as_str().to_owned();
                state.handoffs.push(h);
                r
            }
        };
        if let Err(e) = checked {
            problems.push(line, e);
        }
    }
    problems.into_result(file)?;
    Ok((pages, state))
}

/// Sessions and prompts are never recorded in a reserved project (`_global`, a profile), by
/// a hook or by an import.
fn captured_in(project: &str) -> Result<(), String> {
    match ProjectName::new(project) {
        Ok(p) if p.is_reserved() => Err(format!("sessions and prompts are not recorded in `{p}`")),
        _ => Ok(()),
    }
}

/// A page record checked: its place (names, a path that stays inside its project) and its
/// text (sanitized, parsed: frontmatter, size).
fn page(p: &super::PageRecord) -> Result<(Location, CleanPage), String> {
    let at = Location {
        workspace: WorkspaceName::new(&p.workspace).map_err(|e| e.to_string())?,
        project: ProjectName::new(&p.project).map_err(|e| e.to_string())?,
        path: PagePath::new(&p.path).map_err(|e| e.to_string())?,
    };
    let page = CleanPage::new(sanitize(&p.text)).map_err(|e| e.to_string())?;
    Ok((at, page))
}
