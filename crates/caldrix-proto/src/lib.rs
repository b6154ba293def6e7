//! caldrix protocol version 2: the wire types and their framing. `docs/protocol.md` is the
//! description a client in another language is written from.
//!
//! No I/O runtime and no engine here: the daemon and the client read and write frames with
//! their own I/O and use these types and functions on the bytes.

mod frame;
mod message;

pub use frame::{FrameError, FrameFormat, MAX_FRAME_BYTES, decode, encode, split_frame};
pub use message::*;

/// The protocol version this crate speaks; the handshake refuses any other.
pub const PROTOCOL_VERSION: u32 = 2;
