//! The launch frame's art: the peak mark and the AERIX wordmark.

/// The peak mark, as many rows as the wordmark.
pub fn peak_mark() -> &'static [&'static str] {
    &["      ▄▄      ", "     ▟██▙     ", "   ▄▟▛  ▜▙▄   ", " ▄▟▛▘    ▝▜▙▄ "]
}

/// The AERIX wordmark.
pub fn wordmark() -> &'static [&'static str] {
    &[
        " ▄███▄  ████▀ ████▄ ██ ▀██ ██▀",
        "██▀ ▀██ ██▄▄  ██ ██ ██  ▀███▀ ",
        "███████ ██▀▀  ████▀ ██  ▄███▄ ",
        "██   ██ █████ ██ ▀█▄██ ▄██ ██▄",
    ]
}

/// How wide the mark beside the wordmark is, with the gap between them.
#[cfg(test)]
pub(crate) const MARK_AND_GAP: usize = 14 + 3;
/// From how many columns the mark stands beside the wordmark, and the wordmark alone.
pub(crate) const MARK_FROM: u16 = 72;
pub(crate) const WORDMARK_FROM: u16 = 58;

#[cfg(test)]
mod tests {
    use super::{MARK_AND_GAP, MARK_FROM, WORDMARK_FROM, peak_mark, wordmark};

    #[test]
    fn the_art_fits_the_widths_it_is_shown_from() {
        let width = |rows: &[&str]| rows.iter().map(|r| r.chars().count()).max().unwrap_or(0);
        assert_eq!(peak_mark().len(), wordmark().len());
        assert!(width(peak_mark()) + 3 == MARK_AND_GAP);
        assert!(usize::from(WORDMARK_FROM) >= width(wordmark()) + 2);
        assert!(usize::from(MARK_FROM) >= MARK_AND_GAP + width(wordmark()) + 2);
    }
}
