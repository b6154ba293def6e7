//! The peer a local user would run, for benchmarks: llama-cpp-python's `Llama` driven one prompt
//! at a time by `scripts/peer-llama.py` (a child process speaking JSON lines), which reuses the
//! longest common prefix with its previous prompt, as `Llama.generate` does.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What the peer did for one prompt.
#[derive(Clone, Copy, Debug)]
pub struct PeerReply {
    /// Prompt rows it computed (the prompt's length past the prefix it kept).
    pub recomputed: u64,
    /// From handing it the prompt to its first token.
    pub ttft_ms: f64,
}

pub struct Peer {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Peer {
    /// Starts the peer on `model` with `threads` threads (a cold model: one per workload).
    pub fn start(python: &str, model: &Path, threads: u32) -> std::io::Result<Peer> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/peer-llama.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(model)
            .arg(threads.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the peer's pipes"));
        };
        Ok(Peer { child, input, output: BufReader::new(output) })
    }

    /// The peer's rows recomputed and TTFT on the prompt `ids` (blocking).
    pub fn prompt(&mut self, ids: &[u32]) -> std::io::Result<PeerReply> {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        writeln!(self.input, "[{}]", ids.join(","))?;
        let mut line = String::new();
        self.output.read_line(&mut line)?;
        let reply: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| std::io::Error::other(format!("the peer's reply {line:?}: {e}")))?;
        match (reply["recomputed"].as_u64(), reply["ttft_ms"].as_f64()) {
            (Some(recomputed), Some(ttft_ms)) => Ok(PeerReply { recomputed, ttft_ms }),
            _ => Err(std::io::Error::other(format!("the peer's reply {line:?}"))),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
