//! Stack tags: the languages the profile detects from file names, and what a profile entry's
//! `applies_to` may name.

/// Every tag the profile detects (sorted).
pub const STACK_TAGS: &[&str] = &[
    "c",
    "cpp",
    "csharp",
    "dart",
    "elixir",
    "go",
    "haskell",
    "java",
    "javascript",
    "kotlin",
    "lua",
    "ocaml",
    "php",
    "python",
    "r",
    "ruby",
    "rust",
    "scala",
    "shell",
    "swift",
    "terraform",
    "typescript",
    "zig",
];

pub fn is_stack_tag(tag: &str) -> bool {
    STACK_TAGS.binary_search(&tag).is_ok()
}

/// The stack a file name shows (`Cargo.toml`, `src/main.rs`, `web/app.tsx`), if any.
pub fn stack_of_file(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let by_name = match name {
        "Cargo.toml" | "Cargo.lock" => Some("rust"),
        "package.json" | "pnpm-lock.yaml" | "yarn.lock" | "package-lock.json" | "bun.lockb" => {
            Some("javascript")
        }
        "tsconfig.json" | "deno.json" => Some("typescript"),
        "pyproject.toml" | "requirements.txt" | "setup.py" | "uv.lock" | "Pipfile" => {
            Some("python")
        }
        "go.mod" | "go.sum" => Some("go"),
        "Gemfile" | "Rakefile" => Some("ruby"),
        "pom.xml" | "build.gradle" => Some("java"),
        "build.gradle.kts" => Some("kotlin"),
        "composer.json" => Some("php"),
        "mix.exs" => Some("elixir"),
        "pubspec.yaml" => Some("dart"),
        "Package.swift" => Some("swift"),
        "build.zig" => Some("zig"),
        "dune-project" => Some("ocaml"),
        "stack.yaml" => Some("haskell"),
        "CMakeLists.txt" => Some("cpp"),
        _ => None,
    };
    if by_name.is_some() {
        return by_name;
    }
    let (_, ext) = name.rsplit_once('.')?;
    Some(match ext {
        "rs" => "rust",
        "ts" | "tsx" | "mts" | "cts" => "typescript",
        "js" | "jsx" | "mjs" | "cjs" => "javascript",
        "py" => "python",
        "go" => "go",
        "rb" => "ruby",
        "java" => "java",
        "kt" | "kts" => "kotlin",
        "scala" => "scala",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" => "cpp",
        "cs" => "csharp",
        "php" => "php",
        "ex" | "exs" => "elixir",
        "dart" => "dart",
        "swift" => "swift",
        "zig" => "zig",
        "ml" | "mli" => "ocaml",
        "hs" => "haskell",
        "lua" => "lua",
        "r" | "R" => "r",
        "sh" | "bash" | "zsh" => "shell",
        "tf" => "terraform",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_sorted_and_files_map_to_them() {
        assert!(STACK_TAGS.windows(2).all(|w| w[0] < w[1]));
        for (file, tag) in [
            ("Cargo.toml", Some("rust")),
            ("src/main.rs", Some("rust")),
            ("web/app.tsx", Some("typescript")),
            ("package.json", Some("javascript")),
            ("pyproject.toml", Some("python")),
            ("README.md", None),
            ("Makefile", None),
        ] {
            assert_eq!(stack_of_file(file), tag, "{file}");
            if let Some(t) = tag {
                assert!(is_stack_tag(t));
            }
        }
    }
}
