//! The status page (`GET /`: plain HTML, inline CSS, no script and nothing loaded from
//! elsewhere, readable at 80 columns on a phone) and the models list in each API's shape.

use std::fmt::Write;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use caldrix_proto::{MemberInfo, PoolStatus};
use serde_json::{Value, json};

use crate::AppState;
use crate::error::Api;

/// `/v1/models`: OpenAI's list, or Anthropic's when the request carries `anthropic-version`.
pub fn models_list(members: &[MemberInfo], created: u64, api: Api) -> Value {
    let data: Vec<Value> = members.iter().map(|m| model_entry(m, created, api)).collect();
    match api {
        Api::OpenAi => json!({ "object": "list", "data": data }),
        Api::Anthropic => json!({
            "data": data,
            "has_more": false,
            "first_id": members.first().map(|m| m.alias.as_str()),
            "last_id": members.last().map(|m| m.alias.as_str()),
        }),
    }
}

/// One model: its id is the alias (the loaded reference names it too).
pub fn model_entry(m: &MemberInfo, created: u64, api: Api) -> Value {
    match api {
        Api::OpenAi => {
            json!({"id": m.alias, "object": "model", "created": created, "owned_by": "caldrix"})
        }
        Api::Anthropic => json!({
            "type": "model",
            "id": m.alias,
            "display_name": if m.reference.is_empty() { &m.alias } else { &m.reference },
            "created_at": rfc3339(created),
        }),
    }
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (the civil calendar from days,
/// Howard Hinnant's algorithm).
fn rfc3339(secs: u64) -> String {
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest / 60 % 60, rest % 60)
}

pub async fn page(State(state): State<AppState>) -> Response {
    let html = match crate::pool::status(&state.pool).await {
        Ok(status) => render(&status),
        Err(e) => render_error(&e.message),
    };
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const HEAD: &str = "<!doctype html>\n<html lang=en><head><meta charset=utf-8>\
<meta name=viewport content=\"width=device-width, initial-scale=1\">\
<title>caldrix pool</title><style>\
body{font:15px/1.4 system-ui,sans-serif;margin:1em auto;max-width:48em;padding:0 .6em}\
h1{font-size:1.3em}h2{font-size:1.1em;margin:1.2em 0 .3em;overflow-wrap:anywhere}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.1em .8em;margin:0}\
dt{color:#555}dd{margin:0;overflow-wrap:anywhere}\
section{border-top:1px solid #ccc}small{color:#555}</style></head><body>\n";

fn bytes(n: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    format!("{:.1} MiB", n as f64 / MIB)
}

/// The page for `status`.
pub fn render(status: &PoolStatus) -> String {
    let mut html = String::from(HEAD);
    let _ = write!(
        html,
        "<h1>caldrix pool</h1>\n<p>{} &middot; {} connection(s) open &middot; {} member(s)</p>\n",
        escape(&status.version),
        status.connections,
        status.members.len()
    );
    if status.members.is_empty() {
        html.push_str("<p>No model is loaded.</p>\n");
    }
    for m in &status.members {
        let i = &m.info;
        let lane = i.lane.map_or("cpu", |l| l.name());
        let store = &m.store;
        let asked = store.hits + store.misses;
        let rate = if asked == 0 {
            "-".to_owned()
        } else {
            format!("{:.0}%", 100.0 * store.hits as f64 / asked as f64)
        };
        let _ = write!(
            html,
            "<section><h2>{alias}</h2><dl>\n\
             <dt>model</dt><dd>{model}</dd>\n\
             <dt>reference</dt><dd>{reference}</dd>\n\
             <dt>lane</dt><dd>{lane}{device}{remote}</dd>\n\
             <dt>window</dt><dd>{window} tokens</dd>\n\
             <dt>generations</dt><dd>{running} running, {queue} queued</dd>\n\
             <dt>contexts</dt><dd>{contexts}</dd>\n\
             <dt>prefix store</dt><dd>{used} of {budget}, {rows} rows in {entries} entries</dd>\n\
             <dt>hits</dt><dd>{hits} hit(s), {misses} miss(es), {rate}</dd>\n\
             </dl></section>\n",
            alias = escape(&i.alias),
            model = escape(&i.model),
            reference = escape(if i.reference.is_empty() { "-" } else { &i.reference }),
            lane = lane,
            // Where the layers went, when the lane is a GPU's.
            device = i.gpu.as_ref().filter(|_| i.lane == Some(caldrix_proto::Lane::Gpu)).map_or(
                String::new(),
                |g| format!(
                    " ({} {}, {} of {} layers)",
                    escape(&g.device),
                    escape(&g.description),
                    g.layers,
                    g.total_layers
                )
            ),
            remote = i
                .remote
                .as_ref()
                .map_or(String::new(), |r| format!(" (remote: {})", escape(&r.url))),
            window = i.context_window,
            queue = i.queue_depth,
            running = m.running.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            contexts = m.contexts,
            used = bytes(store.bytes),
            budget = bytes(store.budget_bytes),
            rows = store.rows,
            entries = store.entries,
            hits = store.hits,
            misses = store.misses,
            rate = rate,
        );
    }
    html.push_str("</body></html>\n");
    html
}

fn render_error(message: &str) -> String {
    format!(
        "{HEAD}<h1>caldrix pool</h1>\n<p>The pool did not answer: {}</p>\n</body></html>\n",
        escape(message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldrix_proto::{Lane, MemberStatus, StoreStatus};

    fn info(alias: &str) -> MemberInfo {
        MemberInfo {
            alias: alias.into(),
            reference: "owner/repo:Q4".into(),
            model: "/models/<b>x</b>.gguf".into(),
            architecture: "llama".into(),
            context_window: 2048,
            footprint_bytes: 0,
            queue_depth: 3,
            json_constraint: true,
            lane: Some(Lane::Gpu),
            threads: None,
            max_batch: None,
            remote: None,
            gpu: Some(caldrix_proto::GpuInfo {
                device: "Vulkan0".into(),
                description: "<card>".into(),
                total_bytes: 8 << 30,
                free_bytes: 7 << 30,
                layers: 31,
                total_layers: 31,
                member_bytes: 182 << 20,
            }),
        }
    }

    #[test]
    fn the_page_shows_members_and_escapes_every_string() {
        let status = PoolStatus {
            version: "caldrix/0.1.0".into(),
            connections: 2,
            members: vec![MemberStatus {
                info: info("smol&\"co\""),
                contexts: 4,
                running: Some(1),
                store: StoreStatus {
                    budget_bytes: 64 << 20,
                    bytes: 1 << 20,
                    entries: 2,
                    rows: 45,
                    bytes_per_row: 23_040,
                    hits: 3,
                    misses: 1,
                    parked_rows: 0,
                },
            }],
        };
        let html = render(&status);
        assert!(html.contains("<meta name=viewport"), "{html}");
        assert!(html.contains("smol&amp;&quot;co&quot;"), "{html}");
        assert!(html.contains("/models/&lt;b&gt;x&lt;/b&gt;.gguf"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        for shown in [
            "gpu (Vulkan0 &lt;card&gt;, 31 of 31 layers)",
            "2048 tokens",
            "1 running, 3 queued",
            "1.0 MiB of 64.0 MiB",
            "3 hit(s), 1 miss(es), 75%",
        ] {
            assert!(html.contains(shown), "{shown}: {html}");
        }
        assert!(
            !html.contains("<script") && !html.contains("http://") && !html.contains("https://")
        );
        assert!(render_error("a <b>").contains("a &lt;b&gt;"));
    }

    #[test]
    fn models_in_both_shapes() {
        let members = [info("smol")];
        let openai = models_list(&members, 0, Api::OpenAi);
        assert_eq!(openai["object"], "list");
        assert_eq!(
            openai["data"][0],
            json!({"id": "smol", "object": "model", "created": 0, "owned_by": "caldrix"})
        );
        let anthropic = models_list(&members, 86_400 * 365 + 3661, Api::Anthropic);
        assert_eq!(anthropic["data"][0]["type"], "model");
        assert_eq!(anthropic["data"][0]["display_name"], "owner/repo:Q4");
        assert_eq!(anthropic["data"][0]["created_at"], "1971-01-01T01:01:01Z");
        assert_eq!(anthropic["has_more"], false);
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
