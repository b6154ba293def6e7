//! A path rule's specifier (`Read(./.env)`, `Edit(/src/**)`), in Claude Code's anchors and
//! gitignore's pattern syntax: `//path` from the filesystem's root, `~/path` from the home
//! directory, `/path` from the settings file's own anchor (the project root for a project's
//! file, `~/.claude` for the user's Claude Code file), `./path` and `path` from the working
//! directory. Within its anchor a pattern follows gitignore: `*` stays within a component,
//! `**` crosses them, a pattern with no `/` but a trailing one matches a name at any depth, and
//! a match on a directory covers what is under it.

use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobMatcher};

/// Where a rule's relative patterns and its `/` anchor point, and the home directory.
#[derive(Clone, Debug)]
pub(crate) struct Anchors {
    /// `/path`: the settings source's own directory.
    pub source: PathBuf,
    /// `./path` and `path`: the working directory.
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
}

#[derive(Clone, Debug)]
pub(crate) struct PathPattern {
    /// The directory the pattern is relative to.
    anchor: PathBuf,
    glob: GlobMatcher,
    /// For `dir/**`: `dir` itself (listing it, or searching it, reads what is under it).
    dir: Option<GlobMatcher>,
}

impl PathPattern {
    /// `floating_dirs`: a deny or ask rule, for which a relative `name/**` matches a directory
    /// of that name at any depth (an allow rule's only at the working directory).
    pub(crate) fn parse(
        spec: &str,
        anchors: &Anchors,
        floating_dirs: bool,
    ) -> Result<PathPattern, String> {
        if spec.starts_with('!') {
            return Err("a path rule cannot start with `!` (gitignore's negation)".to_owned());
        }
        let (anchor, rest, anchored) = if let Some(rest) = spec.strip_prefix("//") {
            (PathBuf::from("/"), rest, true)
        } else if let Some(rest) = spec.strip_prefix("~/") {
            let home = anchors.home.clone().ok_or("`~/` needs a home directory (set HOME)")?;
            (home, rest, true)
        } else if let Some(rest) = spec.strip_prefix('/') {
            (anchors.source.clone(), rest, true)
        } else if let Some(rest) = spec.strip_prefix("./") {
            (anchors.cwd.clone(), rest, true)
        } else {
            (anchors.cwd.clone(), spec, false)
        };
        let rest = rest.trim_start_matches('/');
        if rest.is_empty() {
            return Err("the path is empty".to_owned());
        }
        let dir_only = rest.ends_with('/');
        let body = rest.trim_end_matches('/');
        let mut glob = String::new();
        let single_dir = !body.contains('/')
            || (body.split_once('/').is_some_and(|(name, tail)| {
                !name.contains(['*', '?', '[']) && tail.split('/').all(|part| part == "**")
            }));
        // gitignore: no slash but a trailing one floats (any depth), as does a deny or ask
        // rule's `name/**`.
        if !anchored && (!body.contains('/') || (floating_dirs && single_dir)) {
            glob.push_str("**/");
        }
        glob.push_str(body);
        if dir_only {
            glob.push_str("/**");
        }
        let dir = match glob.strip_suffix("/**") {
            Some(dir) if !dir.is_empty() && dir != "**" => Some(glob_of(dir)?.compile_matcher()),
            _ => None,
        };
        let glob = glob_of(&glob)?.compile_matcher();
        Ok(PathPattern { anchor, glob, dir })
    }

    /// Whether the absolute, normalized `path` (or a directory it lies in, under the anchor)
    /// matches.
    pub(crate) fn matches(&self, path: &Path) -> bool {
        let Ok(relative) = path.strip_prefix(&self.anchor) else { return false };
        let mut prefix = PathBuf::new();
        for component in relative.components() {
            prefix.push(component);
            if self.glob.is_match(&prefix) || self.dir.as_ref().is_some_and(|d| d.is_match(&prefix))
            {
                return true;
            }
        }
        false
    }
}

fn glob_of(pattern: &str) -> Result<Glob, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| e.kind().to_string())
}

