//! The cross-project profile: what ai-memory learns of a user's standing choices from their own
//! prompts and curated pages (harvest), how statements become entries (converge), the digest a
//! session start opens with, and `profile apply` into a repository's rules file.
//!
//! Pure logic over text and records: the server keeps the records (SQLite) and the entries
//! (wiki pages in git); this crate decides what they say. Only `apply` touches files, and only
//! those of the repository it is run in.

pub mod apply;
mod category;
pub mod converge;
pub mod digest;
pub mod entry;
pub mod sentence;
mod stack;
pub mod topic;

pub use category::Category;
pub use stack::{STACK_TAGS, is_stack_tag, stack_of_file};
