//! Choosing the GGUF file(s) a reference means among a repository's files.

use std::collections::BTreeMap;

use crate::HubFile;

/// The quantization taken when a repository holds several GGUFs and the reference names none
/// (llama.cpp's `-hf` default too).
pub(crate) const DEFAULT_QUANT: &str = "Q4_K_M";

/// The files to fetch, first the one to load (the other parts of a split model follow), or why
/// none fits.
pub(crate) fn pick(files: &[String], wanted: &HubFile) -> Result<Vec<String>, String> {
    let ggufs: Vec<&String> = files
        .iter()
        .filter(|f| f.ends_with(".gguf") && !basename(f).to_ascii_lowercase().contains("mmproj"))
        .collect();
    let models = group_splits(&ggufs);
    let chosen: Vec<&Vec<String>> = match wanted {
        HubFile::Name(name) => {
            return match models.iter().find(|parts| parts.iter().any(|p| p == name)) {
                // Naming one part of a split model fetches all of its parts.
                Some(parts) if parts.len() > 1 => Ok(parts.clone()),
                _ if files.contains(name) => Ok(vec![name.clone()]),
                _ => Err(format!("the repository has no file {name}")),
            };
        }
        HubFile::Quant(quant) => models.iter().filter(|p| carries_quant(&p[0], quant)).collect(),
        HubFile::Default if models.len() == 1 => models.iter().collect(),
        HubFile::Default => {
            let default: Vec<_> =
                models.iter().filter(|p| carries_quant(&p[0], DEFAULT_QUANT)).collect();
            if default.is_empty() {
                return Err(format!(
                    "the repository has several GGUF files and none is {DEFAULT_QUANT}: \
                     name one with owner/repo:QUANT"
                ));
            }
            default
        }
    };
    match chosen.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(match wanted {
            HubFile::Quant(quant) => format!("no GGUF file carries the quantization {quant}"),
            _ => "the repository has no GGUF file".to_owned(),
        }),
        several => Err(format!(
            "{} GGUF files match ({}): name one with owner/repo/FILE.gguf",
            several.len(),
            several.iter().map(|p| p[0].as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The GGUF files of a listing, for error messages.
pub(crate) fn gguf_files(files: &[String]) -> Vec<String> {
    files.iter().filter(|f| f.ends_with(".gguf")).cloned().collect()
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `name-00002-of-00003.gguf` → (`name`, 2, 3).
fn split_part(path: &str) -> Option<(&str, u32, u32)> {
    let stem = path.strip_suffix(".gguf")?;
    let (rest, total) = stem.rsplit_once("-of-")?;
    let (base, index) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(index) || !digits(total) {
        return None;
    }
    Some((base, index.parse().ok()?, total.parse().ok()?))
}

/// Each model as its parts in order (one part for an unsplit file); a split model with a
/// missing part is left out.
fn group_splits(files: &[&String]) -> Vec<Vec<String>> {
    let mut models: Vec<Vec<String>> = Vec::new();
    // (base name, part count) → (part index, file)
    let mut splits: BTreeMap<(&str, u32), Vec<(u32, String)>> = BTreeMap::new();
    for file in files {
        match split_part(file) {
            Some((base, index, total)) => {
                splits.entry((base, total)).or_default().push((index, (*file).clone()));
            }
            None => models.push(vec![(*file).clone()]),
        }
    }
    for ((_, total), mut parts) in splits {
        parts.sort();
        let complete = parts.iter().map(|(i, _)| *i).eq(1..=total);
        if complete {
            models.push(parts.into_iter().map(|(_, file)| file).collect());
        }
    }
    models.sort();
    models
}

/// Whether a file name carries a quantization as a whole word: `Q4_K` is not in `m-Q4_K_M.gguf`.
fn carries_quant(path: &str, quant: &str) -> bool {
    let name = basename(path).to_ascii_uppercase();
    let quant = quant.to_ascii_uppercase();
    let boundary = |c: Option<char>| c.is_none_or(|c| "-._".contains(c));
    name.match_indices(&quant).any(|(at, _)| {
        boundary(name[..at].chars().next_back())
            && boundary(name[at + quant.len()..].chars().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn quant(q: &str) -> HubFile {
        HubFile::Quant(q.to_owned())
    }

    #[test]
    fn quant_is_a_whole_word() {
        let repo = files(&["m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "m-q8_0.gguf", "README.md"]);
        assert_eq!(pick(&repo, &quant("q4_k_m")).unwrap(), ["m-Q4_K_M.gguf"]);
        assert_eq!(pick(&repo, &quant("Q8_0")).unwrap(), ["m-q8_0.gguf"]);
        let error = pick(&repo, &quant("Q4_K")).unwrap_err();
        assert!(error.contains("Q4_K"), "{error}");
        assert_eq!(pick(&repo, &HubFile::Default).unwrap(), ["m-Q4_K_M.gguf"]);
    }

    #[test]
    fn projector_files_are_not_models() {
        let repo = files(&["m.Q4_0.gguf", "mmproj-m-f16.gguf"]);
        assert_eq!(pick(&repo, &HubFile::Default).unwrap(), ["m.Q4_0.gguf"]);
    }

    #[test]
    fn split_models_come_whole_first_part_first() {
        let repo = files(&[
            "Q8_0/m-Q8_0-00002-of-00002.gguf",
            "Q8_0/m-Q8_0-00001-of-00002.gguf",
            "m-Q4_K_M.gguf",
        ]);
        let whole = ["Q8_0/m-Q8_0-00001-of-00002.gguf", "Q8_0/m-Q8_0-00002-of-00002.gguf"];
        assert_eq!(pick(&repo, &quant("Q8_0")).unwrap(), whole);
        let named = HubFile::Name("Q8_0/m-Q8_0-00002-of-00002.gguf".into());
        assert_eq!(pick(&repo, &named).unwrap(), whole);
        // A split model with a part missing is not offered.
        let broken = files(&["m-Q8_0-00001-of-00003.gguf", "m-Q8_0-00002-of-00003.gguf"]);
        assert!(pick(&broken, &quant("Q8_0")).is_err());
    }

    #[test]
    fn ambiguity_and_absence_are_explained() {
        let repo = files(&["a-Q4_0.gguf", "b-Q4_0.gguf", "c-Q8_0.gguf"]);
        let error = pick(&repo, &quant("Q4_0")).unwrap_err();
        assert!(error.contains("a-Q4_0.gguf") && error.contains("b-Q4_0.gguf"), "{error}");
        let error = pick(&repo, &HubFile::Default).unwrap_err();
        assert!(error.contains("Q4_K_M"), "{error}");
        let error = pick(&repo, &HubFile::Name("z.gguf".into())).unwrap_err();
        assert!(error.contains("z.gguf"), "{error}");
        assert_eq!(pick(&files(&["one.gguf"]), &HubFile::Default).unwrap(), ["one.gguf"]);
    }
}
