//! `ai-memory profile …`: the cross-project profile from the command line. The local operator
//! acts as root on the data directory; `--user`/`--workspace` pick a profile other than the
//! one this directory's workspace reads.

use std::path::Path;
use std::process::ExitCode;

use ai_memory_core::{Identity, ShareMode, Toggle};
use ai_memory_profile::apply;
use ai_memory_server::Memory;
use ai_memory_server::profile::{Home, Which};
use anyhow::{Context, bail};

use crate::cli::{ProfileCommand, WhichArgs};

pub fn run(dir: &Path, command: ProfileCommand) -> anyhow::Result<ExitCode> {
    let memory = Memory::open(dir, crate::settings(dir)?)?;
    let cwd = std::env::current_dir()?;
    let id = Identity::of(&cwd)?;
    let home = |which: &WhichArgs| -> anyhow::Result<Home> {
        let which = Which { user: which.user.clone(), workspace: which.workspace.clone() };
        Ok(memory.profile_which(&which, &id.workspace)?)
    };
    match command {
        ProfileCommand::Status { which } => status(&memory, &id, &which)?,
        ProfileCommand::List { which } => {
            let home = home(&which)?;
            let entries = memory.profile_entries(&home)?;
            if entries.is_empty() {
                outln!("no entries in {home}");
            }
            for e in entries {
                let tags =
                    if e.applies_to.is_empty() { "all".into() } else { e.applies_to.join(",") };
                let state = match (&e.learned, e.edited_by_hand, &e.enforced_by) {
                    (_, _, Some(by)) => format!("  (enforced by {by}; not in the digest)"),
                    (_, true, _) => "  (edited by hand)".into(),
                    (None, false, _) => "  (written by hand)".into(),
                    (Some(_), _, _) => String::new(),
                };
                outln!("{}\t[{tags}]\t{}{state}", e.path, e.summary);
            }
        }
        ProfileCommand::Show { path, which } => {
            let home = home(&which)?;
            let path = ai_memory_server::profile::entry_path(&path)?;
            let stored = memory
                .wiki()
                .read(&home.location(&path))?
                .with_context(|| format!("no entry {path} in {home}"))?;
            out!("{}", stored.text);
        }
        ProfileCommand::Forget { path, which } => {
            let home = home(&which)?;
            let commit = memory.profile_forget(&home, &path)?;
            outln!("forgot {path} ({commit}); it stays out until you say it again");
        }
        ProfileCommand::Review { which } => review(&memory, &home(&which)?)?,
        ProfileCommand::Pass => {
            let report = memory.profile_pass(false)?;
            outln!(
                "read {} prompts: {} entries written",
                report.prompts_read,
                report.written.len()
            );
        }
        ProfileCommand::Rebuild => {
            let report = memory.profile_pass(true)?;
            outln!(
                "re-read {} prompts for {} profiles: {} new statements, {} entries written",
                report.prompts_read,
                report.profiles,
                report.candidates,
                report.written.len()
            );
            for w in &report.written {
                outln!("wrote {w}");
            }
        }
        ProfileCommand::Apply { dry_run, remove, target, which } => {
            apply_cmd(&memory, dir, &id, &cwd, home(&which)?, dry_run, remove, target.as_deref())?
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn status(memory: &Memory, id: &Identity, which: &WhichArgs) -> anyhow::Result<()> {
    let p = &memory.settings.profile;
    let multi = memory.multi_user()?;
    let deployment = if multi { "multi-user" } else { "single operator" };
    match p.mode(multi) {
        None => {
            let why = match (p.enabled, p.share) {
                (Toggle::Off, _) => "enabled = false".to_owned(),
                (_, ai_memory_core::Share::Off) => "share = \"off\"".to_owned(),
                _ => {
                    "a multi-user server keeps `enabled = \"auto\"` off: set enabled = true".into()
                }
            };
            outln!("profile: off ({deployment}; {why})");
        }
        Some(mode) => {
            let mode = match mode {
                ShareMode::Global => "global",
                ShareMode::Workspace => "workspace",
                ShareMode::User => "user (a private profile per operator)",
            };
            outln!("profile: on ({deployment}; share {mode})");
            let which = Which { user: which.user.clone(), workspace: which.workspace.clone() };
            match memory.profile_which(&which, &id.workspace) {
                Ok(home) => {
                    let entries = memory.profile_entries(&home)?;
                    let learned = entries.iter().filter(|e| e.learned.is_some()).count();
                    let by_hand = entries.iter().filter(|e| e.edited_by_hand).count();
                    outln!(
                        "lives in: {home}/ ({}team defaults)",
                        if home.team { "" } else { "not " }
                    );
                    outln!(
                        "entries: {} ({learned} learned, {by_hand} edited by hand, {} written by hand)",
                        entries.len(),
                        entries.len() - learned - by_hand
                    );
                    let project = memory.index().project(&id.workspace, &id.project)?;
                    let consume = match &project {
                        Some(row) => memory.index().project_opt_outs(row)?.1,
                        None => None,
                    };
                    let here = format!("{}/{}", id.workspace, id.project);
                    if consume == Some(false) || id.consume == Some(false) {
                        outln!("digest here ({here}): none, the project sets consume = false");
                    } else if !p.inject_on_session_start {
                        outln!("digest here ({here}): none, inject_on_session_start = false");
                    } else {
                        match memory.home_digest(&home, project.as_ref())? {
                            Some(d) => outln!(
                                "digest here ({here}): {} bytes, {} entries shown, {} did not fit",
                                d.text.len(),
                                d.shown,
                                d.omitted
                            ),
                            None => outln!(
                                "digest here ({here}): none (no entries, or none for this project's stacks)"
                            ),
                        }
                    }
                }
                Err(e) => outln!("lives in: {e}"),
            }
        }
    }
    let opted: Vec<String> = memory.index().opted_out()?.into_iter().collect();
    outln!(
        "opted out of contributing: {}",
        if opted.is_empty() { "none".into() } else { opted.join(", ") }
    );
    outln!(
        "settings: enabled = {} share = {:?} min_projects = {} inject_on_session_start = {} \
         digest_max_bytes = {} baseline_max_bytes = {} apply_max_lines = {} llm = {} (provider: {})",
        match p.enabled {
            Toggle::Auto => "auto",
            Toggle::On => "true",
            Toggle::Off => "false",
        },
        p.share,
        p.min_projects(),
        p.inject_on_session_start,
        p.digest_budget(),
        p.baseline_budget(),
        p.apply_max_lines,
        p.llm,
        memory.settings.llm.provider,
    );
    Ok(())
}

fn review(memory: &Memory, home: &Home) -> anyhow::Result<()> {
    let review = memory.profile_review(home)?;
    outln!("# Entries in {home}");
    for e in &review.entries {
        match (&e.learned, e.edited_by_hand) {
            (Some(l), _) => {
                outln!(
                    "- {} ({}) — {} projects, confidence {}{}",
                    e.summary,
                    e.path,
                    l.projects,
                    l.confidence,
                    if l.general { ", stated as general" } else { "" }
                );
                for ev in &l.evidence {
                    outln!("    {} {}: \"{}\"", ev.date, ev.project, ev.words);
                }
            }
            (None, true) => outln!(
                "- {} ({}) — edited by hand: the harvester leaves it alone",
                e.summary,
                e.path
            ),
            (None, false) => outln!("- {} ({}) — written by hand", e.summary, e.path),
        }
    }
    if !review.problems.is_empty() {
        outln!("\n# Frontmatter to fix");
        for p in &review.problems {
            outln!("- {p}");
        }
    }
    outln!("\n# Not in the profile yet");
    if review.pending.is_empty() {
        outln!("(nothing)");
    }
    for p in &review.pending {
        let why = if p.forgotten {
            "forgotten: comes back only if you say it again".to_owned()
        } else if p.waiting_for_operator {
            "waiting for another operator".to_owned()
        } else {
            format!("seen in {} project(s); needs {} more", p.projects, p.needs_projects)
        };
        outln!("- {} — {why}", p.line);
        for ev in &p.evidence {
            outln!("    {} {}: \"{}\"", ev.date, ev.project, ev.words);
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn apply_cmd(
    memory: &Memory,
    dir: &Path,
    id: &Identity,
    cwd: &Path,
    home: Home,
    dry_run: bool,
    remove: bool,
    target: Option<&Path>,
) -> anyhow::Result<()> {
    let root = apply::repo_root(cwd)?;
    let plan = if remove {
        apply::plan_remove(&root, target)?
    } else {
        let project = memory.index().project(&id.workspace, &id.project)?;
        let recorded = match &project {
            Some(row) => memory.index().project_opt_outs(row)?.1,
            None => None,
        };
        if id.consume == Some(false) || (id.consume.is_none() && recorded == Some(false)) {
            bail!(
                "{}/{} sets [profile] consume = false: it receives no profile, so apply refuses",
                id.workspace,
                id.project
            );
        }
        let lines = memory.apply_lines(&home, project.as_ref())?;
        if lines.is_empty() {
            bail!("no profile entries fit this repository (see `ai-memory profile list`)");
        }
        apply::plan_apply(&root, target, &lines, memory.settings.profile.apply_max_lines)?
    };
    let file = plan.path();
    if dry_run {
        match (remove, plan.block()) {
            (false, Some(block)) => outln!("would write to {}:\n{block}", file.display()),
            _ if !plan.changes() => outln!("{}: nothing to change", file.display()),
            _ => outln!("would remove the profile block from {}", file.display()),
        }
        if plan.dropped_lines > 0 {
            outln!("({} more entries left out: apply_max_lines)", plan.dropped_lines);
        }
        return Ok(());
    }
    if !plan.changes() {
        outln!("{}: unchanged", file.display());
        return Ok(());
    }
    let backup = apply::execute(&plan, &dir.join("backups/profile-apply"))?;
    match (&plan.after, remove) {
        (None, _) => outln!("removed {} (apply had created it)", file.display()),
        (Some(_), true) => outln!("removed the profile block from {}", file.display()),
        (Some(_), false) => outln!("wrote the profile block to {}", file.display()),
    }
    if let Some(b) = backup {
        outln!("previous version: {}", b.display());
    }
    Ok(())
}
