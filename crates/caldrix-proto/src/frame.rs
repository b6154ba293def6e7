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

/// Decodes one payload (without its length prefix) in the connection's format. Beyond what
/// the types take, the payload must be exactly one message of the protocol's shape (see
/// [`check_shape`]): decoders take an array for a struct's fields in order and a CBOR byte
/// string for text, which the protocol never sends, and CBOR has no end of its own.
pub fn decode<T: DeserializeOwned>(payload: &[u8], format: FrameFormat) -> Result<T, FrameError> {
    if let Some(got) = FrameFormat::sniff(payload)
        && got != format
    {
        return Err(FrameError::WrongFormat { expected: format.name(), got: got.name() });
    }
    let malformed = |message: String| FrameError::Malformed { format: format.name(), message };
    match format {
        FrameFormat::Cbor => {
            let mut rest = payload;
            let value: ciborium::Value =
                ciborium::from_reader(&mut rest).map_err(|e| malformed(cbor_error(e)))?;
            if !rest.is_empty() {
                return Err(malformed(format!(
                    "the message ends at byte {} of the payload's {}: a payload holds one message",
                    payload.len() - rest.len(),
                    payload.len()
                )));
            }
            cbor_shape(&value, Place::Message).map_err(malformed)?;
            // ciborium reads a name (a `type`, a key) only through its scratch buffer, 4 KiB
            // by default: a longer unknown `type` got a decoder message instead of being
            // quoted. A buffer as long as the payload holds any of its strings.
            let mut scratch = vec![0u8; payload.len().max(CBOR_SCRATCH_BYTES)];
            ciborium::de::from_reader_with_buffer(payload, &mut scratch)
                .map_err(|e| malformed(cbor_error(e)))
        }
        FrameFormat::Json => {
            // serde_json refuses trailing characters itself.
            let value: serde_json::Value =
                serde_json::from_slice(payload).map_err(|e| malformed(e.to_string()))?;
            json_shape(&value, Place::Message).map_err(malformed)?;
            serde_json::from_slice(payload).map_err(|e| malformed(e.to_string()))
        }
    }
}

/// ciborium's own scratch size, the least a CBOR decode is given.
const CBOR_SCRATCH_BYTES: usize = 4096;

/// The keys whose value is an array in some message (`segments`, `edits`, OneOf `options`, a
/// context's `tools`, and the replies' lists); every other key holds a map or a single value.
const LIST_KEYS: [&str; 8] =
    ["segments", "edits", "options", "tools", "members", "logprobs", "top", "tool_calls"];

/// Where a value stands in a message.
#[derive(Clone, Copy)]
enum Place<'a> {
    Message,
    Key(&'a str),
    Item,
}

impl std::fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Message => f.write_str("the message"),
            Place::Key(key) => write!(f, "`{key}`"),
            Place::Item => f.write_str("an item of a list"),
        }
    }
}

/// The protocol's shape, in either format: the message is a map; an array stands only as the
/// value of a [`LIST_KEYS`] key and holds no array. So a map is never taken from an array.
fn check_shape(place: Place<'_>, is_map: bool, is_array: bool) -> Result<(), String> {
    match place {
        Place::Message if !is_map => {
            Err("the message is not a map: every message is a map with a `type` key".to_owned())
        }
        Place::Key(key) if is_array && !LIST_KEYS.contains(&key) => {
            Err(format!("`{key}` is an array, where the protocol has a map or a single value"))
        }
        Place::Item if is_array => {
            Err("a list holds an array, where the protocol has a map or a single value".to_owned())
        }
        _ => Ok(()),
    }
}

fn json_shape(value: &serde_json::Value, place: Place<'_>) -> Result<(), String> {
    use serde_json::Value as V;
    check_shape(place, value.is_object(), value.is_array())?;
    match value {
        V::Object(map) => map.iter().try_for_each(|(k, v)| json_shape(v, Place::Key(k))),
        V::Array(items) => items.iter().try_for_each(|v| json_shape(v, Place::Item)),
        _ => Ok(()),
    }
}

/// [`check_shape`], and what only CBOR has: the protocol's keys and strings are text strings
/// (major type 3), and it uses no tags.
fn cbor_shape(value: &ciborium::Value, place: Place<'_>) -> Result<(), String> {
    use ciborium::Value as V;
    check_shape(place, value.is_map(), value.is_array())?;
    match value {
        V::Map(entries) => entries.iter().try_for_each(|(k, v)| match k {
            V::Text(key) => cbor_shape(v, Place::Key(key)),
            _ => Err("a map key is not a text string: the protocol's keys are text".to_owned()),
        }),
        V::Array(items) => items.iter().try_for_each(|v| cbor_shape(v, Place::Item)),
        V::Bytes(_) => {
            Err(format!("{place} is a byte string, where the protocol has a text string"))
        }
        V::Tag(tag, _) => Err(format!("{place} carries CBOR tag {tag}: the protocol uses no tags")),
        _ => Ok(()),
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
