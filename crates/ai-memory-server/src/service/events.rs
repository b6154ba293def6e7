//! What hooks report, as the service records it: sessions, captured prompts, the project's
//! stacks, and the context a session starts with.

use std::collections::BTreeSet;

use ai_memory_core::{Clean, ProjectName, WorkspaceName, sanitize};
use ai_memory_index::{Principal, ProjectRow, SessionStart};
use ai_memory_store::ProjectMeta;

use super::{HookEvent, MAX_EVENT_FILES, Memory, author};
use crate::context::{CONTEXT_FLOOR, header, session_context};
use crate::error::MemoryError;
use crate::handoff;

impl Memory {
    /// A session starts: record it (and the marker's explicit opt-outs); return the context to
    /// inject, within `session_start.max_chars`.
    pub fn session_start(&self, who: Principal, event: &HookEvent) -> Result<String, MemoryError> {
        let project = self.hook_project(who, event)?;
        let stacks: BTreeSet<&str> = event
            .files
            .iter()
            .take(MAX_EVENT_FILES)
            .filter_map(|f| ai_memory_profile::stack_of_file(f))
            .collect();
        self.index.add_stacks(&project, &stacks, self.now())?;
        self.index.start_session(
            &project,
            &SessionStart {
                id: &event.session_id,
                harness: &event.harness,
                user: who.user_id(),
                contribute: event.contribute,
                consume: event.consume,
            },
        )?;
        // A harness that sends no session end (Codex): its sessions are handed off now.
        self.hand_off_open_sessions(who, &project, &event.session_id)?;
        self.start_context(who, &project)
    }

    /// The context of the session's first prompt, for a harness that hears a prompt hook's
    /// output on every prompt and no session start's (Kimi Code): the session-start context
    /// once, then `None`.
    pub fn first_prompt_context(
        &self,
        who: Principal,
        event: &HookEvent,
    ) -> Result<Option<String>, MemoryError> {
        let project = self.hook_project(who, event)?;
        if !self.index.brief_once(&event.session_id)? {
            return Ok(None);
        }
        Ok(Some(self.start_context(who, &project)?))
    }

    /// The digest, then the project's context (its heading, the last session's handoff, its
    /// pages), within `session_start.max_chars`.
    fn start_context(&self, who: Principal, project: &ProjectRow) -> Result<String, MemoryError> {
        let global = match self
            .index
            .project(&WorkspaceName::default_workspace(), &ProjectName::global())?
        {
            Some(g) if self.index.can_read(who, &g)? && project.id != g.id => Some(g),
            _ => None,
        };
        // The digest leads: it changes only when the profile does, so it stays in the part of
        // the harness's prompt that can be cached; the rest fills what is left of the cap.
        let digest = self.profile_digest(who, project)?.map(|d| d.text).unwrap_or_default();
        let max_chars =
            self.settings.session_start.max_chars.saturating_sub(digest.chars().count() + 1);
        // The handoff comes next (at most `HANDOFF_MAX_BYTES`), leaving the pages at least
        // their floor; the pages get the rest.
        let handoff = self.handoff(who, project)?.unwrap_or_default();
        let handoff = handoff::fit(&handoff, max_chars.saturating_sub(CONTEXT_FLOOR + 1));
        let max_chars = max_chars.saturating_sub(handoff.chars().count() + 1);
        // The pages nearest to what the last session did, found as `memory_query` finds
        // pages (by words, and by meaning when the encoder is installed), within the pages'
        // share of the cap.
        let related = self.related_to_handoff(who, project, &handoff, max_chars / 4)?;
        let max_chars = max_chars.saturating_sub(related.chars().count());
        let context = session_context(&self.index, project, global.as_ref(), max_chars)?;
        let context = with_handoff(context, project, &format!("{handoff}{related}"));
        Ok(if digest.is_empty() { context } else { format!("{digest}\n{context}") })
    }

    /// The user submitted a prompt: keep it, sanitized and cut to the capture bound.
    pub fn prompt_submit(&self, who: Principal, event: &HookEvent) -> Result<bool, MemoryError> {
        if !self.settings.capture.prompts {
            return Ok(false);
        }
        let Some(prompt) = event.prompt.as_deref().filter(|p| !p.trim().is_empty()) else {
            return Ok(false);
        };
        let project = self.hook_project(who, event)?;
        let text: Clean = sanitize(prompt).truncated(self.settings.capture.max_prompt_bytes);
        self.index.capture_prompt(&project, &event.session_id, who.user_id(), &text, self.now())?;
        // File names the user mentions are activity too (`fix src/main.rs`).
        let stacks: BTreeSet<&str> = text
            .as_str()
            .split(|c: char| c.is_whitespace() || matches!(c, '`' | '(' | ')' | ',' | '"' | '\''))
            .filter(|w| w.contains('.') && w.len() < 200)
            .filter_map(|w| ai_memory_profile::stack_of_file(w.trim_end_matches(['.', ':', ';'])))
            .collect();
        self.index.add_stacks(&project, &stacks, self.now())?;
        Ok(true)
    }

