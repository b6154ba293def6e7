//! The cross-project profile in the server: where each profile lives (its home), the digest a
//! session start opens with, and the operations behind `ai-memory profile`. The harvest pass
//! that keeps it is in `pass.rs`; what entries say is decided by `ai-memory-profile`.

pub mod llm;
mod pass;

use std::collections::BTreeSet;

use ai_memory_core::{GLOBAL_PROJECT, PagePath, ProjectName, ShareMode, WorkspaceName};
use ai_memory_index::{Principal, ProjectRow, Sources};
use ai_memory_profile::Category;
use ai_memory_profile::converge::Pending;
use ai_memory_profile::digest::{Digest, DigestInput, applicable, digest, line};
use ai_memory_profile::entry::{Entry, KeyProblem};
use ai_memory_store::Location;

use crate::error::MemoryError;
use crate::service::Memory;

pub use pass::PassReport;

/// Where a profile lives and who feeds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    pub workspace: WorkspaceName,
    pub project: ProjectName,
    pub mode: ShareMode,
    /// A shared profile on a multi-user server: "team defaults", two operators per entry.
    pub team: bool,
    pub sources: Sources,
    /// The operator of a private profile.
    pub owner: Option<i64>,
}

impl Home {
    pub fn location(&self, path: &PagePath) -> Location {
        Location {
            workspace: self.workspace.clone(),
            project: self.project.clone(),
            path: path.clone(),
        }
    }
}

impl std::fmt::Display for Home {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/profile", self.workspace, self.project)
    }
}

/// `profile review`: the entries with their state, and habits not in the profile yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Review {
    pub entries: Vec<Entry>,
    pub pending: Vec<Pending>,
    /// Pages whose `applies_to` / `enforced_by` a write would refuse (hand edits the watcher
    /// imported): `workspace/project/path: what is wrong`. This profile's entries, and pages
    /// the digest never reads, anywhere.
    pub problems: Vec<String>,
}

/// Which profile a command names (`--user`, `--workspace`), else the caller's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Which {
    pub user: Option<String>,
    pub workspace: Option<String>,
}

impl Memory {
    /// Whether the server has several operators (database users).
    pub fn multi_user(&self) -> Result<bool, MemoryError> {
        Ok(self.index().has_users()?)
    }

    /// Where profiles live on this server; `None`: no profile.
    pub fn profile_mode(&self) -> Result<Option<ShareMode>, MemoryError> {
        Ok(self.settings.profile.mode(self.multi_user()?))
    }

    /// The profile `who` reads and writes from `workspace`; `None`: none (the profile is off,
    /// or the root token on a server of private profiles, which has no operator behind it).
    pub fn profile_home(
        &self,
        who: Principal,
        workspace: &WorkspaceName,
    ) -> Result<Option<Home>, MemoryError> {
        let multi = self.multi_user()?;
        let Some(mode) = self.settings.profile.mode(multi) else { return Ok(None) };
        Ok(match mode {
            ShareMode::Global => Some(Home {
                workspace: WorkspaceName::default_workspace(),
                project: ProjectName::global(),
                mode,
                team: multi,
                sources: Sources { open_only: multi, ..Sources::default() },
                owner: None,
            }),
            ShareMode::Workspace => Some(Home {
                workspace: workspace.clone(),
                project: ProjectName::new("_profile")?,
                mode,
                team: multi,
                sources: Sources {
                    workspace: Some(workspace.to_string()),
                    open_only: multi,
                    ..Sources::default()
                },
                owner: None,
            }),
            ShareMode::User => match who {
                Principal::Root => None,
                Principal::User(id) => Some(private_home(id)?),
            },
        })
    }

    /// Every profile a pass keeps.
    pub fn profile_homes(&self) -> Result<Vec<Home>, MemoryError> {
        let Some(mode) = self.profile_mode()? else { return Ok(Vec::new()) };
        let mut homes = Vec::new();
        match mode {
            ShareMode::Global => homes
                .extend(self.profile_home(Principal::Root, &WorkspaceName::default_workspace())?),
            ShareMode::Workspace => {
                for ws in self.index().workspaces()? {
                    homes.extend(self.profile_home(Principal::Root, &WorkspaceName::new(&ws)?)?);
                }
            }
            ShareMode::User => {
                for (id, _) in self.index().users()? {
                    homes.push(private_home(id)?);
                }
            }
        }
        Ok(homes)
    }

