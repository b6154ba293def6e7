//! Where skills are read, in the order that wins a name, and reading them. A file that cannot
//! be used is one note naming it; a name already loaded is one note naming both files.

use std::path::{Path, PathBuf};

use aerix_config::{Env, Origin};

use crate::parse::{DESCRIPTION_CHARS, cut, first_line, parse};
use crate::{Skill, Skills};

/// A `SKILL.md` or command file larger than this is refused by name (the cap of agent
/// definitions and instruction files too).
pub const MAX_SKILL_BYTES: u64 = aerix_config::MAX_FILE_BYTES;
/// Entries of one directory looked at; the rest are counted in a note.
pub const MAX_ENTRIES: usize = 1000;
/// Subdirectories of a commands directory followed (`a/b/c.md` is `a:b:c`).
const MAX_DEPTH: usize = 4;
/// A skill's name: at most this many characters.
const MAX_NAME: usize = 64;

/// What a directory holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `<name>/SKILL.md` directories.
    Skills,
    /// Legacy `*.md` commands; a subdirectory namespaces them (`frontend/component.md` is
    /// `frontend:component`).
    Commands,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillDir {
    pub path: PathBuf,
    pub kind: Kind,
    /// A plugin's name: its skills are `plugin:name`.
    pub plugin: Option<String>,
    /// Where its skills come from (a profile's overlay path names it).
    pub origin: Origin,
}

/// The directories skills are read from, the one that wins a name first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkillDirs {
    pub dirs: Vec<SkillDir>,
}

impl SkillDirs {
    /// From `cwd` up to the repository `root`, each directory's `.aerix/skills`, then
    /// `.claude/skills`, then `.claude/commands` (the closest directory wins; a skill over a
    /// command of the same name, as in Claude Code); then the user's
    /// `$XDG_CONFIG_HOME/aerix/skills`, `~/.claude/skills` and `~/.claude/commands`. Plugins
    /// come after (`plugin`).
    pub fn standard(env: &Env, root: &Path, cwd: &Path) -> SkillDirs {
        let mut project: Vec<&Path> = cwd.ancestors().take_while(|d| d.starts_with(root)).collect();
        if project.is_empty() {
            project.push(cwd);
        }
        let mut out = SkillDirs::default();
        for dir in project {
            out.push(dir.join(".aerix/skills"), Kind::Skills, Origin::Project);
            out.push(dir.join(".claude/skills"), Kind::Skills, Origin::Project);
            out.push(dir.join(".claude/commands"), Kind::Commands, Origin::Project);
        }
        if let Some(config) = env.config_home() {
            out.push(config.join("aerix/skills"), Kind::Skills, Origin::User);
        }
        if let Some(home) = &env.home {
            out.push(home.join(".claude/skills"), Kind::Skills, Origin::User);
            out.push(home.join(".claude/commands"), Kind::Commands, Origin::User);
        }
        out
    }

    /// A plugin's `skills/` then `commands/`, its names `plugin:name`.
    pub fn plugin(&mut self, name: &str, root: &Path) {
        self.push(root.join("skills"), Kind::Skills, Origin::Plugin(name.to_owned()));
        self.push(root.join("commands"), Kind::Commands, Origin::Plugin(name.to_owned()));
    }

    fn push(&mut self, path: PathBuf, kind: Kind, origin: Origin) {
        if !self.dirs.iter().any(|d| d.path == path) {
            let plugin = match &origin {
                Origin::Plugin(name) => Some(name.clone()),
                _ => None,
            };
            self.dirs.push(SkillDir { path, kind, plugin, origin });
        }
    }
}

impl SkillDir {
    /// The tree its files must lie in once links are resolved: a project's directory (the one
    /// holding `.claude/`), a plugin's root. The user's own directories are theirs to link.
    fn root(&self) -> Option<&Path> {
        match self.origin {
            Origin::User => None,
            Origin::Project => self.path.parent()?.parent(),
            Origin::Plugin(_) => self.path.parent(),
        }
    }
}

/// What loading found: the skills, and one line per problem for the caller to print.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    pub skills: Skills,
    pub notes: Vec<String>,
}

/// Reads every directory that exists, in order; the first skill of a name wins.
pub fn load(dirs: &SkillDirs) -> Loaded {
    let mut out = Loaded::default();
    for dir in &dirs.dirs {
        let mut files = Vec::new();
        match dir.kind {
            Kind::Skills => skill_files(&dir.path, &mut files, &mut out.notes),
            Kind::Commands => command_files(&dir.path, &[], &mut files, &mut out.notes),
        }
        for (segments, file, skill_dir) in files {
            let name = segments.join(":");
            let name = match &dir.plugin {
                Some(plugin) => format!("{plugin}:{name}"),
                None => name,
            };
            if let Some(skill) = read(&file, &skill_dir, name, dir, &mut out.notes) {
                add(&mut out, skill);
            }
        }
    }
    out
}

fn add(out: &mut Loaded, skill: Skill) {
    if let Err((skill, winner)) = out.skills.add(skill) {
        out.notes.push(format!(
            "skills: {}: `{}` is already loaded from {}; this one is skipped",
            skill.file.display(),
            skill.name,
            winner.file.display()
        ));
    }
}

/// A name a prompt's `/name` and the turn schema's enum can carry: letters, digits, `-`, `_`,
/// `.` and `:` (namespaces), not starting with `.` or `:`.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME + 32
        && !name.starts_with(['.', ':'])
        && name.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// A skill's own name (one component): as `valid_name`, without `:` and at most 64 characters.
