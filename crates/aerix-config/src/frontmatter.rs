//! YAML frontmatter, as Claude Code's agent definitions and skills both start: a first line
//! `---`, the YAML, a closing `---` line, then the body.

/// Why a text has no frontmatter to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoFrontmatter {
    /// The first line is not `---`.
    Missing,
    /// A first line `---` and no closing one.
    Unclosed,
}

/// The YAML between a first line `---` and the next `---` line, and the body after it (the
/// blank lines that start it dropped).
pub fn split_frontmatter(text: &str) -> Result<(&str, &str), NoFrontmatter> {
    let first = text.lines().next().ok_or(NoFrontmatter::Missing)?;
    if first.trim_end() != "---" {
        return Err(NoFrontmatter::Missing);
    }
    let rest = &text[first.len()..];
    let rest = rest.strip_prefix("\r\n").or_else(|| rest.strip_prefix('\n')).unwrap_or(rest);
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let body = &rest[at + line.len()..];
            return Ok((&rest[..at], body.trim_start_matches(['\r', '\n'])));
        }
        at += line.len();
    }
    Err(NoFrontmatter::Unclosed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_yaml_and_the_body_or_why_there_is_none() {
        assert_eq!(split_frontmatter("---\na: 1\n---\n\nbody\n"), Ok(("a: 1\n", "body\n")));
        assert_eq!(split_frontmatter("---\r\na: 1\r\n---\r\nb"), Ok(("a: 1\r\n", "b")));
        assert_eq!(split_frontmatter("---\n---\n"), Ok(("", "")));
        assert_eq!(split_frontmatter("# title\n---\n"), Err(NoFrontmatter::Missing));
        assert_eq!(split_frontmatter(""), Err(NoFrontmatter::Missing));
        assert_eq!(split_frontmatter("---\na: 1\n"), Err(NoFrontmatter::Unclosed));
    }
}
