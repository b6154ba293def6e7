//! Names a caller gives: workspaces, projects, page paths, scopes. Each is checked once, here,
//! so nothing downstream sees `..`, an absolute path or a name that is not a directory name.

use std::fmt;

/// The workspace a single-user server keeps everything in unless told otherwise.
pub const DEFAULT_WORKSPACE: &str = "default";
/// The project holding the global scope (and, under `profile/`, the profile).
pub const GLOBAL_PROJECT: &str = "_global";

const MAX_NAME: usize = 64;
const MAX_COMPONENT: usize = 128;
const MAX_PATH: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{what} `{name}` is not a valid name: {why}")]
    Name { what: &'static str, name: String, why: &'static str },
    #[error("page path `{path}` is not valid: {why}")]
    Path { path: String, why: &'static str },
    #[error("unknown scope `{0}`: use `project`, `global` or `profile`")]
    Scope(String),
}

fn check_name(what: &'static str, name: &str) -> Result<(), NameError> {
    let bad = |why| Err(NameError::Name { what, name: name.to_owned(), why });
    if name.is_empty() || name.len() > MAX_NAME {
        return bad("it must be 1 to 64 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) {
        return bad("use letters, digits, `-`, `_` and `.`");
    }
    if name.starts_with('.') {
        return bad("it must not start with `.`");
    }
    Ok(())
}

macro_rules! name_type {
    ($ty:ident, $what:literal) => {
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $ty(String);

        impl $ty {
            pub fn new(name: &str) -> Result<$ty, NameError> {
                check_name($what, name)?;
                Ok($ty(name.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(WorkspaceName, "workspace");
name_type!(ProjectName, "project");

impl WorkspaceName {
    pub fn default_workspace() -> WorkspaceName {
        WorkspaceName(DEFAULT_WORKSPACE.to_owned())
    }
}

impl ProjectName {
    pub fn global() -> ProjectName {
        ProjectName(GLOBAL_PROJECT.to_owned())
    }

    /// A project name made from a directory name: characters a name cannot hold become `-`.
    pub fn from_dir_name(dir: &str) -> Result<ProjectName, NameError> {
        let mapped: String = dir
            .chars()
            .map(
                |c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' },
            )
            .collect();
        let trimmed = mapped.trim_start_matches('.');
        ProjectName::new(&trimmed[..trimmed.len().min(MAX_NAME)])
    }

    /// Names the server keeps for itself (`_global`, `_profile`, `_profile.<user>`).
    pub fn is_reserved(&self) -> bool {
        self.0 == GLOBAL_PROJECT || self.0 == "_profile" || self.is_private_profile()
    }

    /// An operator's private profile (`_profile.<user id>`): restricted by its name.
    pub fn is_private_profile(&self) -> bool {
        self.0.starts_with("_profile.")
    }
}

/// A page's path inside its project: relative, `/`-separated, ending in `.md`, with no `.` or
/// `..` component and no hidden file or directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PagePath(String);

impl PagePath {
    pub fn new(path: &str) -> Result<PagePath, NameError> {
        let bad = |why| Err(NameError::Path { path: path.to_owned(), why });
        if path.is_empty() || path.len() > MAX_PATH {
            return bad("it must be 1 to 512 bytes");
        }
        if path.starts_with('/') || path.contains('\\') || path.contains('\0') {
            return bad("it must be relative to the project, with `/` between folders");
        }
        if !path.ends_with(".md") {
            return bad("a page is a markdown file: end it in `.md`");
        }
        for component in path.split('/') {
            if component.is_empty() {
                return bad("it has an empty folder name");
            }
            if component == "." || component == ".." {
                return bad("it must not leave its project (`.` or `..`)");
            }
            if component.starts_with('.') {
                return bad("hidden files and folders are not pages");
            }
            if component.len() > MAX_COMPONENT {
                return bad("a folder or file name is over 128 bytes");
            }
            if component.chars().any(char::is_control) {
                return bad("it holds a control character");
            }
        }
        Ok(PagePath(path.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path under `profile/` (as it is when it already is): where a profile entry lives.
    pub fn under_profile(&self) -> Result<PagePath, NameError> {
        match self.0.strip_prefix("profile/") {
            Some(_) => Ok(self.clone()),
            None => PagePath::new(&format!("profile/{}", self.0)),
        }
    }
}

impl fmt::Display for PagePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a page lives, as a tool call names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The caller's project.
    Project,
    /// Knowledge for every project: `default/_global`.
    Global,
    /// The cross-project profile: under `profile/` in the profile's home (`default/_global`,
    /// a workspace's `_profile` or an operator's `_profile.<id>`, by deployment).
    Profile,
}

impl Scope {
    pub fn parse(s: &str) -> Result<Scope, NameError> {
        match s {
            "project" => Ok(Scope::Project),
            "global" => Ok(Scope::Global),
            "profile" => Ok(Scope::Profile),
            other => Err(NameError::Scope(other.to_owned())),
        }
    }

    /// The workspace, project and path a page of this scope is stored at, for a caller in
    /// `workspace`/`project`. For `Profile` the caller passes the profile's home (which project
    /// that is depends on the deployment: the server decides) and the page goes under `profile/`.
    pub fn locate(
        self,
        workspace: &WorkspaceName,
        project: &ProjectName,
        path: &PagePath,
    ) -> Result<(WorkspaceName, ProjectName, PagePath), NameError> {
        Ok(match self {
            Scope::Project => (workspace.clone(), project.clone(), path.clone()),
            Scope::Global => {
                (WorkspaceName::default_workspace(), ProjectName::global(), path.clone())
            }
            Scope::Profile => (workspace.clone(), project.clone(), path.under_profile()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_their_project() {
        for ok in ["a.md", "decisions/adr-1.md", "profile/tools/pnpm.md", "notes/é.md"] {
            assert!(PagePath::new(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("../x.md", "leave its project"),
            ("a/../../x.md", "leave its project"),
            ("/etc/x.md", "relative"),
            ("a\\b.md", "relative"),
            ("a//b.md", "empty folder"),
            (".git/config.md", "hidden"),
            ("a/.hidden.md", "hidden"),
            ("notes.txt", "end it in `.md`"),
            ("", "1 to 512"),
            ("a\u{7}.md", "control"),
        ] {
            let err = PagePath::new(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn names_are_directory_names() {
        assert!(WorkspaceName::new("work").is_ok());
        assert!(ProjectName::new("my-app_2.0").is_ok());
        for bad in ["", ".hidden", "a/b", "..", "a b", &"x".repeat(65)] {
            assert!(ProjectName::new(bad).is_err(), "{bad}");
        }
        assert_eq!(ProjectName::from_dir_name("My App (v2)").unwrap().as_str(), "My-App--v2-");
        assert!(ProjectName::new("_profile.7").unwrap().is_reserved());
        assert!(!ProjectName::new("profile").unwrap().is_reserved());
    }

    #[test]
    fn scopes_locate_their_pages() {
        let (ws, p) = (WorkspaceName::new("work").unwrap(), ProjectName::new("app").unwrap());
        let path = PagePath::new("tools/pnpm.md").unwrap();
        let home = ProjectName::global();
        let (w, q, r) = Scope::Profile.locate(&ws, &home, &path).unwrap();
        assert_eq!(
            (w.as_str(), q.as_str(), r.as_str()),
            ("work", "_global", "profile/tools/pnpm.md")
        );
        let again = Scope::Profile.locate(&ws, &home, &r).unwrap().2;
        assert_eq!(again, r, "a path already under profile/ stays");
        let (w, q, _) = Scope::Global.locate(&ws, &p, &path).unwrap();
        assert_eq!((w.as_str(), q.as_str()), ("default", "_global"));
        let (w, q, _) = Scope::Project.locate(&ws, &p, &path).unwrap();
        assert_eq!((w.as_str(), q.as_str()), ("work", "app"));
        assert_eq!(
            Scope::parse("team").unwrap_err().to_string(),
            "unknown scope `team`: use `project`, `global` or `profile`"
        );
    }
}
