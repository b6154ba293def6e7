//! The built-in prompts, embedded in the binary: `main`'s seed of every profile, and the
//! fallback for a prompt a profile's commit lacks. A session's set is read from its profile
//! (`aerix-profile`); the turn contract is never among them (`turn.rs` renders it).

use std::collections::BTreeMap;

/// Every built-in prompt, by its path in a profile.
pub const EMBEDDED: [(&str, &str); 17] = [
    ("system.md", include_str!("../prompts/system.md")),
    ("routing.md", include_str!("../prompts/routing.md")),
    ("brief.md", include_str!("../prompts/brief.md")),
    ("verifier.md", include_str!("../prompts/verifier.md")),
    ("tools/read.md", include_str!("../prompts/tools/read.md")),
    ("tools/write.md", include_str!("../prompts/tools/write.md")),
    ("tools/edit.md", include_str!("../prompts/tools/edit.md")),
    ("tools/bash.md", include_str!("../prompts/tools/bash.md")),
    ("tools/glob.md", include_str!("../prompts/tools/glob.md")),
    ("tools/grep.md", include_str!("../prompts/tools/grep.md")),
    ("tools/agent.md", include_str!("../prompts/tools/agent.md")),
    ("tools/context.md", include_str!("../prompts/tools/context.md")),
    ("tools/plan.md", include_str!("../prompts/tools/plan.md")),
    ("tools/repo_map.md", include_str!("../prompts/tools/repo_map.md")),
    ("tools/skill.md", include_str!("../prompts/tools/skill.md")),
    ("tune/reflect.md", include_str!("../prompts/tune/reflect.md")),
    ("tune/reconcile.md", include_str!("../prompts/tune/reconcile.md")),
];

/// The prompts a session reads.
#[derive(Clone, Debug)]
pub struct Prompts {
    texts: BTreeMap<String, String>,
}

impl Prompts {
    pub fn embedded() -> Prompts {
        Prompts {
            texts: EMBEDDED.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        }
    }

    /// The set a session read from its profile: `texts` by path (the embedded text stands in
    /// for any path it lacks).
    pub fn from_texts(texts: BTreeMap<String, String>) -> Prompts {
        Prompts { texts }
    }

    /// A prompt's text; the embedded one when this set lacks it.
    pub fn get(&self, path: &str) -> &str {
        self.texts
            .get(path)
            .map(String::as_str)
            .or_else(|| EMBEDDED.iter().find(|(k, _)| *k == path).map(|(_, v)| *v))
            .unwrap_or("")
    }
}

/// Replaces each `{{name}}` with its value.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{{{name}}}}}"), value);
    }
    out
}
