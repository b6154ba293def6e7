//! The skills a `skill` call loads. The runtime reads no files: the binary hands it a set
//! (`aerix-skills`) through `Skills`, and `NO_SKILLS` knows none. With no skill the model may
//! load, the `skill` tool is not offered at all (a tool that always refuses is noise).

/// A loaded set, as the runtime uses it.
pub trait Skills: Send + Sync {
    /// The names the model may load: the `skill` call's enum; none: no `skill` tool.
    fn names(&self) -> Vec<String>;
    /// The system segment's skills section within `max_chars`; `None` without skills.
    fn listing(&self, max_chars: usize) -> Option<String>;
    /// `skill` with `list`.
    fn list(&self) -> String;
    /// `skill` with a `name`: its text, or why not.
    fn load(&self, name: &str, args: &str) -> Result<String, String>;
    /// The file a `skill` call of `name` returns, for the `Read` rules to judge.
    fn file(&self, _name: &str) -> Option<std::path::PathBuf> {
        None
    }
}

/// Knows no skill.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSkills;

impl Skills for NoSkills {
    fn names(&self) -> Vec<String> {
        Vec::new()
    }

    fn listing(&self, _: usize) -> Option<String> {
        None
    }

    fn list(&self) -> String {
        "no skills are loaded".to_owned()
    }

    fn load(&self, name: &str, _: &str) -> Result<String, String> {
        Err(format!("no skill named `{name}`: no skills are loaded"))
    }
}

/// For a `Runtime` whose caller has no skills.
pub static NO_SKILLS: NoSkills = NoSkills;

/// `tools` without `skill` when the model may load no skill.
pub fn offer_skill(tools: Vec<String>, skills: &dyn Skills) -> Vec<String> {
    if !skills.names().is_empty() {
        return tools;
    }
    tools.into_iter().filter(|t| t != "skill").collect()
}
