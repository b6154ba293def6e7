//! What keeps a web page out: a browser can send a "simple" cross-site request (a `text/plain`
//! POST, an image's GET) to a loopback port without asking first, and in single-user mode such a
//! request needs no token. Every endpoint refuses a request a browser marks as coming from a
//! page elsewhere (`Origin`, `Sec-Fetch-Site`), and the hook endpoint takes only JSON, which no
//! page can send without the CORS preflight this server never answers. Clients that are not
//! browsers (the hook command, curl, MCP clients) send neither header and are not affected.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The header a browser sends to say how the request's initiator relates to its target.
const SEC_FETCH_SITE: &str = "sec-fetch-site";

/// Why a request was refused before any handler read it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A page whose origin is not loopback (or an opaque `null` origin) sent it.
    #[error(
        "refused: the request comes from a web page at `{0}` (its Origin header); ai-memory answers only requests with no Origin or a loopback one (http or https on localhost, 127.0.0.1 or [::1], any port)"
    )]
    ForeignOrigin(String),
    /// The browser says the page that sent it is on another site.
    #[error(
        "refused: the browser marks the request `Sec-Fetch-Site: {0}`; ai-memory answers only requests the browser marks same-origin, same-site or none (typed by the user)"
    )]
    CrossSite(String),
    /// A hook event in another media type (a browser's `text/plain` form of one, say).
    #[error(
        "the hook endpoint takes only `Content-Type: application/json`, not {0} (a browser can send text/plain to any address without asking)"
    )]
    NotJson(String),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let status = match self {
            Refusal::ForeignOrigin(_) | Refusal::CrossSite(_) => StatusCode::FORBIDDEN,
            Refusal::NotJson(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        };
        (status, axum::Json(serde_json::json!({ "error": self.to_string() }))).into_response()
    }
}

/// Refuses a request sent by a page that is not on a loopback origin, or that the browser marks
/// `cross-site`. Every `Origin` and `Sec-Fetch-Site` value is checked (a repeated header too).
pub fn check_site(headers: &HeaderMap) -> Result<(), Refusal> {
    for value in headers.get_all(header::ORIGIN) {
        let text = value.to_str().unwrap_or("");
        if !is_loopback_origin(text) {
            return Err(Refusal::ForeignOrigin(quote(value.as_bytes())));
        }
    }
    for value in headers.get_all(SEC_FETCH_SITE) {
        let text = value.to_str().unwrap_or("");
        // `same-site` stays: to a browser every port of one host is one site, and a page on
        // another localhost port is the user's own (its Origin is checked above); an unknown
        // value is not trusted.
        if !["same-origin", "same-site", "none"].iter().any(|v| text.eq_ignore_ascii_case(v)) {
            return Err(Refusal::CrossSite(quote(value.as_bytes())));
        }
    }
    Ok(())
}

/// Refuses a body whose `Content-Type` is not `application/json` (parameters such as
/// `; charset=utf-8` allowed), or that has none: a page's `fetch` of a `Blob` sends none.
pub fn check_json(headers: &HeaderMap) -> Result<(), Refusal> {
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        let n = headers.get_all(header::CONTENT_TYPE).iter().count();
        return Err(Refusal::NotJson(if n == 0 {
            "a request without one".into()
        } else {
            format!("{n} Content-Type headers")
        }));
    };
    let text = value.to_str().unwrap_or("");
    let essence = text.split_once(';').map_or(text, |(essence, _)| essence).trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(Refusal::NotJson(format!("`{}`", quote(value.as_bytes()))))
    }
}

/// An origin serialized as a browser does (`scheme://host[:port]`) whose scheme is http or
/// https and whose host is a loopback name the Host check also takes. `null` (a sandboxed
/// frame, a `file:` page, a redirect across origins: any site can make one) is not.
fn is_loopback_origin(origin: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else { return false };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let host = match authority.strip_prefix('[') {
        // An IPv6 literal: `[::1]` and an optional port.
        Some(rest) => match rest.split_once(']') {
            Some((ip, "")) => ip,
            Some((ip, port)) if port.strip_prefix(':').is_some_and(is_port) => ip,
            _ => return false,
        },
        None => match authority.split_once(':') {
            Some((host, port)) if is_port(port) => host,
            Some(_) => return false,
            None => authority,
        },
    };
    ["localhost", "127.0.0.1", "::1"].iter().any(|name| host.eq_ignore_ascii_case(name))
}

