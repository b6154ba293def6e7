//! ai-memory's vocabulary: workspace and project names, page paths and scopes, pages with
//! their frontmatter, the sanitizer every stored or model-bound text passes through, and the
//! settings (`config.toml`, environment overrides, the per-project `.ai-memory.toml` marker).
//!
//! Pure data: no git, no SQLite, no I/O but reading settings files.

mod links;
mod name;
mod page;
mod sanitize;
mod settings;

pub use links::{Link, LinkKind, MAX_LINKS_PER_PAGE, page_links};
pub use name::{
    DEFAULT_WORKSPACE, GLOBAL_PROJECT, NameError, PagePath, ProjectName, Scope, WorkspaceName,
};
pub use page::{CURATED_FOLDERS, Frontmatter, MAX_PAGE_BYTES, Page, PageError};
pub use sanitize::{Clean, sanitize};
pub use settings::{
    BASELINE_BYTES, DIGEST_BYTES, Identity, Llm, MARKER_FILE, Marker, Profile, Settings,
    SettingsError, Share, ShareMode, Toggle,
};
