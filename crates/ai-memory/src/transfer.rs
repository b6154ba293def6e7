//! `ai-memory export` and `ai-memory import`: the service does the work
//! (`ai_memory_server::transfer`); this prints what it did.

use std::path::Path;

use ai_memory_core::{Identity, ProjectName, WorkspaceName};
use ai_memory_server::Memory;
use ai_memory_server::transfer::ImportOptions;

pub fn export(memory: &Memory, path: &Path, force: bool) -> anyhow::Result<()> {
    let out = memory.export_to(path, force)?;
    let at = out
        .wiki_commit
        .as_deref()
        .map_or("an empty wiki".to_owned(), |c| format!("wiki commit {}", &c[..c.len().min(12)]));
    outln!(
        "exported to {} ({at}): {} projects, {} pages, {} operators, {} grants, {} sessions, {} prompts, {} profile candidates, {} forgotten entries, {} handoffs",
        path.display(),
        out.projects,
        out.pages,
        out.operators,
        out.grants,
        out.sessions,
        out.prompts,
        out.candidates,
        out.forgotten,
        out.handoffs
    );
    outln!(
        "API keys are exported only as SHA-256 hashes; the file holds your prompts: keep it private"
    );
    for s in &out.skipped {
        outln!("not exported (does not parse; fix it under wiki/ and export again): {s}");
    }
    Ok(())
}

pub fn options(
    replace: bool,
    workspace: Option<String>,
    project: Option<String>,
) -> anyhow::Result<ImportOptions> {
    let here = std::env::current_dir()
        .ok()
        .and_then(|cwd| Identity::of(&cwd).ok())
        .map(|id| (id.workspace, id.project));
    Ok(ImportOptions {
        replace,
        workspace: workspace.as_deref().map(WorkspaceName::new).transpose()?,
        project: project.as_deref().map(ProjectName::new).transpose()?,
        here,
    })
}

pub fn import(memory: &Memory, path: &Path, options: &ImportOptions) -> anyhow::Result<()> {
    let out = memory.import_from(path, options)?;
    let commit = out
        .commit
        .as_deref()
        .map_or("no new commit".to_owned(), |c| format!("commit {}", &c[..c.len().min(12)]));
    outln!(
        "imported {} ({}): pages: {} new, {} replaced, {} unchanged ({commit})",
        path.display(),
        out.format,
        out.pages_new,
        out.pages_replaced,
        out.pages_unchanged
    );
    if let Some(m) = &out.merged {
        outln!(
            "records: {} operators, {} grants, {} sessions, {} prompts, {} profile candidates, {} forgotten entries, {} handoffs added",
            m.operators,
            m.grants,
            m.sessions,
            m.prompts,
            m.candidates,
            m.forgotten,
            m.handoffs
        );
    }
    if out.format == "basic-memory JSON" {
        outln!("{} entities, {} relations read", out.entities, out.relations);
    }
    for k in &out.kept {
        outln!("kept: {k}");
    }
    Ok(())
}
