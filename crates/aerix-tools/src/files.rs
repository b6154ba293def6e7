//! `read`, `write`, `edit`.

use serde::Deserialize;

use crate::{ToolEnv, ToolError, resolve};

pub const READ_LIMIT: usize = 200;
pub const LINE_CHARS: usize = 2000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditInput {
    path: String,
    old: String,
    new: String,
    #[serde(default)]
    replace_all: bool,
}

/// Lines of a file with their numbers (`offset` is the first line, from 1), each cut to 2000
/// characters; a directory gives its entries.
pub fn read(input: ReadInput, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    let path = resolve(env, &input.path);
    let meta = std::fs::metadata(&path)
        .map_err(|e| ToolError::new(format!("cannot read {}: {e}", input.path)))?;
    if meta.is_dir() {
        let mut entries: Vec<String> = std::fs::read_dir(&path)
            .map_err(|e| ToolError::new(format!("cannot list {}: {e}", input.path)))?
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_dir()) { format!("{name}/") } else { name }
            })
            .collect();
        entries.sort();
        if entries.is_empty() {
            return Ok(format!("{} is an empty directory", input.path));
        }
        return Ok(entries.join("\n"));
    }
    let bytes = std::fs::read(&path)
        .map_err(|e| ToolError::new(format!("cannot read {}: {e}", input.path)))?;
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(ToolError::new(format!(
            "{} is a binary file ({} bytes)",
            input.path,
            bytes.len()
        )));
    }
    let text = String::from_utf8_lossy(&bytes);
    let offset = input.offset.unwrap_or(1).max(1);
    let limit = input.limit.unwrap_or(READ_LIMIT).max(1);
    let total = text.lines().count();
    if total == 0 {
        return Ok(format!("{} is empty", input.path));
    }
    if offset > total {
        return Err(ToolError::new(format!(
            "{} has {total} lines; offset {offset} is past the end",
            input.path
        )));
    }
    let width = (offset + limit).min(total).to_string().len();
    let mut out = String::new();
    for (i, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        let line = cut_chars(line, LINE_CHARS);
        out.push_str(&format!("{:>width$}\t{line}\n", i + 1));
    }
    let last = (offset + limit - 1).min(total);
    if last < total {
        out.push_str(&format!(
            "[lines {offset}-{last} of {total}; read with offset={} for more]\n",
            last + 1
        ));
    }
    Ok(out)
}

/// Creates or replaces a file, creating its parent directories.
pub fn write(input: WriteInput, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    let path = resolve(env, &input.path);
    if path.is_dir() {
        return Err(ToolError::new(format!("{} is a directory", input.path)));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| ToolError::new(format!("cannot create {}: {e}", parent.display())))?;
    }
    let existed = path.exists();
    std::fs::write(&path, &input.content)
        .map_err(|e| ToolError::new(format!("cannot write {}: {e}", input.path)))?;
    let lines = input.content.lines().count();
    let verb = if existed { "replaced" } else { "created" };
    Ok(format!("{verb} {} ({lines} lines, {} bytes)", input.path, input.content.len()))
}

/// Replaces an exact string: refused when it is missing, or found more than once without
/// `replace_all`.
pub fn edit(input: EditInput, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    let path = resolve(env, &input.path);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ToolError::new(format!("cannot read {}: {e}", input.path)))?;
    if input.old.is_empty() {
        return Err(ToolError::new("`old` is empty: use write to create a file"));
    }
    if input.old == input.new {
        return Err(ToolError::new("`old` and `new` are the same: nothing to change"));
    }
    let count = text.matches(&input.old).count();
    let updated = match count {
        0 => {
            return Err(ToolError::new(format!(
                "`old` was not found in {}: read the file and copy the text exactly",
                input.path
            )));
        }
        1 => text.replacen(&input.old, &input.new, 1),
        n if input.replace_all => {
            let _ = n;
            text.replace(&input.old, &input.new)
        }
        n => {
            return Err(ToolError::new(format!(
                "`old` is found {n} times in {}: give more context to make it unique, or set \
                 replace_all",
                input.path
            )));
        }
    };
    std::fs::write(&path, &updated)
        .map_err(|e| ToolError::new(format!("cannot write {}: {e}", input.path)))?;
    let line = text[..text.find(&input.old).unwrap_or(0)].matches('\n').count() + 1;
    Ok(if count == 1 {
        format!("edited {} at line {line}", input.path)
    } else {
        format!("edited {}: {count} replacements", input.path)
    })
}

/// At most `max` characters of a line, with a mark when cut.
pub fn cut_chars(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}[... line cut at {max} characters]", &line[..at]),
        None => line.to_owned(),
    }
}
