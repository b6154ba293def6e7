//! basic-memory's JSON memories: the knowledge graph the MCP memory server keeps (and
//! basic-memory's `import memory-json` reads), one JSON object a line: an entity
//! (`"type": "entity"`, `name`, `entityType`, `observations`) or a relation (`"type":
//! "relation"`, `from`, `to`, `relationType`). Each entity becomes a page,
//! `<entity type>/<name>.md`, holding its observations; its relations are listed in the body as
//! `[[path]]` links and in the frontmatter's `related:`.

use std::collections::BTreeMap;

use ai_memory_core::{Frontmatter, Page, PagePath, ProjectName, WorkspaceName, sanitize};
use ai_memory_store::{CleanPage, Location};
use serde_json::Value;

use super::import::{Incoming, Problems};
use crate::error::MemoryError;

#[derive(Debug)]
pub(crate) struct Read {
    pub pages: Vec<Incoming>,
    pub entities: usize,
    pub relations: usize,
}

struct Entity {
    line: usize,
    name: String,
    kind: String,
    observations: Vec<String>,
}

struct Relation {
    from: String,
    to: String,
    kind: String,
}

/// A string field under any of the names basic-memory accepts.
fn field(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(|x| x.as_str()))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A file name from a name: lowercase letters and digits, other runs as `-`.
pub(crate) fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    out.chars().take(100).collect()
}

pub(crate) fn read(
    file: &std::path::Path,
    lines: &[(usize, String)],
    workspace: &WorkspaceName,
    project: &ProjectName,
) -> Result<Read, MemoryError> {
    let mut problems = Problems::default();
    let mut entities: Vec<Entity> = Vec::new();
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    let mut relations: Vec<Relation> = Vec::new();
    for (line, text) in lines {
        let line = *line;
        if problems.full() {
            break;
        }
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                problems.push(line, format!("not JSON ({e})"));
                continue;
            }
        };
        match v.get("type").and_then(|t| t.as_str()) {
            Some("entity") => {
                let Some(name) = field(&v, &["name", "entityName", "id"]) else {
                    problems.push(line, "an entity without a `name`");
                    continue;
                };
                let kind = field(&v, &["entityType"]).unwrap_or_else(|| "entity".into());
                let observations = match v.get("observations") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => {
                        let strings: Option<Vec<String>> =
                            items.iter().map(|o| o.as_str().map(str::to_owned)).collect();
                        match strings {
                            Some(s) => s,
                            None => {
                                problems.push(
                                    line,
                                    format!(
                                        "entity `{name}`: `observations` must be a list of strings"
                                    ),
                                );
                                continue;
                            }
                        }
                    }
                    Some(_) => {
                        problems.push(
                            line,
                            format!("entity `{name}`: `observations` must be a list of strings"),
                        );
                        continue;
                    }
                };
                if slug(&kind).is_empty() || slug(&name).is_empty() {
                    problems.push(line, format!("entity `{name}` ({kind}): its name or type has no letter or digit to make a path of"));
                    continue;
                }
                // The same name again replaces the earlier one, as in basic-memory.
                match by_name.get(&name) {
                    Some(&i) => entities[i] = Entity { line, name, kind, observations },
                    None => {
                        by_name.insert(name.clone(), entities.len());
                        entities.push(Entity { line, name, kind, observations });
                    }
                }
            }
            Some("relation") => {
                let (Some(from), Some(to)) =
                    (field(&v, &["from", "from_id"]), field(&v, &["to", "to_id"]))
                else {
                    problems.push(line, "a relation needs `from` and `to`");
                    continue;
                };
                let kind = field(&v, &["relationType", "relation_type"])
                    .unwrap_or_else(|| "relates_to".into());
                relations.push(Relation { from, to, kind });
            }
            Some(other) => {
                problems.push(line, format!("`type` is `{other}`: expected `entity` or `relation`"))
            }
            None => problems.push(line, "no `type` (`entity` or `relation`)"),
        }
    }
    // Paths: `<type>/<name>.md`; two names that make one path get `-2`, `-3`, ...
    let mut paths: Vec<String> = Vec::new();
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for e in &entities {
        let base = format!("{}/{}", slug(&e.kind), slug(&e.name));
        let n = taken.entry(base.clone()).or_insert(0);
        *n += 1;
        paths.push(if *n == 1 { format!("{base}.md") } else { format!("{base}-{n}.md") });
    }
    let path_of = |name: &str| by_name.get(name).map(|&i| paths[i].clone());
    let mut pages = Vec::new();
    for (i, e) in entities.iter().enumerate() {
        let related: Vec<&Relation> = relations.iter().filter(|r| r.from == e.name).collect();
        match entity_page(e, &related, &path_of) {
            Ok(text) => {
                let made =
                    PagePath::new(&paths[i]).map_err(|err| err.to_string()).and_then(|path| {
                        let page =
                            CleanPage::new(sanitize(&text)).map_err(|err| err.to_string())?;
                        Ok((path, page))
                    });
                match made {
                    Ok((path, page)) => pages.push(Incoming {
                        line: e.line,
                        at: Location {
                            workspace: workspace.clone(),
                            project: project.clone(),
                            path,
                        },
                        page,
                    }),
                    Err(err) => problems.push(e.line, format!("entity `{}`: {err}", e.name)),
                }
            }
            Err(err) => problems.push(e.line, format!("entity `{}`: {err}", e.name)),
        }
    }
    problems.into_result(file)?;
    Ok(Read { pages, entities: entities.len(), relations: relations.len() })
}

