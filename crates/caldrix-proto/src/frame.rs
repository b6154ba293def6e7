//! Frames: a 4-byte big-endian payload length, then the payload, one message encoded as CBOR
//! (the default) or JSON (`--frames json`).

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The largest payload a peer may send; a larger length prefix is refused before any byte of
/// the payload is read.
pub const MAX_FRAME_BYTES: u32 = 16 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameFormat {
    Cbor,
    Json,
}

impl FrameFormat {
    pub fn name(self) -> &'static str {
        match self {
            FrameFormat::Cbor => "cbor",
            FrameFormat::Json => "json",
        }
    }

    /// Guesses a payload's format from its first byte: a JSON message is an object (`{`,
    /// possibly after whitespace); a CBOR message is a map (major type 5, 0xa0..=0xbf).
    fn sniff(payload: &[u8]) -> Option<FrameFormat> {
        match payload.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => Some(FrameFormat::Json),
            Some(0xa0..=0xbf) => Some(FrameFormat::Cbor),
            _ => None,
        }
    }
}

impl std::str::FromStr for FrameFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cbor" => Ok(FrameFormat::Cbor),
            "json" => Ok(FrameFormat::Json),
            other => Err(format!("unknown frame format `{other}` (cbor or json)")),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("a frame of {len} bytes is larger than the limit of {MAX_FRAME_BYTES}")]
    TooLarge { len: u32 },
    #[error("this connection speaks {expected} frames, but a {got} payload arrived")]
    WrongFormat { expected: &'static str, got: &'static str },
    #[error("the {format} payload is not a valid message: {message}")]
    Malformed { format: &'static str, message: String },
    #[error("cannot encode a message: {0}")]
    Encode(String),
}

/// Encodes `message` as one frame: length prefix and payload.
pub fn encode<T: Serialize>(message: &T, format: FrameFormat) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0u8; 4];
    match format {
        FrameFormat::Cbor => ciborium::into_writer(message, &mut out)
            .map_err(|e| FrameError::Encode(e.to_string()))?,
        FrameFormat::Json => serde_json::to_writer(&mut out, message)
            .map_err(|e| FrameError::Encode(e.to_string()))?,
    }
    let len = u32::try_from(out.len() - 4).unwrap_or(u32::MAX);
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge { len });
    }
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}

/// Splits the first whole frame off `buf`: `Ok(Some((payload, consumed)))`, `Ok(None)` when
/// more bytes are needed, or an error for an oversized length prefix.
pub fn split_frame(buf: &[u8]) -> Result<Option<(&[u8], usize)>, FrameError> {
    let Some(prefix) = buf.get(..4) else { return Ok(None) };
    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge { len });
    }
    let end = 4 + len as usize;
    Ok(buf.get(4..end).map(|payload| (payload, end)))
}

/// Decodes one payload (without its length prefix) in the connection's format.
pub fn decode<T: DeserializeOwned>(payload: &[u8], format: FrameFormat) -> Result<T, FrameError> {
    if let Some(got) = FrameFormat::sniff(payload)
        && got != format
    {
        return Err(FrameError::WrongFormat { expected: format.name(), got: got.name() });
    }
    let malformed = |message: String| FrameError::Malformed { format: format.name(), message };
    match format {
        FrameFormat::Cbor => ciborium::from_reader(payload).map_err(|e| malformed(cbor_error(e))),
        FrameFormat::Json => serde_json::from_slice(payload).map_err(|e| malformed(e.to_string())),
    }
}

/// ciborium's errors print as Rust debug text (`Semantic(None, "...")`): a sentence instead.
fn cbor_error(e: ciborium::de::Error<std::io::Error>) -> String {
    use ciborium::de::Error;
    match e {
        Error::Io(_) => "the payload ends in the middle of a value".to_owned(),
        Error::Syntax(at) => format!("the bytes are not CBOR (at byte {at})"),
        Error::Semantic(Some(at), message) => format!("{message} (at byte {at})"),
        Error::Semantic(None, message) => message,
        Error::RecursionLimitExceeded => "the value is nested too deeply".to_owned(),
    }
}
