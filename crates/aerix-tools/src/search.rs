//! `glob`, `grep`, `repo_map` over the request's file set, as much of it as lies inside the
//! roots.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::confine::Access;
use crate::files::cut_chars;
use crate::{ToolEnv, ToolError, open};

pub const MAX_MATCHES: usize = 200;
pub const GREP_FILE_LIMIT: u64 = 8 << 20;
pub const GREP_LINE_CHARS: usize = 400;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobInput {
    pattern: String,
    path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepInput {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    max_matches: Option<usize>,
}

fn matcher(pattern: &str) -> Result<globset::GlobMatcher, ToolError> {
    // `*` crosses `/`: `*.rs` finds Rust files at any depth.
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolError::new(format!("bad glob `{pattern}`: {e}")))
}

/// A path for the model: relative to the working directory when under it.
fn shown(env: &ToolEnv<'_>, path: &Path) -> String {
    let cwd = env.files.cwd();
    match path.strip_prefix(cwd) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => pathdiff(path, cwd),
    }
}

/// `path` relative to `base` with `..` steps, for paths outside the working directory.
fn pathdiff(path: &Path, base: &Path) -> String {
    let common = path.components().zip(base.components()).take_while(|(a, b)| a == b).count();
    if common <= 1 {
        return path.display().to_string();
    }
    let ups = base.components().count() - common;
    let mut out = PathBuf::new();
    for _ in 0..ups {
        out.push("..");
    }
    for part in path.components().skip(common) {
        out.push(part);
    }
    out.display().to_string()
}

/// The search base: `path` (a directory or a file), else the working directory; inside the
/// roots.
fn base(env: &ToolEnv<'_>, path: Option<&str>) -> Result<PathBuf, ToolError> {
    let base = env.roots.check(env.cwd, path.unwrap_or("."), Access::Read)?;
    if !base.exists() {
        return Err(ToolError::new(format!("{} does not exist", path.unwrap_or("."))));
    }
    Ok(base)
}

/// The files under `base` a listing may show (`Roots::listed`).
fn files_under(env: &ToolEnv<'_>, base: &Path) -> Result<Vec<PathBuf>, ToolError> {
    Ok(env.roots.listed(env.files.under(base)?))
}

/// Files whose path relative to the search base matches the pattern.
pub fn glob(input: GlobInput, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    let glob = matcher(&input.pattern)?;
    let base = base(env, input.path.as_deref())?;
    let found: Vec<String> = files_under(env, &base)?
        .iter()
        .filter(|p| p.strip_prefix(&base).is_ok_and(|r| glob.is_match(r)))
        .map(|p| shown(env, p))
        .collect();
    if found.is_empty() {
        return Ok(format!("no file matches `{}`", input.pattern));
    }
    Ok(found.join("\n"))
}

/// The regex `pattern` means, and a note when it is not a regex and is searched as plain text:
/// small models write globs (`**/*`) and code (`f(x`) into `pattern`, and a refusal only gets
/// the same call again. A pattern too big to compile is still refused.
fn regex(pattern: &str) -> Result<(regex::Regex, Option<String>), ToolError> {
    let bad = |e: regex::Error| ToolError::new(format!("bad regex `{pattern}`: {e}"));
    match regex::Regex::new(pattern) {
        Ok(regex) => Ok((regex, None)),
        Err(regex::Error::Syntax(message)) => {
            let regex = regex::Regex::new(&regex::escape(pattern)).map_err(bad)?;
            let note = format!(
                "[note: `{pattern}` is not a regex ({}); searched as plain text]",
                syntax_reason(&message)
            );
            Ok((regex, Some(note)))
        }
        Err(e) => Err(bad(e)),
    }
}

/// The one-line reason of a regex syntax error, whose text is several lines (the pattern with
/// a caret under the fault, then `error: <reason>`).
fn syntax_reason(message: &str) -> &str {
    let last = message.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(message);
    last.trim().strip_prefix("error: ").unwrap_or(last.trim())
}

/// Regex matches as `path:line:text`; a pattern that is not a regex, matches of its text.
pub fn grep(input: GrepInput, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    let (regex, note) = regex(&input.pattern)?;
    let filter = input.glob.as_deref().map(matcher).transpose()?;
    let base = base(env, input.path.as_deref())?;
    let max = input.max_matches.unwrap_or(MAX_MATCHES).max(1);
    let files = if base.is_dir() {
        files_under(env, &base)?
    } else {
        // One file named: a FIFO or a device is refused by name.
        open::regular(&base, input.path.as_deref().unwrap_or("."))?;
        vec![base.clone()]
    };
    let mut out = Vec::new();
    let mut skipped_large = 0;
    let mut skipped_other = 0;
    'files: for file in &files {
        let name = file.file_name().map(Path::new).unwrap_or(file);
        let relative = file.strip_prefix(&base).unwrap_or(name);
        if let Some(filter) = &filter
            && !filter.is_match(relative)
            && !filter.is_match(name)
        {
            continue;
        }
        // Only a regular file, opened so that neither a FIFO nor a swapped-in link can hang or
        // redirect the search; a file over the limit is counted, not read.
        let Ok((opened, meta)) = open::regular(file, "") else {
            skipped_other += 1;
            continue;
        };
        if meta.len() > GREP_FILE_LIMIT {
            skipped_large += 1;
            continue;
        }
        let mut bytes = Vec::new();
        if opened.take(GREP_FILE_LIMIT).read_to_end(&mut bytes).is_err() {
            continue;
        }
        if bytes.iter().take(8192).any(|b| *b == 0) {
            continue; // binary
        }
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in text.lines().enumerate() {
            if regex.is_match(line) {
                out.push(format!(
                    "{}:{}:{}",
                    shown(env, file),
                    i + 1,
                    cut_chars(line, GREP_LINE_CHARS)
                ));
                if out.len() >= max {
                    out.push(format!("[stopped at {max} matches]"));
                    break 'files;
                }
            }
        }
    }
    if out.is_empty() {
        out.push(format!("no match for `{}`", input.pattern));
    }
    if skipped_large > 0 {
        out.push(format!("[{skipped_large} files over {} MiB skipped]", GREP_FILE_LIMIT >> 20));
    }
    if skipped_other > 0 {
        out.push(format!("[{skipped_other} files that are not regular files skipped]"));
    }
    out.splice(0..0, note);
    Ok(out.join("\n"))
}

