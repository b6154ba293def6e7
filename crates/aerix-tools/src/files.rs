//! `read`, `write`, `edit`, each confined to the roots (`confine.rs`) and to regular files
//! (`open.rs`).

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde::Deserialize;

use crate::confine::Access;
use crate::search::GREP_FILE_LIMIT;
use crate::tolerant::{self, Miss};
use crate::{ToolEnv, ToolError, open};

pub const READ_LIMIT: usize = 200;
pub const LINE_CHARS: usize = 2000;
/// The most a `read` returns: past it, the lines stop and the result says where to go on.
pub const READ_BYTES: usize = 256 << 10;
/// A file `edit` loads at most; a larger one is refused by name.
pub const EDIT_MAX_BYTES: u64 = 8 << 20;
/// A read's buffer: its memory, whatever the file's size.
const BUFFER: usize = 64 << 10;

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
/// characters; a directory gives its entries. The file is streamed: whatever its size, a read
/// holds one buffer and the lines it returns (at most `READ_BYTES` of them).
pub fn read(input: ReadInput, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    let path = env.roots.check(env.cwd, &input.path, Access::Read)?;
    let shown = input.path.as_str();
    let meta = std::fs::symlink_metadata(&path)
        .map_err(|e| ToolError::new(format!("cannot read {shown}: {e}")))?;
    if meta.is_dir() {
        return list(&path, shown);
    }
    let (file, meta) = open::regular(&path, shown)?;
    let failed = |e: std::io::Error| ToolError::new(format!("cannot read {shown}: {e}"));
    let mut reader = BufReader::with_capacity(BUFFER, file);
    if reader.fill_buf().map_err(failed)?.iter().take(8192).any(|b| *b == 0) {
        return Err(ToolError::new(format!("{shown} is a binary file ({} bytes)", meta.len())));
    }
    let offset = input.offset.unwrap_or(1).max(1);
    let limit = input.limit.unwrap_or(READ_LIMIT).max(1);
    let mut before = 0;
    while before < offset - 1 {
        if reader.skip_until(b'\n').map_err(failed)? == 0 {
            break;
        }
        before += 1;
    }
    let mut lines: Vec<String> = Vec::new();
    let (mut bytes, mut cut_at_bytes) = (0, false);
    let mut buf = Vec::new();
    while lines.len() < limit {
        let Some(line) = next_line(&mut reader, &mut buf).map_err(failed)? else { break };
        if bytes + line.len() > READ_BYTES && !lines.is_empty() {
            cut_at_bytes = true;
            break;
        }
        bytes += line.len() + 8;
        lines.push(line);
    }
    if lines.is_empty() {
        if before == 0 {
            return Ok(format!("{shown} is empty"));
        }
        return Err(ToolError::new(format!(
            "{shown} has {before} lines; offset {offset} is past the end"
        )));
    }
    let last = offset + lines.len() - 1;
    let width = last.to_string().len();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        out.push_str(&format!("{:>width$}\t{line}\n", offset + i));
    }
    let more = cut_at_bytes || !reader.fill_buf().map_err(failed)?.is_empty();
    if more {
        // Counting the rest means reading it: only for a file of a size grep reads too.
        let of = if meta.len() <= GREP_FILE_LIMIT {
            let mut rest = usize::from(cut_at_bytes);
            while reader.skip_until(b'\n').map_err(failed)? > 0 {
                rest += 1;
            }
            (last + rest).to_string()
        } else {
            format!("a {} file", crate::search::human(meta.len()))
        };
        let cut =
            if cut_at_bytes { format!("; cut at {} KiB", READ_BYTES >> 10) } else { String::new() };
        out.push_str(&format!(
            "[lines {offset}-{last} of {of}{cut}; read with offset={} for more]\n",
            last + 1
        ));
    }
    Ok(out)
}

/// The next line (without its newline), cut to `LINE_CHARS`; the rest of a long line is skipped
/// unread into memory. `None` at the end.
fn next_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<String>> {
    buf.clear();
    let keep = (LINE_CHARS * 4) as u64;
    let n = (&mut *reader).take(keep).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    let ended = buf.last() == Some(&b'\n');
    let cut = !ended && n as u64 == keep && reader.skip_until(b'\n')? > 0;
    if ended {
        buf.pop();
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    let text = String::from_utf8_lossy(buf);
    let line = cut_chars(&text, LINE_CHARS);
    if cut && line.len() == text.len() {
        return Ok(Some(format!("{line}[... line cut at {LINE_CHARS} characters]")));
    }
    Ok(Some(line))
}

fn list(path: &Path, shown: &str) -> Result<String, ToolError> {
    let mut entries: Vec<String> = std::fs::read_dir(path)
        .map_err(|e| ToolError::new(format!("cannot list {shown}: {e}")))?
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) { format!("{name}/") } else { name }
        })
        .collect();
    entries.sort();
    if entries.is_empty() {
        return Ok(format!("{shown} is an empty directory"));
    }
    Ok(entries.join("\n"))
}

