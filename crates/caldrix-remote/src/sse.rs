//! Server-sent events, decoded from the body's chunks as they come, within the client's bounds:
//! a line, an event (its `data:` lines joined by newlines) and the count of events. Fields other
//! than `data` (`event`, `id`, `retry`) and comment lines (`:` keep-alives) are ignored.

use crate::error::Bound;

#[derive(Debug)]
pub(crate) struct Decoder {
    pending: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    events: usize,
    line_bytes: usize,
    event_bytes: usize,
    max_events: usize,
}

/// What went wrong decoding; the caller adds the URL.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SseError {
    TooLarge(Bound),
    /// An event's data that is not UTF-8 (its first bytes, lossily).
    NotUtf8(String),
}

impl Decoder {
    pub(crate) fn new(line_bytes: usize, event_bytes: usize, max_events: usize) -> Decoder {
        Decoder {
            pending: Vec::new(),
            data: Vec::new(),
            has_data: false,
            events: 0,
            line_bytes,
            event_bytes,
            max_events,
        }
    }

    /// Feeds a chunk of the body; returns the data of each event it completes.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<Vec<String>, SseError> {
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(end) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let line_end = start + end;
            let mut line = &self.pending[start..line_end];
            if line.len() > self.line_bytes {
                return Err(SseError::TooLarge(Bound::Line(self.line_bytes)));
            }
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            if line.is_empty() {
                if self.has_data {
                    out.push(self.finish_event()?);
                }
            } else if let Some(value) = line.strip_prefix(b"data:") {
                let value = value.strip_prefix(b" ").unwrap_or(value);
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
                if self.data.len() > self.event_bytes {
                    return Err(SseError::TooLarge(Bound::Event(self.event_bytes)));
                }
            }
            start = line_end + 1;
        }
        self.pending.drain(..start);
        // A line still open past the bound fails now, not when (if ever) its newline comes.
        if self.pending.len() > self.line_bytes {
            return Err(SseError::TooLarge(Bound::Line(self.line_bytes)));
        }
        Ok(out)
    }

    /// The body ended: an event whose blank line never came is still an event (some servers
    /// end with `data: [DONE]\n` alone).
    pub(crate) fn end(&mut self) -> Result<Vec<String>, SseError> {
        let mut out = self.feed(b"\n")?;
        if self.has_data {
            out.push(self.finish_event()?);
        }
        Ok(out)
    }

    fn finish_event(&mut self) -> Result<String, SseError> {
        self.events += 1;
        if self.events > self.max_events {
            return Err(SseError::TooLarge(Bound::Events(self.max_events)));
        }
        self.has_data = false;
        let data = std::mem::take(&mut self.data);
        String::from_utf8(data).map_err(|e| {
            let bytes = e.into_bytes();
            SseError::NotUtf8(String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder() -> Decoder {
        Decoder::new(64, 128, 3)
    }

    #[test]
    fn events_split_across_chunks_and_crlf() {
        let mut d = decoder();
        assert_eq!(d.feed(b"data: {\"a\"").unwrap(), Vec::<String>::new());
        assert_eq!(
            d.feed(b":1}\r\n\r\n: keep-alive\n\nevent: x\ndata: b\n").unwrap(),
            ["{\"a\":1}"]
        );
        assert_eq!(d.feed(b"data: c\n\n").unwrap(), ["b\nc"]);
    }

    #[test]
    fn a_last_event_without_its_blank_line_is_kept() {
        let mut d = decoder();
        assert!(d.feed(b"data: [DONE]").unwrap().is_empty());
        assert_eq!(d.end().unwrap(), ["[DONE]"]);
    }

    #[test]
    fn each_bound_is_named() {
        let mut d = decoder();
        assert_eq!(d.feed(&[b'x'; 65]), Err(SseError::TooLarge(Bound::Line(64))));
        let mut d = decoder();
        let line = format!("data: {}\n", "y".repeat(50));
        let many = line.repeat(3);
        assert_eq!(d.feed(many.as_bytes()), Err(SseError::TooLarge(Bound::Event(128))));
        let mut d = decoder();
        assert_eq!(
            d.feed(b"data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n"),
            Err(SseError::TooLarge(Bound::Events(3)))
        );
    }
}