/// The file tree with sizes and languages, computed once per request.
pub fn repo_map(env: &ToolEnv<'_>) -> Result<String, ToolError> {
    if let Some(map) = env.files.map.get() {
        return Ok(map.clone());
    }
    let cwd = env.files.cwd().to_owned();
    let files = files_under(env, &cwd)?;
    let mut languages: BTreeMap<&str, usize> = BTreeMap::new();
    let mut total = 0u64;
    let mut lines = Vec::new();
    let mut open_dirs: Vec<String> = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&cwd).unwrap_or(file);
        let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        total += size;
        let language = language(relative);
        if let Some(l) = language {
            *languages.entry(l).or_default() += 1;
        }
        let dirs: Vec<String> = relative
            .parent()
            .map(|p| p.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let same = open_dirs.iter().zip(&dirs).take_while(|(a, b)| a == b).count();
        open_dirs.truncate(same);
        for dir in &dirs[same..] {
            lines.push(format!("{}{dir}/", "  ".repeat(open_dirs.len())));
            open_dirs.push(dir.clone());
        }
        let name = relative.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        let tag = language.map(|l| format!("  {l}")).unwrap_or_default();
        lines.push(format!("{}{name}  {}{tag}", "  ".repeat(dirs.len()), human(size)));
    }
    let mut by_count: Vec<_> = languages.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let summary: Vec<String> = by_count.iter().map(|(l, n)| format!("{l} {n}")).collect();
    let header = format!(
        "{} files, {}{}",
        files.len(),
        human(total),
        if summary.is_empty() { String::new() } else { format!("; {}", summary.join(", ")) }
    );
    let map = std::iter::once(header).chain(lines).collect::<Vec<_>>().join("\n");
    let _ = env.files.map.set(map.clone());
    Ok(map)
}

pub(crate) fn human(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1 << 20 => format!("{:.1} KiB", b as f64 / 1024.0),
        b if b < 1 << 30 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b => format!("{:.1} GiB", b as f64 / (1 << 30) as f64),
    }
}

fn language(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    match name {
        "Makefile" | "makefile" => return Some("Make"),
        "Dockerfile" => return Some("Docker"),
        "Cargo.lock" => return Some("TOML"),
        _ => {}
    }
    Some(match path.extension()?.to_str()? {
        "rs" => "Rust",
        "py" => "Python",
        "js" | "mjs" | "cjs" => "JavaScript",
        "ts" | "tsx" => "TypeScript",
        "jsx" => "JavaScript",
        "go" => "Go",
        "c" | "h" => "C",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" => "C++",
        "java" => "Java",
        "kt" => "Kotlin",
        "rb" => "Ruby",
        "sh" | "bash" => "Shell",
        "md" => "Markdown",
        "toml" => "TOML",
        "json" => "JSON",
        "yaml" | "yml" => "YAML",
        "html" => "HTML",
        "css" => "CSS",
        "sql" => "SQL",
        "swift" => "Swift",
        "cs" => "C#",
        "php" => "PHP",
        "lua" => "Lua",
        "jinja" | "j2" => "Jinja",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_that_is_not_a_regex_is_searched_as_its_text_with_a_note() {
        let (re, note) = regex("**/*").unwrap();
        assert_eq!(
            note.as_deref(),
            Some(
                "[note: `**/*` is not a regex (repetition operator missing expression); \
                 searched as plain text]"
            )
        );
        assert!(re.is_match("see **/* here") && !re.is_match("src/main.rs"));
        let (re, note) = regex("helper(").unwrap();
        assert!(note.unwrap().contains("(unclosed group)"));
        assert!(re.is_match("    helper();") && !re.is_match("helper"));
        // A regex is a regex, without a note.
        let (re, note) = regex("fn \\w+\\(").unwrap();
        assert_eq!(note, None);
        assert!(re.is_match("pub fn helper() {}"));
    }

    #[test]
    fn a_regex_too_big_to_compile_is_still_refused() {
        let error = regex("\\w{1000}{1000}").unwrap_err();
        assert!(
            error.0.starts_with("bad regex `\\w{1000}{1000}`: Compiled regex exceeds"),
            "{error}"
        );
    }
}
