//! caldrix protocol version 2: the wire types and their framing. `docs/protocol.md` is the
//! description a client in another language is written from.
//!
//! No I/O runtime and no engine here: the daemon and the client read and write frames with
//! their own I/O and use these types and functions on the bytes.

mod frame;
mod message;
mod tools;

pub use frame::{FrameError, FrameFormat, MAX_FRAME_BYTES, decode, encode, split_frame};
pub use message::*;
pub use tools::*;

/// The protocol version this crate speaks; the handshake refuses any other.
pub const PROTOCOL_VERSION: u32 = 2;

/// The socket a pool listens on unless told otherwise: `<runtime dir>/caldrix/pool.sock`
/// (`$XDG_RUNTIME_DIR`), else `/tmp/caldrix-<uid>/pool.sock`. Every client finds the same pool.
pub fn default_socket(runtime_dir: Option<&std::path::Path>) -> std::path::PathBuf {
    match runtime_dir {
        Some(dir) => dir.join("caldrix/pool.sock"),
        None => {
            let uid = std::fs::metadata("/proc/self")
                .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
                .unwrap_or(0);
            std::path::PathBuf::from(format!("/tmp/caldrix-{uid}/pool.sock"))
        }
    }
}