    pub fn session_end(&self, who: Principal, event: &HookEvent) -> Result<bool, MemoryError> {
        let project = self.hook_project(who, event)?;
        let ended = self.index.end_session(&project, &event.session_id, who.user_id())?;
        self.write_handoff(who, &project, &event.session_id, &event.harness, self.now())?;
        // The server's profile task runs a pass a few seconds later (a burst costs one).
        self.pass_wanted.notify_one();
        Ok(ended)
    }

    /// The project a hook reports for: made on first sight; never a profile project (event
    /// capture is never attributed to one).
    pub(crate) fn hook_project(
        &self,
        who: Principal,
        event: &HookEvent,
    ) -> Result<ProjectRow, MemoryError> {
        if event.session_id.is_empty() || event.session_id.len() > 200 {
            return Err(MemoryError::Invalid(
                "a hook event needs a session id (1 to 200 bytes)".into(),
            ));
        }
        let workspace = WorkspaceName::new(&event.workspace)?;
        let project = ProjectName::new(&event.project)?;
        if project.is_reserved() {
            return Err(MemoryError::Invalid(format!("sessions are not recorded in `{project}`")));
        }
        match self.index.project(&workspace, &project)? {
            Some(p) if self.index.can_read(who, &p)? => Ok(p),
            Some(_) => Err(MemoryError::NotFound(format!("no project {workspace}/{project}"))),
            None => self.project_for_event(who, &workspace, &project),
        }
    }

    /// The project a hook reports for, made (settings first, then its row) when new.
    fn project_for_event(
        &self,
        who: Principal,
        workspace: &WorkspaceName,
        project: &ProjectName,
    ) -> Result<ProjectRow, MemoryError> {
        if let Some(meta) = self.plan_project(who, workspace, project, None)?
            && meta != ProjectMeta::default()
        {
            self.wiki.set_project_meta(workspace, project, &meta, &author(who))?;
            self.sync_index()?;
        }
        let row = self.index.project(workspace, project)?;
        match row {
            Some(row) => Ok(row),
            None => Ok(self.index.ensure_project(workspace, project, false, None)?),
        }
    }
}

/// Pages listed under a handoff as related to it.
const RELATED_PAGES: usize = 3;

impl Memory {
    /// `## Pages related to it`: the project's pages nearest to the handoff's text, at most
    /// `RELATED_PAGES`, in at most `max_chars`; empty without a handoff or a match.
    fn related_to_handoff(
        &self,
        who: Principal,
        project: &ProjectRow,
        handoff: &str,
        max_chars: usize,
    ) -> Result<String, MemoryError> {
        let text: String = handoff.lines().skip(1).collect::<Vec<_>>().join("\n");
        if text.trim().is_empty() {
            return Ok(String::new());
        }
        let near = self.query_vector(&text);
        let hits = match self.index.query_project(
            who,
            &project.workspace,
            &project.name,
            &text,
            near.as_ref(),
            RELATED_PAGES,
        ) {
            Ok(hits) => hits,
            // No word to search for and no encoder: nothing to list.
            Err(ai_memory_index::IndexError::Invalid(_)) => return Ok(String::new()),
            Err(e) => return Err(e.into()),
        };
        let mut out = String::new();
        for h in hits {
            let line = format!("- `{}`: {}\n", h.path, h.title);
            if out.is_empty() {
                out.push_str(RELATED_HEADING);
                out.push('\n');
            }
            if out.chars().count() + line.chars().count() > max_chars {
                break;
            }
            out.push_str(&line);
        }
        Ok(if out.lines().count() > 1 { out } else { String::new() })
    }
}

/// The heading of the pages listed under a handoff.
pub const RELATED_HEADING: &str = "### Pages related to it";

/// The project's context with the handoff right after its heading and preamble (so the handoff
/// is read as stored memory, which is data), ahead of its pages.
fn with_handoff(context: String, project: &ProjectRow, handoff: &str) -> String {
    let head = header(project);
    match context.strip_prefix(&head) {
        Some(rest) if !handoff.is_empty() => format!("{head}\n{handoff}{rest}"),
        _ => context,
    }
}