/// `path` made absolute against `cwd`, `.` and `..` taken out without touching the disk.
pub(crate) fn normalize(path: &Path, cwd: &Path) -> PathBuf {
    let joined = if path.is_absolute() { path.to_owned() } else { cwd.join(path) };
    let mut out = PathBuf::from("/");
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// What `path` resolves to on disk: its longest existing ancestor's real path, the rest
/// appended (a file not yet written resolves through its directory).
pub(crate) fn resolved(path: &Path) -> PathBuf {
    let mut existing = path.to_owned();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.file_name().map(ToOwned::to_owned), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_owned();
            }
            _ => return path.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchors() -> Anchors {
        Anchors {
            source: PathBuf::from("/proj"),
            cwd: PathBuf::from("/proj"),
            home: Some(PathBuf::from("/home/alice")),
        }
    }

    fn matches(spec: &str, floating: bool, path: &str) -> bool {
        PathPattern::parse(spec, &anchors(), floating).unwrap().matches(Path::new(path))
    }

    #[test]
    fn the_documented_anchors_resolve_where_the_documentation_says() {
        // `Edit(/docs/**)`: edits in <project>/docs/, not /docs/ nor <project>/.claude/docs/.
        assert!(matches("/docs/**", false, "/proj/docs/a.md"));
        assert!(!matches("/docs/**", false, "/docs/a.md"));
        assert!(!matches("/docs/**", false, "/proj/.claude/docs/a.md"));
        // `Read(~/.zshrc)`: the home directory's `.zshrc`.
        assert!(matches("~/.zshrc", false, "/home/alice/.zshrc"));
        assert!(!matches("~/.zshrc", false, "/home/alice/sub/.zshrc"));
        // `Edit(//tmp/scratch.txt)`: that absolute path.
        assert!(matches("//tmp/scratch.txt", false, "/tmp/scratch.txt"));
        assert!(!matches("//tmp/scratch.txt", false, "/proj/tmp/scratch.txt"));
        // `Read(~/Documents/*.pdf)`: `*` stays within the directory.
        assert!(matches("~/Documents/*.pdf", false, "/home/alice/Documents/a.pdf"));
        assert!(!matches("~/Documents/*.pdf", false, "/home/alice/Documents/x/a.pdf"));
        // `Read(./.env)`: the `.env` of the working directory.
        assert!(matches("./.env", true, "/proj/.env"));
        assert!(!matches("./.env", true, "/proj/sub/.env"));
        // `Read(./secrets/**)`.
        assert!(matches("./secrets/**", true, "/proj/secrets/key"));
    }

    #[test]
    fn bare_names_float_and_a_single_directory_floats_only_for_deny_and_ask() {
        // `Read(.env)` and `Read(**/.env)`: any `.env` at or under the working directory.
        for spec in [".env", "**/.env", "*.env"] {
            assert!(matches(spec, true, "/proj/.env"), "{spec}");
            assert!(matches(spec, true, "/proj/a/b/.env"), "{spec}");
            assert!(!matches(spec, true, "/elsewhere/.env"), "{spec}");
        }
        // `Read(//**/.env)`: anywhere on the filesystem.
        assert!(matches("//**/.env", true, "/elsewhere/deep/.env"));
        // The documentation's table: src/app.ts and vendor/pkg/src/lib.js.
        let (top, nested) = ("/proj/src/app.ts", "/proj/vendor/pkg/src/lib.js");
        assert!(matches("src/**", false, top) && !matches("src/**", false, nested), "allow");
        assert!(matches("src/**", true, top) && matches("src/**", true, nested), "deny, ask");
        for floating in [false, true] {
            assert!(matches("/src/**", floating, top) && !matches("/src/**", floating, nested));
            assert!(matches("**/src/**", floating, top) && matches("**/src/**", floating, nested));
        }
        // `src/components/**` is anchored in every rule type.
        assert!(!matches("src/components/**", true, "/proj/x/src/components/a"));
        // A directory's match covers what is under it; a trailing `/` is a directory.
        assert!(matches("secrets", true, "/proj/a/secrets/key"));
        assert!(matches("build/", false, "/proj/x/build/out.o"));
        // `dir/**` holds the directory itself: listing or searching it reads what it holds.
        assert!(matches("./secrets/**", true, "/proj/secrets"));
        assert!(!matches("./secrets/**", true, "/proj/secretsx"));
    }

    #[test]
    fn a_bad_path_rule_says_why() {
        let bad = |spec: &str| PathPattern::parse(spec, &anchors(), false).unwrap_err();
        assert!(bad("!x").contains("negation"));
        assert!(bad("//").contains("empty"));
        assert!(!bad("src/[ab").is_empty());
        let homeless = Anchors { home: None, ..anchors() };
        assert!(PathPattern::parse("~/x", &homeless, false).unwrap_err().contains("HOME"));
    }

    #[test]
    fn paths_normalize_without_the_disk_and_resolve_through_it() {
        assert_eq!(normalize(Path::new("a/../b/./c"), Path::new("/p")), Path::new("/p/b/c"));
        assert_eq!(normalize(Path::new("/../../x"), Path::new("/p")), Path::new("/x"));
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(&real, real.join("link")).unwrap();
        assert_eq!(resolved(&real.join("link/new.txt")), real.join("new.txt"));
    }
}
