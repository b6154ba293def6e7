//! A topic's category and stack, zero-LLM: keyword lists over the sentence's words. Lists are
//! checked in a fixed order and the first hit wins, so the same sentence always lands in the
//! same folder.

use super::verbs::verb_base;
use super::words::Token;
use crate::Category;

const TESTING: &[&str] = &[
    "test", "tests", "testing", "tdd", "coverage", "pytest", "jest", "vitest", "rspec", "mock",
    "mocks", "mocking", "fixture", "fixtures", "teste", "testes", "e2e",
];
const WORKFLOW: &[&str] = &[
    "commit",
    "commits",
    "pr",
    "prs",
    "pull request",
    "pull requests",
    "review",
    "branch",
    "branches",
    "push",
    "merge",
    "rebase",
    "squash",
    "ci",
    "deploy",
    "release",
    "changelog",
];
const TOOLS: &[&str] = &[
    "pnpm", "npm", "yarn", "bun", "cargo", "pip", "uv", "poetry", "docker", "make", "just",
    "eslint", "prettier", "ruff", "black", "clippy", "rustfmt", "gofmt", "git", "editor", "vim",
    "neovim", "vscode", "brew",
];
const STYLE: &[&str] = &[
    "naming",
    "name",
    "names",
    "format",
    "formatting",
    "indent",
    "indentation",
    "tab",
    "tabs",
    "space",
    "spaces",
    "comment",
    "comments",
    "camelcase",
    "snake_case",
    "kebab-case",
    "line length",
    "quote",
    "quotes",
    "semicolon",
    "semicolons",
    "espaco",
    "espacos",
    "indentacao",
    "comentario",
    "comentarios",
];
const ARCHITECTURE: &[&str] = &[
    "architecture",
    "module",
    "modules",
    "layer",
    "layers",
    "service",
    "services",
    "monolith",
    "microservice",
    "microservices",
    "hexagonal",
    "crate",
    "crates",
    "package layout",
    "dependency injection",
    "folder structure",
    "arquitetura",
    "modulo",
    "modulos",
];

/// Language names, and what they tag.
const LANGUAGES: &[(&str, &str)] = &[
    ("rust", "rust"),
    ("typescript", "typescript"),
    ("tsx", "typescript"),
    ("tsc", "typescript"),
    ("javascript", "javascript"),
    ("python", "python"),
    ("golang", "go"),
    ("ruby", "ruby"),
    ("java", "java"),
    ("kotlin", "kotlin"),
    ("swift", "swift"),
    ("php", "php"),
    ("elixir", "elixir"),
    ("dart", "dart"),
    ("scala", "scala"),
    ("haskell", "haskell"),
    ("zig", "zig"),
    ("lua", "lua"),
    ("ocaml", "ocaml"),
    ("c++", "cpp"),
    ("cpp", "cpp"),
    ("c#", "csharp"),
    ("csharp", "csharp"),
    ("terraform", "terraform"),
    ("bash", "shell"),
    ("zsh", "shell"),
];

/// Frameworks and runtimes: a Stack-category word, and the stack they imply.
const FRAMEWORKS: &[(&str, &str)] = &[
    ("react", "javascript"),
    ("vue", "javascript"),
    ("svelte", "javascript"),
    ("angular", "typescript"),
    ("next.js", "javascript"),
    ("nextjs", "javascript"),
    ("node", "javascript"),
    ("node.js", "javascript"),
    ("nodejs", "javascript"),
    ("deno", "typescript"),
    ("django", "python"),
    ("flask", "python"),
    ("fastapi", "python"),
    ("rails", "ruby"),
    ("spring", "java"),
    ("laravel", "php"),
    ("phoenix", "elixir"),
    ("flutter", "dart"),
    ("tokio", "rust"),
];

/// Tools that imply a stack without being a Stack-category word.
const TOOL_STACKS: &[(&str, &str)] = &[
    ("pnpm", "javascript"),
    ("npm", "javascript"),
    ("yarn", "javascript"),
    ("bun", "javascript"),
    ("vite", "javascript"),
    ("eslint", "javascript"),
    ("prettier", "javascript"),
    ("jest", "javascript"),
    ("vitest", "javascript"),
    ("cargo", "rust"),
    ("clippy", "rust"),
    ("rustfmt", "rust"),
    ("crate", "rust"),
    ("crates", "rust"),
    ("pip", "python"),
    ("uv", "python"),
    ("poetry", "python"),
    ("pytest", "python"),
    ("ruff", "python"),
    ("mypy", "python"),
    ("gofmt", "go"),
    ("bundler", "ruby"),
    ("rspec", "ruby"),
    ("rubocop", "ruby"),
];

/// `go` followed by one of these is the Go toolchain, not the verb.
const GO_COMMANDS: &[&str] =
    &["test", "build", "run", "mod", "vet", "fmt", "get", "install", "generate", "modules", "code"];