    /// The profile a command names: `--user NAME` (a private profile), `--workspace W`, else
    /// the one the local operator reads from the current workspace.
    pub fn profile_which(
        &self,
        which: &Which,
        cwd_workspace: &WorkspaceName,
    ) -> Result<Home, MemoryError> {
        let off = || {
            MemoryError::Invalid(
                "the profile is off on this server (see `ai-memory profile status`)".into(),
            )
        };
        if let Some(name) = &which.user {
            let id = self.index().user_id(name)?;
            return match self.profile_mode()? {
                Some(ShareMode::User) => private_home(id),
                Some(_) => Err(MemoryError::Invalid(format!(
                    "profiles are not per operator here (share is not `user`): drop --user {name}"
                ))),
                None => Err(off()),
            };
        }
        let ws = match &which.workspace {
            Some(w) => WorkspaceName::new(w)?,
            None => cwd_workspace.clone(),
        };
        self.profile_home(Principal::Root, &ws)?.ok_or_else(off)
    }

    /// The project row of a home, if anything was ever written there.
    pub(crate) fn home_row(&self, home: &Home) -> Result<Option<ProjectRow>, MemoryError> {
        Ok(self.index().project(&home.workspace, &home.project)?)
    }

    /// The entries of a profile, in digest order (category, then path); pages that no longer
    /// parse are left out.
    pub fn profile_entries(&self, home: &Home) -> Result<Vec<Entry>, MemoryError> {
        let Some(row) = self.home_row(home)? else { return Ok(Vec::new()) };
        let mut entries = Vec::new();
        for page in self.index().pages_of(&row, "profile/")? {
            let path = PagePath::new(&page.path)?;
            let Some(stored) = self.wiki().read(&home.location(&path))? else { continue };
            if let Ok(entry) = Entry::parse(&page.path, &stored.text) {
                entries.push(entry);
            }
        }
        entries.sort_by(|a, b| {
            (a.category().unwrap_or(Category::Habits), &a.path)
                .cmp(&(b.category().unwrap_or(Category::Habits), &b.path))
        });
        Ok(entries)
    }

    /// The digest for a session start of `who` in `project`, or why there is none.
    pub fn profile_digest(
        &self,
        who: Principal,
        project: &ProjectRow,
    ) -> Result<Option<Digest>, MemoryError> {
        if !self.settings.profile.inject_on_session_start {
            return Ok(None);
        }
        let workspace = WorkspaceName::new(&project.workspace)?;
        let Some(home) = self.profile_home(who, &workspace)? else { return Ok(None) };
        // A session inside the profile's own scope already has these pages as its memory.
        if (home.workspace.as_str(), home.project.as_str())
            == (project.workspace.as_str(), project.name.as_str())
            || project.name == GLOBAL_PROJECT
        {
            return Ok(None);
        }
        if self.index().project_opt_outs(project)?.1 == Some(false) {
            return Ok(None);
        }
        let Some(row) = self.home_row(&home)? else { return Ok(None) };
        if !self.index().can_read(who, &row)? {
            return Ok(None);
        }
        self.home_digest(&home, Some(project))
    }

    /// The digest `home` gives `project` (`None`: a project not seen yet: no stacks, no pages).
    pub fn home_digest(
        &self,
        home: &Home,
        project: Option<&ProjectRow>,
    ) -> Result<Option<Digest>, MemoryError> {
        let settings = &self.settings.profile;
        let entries = self.profile_entries(home)?;
        let (stacks, baseline) = self.project_activity(project)?;
        let budget = if baseline { settings.baseline_budget() } else { settings.digest_budget() };
        // Within the session-start cap too, leaving the context after it its floor (bytes
        // bound characters, so the cap in characters holds).
        let cap =
            self.settings.session_start.max_chars.saturating_sub(crate::context::CONTEXT_FLOOR);
        let budget = budget.min(cap);
        Ok(digest(DigestInput {
            entries: &entries,
            stacks: &stacks,
            budget,
            team: home.team,
            baseline,
        }))
    }

    /// The lines `profile apply` writes for `project`: the entries the digest would show,
    /// selected the same way (stacks, `enforced_by`), every one of them.
    pub fn apply_lines(
        &self,
        home: &Home,
        project: Option<&ProjectRow>,
    ) -> Result<Vec<String>, MemoryError> {
        let entries = self.profile_entries(home)?;
        let (stacks, _) = self.project_activity(project)?;
        Ok(applicable(&entries, &stacks).into_iter().map(line).collect())
    }

    /// The stacks a project's activity shows, and whether it is new (no pages of its own).
    fn project_activity(
        &self,
        project: Option<&ProjectRow>,
    ) -> Result<(BTreeSet<String>, bool), MemoryError> {
        Ok(match project {
            Some(p) => (self.index().stacks(p)?, !self.index().has_pages(p)?),
            None => (BTreeSet::new(), true),
        })
    }

