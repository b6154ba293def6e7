//! Which project roots the user trusts. A project brings things that run: hook commands,
//! plugins, settings that name a program or send a key off the machine, and (later) MCP
//! servers. Until the user trusts its root, none of them runs; a trust is kept with a hash of
//! what the root would run then, so a change to any of it (a pulled commit adding a hook) asks
//! again. The record is the user's: `<data>/aerix/trust.json`, never in a repository.
//!
//! This crate knows nothing of where the items come from: the binary lists them
//! ([`Inventory`]) from the crates that read each kind.

mod record;

use std::fmt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use record::{Entry, Record, TrustError};

/// What kind of thing a project would run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A hook command of a project hook file.
    Hook,
    /// A plugin the project brings or enables (its hooks, skills and agents).
    Plugin,
    /// A setting that runs a program or sends a key off the machine.
    Setting,
    /// A permission a project's file would grant (an allow rule, a default mode, an added
    /// directory): it runs nothing itself, but lets the agent do more without asking.
    Permission,
    /// An MCP server the project declares (`.mcp.json`, a project settings file's
    /// `[mcp.servers]`): a program it starts, or an endpoint it sends calls to.
    McpServer,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hook => "hook",
            Kind::Plugin => "plugin",
            Kind::Setting => "setting",
            Kind::Permission => "permission",
            Kind::McpServer => "mcp server",
        }
    }
}

/// One thing the project would run, and the file that brings it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Item {
    pub kind: Kind,
    /// The file (or plugin directory) it comes from, relative to the root when inside it.
    pub source: String,
    /// The command, the plugin's name and directory, or `key = value`.
    pub what: String,
}

/// An item as a person reads it, escaped (see [`escaped`]).
impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({})", self.kind.name(), escaped(&self.what), escaped(&self.source))
    }
}

/// Whitespace runs longer than this are shown by their length.
const MAX_RUN: usize = 3;

/// `text` safe to show on a terminal and impossible to pad out of sight: control characters
/// (escape sequences among them) and the bidirectional overrides that reorder what is read
/// are written as `\u{..}` escapes (`\n`, `\t`, `\r` for the common ones), and a run of
/// more than three spaces is shown as `[N spaces]`, so a hook padded with spaces cannot push
/// what follows out of a question's box.
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = 0usize;
    let flush = |out: &mut String, run: &mut usize| {
        if *run > MAX_RUN {
            out.push_str(&format!(" [{run} spaces] "));
        } else {
            out.extend(std::iter::repeat_n(' ', *run));
        }
        *run = 0;
    };
    for c in text.chars() {
        if c == ' ' {
            run += 1;
            continue;
        }
        flush(&mut out, &mut run);
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || is_reordering(c) => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    flush(&mut out, &mut run);
    out
}

/// The bidirectional embeddings, overrides and isolates, and the marks that change no width.
fn is_reordering(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// What a project root would run, as of now.
#[derive(Clone, Debug)]
pub struct Inventory {
    root: PathBuf,
    items: Vec<Item>,
}

impl Inventory {
    /// `root` as given (the caller canonicalizes it: the record is keyed by its text).
    pub fn new(root: &Path) -> Inventory {
        Inventory { root: root.to_owned(), items: Vec::new() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Adds an item; `source` is shown relative to the root when under it.
    pub fn add(&mut self, kind: Kind, source: &Path, what: impl Into<String>) {
        let source = source.strip_prefix(&self.root).unwrap_or(source).display().to_string();
        self.items.push(Item { kind, source, what: what.into() });
    }

    pub fn items(&self) -> &[Item] {
        &self.items
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// `sha256:<hex>` over the sorted items: the same things in any order hash alike, and any
    /// change to a command, a plugin or a setting changes it.
    pub fn hash(&self) -> String {
        let mut items: Vec<&Item> = self.items.iter().collect();
        items.sort();
        items.dedup();
        let mut hasher = Sha256::new();
        for item in items {
            // Lengths first, so no two different lists can run together into one text.
            for part in [item.kind.name(), &item.source, &item.what] {
                hasher.update((part.len() as u64).to_le_bytes());
                hasher.update(part.as_bytes());
            }
        }
        let digest = hasher.finalize();
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }
}

/// Where a root stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// It brings nothing that runs: there is nothing to trust.
    Nothing,
    /// Trusted with what it would run now.
    Trusted,
    /// Never trusted (or revoked).
    Untrusted,
    /// Trusted once, but what it would run has changed since (`since`: when it was trusted).
    Changed { since: String },
}

impl Standing {
    /// Whether the project's items may run.
    pub fn allows(&self) -> bool {
        matches!(self, Standing::Nothing | Standing::Trusted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory(items: &[(&str, &str)]) -> Inventory {
        let mut inv = Inventory::new(Path::new("/repo"));
        for (source, what) in items {
            inv.add(Kind::Hook, &Path::new("/repo").join(source), *what);
        }
        inv
    }

    #[test]
    fn control_characters_and_padding_are_shown_not_obeyed() {
        assert_eq!(escaped("touch x"), "touch x");
        assert_eq!(escaped("a\x1b[2Jb\nc\td"), "a\\u{1b}[2Jb\\nc\\td");
        assert_eq!(escaped("ok\u{202e}txt.sh"), "ok\\u{202e}txt.sh");
        let padded = format!("true{}; curl x | sh", " ".repeat(500));
        assert_eq!(escaped(&padded), "true [500 spaces] ; curl x | sh");
        assert_eq!(escaped("a   b"), "a   b", "three spaces are still themselves");
        let item = Item { kind: Kind::Hook, source: "h\x07.json".into(), what: padded };
        assert_eq!(item.to_string(), "hook true [500 spaces] ; curl x | sh (h\\u{7}.json)");
    }

    #[test]
    fn the_hash_covers_every_item_and_not_their_order() {
        let a = inventory(&[(".claude/settings.json", "SessionStart: touch x"), ("b", "c")]);
        let b = inventory(&[("b", "c"), (".claude/settings.json", "SessionStart: touch x")]);
        assert_eq!(a.hash(), b.hash());
        let changed = inventory(&[(".claude/settings.json", "SessionStart: touch y"), ("b", "c")]);
        assert_ne!(a.hash(), changed.hash());
        let moved = inventory(&[(".aerix/hooks.json", "SessionStart: touch x"), ("b", "c")]);
        assert_ne!(a.hash(), moved.hash());
        // No two lists run together: ("ab", "c") is not ("a", "bc").
        assert_ne!(inventory(&[("ab", "c")]).hash(), inventory(&[("a", "bc")]).hash());
        assert_eq!(a.items()[0].source, ".claude/settings.json", "shown relative to the root");
        assert_eq!(a.items()[0].to_string(), "hook SessionStart: touch x (.claude/settings.json)");
    }
}
