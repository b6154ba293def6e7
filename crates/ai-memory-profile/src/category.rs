//! The seven categories of profile entries, in the order the digest lists them.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    Stack,
    Architecture,
    Workflow,
    Testing,
    Tools,
    Style,
    Habits,
}

impl Category {
    /// Every category, in digest order.
    pub const ALL: [Category; 7] = [
        Category::Stack,
        Category::Architecture,
        Category::Workflow,
        Category::Testing,
        Category::Tools,
        Category::Style,
        Category::Habits,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Stack => "stack",
            Category::Architecture => "architecture",
            Category::Workflow => "workflow",
            Category::Testing => "testing",
            Category::Tools => "tools",
            Category::Style => "style",
            Category::Habits => "habits",
        }
    }

    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The category of an entry path (`profile/tools/pnpm.md` or `tools/pnpm.md`); `None` for a
    /// path outside the seven folders.
    pub fn of_path(path: &str) -> Option<Category> {
        let rest = path.strip_prefix("profile/").unwrap_or(path);
        let (folder, file) = rest.split_once('/')?;
        (!file.is_empty()).then_some(())?;
        Category::parse(folder)
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_category() {
        assert_eq!(Category::of_path("profile/tools/pnpm.md"), Some(Category::Tools));
        assert_eq!(Category::of_path("testing/layout.md"), Some(Category::Testing));
        assert_eq!(Category::of_path("profile/misc/x.md"), None);
        assert_eq!(Category::of_path("profile/pnpm.md"), None);
        let order: Vec<_> = Category::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            order,
            ["stack", "architecture", "workflow", "testing", "tools", "style", "habits"]
        );
    }
}
