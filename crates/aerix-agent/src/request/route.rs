//! Routing: which shape of work a request gets.

use std::collections::BTreeMap;

use aerix_session::{Event, Route};
use caldrix_proto::{Constraint, Generate, Role, Segment};

use crate::runtime::{CoreError, Runtime};

/// The routing generation's bound.
pub const ROUTE_TOKENS: u32 = 8;

#[derive(Clone, Debug, PartialEq)]
pub struct Routed {
    pub route: Route,
    pub scores: BTreeMap<String, f64>,
    /// What the member answered when it was none of the routes (then the route is `edit`).
    pub raw: Option<String>,
}

/// Classifies `request` on `member` with a throwaway context holding only `routing.md` and the
/// request: at most 8 tokens, OneOf over the routes, with logprobs. Writes a `route` event.
pub async fn route(
    rt: &mut Runtime<'_>,
    agent: &str,
    member: &str,
    request: &str,
) -> Result<Routed, CoreError> {
    let segments = vec![
        Segment {
            id: "routing".into(),
            role: Role::System,
            text: rt.services.prompts.get("routing.md").to_owned(),
            pinned: true,
        },
        Segment { id: "request".into(), role: Role::User, text: request.to_owned(), pinned: false },
    ];
    let counts = rt.client.create_context(member, segments).await?;
    let generate = Generate {
        context: counts.context,
        constraint: Constraint::OneOf {
            options: Route::REQUEST.map(|r| r.as_str().to_owned()).to_vec(),
        },
        max_new_tokens: ROUTE_TOKENS,
        sampling: None,
        logprobs: Some(0),
        append_as: None,
    };
    let done = rt.generate("route", generate).await;
    // The throwaway context goes whatever happened; its rows stay in the prefix store.
    let _ = rt.client.drop_context(counts.context).await;
    let done = done?;
    let answer = done.text.trim().to_owned();
    let mut scores = BTreeMap::new();
    if let Some(one_of) = &done.one_of {
        for (route, score) in Route::REQUEST.iter().zip(&one_of.logprobs) {
            scores.insert(route.as_str().to_owned(), *score);
        }
    }
    let (route, raw) = match Route::REQUEST.into_iter().find(|r| r.as_str() == answer) {
        Some(r) => (r, None),
        None => (Route::Edit, Some(answer)),
    };
    rt.sink.event(Event::Route {
        agent: agent.to_owned(),
        route,
        raw: raw.clone(),
        scores: scores.clone(),
        member: member.to_owned(),
    });
    Ok(Routed { route, scores, raw })
}
