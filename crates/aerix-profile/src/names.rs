//! Names: a profile's, its branches', and the overlay paths of skills and agent definitions.

/// The model-agnostic base branch.
pub const MAIN: &str = "main";

/// A profile name: `[A-Za-z0-9_-][A-Za-z0-9._-]*`. The rule is the `profile` setting's, so
/// `aerix-config` owns it (and needs no git to check a settings file).
pub use aerix_config::valid_profile_name as valid_name;

/// The model reference as one ref component: every byte outside `[A-Za-z0-9_-]` written
/// `%XX` (upper-case hex), so `.` is `%2E` and `/` is `%2F`.
pub fn encode_model(model: &str) -> String {
    let mut out = String::with_capacity(model.len());
    for byte in model.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `model/<encoded model>`: the model base of the main member's model reference, exactly as
/// configured (an alias and its full reference are two branches).
pub fn model_branch(model: &str) -> String {
    format!("model/{}", encode_model(model))
}

/// `session/<id>`.
pub fn session_branch(session: &str) -> String {
    format!("session/{session}")
}

/// Why a name or source is not one path component, if it is not.
pub(crate) fn component_problem(part: &str) -> Option<&'static str> {
    if part.is_empty() {
        Some("it is empty")
    } else if part == "." || part == ".." {
        Some("it is `.` or `..`")
    } else if part == ".git" {
        Some("it is `.git`")
    } else if part.contains('/') || part.contains('\\') {
        Some("it holds `/` or `\\`")
    } else if part.chars().any(char::is_control) {
        Some("it holds a control character")
    } else {
        None
    }
}

/// The overlay path of a skill (`skills/<source>/<name>/SKILL.md`) or an agent definition
/// (`agents/<source>/<name>.md`), or why it has none: a name or source that is not one path
/// component, or a plugin whose id is `user` or `project`.
pub fn overlay_path(
    kind: crate::OverlayKind,
    source: &crate::Source<'_>,
    name: &str,
) -> Result<String, String> {
    let source_part = match source {
        crate::Source::User => "user",
        crate::Source::Project => "project",
        crate::Source::Plugin(id) => {
            if matches!(*id, "user" | "project") {
                return Err(format!("its plugin's id `{id}` is a source name"));
            }
            if let Some(problem) = component_problem(id) {
                return Err(format!(
                    "its plugin's id `{}` is not one path component: {problem}",
                    id.escape_debug()
                ));
            }
            id
        }
    };
    if let Some(problem) = component_problem(name) {
        return Err(format!(
            "its name `{}` is not one path component: {problem}",
            name.escape_debug()
        ));
    }
    Ok(match kind {
        crate::OverlayKind::Skill => format!("skills/{source_part}/{name}/SKILL.md"),
        crate::OverlayKind::Agent => format!("agents/{source_part}/{name}.md"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{OverlayKind, Source};

    #[test]
    fn models_encode_into_one_component() {
        assert_eq!(encode_model("qwen3-0.6b"), "qwen3-0%2E6b");
        assert_eq!(model_branch("org/repo:Q4_K_M"), "model/org%2Frepo%3AQ4_K_M");
        assert_eq!(encode_model("a b%"), "a%20b%25");
        assert_eq!(encode_model("é"), "%C3%A9");
        assert!(!model_branch("../x").trim_start_matches("model/").contains(['/', '.']));
    }

    #[test]
    fn overlay_paths_and_the_names_that_have_none() {
        let skill = |source, name| overlay_path(OverlayKind::Skill, &source, name);
        assert_eq!(skill(Source::User, "review").unwrap(), "skills/user/review/SKILL.md");
        assert_eq!(
            overlay_path(OverlayKind::Agent, &Source::Plugin("tools"), "fmt").unwrap(),
            "agents/tools/fmt.md"
        );
        assert_eq!(skill(Source::Project, "a:b").unwrap(), "skills/project/a:b/SKILL.md");
        for name in ["", ".", "..", ".git", "a/b", "a\\b", "a\u{7}"] {
            assert!(skill(Source::User, name).is_err(), "{name:?}");
        }
        for id in ["user", "project", "..", "a/b", ""] {
            assert!(skill(Source::Plugin(id), "x").is_err(), "{id:?}");
        }
        assert!(
            skill(Source::Plugin("user"), "x").unwrap_err().contains("`user` is a source name")
        );
    }
}