fn valid_part(name: &str) -> bool {
    name.chars().count() <= MAX_NAME && !name.contains(':') && valid_name(name)
}

/// A directory's entries, sorted, at most `MAX_ENTRIES`; a missing directory has none.
fn entries(dir: &Path, notes: &mut Vec<String>) -> Vec<PathBuf> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Vec::new();
        }
        Err(e) => {
            notes.push(format!("skills: {}: {e}; its skills are skipped", dir.display()));
            return Vec::new();
        }
    };
    let mut paths = Vec::new();
    let mut more = 0usize;
    for entry in read.flatten() {
        if paths.len() < MAX_ENTRIES {
            paths.push(entry.path());
        } else {
            more += 1;
        }
    }
    if more > 0 {
        notes.push(format!(
            "skills: {}: holds more than {MAX_ENTRIES} entries; {more} are not read",
            dir.display()
        ));
    }
    paths.sort();
    paths
}

/// A file's name segments, the file, and its skill directory.
type Found = (Vec<String>, PathBuf, PathBuf);

fn skill_files(dir: &Path, out: &mut Vec<Found>, notes: &mut Vec<String>) {
    for path in entries(dir, notes) {
        // `metadata` follows symlinks: a linked skill directory counts as its target.
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let file = path.join("SKILL.md");
        if !file.is_file() {
            continue;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !valid_part(&name) {
            notes.push(format!(
                "skills: {}: the directory's name is not a skill name (letters, digits, `-`, `_`, `.`, at most {MAX_NAME}); skipped",
                path.display()
            ));
            continue;
        }
        out.push((vec![name], file, path));
    }
}

fn command_files(dir: &Path, prefix: &[String], out: &mut Vec<Found>, notes: &mut Vec<String>) {
    for path in entries(dir, notes) {
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        let stem = if meta.is_dir() {
            path.file_name()
        } else if path.extension().is_some_and(|e| e == "md") {
            path.file_stem()
        } else {
            continue;
        };
        let part = stem.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if !valid_part(&part) {
            notes.push(format!(
                "skills: {}: the name is not a skill name (letters, digits, `-`, `_`, `.`); skipped",
                path.display()
            ));
            continue;
        }
        let mut segments = prefix.to_vec();
        segments.push(part);
        if meta.is_dir() {
            if segments.len() > MAX_DEPTH {
                notes.push(format!(
                    "skills: {}: deeper than {MAX_DEPTH} directories; skipped",
                    path.display()
                ));
                continue;
            }
            command_files(&path, &segments, out, notes);
        } else {
            out.push((segments, path.clone(), dir.to_owned()));
        }
    }
}

/// One file as a skill named `name` (a frontmatter `name` of a skill name's shape replaces a
/// `SKILL.md`'s last segment; published plugins write display names such as `Writing Rules`
/// there, which leave the directory's name, without a note), or `None` with a note when it
/// cannot be read.
fn read(
    file: &Path,
    skill_dir: &Path,
    name: String,
    dir: &SkillDir,
    notes: &mut Vec<String>,
) -> Option<Skill> {
    // A repository's `SKILL.md -> ~/.aws/credentials` would hand the file to the model past
    // every Read rule: a link out of the skill's tree is never read.
    if let Some(root) = dir.root() {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_owned());
        match file.canonicalize() {
            Ok(resolved) if resolved.starts_with(&root) => {}
            Ok(resolved) => {
                notes.push(format!(
                    "skills: {}: a link to {}, outside {}; skipped",
                    file.display(),
                    resolved.display(),
                    root.display()
                ));
                return None;
            }
            Err(e) => {
                notes.push(format!("skills: {}: {e}; skipped", file.display()));
                return None;
            }
        }
    }
    let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    if size > MAX_SKILL_BYTES {
        notes.push(format!(
            "skills: {}: {size} bytes, over the {} KiB a skill may hold; skipped",
            file.display(),
            MAX_SKILL_BYTES / 1024
        ));
        return None;
    }
    let text = match std::fs::read(file).map(String::from_utf8) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => {
            notes.push(format!("skills: {}: not UTF-8 text; skipped", file.display()));
            return None;
        }
        Err(e) => {
            notes.push(format!("skills: {}: {e}; skipped", file.display()));
            return None;
        }
    };
    let parsed = parse(&text);
    if let Some(problem) = &parsed.problem {
        notes.push(format!("skills: {}: {problem}", file.display()));
    }
    let mut name = name;
    if dir.kind == Kind::Skills
        && let Some(own) = parsed.fields.name.as_ref().filter(|n| valid_part(n))
    {
        name = match &dir.plugin {
            Some(plugin) => format!("{plugin}:{own}"),
            None => own.clone(),
        };
    }
    let description = parsed
        .fields
        .description
        .clone()
        .or_else(|| first_line(&parsed.body))
        .map(|d| cut(&d.split_whitespace().collect::<Vec<_>>().join(" "), DESCRIPTION_CHARS))
        .unwrap_or_default();
    Some(Skill {
        name,
        description,
        argument_hint: parsed.fields.argument_hint,
        allowed_tools: parsed.fields.allowed_tools,
        model_invocable: !parsed.fields.disable_model_invocation,
        user_invocable: parsed.fields.user_invocable,
        body: parsed.body,
        dir: skill_dir.to_owned(),
        file: file.to_owned(),
        origin: dir.origin.clone(),
    })
}
