//! Timestamps and session ids (the calendar is chrono's).

use std::time::{SystemTime, UNIX_EPOCH};

/// `2026-11-30T04:35:12.123Z`.
pub fn now_rfc3339() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (date, clock) = civil(now.as_secs());
    format!("{date}T{clock}.{:03}Z", now.subsec_millis())
}

/// A new session id: the UTC time to the second and four hex digits, sortable by start:
/// `20261130-043512-9f3a`.
pub fn session_id() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (date, clock) = civil(now.as_secs());
    let salt = (now.subsec_nanos() ^ std::process::id().rotate_left(16)) & 0xffff;
    format!("{}-{}-{salt:04x}", date.replace('-', ""), clock.replace(':', ""))
}

/// The id of a session copied from elsewhere: the time it started (`created`, RFC 3339) and
/// four hex digits of a hash of its origin and `salt`, so it sorts with the sessions of its
/// time; a `created` that does not parse gives the current time.
pub fn id_at(created: &str, origin: &str, salt: u32) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{origin}/{salt}").as_bytes());
    let hash = format!("{:02x}{:02x}", digest[0], digest[1]);
    let digits: String = created.chars().take(19).filter(char::is_ascii_digit).collect();
    let shaped = created.len() >= 19 && digits.len() == 14;
    let (date, clock) = if shaped {
        (digits[..8].to_owned(), digits[8..].to_owned())
    } else {
        let now = session_id();
        (now[..8].to_owned(), now[9..15].to_owned())
    };
    format!("{date}-{clock}-{hash}")
}

/// Whether `id` has the shape `session_id` gives (ids name files: nothing else is accepted).
pub fn is_session_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 20
        && b[8] == b'-'
        && b[15] == b'-'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit)
        && b[16..].iter().all(u8::is_ascii_hexdigit)
}

/// (`YYYY-MM-DD`, `HH:MM:SS`) of a Unix time, UTC.
fn civil(secs: u64) -> (String, String) {
    let at = i64::try_from(secs)
        .ok()
        .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0))
        .unwrap_or_default();
    (at.format("%Y-%m-%d").to_string(), at.format("%H:%M:%S").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), ("1970-01-01".into(), "00:00:00".into()));
        assert_eq!(civil(951_782_400), ("2000-02-29".into(), "00:00:00".into()));
        assert_eq!(civil(1_796_012_112), ("2026-11-30".into(), "04:15:12".into()));
    }

    #[test]
    fn an_imported_id_is_its_start_and_origin() {
        let id = id_at("2026-01-04T12:19:34.059Z", "d25fe96c", 0);
        assert!(id.starts_with("20260104-121934-"), "{id}");
        assert!(is_session_id(&id), "{id}");
        assert_eq!(id, id_at("2026-01-04T12:19:34.059Z", "d25fe96c", 0));
        assert_ne!(id, id_at("2026-01-04T12:19:34.059Z", "d25fe96c", 1));
        assert!(is_session_id(&id_at("yesterday", "x", 0)));
    }

    #[test]
    fn ids_have_their_shape() {
        let id = session_id();
        assert!(is_session_id(&id), "{id}");
        for bad in ["../x", "20261130-043512-9f3", "20261130_043512-9f3a", ""] {
            assert!(!is_session_id(bad), "{bad}");
        }
    }
}