fn entity_page(
    e: &Entity,
    relations: &[&Relation],
    path_of: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut body = format!("# {}\n", e.name);
    if !e.observations.is_empty() {
        body.push_str("\n## Observations\n\n");
        for o in &e.observations {
            body.push_str(&format!("- {}\n", o.replace('\n', " ")));
        }
    }
    let mut related = Vec::new();
    if !relations.is_empty() {
        body.push_str("\n## Relations\n\n");
        for r in relations {
            // A target in the file is linked by its page's path; another by its name.
            let target = path_of(&r.to).unwrap_or_else(|| r.to.clone());
            body.push_str(&format!("- {} [[{target}]]\n", r.kind));
            if !related.contains(&target) {
                related.push(target);
            }
        }
    }
    let mut frontmatter = Frontmatter { title: Some(e.name.clone()), ..Frontmatter::default() };
    frontmatter.extra.insert("type".into(), e.kind.clone().into());
    if !related.is_empty() {
        let list = related.into_iter().map(serde_yaml_ng::Value::from).collect();
        frontmatter.extra.insert("related".into(), serde_yaml_ng::Value::Sequence(list));
    }
    Page { frontmatter, body }.render().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;

    #[test]
    fn slugs_are_path_safe() {
        assert_eq!(slug("Alice Smith"), "alice-smith");
        assert_eq!(slug("../etc/passwd"), "etc-passwd");
        assert_eq!(slug("  C++ / Rust!! "), "c-rust");
        assert_eq!(slug("!!!"), "");
    }

    #[test]
    fn an_entity_becomes_a_page_with_its_observations_and_relations() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.jsonl");
        let lines = vec![
            (1, r#"{"type":"entity","name":"Alice","entityType":"person","observations":["Prefers pnpm","Works on the shop"]}"#.to_owned()),
            (2, r#"{"type":"entity","name":"Shop","entityType":"project","observations":[]}"#.to_owned()),
            (3, r#"{"type":"relation","from":"Alice","to":"Shop","relationType":"works_on"}"#.to_owned()),
            (4, r#"{"type":"relation","from":"Alice","to":"Bob","relationType":"knows"}"#.to_owned()),
        ];
        let ws = WorkspaceName::default_workspace();
        let project = ProjectName::new("notes").unwrap();
        let read = read(&file, &lines, &ws, &project).unwrap();
        assert_eq!((read.entities, read.relations), (2, 2));
        let alice = &read.pages[0];
        assert_eq!(alice.at.path.as_str(), "person/alice.md");
        let page = alice.page.page();
        assert_eq!(page.frontmatter.title.as_deref(), Some("Alice"));
        assert_eq!(page.frontmatter.extra["type"], serde_yaml_ng::Value::from("person"));
        let related: Vec<&str> = page.frontmatter.extra["related"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(related, ["project/shop.md", "Bob"]);
        assert!(page.body.contains("- Prefers pnpm\n"), "{}", page.body);
        assert!(page.body.contains("- works_on [[project/shop.md]]\n"), "{}", page.body);
        assert!(page.body.contains("- knows [[Bob]]\n"), "{}", page.body);
        assert_eq!(read.pages[1].at.path.as_str(), "project/shop.md");
    }

    #[test]
    fn bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.jsonl");
        let lines = vec![
            (1, r#"{"type":"entity","name":"A","observations":"not a list"}"#.to_owned()),
            (2, "{not json".to_owned()),
            (3, r#"{"type":"edge"}"#.to_owned()),
            (4, r#"{"type":"relation","from":"A"}"#.to_owned()),
        ];
        let ws = WorkspaceName::default_workspace();
        let e = read(&file, &lines, &ws, &ProjectName::new("n").unwrap()).unwrap_err().to_string();
        assert!(e.contains("line 1: entity `A`: `observations` must be a list"), "{e}");
        assert!(e.contains("line 2: not JSON"), "{e}");
        assert!(e.contains("line 3: `type` is `edge`"), "{e}");
        assert!(e.contains("line 4: a relation needs `from` and `to`"), "{e}");
    }
}