    /// Removes an entry and records it as forgotten: the harvester does not write it again
    /// from the same evidence, only from a statement made later.
    pub fn profile_forget(&self, home: &Home, path: &str) -> Result<String, MemoryError> {
        let path = entry_path(path)?;
        let at = home.location(&path);
        let row =
            self.home_row(home)?.ok_or_else(|| MemoryError::NotFound(format!("no entry {at}")))?;
        let stored = self
            .wiki()
            .read(&at)?
            .ok_or_else(|| MemoryError::NotFound(format!("no entry {at}")))?;
        let entry = Entry::parse(path.as_str(), &stored.text)
            .map_err(|e| MemoryError::Invalid(e.to_string()))?;
        let statement =
            entry.learned.as_ref().map_or(entry.summary.clone(), |l| l.statement.clone());
        self.index().forget(&row, path.as_str(), &statement, self.now())?;
        self.remove_page(&at, "profile forget")
    }

    /// `memory_forget`: `profile_forget` in the caller's profile, for a caller who may write it
    /// (the entry is recorded in the same ledger, so the next pass does not bring it back).
    pub fn forget(
        &self,
        caller: &crate::service::Caller,
        req: &crate::service::Forget,
    ) -> Result<serde_json::Value, MemoryError> {
        let workspace = match &req.workspace {
            Some(w) => WorkspaceName::new(w)?,
            None => caller.workspace.clone().unwrap_or_else(WorkspaceName::default_workspace),
        };
        let home = self.profile_home(caller.who, &workspace)?.ok_or_else(|| {
            MemoryError::Invalid(
                "no profile to forget from: it is off on this server, or the root token has no private profile".into(),
            )
        })?;
        if let Some(row) = self.home_row(&home)?
            && !self.index().can_write(caller.who, &row)?
        {
            return Err(MemoryError::Denied(format!(
                "no write access to {}/{}",
                home.workspace, home.project
            )));
        }
        let commit = self.profile_forget(&home, &req.path)?;
        Ok(serde_json::json!({
            "commit": commit,
            "forgotten": entry_path(&req.path)?.to_string(),
        }))
    }

    /// `profile review`: every entry (learned, or edited by hand) and the habits short of the
    /// bar, from the records as they are (no pass is run).
    pub fn profile_review(&self, home: &Home) -> Result<Review, MemoryError> {
        let entries = self.profile_entries(home)?;
        let pending = match self.home_row(home)? {
            Some(row) => self.converge_home(home, &row, &entries)?.pending,
            None => Vec::new(),
        };
        Ok(Review { entries, pending, problems: self.entry_key_problems(home)? })
    }

    fn entry_key_problems(&self, home: &Home) -> Result<Vec<String>, MemoryError> {
        let mut out = Vec::new();
        for row in self.index().pages_with_entry_keys()? {
            let at = Location {
                workspace: WorkspaceName::new(&row.workspace)?,
                project: ProjectName::new(&row.project)?,
                path: PagePath::new(&row.path)?,
            };
            let digest_page = crate::service::is_digest_page(&at);
            if digest_page && (at.workspace != home.workspace || at.project != home.project) {
                continue;
            }
            if let Err(e) = ai_memory_profile::entry::check_keys(
                digest_page,
                &row.applies_to,
                row.enforced_by.as_deref(),
            ) {
                let effect = match e {
                    KeyProblem::NotAnEntry => "the digest never reads this page",
                    KeyProblem::UnknownTag(_) => {
                        "the tag is ignored: the entry shows in every project"
                    }
                };
                out.push(format!("{at}: {e} ({effect})"));
            }
        }
        Ok(out)
    }
}

fn private_home(id: i64) -> Result<Home, MemoryError> {
    Ok(Home {
        workspace: WorkspaceName::default_workspace(),
        project: ProjectName::new(&format!("_profile.{id}"))?,
        mode: ShareMode::User,
        team: false,
        sources: Sources { user: Some(id), ..Sources::default() },
        owner: Some(id),
    })
}

/// `tools/pnpm.md` or `profile/tools/pnpm.md` → `profile/tools/pnpm.md`, in one of the seven
/// category folders.
pub fn entry_path(path: &str) -> Result<PagePath, MemoryError> {
    let path = PagePath::new(path)?.under_profile()?;
    check_category(&path)?;
    Ok(path)
}

/// A profile entry lives in one of the seven category folders (the digest reads no other).
pub fn check_category(path: &PagePath) -> Result<(), MemoryError> {
    if Category::of_path(path.as_str()).is_none() {
        return Err(MemoryError::Invalid(format!(
            "`{path}`: a profile entry lives in a category folder: {}",
            Category::ALL.map(|c| c.as_str()).join(", ")
        )));
    }
    Ok(())
}