fn lookup(table: &[(&str, &'static str)], w: &str) -> Option<&'static str> {
    table.iter().find(|(k, _)| *k == w).map(|(_, v)| *v)
}

/// The language named at token `i` ("Go" only capitalized mid-sentence or as `go test`...).
fn language(toks: &[Token], i: usize) -> Option<&'static str> {
    let t = toks.get(i)?;
    if t.text == "go" {
        let command = toks.get(i + 1).is_some_and(|n| GO_COMMANDS.contains(&n.text.as_str()));
        return ((t.capital && i > 0) || command).then_some("go");
    }
    lookup(LANGUAGES, &t.text)
}

/// The stack the sentence implies: a language it names wins over one its tools, frameworks or
/// file names imply (`pnpm` with TypeScript is typescript).
pub(super) fn stack(toks: &[Token]) -> Option<String> {
    let mut implied = None;
    for (i, t) in toks.iter().enumerate() {
        if let Some(lang) = language(toks, i) {
            return Some(lang.to_owned());
        }
        if implied.is_none() {
            implied = lookup(FRAMEWORKS, &t.text)
                .or_else(|| lookup(TOOL_STACKS, &t.text))
                .or_else(|| t.raw.contains('.').then(|| crate::stack_of_file(&t.raw)).flatten());
        }
    }
    implied.map(str::to_owned)
}

/// Whether a tool named like a common word (`make`, `just`) is the tool here: in inline code or
/// right after run/use.
pub(super) fn tool_word_counts(toks: &[Token], i: usize) -> bool {
    let prev = i.checked_sub(1).and_then(|j| toks.get(j));
    toks[i].code
        || prev.is_some_and(|p| matches!(verb_base(&p.text), Some(("run" | "use" | "install", _))))
}

fn hits(list: &[&str], words: &[Vec<String>]) -> bool {
    list.iter().any(|k| {
        let parts: Vec<&str> = k.split(' ').collect();
        words
            .windows(parts.len())
            .any(|w| w.iter().zip(&parts).all(|(forms, p)| forms.iter().any(|f| f == p)))
    })
}

/// The category: testing, workflow, tools, style, architecture, then a named language or
/// framework (stack); habits otherwise. `framed`: tokens of framing phrases, not looked at.
pub(super) fn category(toks: &[Token], framed: &[bool]) -> Category {
    // Each word with the forms a keyword may match: as written, its verb base, its singular.
    let words: Vec<Vec<String>> = toks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let w = t.text.as_str();
            if framed.get(i).copied().unwrap_or(false)
                || (matches!(w, "make" | "just") && !tool_word_counts(toks, i))
            {
                return Vec::new();
            }
            let mut forms = vec![w.to_owned()];
            // A verb matches by its base (`committing` is a commit), `make` only as written.
            if let Some((base, _)) = verb_base(w).filter(|(b, _)| *b != "make") {
                forms.push(base.to_owned());
            }
            if let Some(single) = w.strip_suffix('s') {
                forms.push(single.to_owned());
            }
            forms
        })
        .collect();
    let ordered = [
        (TESTING, Category::Testing),
        (WORKFLOW, Category::Workflow),
        (TOOLS, Category::Tools),
        (STYLE, Category::Style),
        (ARCHITECTURE, Category::Architecture),
    ];
    if let Some((_, c)) = ordered.iter().find(|(list, _)| hits(list, &words)) {
        return *c;
    }
    let named = (0..toks.len())
        .any(|i| language(toks, i).is_some() || lookup(FRAMEWORKS, &toks[i].text).is_some());
    if named { Category::Stack } else { Category::Habits }
}

#[cfg(test)]
mod tests {
    use super::super::words::{FRAME_PHRASES, phrase_mask, tokens};
    use super::*;

    fn cat(s: &str) -> Category {
        let t = tokens(s);
        category(&t, &phrase_mask(&t, FRAME_PHRASES))
    }

    #[test]
    fn categories_follow_the_keyword_order() {
        assert_eq!(cat("Use pnpm, not npm."), Category::Tools);
        assert_eq!(cat("Keep integration tests in tests/suite"), Category::Testing);
        assert_eq!(cat("Prefiro usar tabs em vez de espaços"), Category::Style);
        assert_eq!(cat("Always squash commits before merging"), Category::Workflow);
        assert_eq!(cat("Always run cargo fmt before committing"), Category::Workflow);
        assert_eq!(cat("Prefer a modular monolith over microservices"), Category::Architecture);
        assert_eq!(cat("Always use TypeScript for new code"), Category::Stack);
        assert_eq!(cat("Always answer in Portuguese"), Category::Habits);
        assert_eq!(cat("Always make small functions"), Category::Habits);
        assert_eq!(cat("Always run `make` first"), Category::Tools);
    }

    #[test]
    fn stacks_come_from_languages_then_tools_and_files() {
        let st = |s: &str| stack(&tokens(s));
        assert_eq!(st("Use pnpm, not npm."), Some("javascript".into()));
        assert_eq!(st("Use pnpm for TypeScript projects"), Some("typescript".into()));
        assert_eq!(st("Always run cargo clippy"), Some("rust".into()));
        assert_eq!(st("Prefer uv over pip"), Some("python".into()));
        assert_eq!(st("Always run go test before pushing"), Some("go".into()));
        assert_eq!(st("Write services in Go"), Some("go".into()));
        assert_eq!(st("Tests go in tests/suite"), None);
        assert_eq!(st("Never edit Cargo.toml by hand"), Some("rust".into()));
        assert_eq!(st("Use rspec with Rails"), Some("ruby".into()));
        assert_eq!(st("Always write small functions"), None);
    }
}
