//! The operations every entry point shares (MCP tools, hook endpoint, CLI), with their checks:
//! names and paths validated, text sanitized, access decided, git then index updated.

mod events;
mod links;

use std::path::{Path, PathBuf};

use ai_memory_core::{
    GLOBAL_PROJECT, PagePath, ProjectName, Scope, Settings, WorkspaceName, sanitize,
};
use ai_memory_index::{Index, Principal, ProjectRow, QueryResult};
use ai_memory_store::{CleanPage, Location, ProjectMeta, Wiki};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::MemoryError;

pub use ai_memory_profile::STACK_TAGS;
pub use links::{
    CONTEXT_BYTES, CONTEXT_DEPTH, ContextOut, ContextPage, ContextReq, MAX_CONTEXT_BYTES,
    MAX_CONTEXT_DEPTH, MIN_CONTEXT_BYTES, PageLinks,
};

/// Where a call runs: the caller's workspace and project when it names none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub who: Principal,
    pub workspace: Option<WorkspaceName>,
    pub project: Option<ProjectName>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WritePage {
    /// `project` (default), `global` or `profile`.
    #[serde(default)]
    pub scope: Option<String>,
    /// The page's path inside its project, ending in `.md` (e.g. `decisions/queue.md`).
    pub path: String,
    /// The page: markdown, optionally opening with a YAML frontmatter block.
    pub body: String,
    /// Stack tags a profile entry is scoped to (profile pages only).
    #[serde(default)]
    pub applies_to: Option<Vec<String>>,
    /// What already enforces a profile entry (profile pages only).
    #[serde(default)]
    pub enforced_by: Option<String>,
    /// Workspace, when not the caller's.
    #[serde(default)]
    pub workspace: Option<String>,
    /// Project, when not the caller's.
    #[serde(default)]
    pub project: Option<String>,
    /// Make a new project restricted (readable only by its creator, grantees and root).
    #[serde(default)]
    pub restricted: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageRef {
    #[serde(default)]
    pub scope: Option<String>,
    pub path: String,
    #[serde(default)]
    pub workspace: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
}

/// `memory_forget`: a profile entry to remove and keep out.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Forget {
    /// The entry's path as the digest or `memory_query` names it (`profile/<category>/<page>.md`).
    pub path: String,
    /// Workspace, when not the caller's (a workspace-shared profile).
    #[serde(default)]
    pub workspace: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// Words to search for.
    pub query: String,
    #[serde(default)]
    pub workspace: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    /// Most hits of each kind (default 10, at most 100).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Written {
    pub workspace: String,
    pub project: String,
    pub path: String,
    pub commit: String,
    pub created: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadOut {
    pub workspace: String,
    pub project: String,
    pub path: String,
    /// The page as stored (frontmatter included).
    pub text: String,
    /// Recent commits that changed it, newest first.
    pub history: Vec<String>,
    /// Its links and backlinks (`links`, `backlinks`, `backlinks_total`).
    #[serde(flatten)]
    pub links: PageLinks,
}

/// A hook's report, in harness-independent terms.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookEvent {
    pub harness: String,
    pub session_id: String,
    pub workspace: String,
    pub project: String,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub contribute: Option<bool>,
    #[serde(default)]
    pub consume: Option<bool>,
    /// File names at the project's root (session start): the stacks its activity shows.
    #[serde(default)]
    pub files: Vec<String>,
    /// Files an edit or write tool changed (tool use), relative to the project's root when
    /// inside it: the session's handoff names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

/// The most file names one session start reports.
pub const MAX_EVENT_FILES: usize = 2_000;

pub struct Memory {
    data_dir: PathBuf,
    pub settings: Settings,
    wiki: Wiki,
    index: Index,
    /// One profile pass at a time.
    pass: std::sync::Mutex<()>,
    /// Set when a session ends: the server's profile task runs a pass a few seconds later.
    pub(crate) pass_wanted: std::sync::Arc<tokio::sync::Notify>,
    clock: Clock,
    /// The `[llm]` provider, when one is configured (the profile uses it under `[profile] llm`).
    llm: Option<Box<dyn crate::profile::llm::Provider>>,
    /// The sentence encoder, loaded on first use (`embedding`).
    pub(crate) embedding: std::sync::OnceLock<crate::embedding::Loaded>,
    pub(crate) embed_wake: std::sync::Arc<crate::embedding::Wake>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory").field("data_dir", &self.data_dir).finish_non_exhaustive()
    }
}