/// A port: decimal digits that make a u16.
fn is_port(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && text.parse::<u16>().is_ok()
}

/// A header's value for a message: lossy UTF-8, control characters escaped, at most 200 bytes.
fn quote(bytes: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(bytes).escape_debug().collect();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{} ...", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn loopback_origins_pass_and_every_other_is_refused() {
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1:7434",
            "http://[::1]:7434",
            "https://localhost",
            "HTTP://LOCALHOST:1",
            "http://[::1]",
        ] {
            assert!(is_loopback_origin(ok), "{ok}");
        }
        for bad in [
            "null",
            "",
            "https://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "http://localhost:80@evil.example",
            "http://evil.example#localhost",
            "file://localhost",
            "chrome-extension://abc",
            "http://127.0.0.2:7434",
            "http://sub.localhost:3000",
            "http://localhost:99999",
            "http://localhost:",
            "http://[::1]x",
            "http://[::2]:80",
            "http://0.0.0.0:7434",
        ] {
            assert!(!is_loopback_origin(bad), "{bad}");
        }
    }

    #[test]
    fn a_request_without_browser_headers_passes_and_each_browser_mark_is_judged() {
        assert_eq!(check_site(&HeaderMap::new()), Ok(()));
        assert_eq!(check_site(&headers(&[("origin", "http://localhost:5173")])), Ok(()));
        for site in ["same-origin", "same-site", "none"] {
            assert_eq!(check_site(&headers(&[("sec-fetch-site", site)])), Ok(()), "{site}");
        }
        let e = check_site(&headers(&[("origin", "https://evil.example")])).unwrap_err();
        assert!(e.to_string().contains("`https://evil.example`"), "{e}");
        let e = check_site(&headers(&[("sec-fetch-site", "cross-site")])).unwrap_err();
        assert_eq!(e, Refusal::CrossSite("cross-site".into()));
        // A repeated header is judged by every value.
        let two = headers(&[("origin", "http://localhost"), ("origin", "null")]);
        assert_eq!(check_site(&two), Err(Refusal::ForeignOrigin("null".into())));
        // A loopback origin the browser still marks cross-site (127.0.0.1 calling localhost).
        let mixed =
            headers(&[("origin", "http://127.0.0.1:3000"), ("sec-fetch-site", "cross-site")]);
        assert!(matches!(check_site(&mixed), Err(Refusal::CrossSite(_))));
    }

    #[test]
    fn only_json_is_a_hook_body() {
        for ok in ["application/json", "application/json; charset=utf-8", "Application/JSON ;x=1"] {
            assert_eq!(check_json(&headers(&[("content-type", ok)])), Ok(()), "{ok}");
        }
        for bad in
            ["text/plain", "text/plain;charset=UTF-8", "application/jsonx", "multipart/form-data"]
        {
            let e = check_json(&headers(&[("content-type", bad)])).unwrap_err();
            assert!(e.to_string().contains(&format!("not `{bad}`")), "{e}");
        }
        let e = check_json(&HeaderMap::new()).unwrap_err();
        assert!(e.to_string().contains("without one"), "{e}");
        let two = headers(&[("content-type", "application/json"), ("content-type", "text/plain")]);
        assert!(check_json(&two).is_err());
    }

    #[test]
    fn a_quoted_header_is_one_bounded_line() {
        let long = format!("http://{}\u{7}", "a".repeat(500));
        let q = quote(long.as_bytes());
        assert!(q.len() < 220 && q.ends_with(" ..."), "{q}");
        assert_eq!(quote(b"a\nb"), "a\\nb");
    }
}