/// Creates or replaces a file, creating its parent directories. The path is resolved first
/// (a link to outside the roots is refused), and the file is opened without following a link.
pub fn write(input: WriteInput, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    let path = env.roots.check(env.cwd, &input.path, Access::Write)?;
    let shown = input.path.as_str();
    if let Some(parent) = path.parent() {
        // The resolved parent holds no link: what is created is created inside the roots.
        std::fs::create_dir_all(parent)
            .map_err(|e| ToolError::new(format!("cannot create {}: {e}", parent.display())))?;
    }
    let (mut file, existed) = open::replace(&path, shown)?;
    file.write_all(input.content.as_bytes())
        .map_err(|e| ToolError::new(format!("cannot write {shown}: {e}")))?;
    let lines = input.content.lines().count();
    let verb = if existed { "replaced" } else { "created" };
    Ok(format!("{verb} {shown} ({lines} lines, {} bytes)", input.content.len()))
}

/// Replaces a string: refused when it is missing, or found more than once without
/// `replace_all`. An `old` not in the file exactly may still match one place with its
/// whitespace or indentation tolerated (`tolerant.rs`), and the result says how. A file over
/// `EDIT_MAX_BYTES` is refused, not loaded.
pub fn edit(input: EditInput, env: &ToolEnv<'_>) -> Result<String, ToolError> {
    let path = env.roots.check(env.cwd, &input.path, Access::Write)?;
    let shown = input.path.as_str();
    let (mut file, meta) = open::regular_rw(&path, shown)?;
    let too_big = |size: u64| {
        ToolError::new(format!(
            "refused: {shown} is {size} bytes, over the {} MiB edit loads; change it with bash",
            EDIT_MAX_BYTES >> 20
        ))
    };
    if meta.len() > EDIT_MAX_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::new();
    // The file may grow after the check: never read past the cap.
    (&mut file)
        .take(EDIT_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::new(format!("cannot read {shown}: {e}")))?;
    if bytes.len() as u64 > EDIT_MAX_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| ToolError::new(format!("cannot edit {shown}: it is not UTF-8 text")))?;
    if input.old.is_empty() {
        return Err(ToolError::new("`old` is empty: use write to create a file"));
    }
    if input.old == input.new {
        return Err(ToolError::new("`old` and `new` are the same: nothing to change"));
    }
    let count = text.matches(&input.old).count();
    let (updated, done) = match count {
        0 => tolerated(&text, &input, shown)?,
        1 => {
            // Found once above, so `find` is that place.
            let at = text.find(&input.old).unwrap_or(0);
            let line = text[..at].matches('\n').count() + 1;
            let mut updated = text.clone();
            updated.replace_range(at..at + input.old.len(), &input.new);
            (updated, format!("edited {shown} at line {line}"))
        }
        _ if input.replace_all => {
            (text.replace(&input.old, &input.new), format!("edited {shown}: {count} replacements"))
        }
        n => {
            return Err(ToolError::new(format!(
                "`old` is found {n} times in {shown}: give more context to make it unique, or set \
                 replace_all"
            )));
        }
    };
    // The same open file, rewritten: no second open a link could redirect.
    let written = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.set_len(0))
        .and_then(|()| file.write_all(updated.as_bytes()));
    written.map_err(|e| ToolError::new(format!("cannot write {shown}: {e}")))?;
    Ok(done)
}

/// The file with `old` replaced where it matches with whitespace tolerated, and the result;
/// else the refusal. "`old` was not found" is the one wording of a miss (a benchmark counts
/// those refusals by it).
fn tolerated(text: &str, input: &EditInput, shown: &str) -> Result<(String, String), ToolError> {
    match tolerant::find(text, &input.old, &input.new) {
        Ok(found) => Ok((
            found.apply(text),
            format!("edited {shown} at line {} ({})", found.line, found.how),
        )),
        Err(Miss::NotFound) => Err(ToolError::new(format!(
            "`old` was not found in {shown}: read the file and copy the text exactly"
        ))),
        Err(Miss::Ambiguous { lines, tolerance }) => {
            let mut at: Vec<String> = lines.iter().take(5).map(usize::to_string).collect();
            if lines.len() > 5 {
                at.push("...".into());
            }
            let all = if input.replace_all { " (replace_all is for exact text only)" } else { "" };
            Err(ToolError::new(format!(
                "`old` is not in {shown} exactly, and {tolerance} it is found {} times (lines \
                 {}): give more context to make it unique{all}",
                lines.len(),
                at.join(", ")
            )))
        }
    }
}

/// At most `max` characters of a line, with a mark when cut.
pub fn cut_chars(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}[... line cut at {max} characters]", &line[..at]),
        None => line.to_owned(),
    }
}