/// Unix seconds now: the system's, or a test's.
pub type Clock = Box<dyn Fn() -> i64 + Send + Sync>;

fn system_clock() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Memory {
    pub fn open(data_dir: &Path, settings: Settings) -> Result<Memory, MemoryError> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            MemoryError::Invalid(format!("cannot create {}: {e}", data_dir.display()))
        })?;
        let wiki = Wiki::open(data_dir)?;
        let index = Index::open(&data_dir.join("index.sqlite"))?;
        let llm = crate::profile::llm::provider(&settings.llm)
            .map_err(|e| MemoryError::Invalid(format!("config.toml: {e}")))?;
        let memory = Memory {
            data_dir: data_dir.to_owned(),
            settings,
            wiki,
            index,
            pass: std::sync::Mutex::new(()),
            pass_wanted: std::sync::Arc::new(tokio::sync::Notify::new()),
            clock: Box::new(system_clock),
            llm,
            embedding: std::sync::OnceLock::new(),
            embed_wake: std::sync::Arc::default(),
        };
        // A new index is made from the wiki; one left behind by a process killed between its
        // commit and its index write catches up on the paths changed since.
        let synced = memory.index.sync(&memory.wiki)?;
        if synced.pages > 0 || synced.rebuilt {
            tracing::info!(
                pages = synced.pages,
                rebuilt = synced.rebuilt,
                "the index caught up with the wiki"
            );
        }
        for problem in &synced.broken {
            tracing::warn!(%problem, "a page in the wiki does not parse; not indexed");
        }
        Ok(memory)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn wiki(&self) -> &Wiki {
        &self.wiki
    }

    /// The same memory with another clock (tests: prompts at chosen times).
    pub fn with_clock(mut self, clock: Clock) -> Memory {
        self.clock = clock;
        self
    }

    /// The provider the profile's LLM steps use: `None` without one or with `[profile] llm`
    /// off.
    pub(crate) fn profile_llm(&self) -> Option<&dyn crate::profile::llm::Provider> {
        self.llm.as_deref().filter(|_| self.settings.profile.llm)
    }

    /// Unix seconds now, by this memory's clock.
    pub fn now(&self) -> i64 {
        (self.clock)()
    }

    pub(crate) fn pass_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.pass.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Commits a page and indexes it; returns the commit. (The caller has made the page's
    /// project, with its access mode, before anything is committed.)
    pub(crate) fn store_page(
        &self,
        at: &Location,
        page: &CleanPage,
        author: &str,
    ) -> Result<String, MemoryError> {
        let commit = self.wiki.write(at, page, author)?;
        self.sync_index()?;
        Ok(commit)
    }

    /// Deletes a page from git and the index; returns the commit.
    pub(crate) fn remove_page(&self, at: &Location, author: &str) -> Result<String, MemoryError> {
        let commit = self.wiki.delete(at, author).map_err(|e| match e {
            ai_memory_store::StoreError::NotFound(what) => {
                MemoryError::NotFound(format!("no page {what}"))
            }
            other => other.into(),
        })?;
        self.sync_index()?;
        Ok(commit)
    }

    /// Brings the index to the wiki's tip (git is written first: the index follows it).
    pub(crate) fn sync_index(&self) -> Result<(), MemoryError> {
        for problem in self.index.sync(&self.wiki)?.broken {
            tracing::warn!(%problem, "a page in the wiki does not parse; not indexed");
        }
        self.embedding_changed();
        Ok(())
    }

    /// Who a bearer token is: the root token, an operator's key, or (no token on a server with
    /// no operators) the single user. `None`: refused.
    pub fn authenticate(&self, token: Option<&str>) -> Result<Option<Principal>, MemoryError> {
        let root = &self.settings.server.root_token;
        match token {
            Some(t) if !root.is_empty() && constant_time_eq(t.as_bytes(), root.as_bytes()) => {
                Ok(Some(Principal::Root))
            }
            Some(t) => Ok(self.index.user_by_token(t)?.map(Principal::User)),
            None if self.index.has_users()? || !root.is_empty() => Ok(None),
            None => Ok(Some(Principal::Root)),
        }
    }

    fn locate(
        &self,
        caller: &Caller,
        scope: Option<&str>,
        ws: Option<&str>,
        project: Option<&str>,
        path: &str,
    ) -> Result<(Location, Scope), MemoryError> {
        let scope = Scope::parse(scope.unwrap_or("project"))?;
        let path = PagePath::new(path)?;
        let workspace = match ws {
            Some(w) => WorkspaceName::new(w)?,
            None => caller.workspace.clone().unwrap_or_else(WorkspaceName::default_workspace),
        };
        let project = match project {
            Some(p) => ProjectName::new(p)?,
            None => match (&caller.project, scope) {
                (Some(p), _) => p.clone(),
                (None, Scope::Project) => {
                    return Err(MemoryError::Invalid(
                        "no project: name one (`project`) or call from inside a project".into(),
                    ));
                }
                (None, _) => ProjectName::global(),
            },
        };
        let (workspace, project) = match scope {
            Scope::Profile => {
                let home = self.profile_home(caller.who, &workspace)?.ok_or_else(|| {
                    MemoryError::Invalid(match self.profile_mode() {
                        Ok(Some(_)) => "the root token has no private profile (there is no operator behind it): name the project, or use an operator's key".into(),
                        _ => "the profile is off on this server (`ai-memory profile status` says why)".into(),
                    })
                })?;
                (home.workspace, home.project)
            }
            _ => (workspace, project),
        };
        let (workspace, project, path) = scope.locate(&workspace, &project, &path)?;
        if scope == Scope::Profile {
            crate::profile::check_category(&path)?;
        }
        Ok((Location { workspace, project, path }, scope))
    }

    /// The project row a read of `at` may use: unknown and unreadable are the same answer, so
    /// a restricted project's existence does not leak.
    fn readable(&self, who: Principal, at: &Location) -> Result<ProjectRow, MemoryError> {
        match self.index.project(&at.workspace, &at.project)? {
            Some(p) if self.index.can_read(who, &p)? => Ok(p),
            _ => Err(MemoryError::NotFound(format!("no page {at}"))),
        }
    }

    pub fn write_page(&self, caller: &Caller, req: &WritePage) -> Result<Written, MemoryError> {
        let (at, _) = self.locate(
            caller,
            req.scope.as_deref(),
            req.workspace.as_deref(),
            req.project.as_deref(),
            &req.path,
        )?;
        let digest_page = is_digest_page(&at);
        if (req.applies_to.is_some() || req.enforced_by.is_some()) && !digest_page {
            return Err(MemoryError::Invalid(format!(
                "`applies_to` and `enforced_by` are for profile entries (`profile/` in `_global` or a profile project), not {at}"
            )));
        }
        if let Some(tags) = &req.applies_to
            && let Some(bad) = tags.iter().find(|t| !ai_memory_profile::is_stack_tag(t))
        {
            return Err(MemoryError::Invalid(format!(
                "unknown stack tag `{bad}` in `applies_to`: use one of {}",
                STACK_TAGS.join(", ")
            )));
        }
        let invalid = |e: ai_memory_core::PageError| MemoryError::Invalid(format!("{at}: {e}"));
        let mut page = CleanPage::new(sanitize(&req.body)).map_err(invalid)?;
        // Frontmatter set by arguments: the page is rendered again (and parsed once more).
        if req.applies_to.is_some() || req.enforced_by.is_some() {
            let mut edited = page.page().clone();
            if let Some(tags) = &req.applies_to {
                edited.frontmatter.applies_to = tags.clone();
            }
            if let Some(by) = &req.enforced_by {
                edited.frontmatter.enforced_by = Some(by.clone());
            }
            page = CleanPage::new(sanitize(&edited.render().map_err(invalid)?)).map_err(invalid)?;
        }
        // The page's own frontmatter is held to the same rules as the arguments.
        let fm = &page.page().frontmatter;
        ai_memory_profile::entry::check_keys(
            digest_page,
            &fm.applies_to,
            fm.enforced_by.as_deref(),
        )
        .map_err(|e| MemoryError::Invalid(format!("{at}: its frontmatter: {e}")))?;

        // A new project's settings go in the commit of its first page: a crash cannot leave
        // one without the other.
        let meta = self
            .plan_project(caller.who, &at.workspace, &at.project, req.restricted)?
            .filter(|m| *m != ProjectMeta::default());
        let created = self.wiki.read(&at)?.is_none();
        let commit = self.wiki.write_with_meta(&at, &page, meta.as_ref(), &author(caller.who))?;
        self.sync_index()?;
        Ok(Written {
            workspace: at.workspace.to_string(),
            project: at.project.to_string(),
            path: at.path.to_string(),
            commit,
            created,
        })
    }

    /// Whether `who` may write to the project: `None` when it exists, else the settings a new
    /// one is made with (its access mode then fixed).
    fn plan_project(
        &self,
        who: Principal,
        workspace: &WorkspaceName,
        project: &ProjectName,
        restricted: Option<bool>,
    ) -> Result<Option<ProjectMeta>, MemoryError> {
        if let Some(p) = self.index.project(workspace, project)? {
            if !self.index.can_read(who, &p)? {
                return Err(MemoryError::NotFound(format!("no project {}/{}", workspace, project)));
            }
            if !self.index.can_write(who, &p)? {
                return Err(MemoryError::Denied(format!(
                    "no write access to {}/{}",
                    workspace, project
                )));
            }
            if restricted.is_some_and(|r| r != p.restricted) {
                return Err(MemoryError::Invalid(format!(
                    "{}/{} exists and its access mode is fixed",
                    workspace, project
                )));
            }
            return Ok(None);
        }
        if !self.index.can_create(who, project) {
            return Err(MemoryError::Denied(format!("`{}` is reserved", project)));
        }
        Ok(Some(ProjectMeta {
            restricted: restricted.unwrap_or(false) || project.is_private_profile(),
            creator: who.user_id(),
        }))
    }

    pub fn read_page(&self, caller: &Caller, req: &PageRef) -> Result<ReadOut, MemoryError> {
        self.as_printed(caller, req, |r| self.read_located(caller, r))
    }

    /// Runs `f` on the page `req` names. A digest line names `profile/<category>/<page>.md`
    /// without its scope: a path given as the digest printed it, with no scope or place named,
    /// that is not a page of the caller's project (or with no project to look in) is looked up
    /// in the caller's profile.
    pub(crate) fn as_printed<T>(
        &self,
        caller: &Caller,
        req: &PageRef,
        f: impl Fn(&PageRef) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        let as_printed = req.scope.is_none()
            && req.workspace.is_none()
            && req.project.is_none()
            && req.path.starts_with("profile/");
        if !as_printed {
            return f(req);
        }
        let first = match caller.project {
            Some(_) => match f(req) {
                Err(MemoryError::NotFound(first)) => first,
                other => return other,
            },
            None => format!("no project page {}", req.path),
        };
        let in_profile = PageRef { scope: Some("profile".into()), ..req.clone() };
        f(&in_profile).map_err(|e| match e {
            MemoryError::NotFound(_) => {
                MemoryError::NotFound(format!("{first}, nor in your profile (`scope`: `profile`)"))
            }
            other => other,
        })
    }

    fn read_located(&self, caller: &Caller, req: &PageRef) -> Result<ReadOut, MemoryError> {
        let (at, _) = self.locate(
            caller,
            req.scope.as_deref(),
            req.workspace.as_deref(),
            req.project.as_deref(),
            &req.path,
        )?;
        let project = self.readable(caller.who, &at)?;
        let stored =
            self.wiki.read(&at)?.ok_or_else(|| MemoryError::NotFound(format!("no page {at}")))?;
        let links = self.page_links(&project, at.path.as_str())?;
        let history = self
            .wiki
            .history(&at, 5)?
            .into_iter()
            .map(|c| format!("{} {}", &c.id[..12], c.message))
            .collect();
        Ok(ReadOut {
            workspace: at.workspace.to_string(),
            project: at.project.to_string(),
            path: at.path.to_string(),
            text: stored.text,
            history,
            links,
        })
    }

    pub fn delete_page(&self, caller: &Caller, req: &PageRef) -> Result<String, MemoryError> {
        let (at, _) = self.locate(
            caller,
            req.scope.as_deref(),
            req.workspace.as_deref(),
            req.project.as_deref(),
            &req.path,
        )?;
        let project = self.readable(caller.who, &at)?;
        if !self.index.can_write(caller.who, &project)? {
            return Err(MemoryError::Denied(format!(
                "no write access to {}/{}",
                at.workspace, at.project
            )));
        }
        self.remove_page(&at, &author(caller.who))
    }

    pub fn query(&self, caller: &Caller, req: &Query) -> Result<QueryResult, MemoryError> {
        let workspace = match &req.workspace {
            Some(w) => WorkspaceName::new(w)?,
            None => caller.workspace.clone().unwrap_or_else(WorkspaceName::default_workspace),
        };
        let project = match (&req.project, &caller.project) {
            (Some(p), _) => ProjectName::new(p)?,
            (None, Some(p)) => p.clone(),
            (None, None) => ProjectName::global(),
        };
        let limit = req.limit.unwrap_or(10).clamp(1, 100);
        let near = self.query_vector(&req.query);
        let mut result = self.index.query(
            caller.who,
            workspace.as_str(),
            project.as_str(),
            &req.query,
            near.as_ref(),
            limit,
        )?;
        let consume = match self.index.project(&workspace, &project)? {
            Some(row) => self.index.project_opt_outs(&row)?.1,
            None => None,
        };
        if consume == Some(false) {
            // `consume = false`: no profile in this project's queries either.
            result.global_scope_hits.retain(|h| !h.path.starts_with("profile/"));
        } else if let Some(home) = self.profile_home(caller.who, &workspace)?
            && home.project.as_str() != GLOBAL_PROJECT
            && (&home.workspace, &home.project) != (&workspace, &project)
        {
            // A workspace or private profile travels with retrieval like the global scope.
            let entries = self.index.query_project(
                caller.who,
                home.workspace.as_str(),
                home.project.as_str(),
                &req.query,
                near.as_ref(),
                limit,
            )?;
            let hits = &mut result.global_scope_hits;
            hits.extend(entries.into_iter().filter(|h| h.path.starts_with("profile/")));
            hits.sort_by(|a, b| a.score.total_cmp(&b.score));
            hits.truncate(limit);
        }
        Ok(result)
    }

    /// Rebuilds the index from the wiki (after importing hand-copied pages).
    pub fn reindex(&self) -> Result<(usize, Vec<String>), MemoryError> {
        // The pages only: the rebuild reads the whole wiki, so a sync before it is wasted.
        self.wiki.import_changed("ai-memory watcher")?;
        let rebuilt = self.index.rebuild(&self.wiki)?;
        self.embedding_changed();
        Ok(rebuilt)
    }

    /// Imports pages copied into `wiki/` by hand; returns what was imported and what was not
    /// (a file that does not parse, named). A page whose `applies_to` / `enforced_by` a write
    /// would refuse is imported all the same (the file is the user's), and named in the log
    /// and in `profile review`.
    pub fn import_changed(&self) -> Result<(Vec<String>, Vec<String>), MemoryError> {
        let (mut ok, mut bad) = (Vec::new(), Vec::new());
        for result in self.wiki.import_changed("ai-memory watcher")? {
            match result {
                Ok(stored) => {
                    let fm = &stored.page.frontmatter;
                    if let Err(e) = ai_memory_profile::entry::check_keys(
                        is_digest_page(&stored.location),
                        &fm.applies_to,
                        fm.enforced_by.as_deref(),
                    ) {
                        let page = stored.location.to_string();
                        tracing::warn!(%page, problem = %e, "a page copied into the wiki has bad frontmatter; `profile review` lists it");
                    }
                    ok.push(stored.location.to_string())
                }
                Err(e) => bad.push(e.to_string()),
            }
        }
        // Also what other processes committed without indexing (one killed in between).
        self.sync_index()?;
        Ok((ok, bad))
    }
}

/// Whether the digest reads the page at `at`: a category folder under `profile/` in `_global`
/// or a profile project (the reserved ones).
pub(crate) fn is_digest_page(at: &Location) -> bool {
    at.path.as_str().starts_with("profile/")
        && ai_memory_profile::Category::of_path(at.path.as_str()).is_some()
        && at.project.is_reserved()
}

fn author(who: Principal) -> String {
    match who {
        Principal::Root => "root".into(),
        Principal::User(id) => format!("user-{id}"),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
