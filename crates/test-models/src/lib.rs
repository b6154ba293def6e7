//! Where the test models are: the GGUF files `scripts/fetch-models` caches under
//! `$XDG_CACHE_HOME/aerix/models` (else `~/.cache/aerix/models`). A dev-dependency of every
//! crate whose tests run a real model, so the path is written once. Also where the remote-engine
//! tests' `llama-server` is: `scripts/fetch-engine` caches it under `.../aerix/engine`; and the
//! Python MCP SDK's virtual environment, which `scripts/setup --tests` makes under
//! `.../aerix/mcp-sdk`.

#![allow(clippy::expect_used, reason = "a test without its model cannot run: say so loudly")]

use std::path::PathBuf;

pub mod peer;
pub mod server;

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";

/// The cached model `file`; panics, naming the fix, when it is missing.
pub fn path(file: &str) -> PathBuf {
    let path = cache().join("aerix/models").join(file);
    assert!(path.is_file(), "{} is missing: run scripts/fetch-models", path.display());
    path
}

/// The sentence encoder all-MiniLM-L6-v2 in its published layout (`config.json`,
/// `tokenizer.json`, `model.safetensors`), the directory `scripts/fetch-models` extracts.
pub fn minilm_dir() -> PathBuf {
    let path = cache().join("aerix/models").join(MINILM_DIR);
    assert!(
        path.join("model.safetensors").is_file(),
        "{} is missing: run scripts/fetch-models",
        path.display()
    );
    path
}

pub const MINILM_DIR: &str = "all-MiniLM-L6-v2";

pub fn smollm2() -> PathBuf {
    path(SMOLLM2)
}

pub fn gemma3() -> PathBuf {
    path(GEMMA3)
}

/// The cached `llama-server`; panics, naming the command that builds it, when it is missing (a
/// test that needs the engine never skips).
pub fn llama_server() -> PathBuf {
    let path = cache().join("aerix/engine/llama-server");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch-engine (it builds llama-server once per machine)",
        path.display()
    );
    path
}

/// The Python of the MCP SDK's virtual environment; panics, naming the command that makes it,
/// when it is missing (the MCP tests' servers are written with the SDK: they never skip).
pub fn mcp_sdk_python() -> PathBuf {
    installed("aerix/mcp-sdk/bin/python3", "the Python MCP SDK")
}

/// The Python with the OpenAI and Anthropic SDKs (pinned) that `scripts/setup --tests` installs.
pub fn http_sdk_python() -> PathBuf {
    installed("aerix/http-sdk/bin/python3", "the OpenAI and Anthropic Python SDKs")
}

/// Claude Code (pinned) as `scripts/setup --tests` installs it.
pub fn claude_code() -> PathBuf {
    installed("aerix/claude-code/node_modules/.bin/claude", "Claude Code")
}

/// A file `scripts/setup --tests` puts under the cache, or a failure naming the step.
fn installed(relative: &str, what: &str) -> PathBuf {
    let path = cache().join(relative);
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup --tests (it installs {what})",
        path.display()
    );
    path
}

fn cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .expect("HOME or XDG_CACHE_HOME is set")
}
