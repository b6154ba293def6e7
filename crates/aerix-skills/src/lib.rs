//! Skills and plugins in Claude Code's format: `SKILL.md` directories and legacy command files
//! loaded from the project, the user's directories and enabled plugins (`load.rs`), their
//! frontmatter (`parse.rs`), the listing the system segment shows, the text a `skill` call or a
//! `/name args` prompt gets (`expand.rs`), and where plugins come from (`plugins.rs`).
//!
//! Nothing here runs anything: a skill is text. aerix-agent loads a set, expands a prompt's
//! first line with it and hands it to its runtime as it is.

mod expand;
mod load;
mod parse;
pub mod plugins;

use std::path::PathBuf;

use aerix_config::{ByName, Named};

pub use expand::{Values, expand, split_words};
pub use load::{Kind, Loaded, MAX_ENTRIES, MAX_SKILL_BYTES, SkillDir, SkillDirs, load};
pub use parse::{DESCRIPTION_CHARS, Fields, Parsed, parse};

/// One loaded skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// `review`, `frontend:component` (a command in a subdirectory), `plugin:name`.
    pub name: String,
    /// The frontmatter's, else the body's first line; cut to `DESCRIPTION_CHARS`.
    pub description: String,
    pub argument_hint: Option<String>,
    /// As written; aerix has no permission prompts, so they grant nothing (documented).
    pub allowed_tools: Vec<String>,
    /// `disable-model-invocation: true` makes this false: not listed, not offered to `skill`.
    pub model_invocable: bool,
    /// `user-invocable: false` makes this false: `/name` refuses it.
    pub user_invocable: bool,
    pub body: String,
    /// `${CLAUDE_SKILL_DIR}`: the skill's directory (a command's: the file's).
    pub dir: PathBuf,
    pub file: PathBuf,
    /// Where it was found: a profile's overlay path `skills/<origin>/<name>/SKILL.md` names it
    /// (a plugin's skill by its name without the `plugin:` prefix).
    pub origin: aerix_config::Origin,
}

/// Why a skill cannot be given: the text a model or a user sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    #[error("no skill named `{name}`; {known}")]
    Unknown { name: String, known: String },
    #[error("`{0}` is for the user to run (`disable-model-invocation`), not for the model")]
    NotForModel(String),
    #[error("`{0}` is not run as `/{0}` (`user-invocable: false`): only the model loads it")]
    NotForUser(String),
}

/// The loaded skills by name (`get`, `iter`, `set_body`, ... of the set it derefs to), and the
/// session they are expanded for.
#[derive(Clone, Debug, Default)]
pub struct Skills {
    set: ByName<Skill>,
    session_id: String,
}

impl Named for Skill {
    fn name(&self) -> &str {
        &self.name
    }

    fn body_mut(&mut self) -> &mut String {
        &mut self.body
    }
}

impl std::ops::Deref for Skills {
    type Target = ByName<Skill>;

    fn deref(&self) -> &ByName<Skill> {
        &self.set
    }
}

impl std::ops::DerefMut for Skills {
    fn deref_mut(&mut self) -> &mut ByName<Skill> {
        &mut self.set
    }
}

impl Skills {
    /// The same set, expanding `${CLAUDE_SESSION_ID}` to `id`.
    pub fn with_session(self, id: &str) -> Skills {
        Skills { session_id: id.to_owned(), ..self }
    }

    /// The names the model may load (the `skill` call's enum); none: no `skill` tool.
    pub fn model_names(&self) -> Vec<String> {
        self.iter().filter(|s| s.model_invocable).map(|s| s.name.clone()).collect()
    }

    /// The system segment's `# Skills` section: one `- name: description` line per skill the
    /// model may load, those lines within `max_chars` characters, the ones that do not fit
    /// counted in one more line. `None` when the model may load none.
    pub fn listing(&self, max_chars: usize) -> Option<String> {
        let skills: Vec<&Skill> = self.iter().filter(|s| s.model_invocable).collect();
        if skills.is_empty() {
            return None;
        }
        let mut out = String::from(
            "# Skills\n\nA skill holds instructions for one kind of task: before such a task, call `skill` with its `name` (and `args` for it) to load them.\n\n",
        );
        let mut used = 0;
        let mut shown = 0;
        for skill in &skills {
            let line = format!("- {}: {}\n", skill.name, skill.description);
            let len = line.chars().count();
            if used + len > max_chars {
                break;
            }
            used += len;
            shown += 1;
            out.push_str(&line);
        }
        let more = skills.len() - shown;
        if more > 0 {
            let s = if more == 1 { "" } else { "s" };
            out.push_str(&format!("(and {more} more skill{s}: call skill with list)\n"));
        }
        Some(out)
    }

    /// `skill` with `list`: every skill the model may load, with its argument hint.
    pub fn list(&self) -> String {
        let lines: Vec<String> = self
            .iter()
            .filter(|s| s.model_invocable)
            .map(|s| match &s.argument_hint {
                Some(hint) => format!("- {} {hint}: {}", s.name, s.description),
                None => format!("- {}: {}", s.name, s.description),
            })
            .collect();
        if lines.is_empty() {
            return "no skills are loaded".to_owned();
        }
        format!("{} skills:\n{}", lines.len(), lines.join("\n"))
    }

    /// `skill` with a `name`: the skill's base directory, then its body expanded.
    pub fn load(&self, name: &str, args: &str) -> Result<String, SkillError> {
        let skill = self.find(name)?;
        if !skill.model_invocable {
            return Err(SkillError::NotForModel(skill.name.clone()));
        }
        Ok(format!(
            "Base directory for this skill: {}\n\n{}",
            skill.dir.display(),
            self.expand(skill, args)
        ))
    }

    /// A prompt whose first line is `/name args`: that line replaced by the skill's text (the
    /// rest of the prompt after it). `Ok(None)`: the first line names no skill (it does not
    /// start with `/` and a name); an unknown name is an error.
    pub fn expand_prompt(&self, prompt: &str) -> Result<Option<String>, SkillError> {
        let Some((name, args, rest)) = slash_line(prompt) else { return Ok(None) };
        let skill = self.find(name)?;
        if !skill.user_invocable {
            return Err(SkillError::NotForUser(skill.name.clone()));
        }
        let mut text = self.expand(skill, args);
        if !rest.trim().is_empty() {
            text = format!("{}\n\n{rest}", text.trim_end());
        }
        Ok(Some(text))
    }

    fn find(&self, name: &str) -> Result<&Skill, SkillError> {
        self.get(name).ok_or_else(|| {
            let names = self.model_names();
            let known = if names.is_empty() {
                "no skills are loaded".to_owned()
            } else {
                format!("the skills are {}", names.join(", "))
            };
            SkillError::Unknown { name: name.to_owned(), known }
        })
    }

    fn expand(&self, skill: &Skill, args: &str) -> String {
        let values =
            Values { arguments: args, skill_dir: &skill.dir, session_id: &self.session_id };
        expand(&skill.body, &values)
    }
}

/// `/name args` on the first line: the name, the arguments, the lines after. A first line
/// whose first word is not `/` and a skill name (`/usr/bin/x is slow`) is not one.
fn slash_line(prompt: &str) -> Option<(&str, &str, &str)> {
    let (first, rest) = prompt.split_once('\n').unwrap_or((prompt, ""));
    let command = first.strip_prefix('/')?;
    let (name, args) = command.split_once(char::is_whitespace).unwrap_or((command, ""));
    load::valid_name(name).then_some((name, args.trim(), rest))
}

#[cfg(test)]
mod tests;
