//! A session's requests (each `session.start` opens one, numbered from 1) and which of them a
//! `session.rewind` event left out of the conversation.

use crate::Event;

/// One request of a session, as `aerix rewind --list` and `/rewind` show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// From 1, in the log's order; rewound requests keep their numbers.
    pub number: u32,
    pub prompt: String,
    /// A later `rewind` left it out of the conversation.
    pub rewound: bool,
}

/// The request each event belongs to: 0 before the first `session.start`, then its number.
fn numbered(events: &[Event]) -> impl Iterator<Item = (u32, &Event)> {
    let mut number = 0;
    events.iter().map(move |event| {
        if matches!(event, Event::SessionStart { .. }) {
            number += 1;
        }
        (number, event)
    })
}

/// The session's requests, oldest first.
pub fn requests(events: &[Event]) -> Vec<Request> {
    let mut out: Vec<Request> = Vec::new();
    for (_, event) in numbered(events) {
        match event {
            Event::SessionStart { prompt, .. } => out.push(Request {
                number: out.len() as u32 + 1,
                prompt: prompt.clone(),
                rewound: false,
            }),
            Event::Rewind { to, conversation: true, .. } => {
                for request in out.iter_mut().filter(|r| r.number >= *to) {
                    request.rewound = true;
                }
            }
            _ => {}
        }
    }
    out
}

/// The events of the requests no rewind left out, in order (the `session.rewind` events too). What a
/// resumed session's context is rebuilt from, and what `aerix tune` learns from.
pub fn live(events: &[Event]) -> Vec<&Event> {
    events.iter().zip(live_mask(events)).filter(|(_, kept)| *kept).map(|(e, _)| e).collect()
}

/// For each event, whether its request is live (not left out by a rewind).
pub fn live_mask(events: &[Event]) -> Vec<bool> {
    let rewound: Vec<u32> =
        requests(events).into_iter().filter(|r| r.rewound).map(|r| r.number).collect();
    numbered(events).map(|(n, _)| !rewound.contains(&n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SegmentOp;

    fn start(prompt: &str) -> Event {
        Event::SessionStart {
            session: "s".into(),
            project: "p".into(),
            cwd: "/".into(),
            model: "m".into(),
            decision: None,
            prompt: prompt.into(),
            resumed: prompt != "one",
            version: "0".into(),
            profile: None,
            profile_branch: None,
            profile_commit: None,
            start_commit: None,
        }
    }

    fn segment(id: &str) -> Event {
        Event::Segment {
            agent: "a1".into(),
            op: SegmentOp::Append,
            id: id.into(),
            role: Some(crate::Role::User),
            label: Some(crate::Label::Prompt),
            text: Some(id.into()),
            tokens: None,
            pinned: None,
            recomputed_from: None,
            prompt_tokens: None,
        }
    }

    #[test]
    fn a_rewind_leaves_out_its_request_and_the_later_ones() {
        let rewind = |to, conversation| Event::Rewind { to, files: true, conversation };
        let events = vec![
            start("one"),
            segment("s1"),
            start("two"),
            segment("s2"),
            start("three"),
            segment("s3"),
            rewind(2, true),
            start("four"),
            segment("s4"),
            rewind(4, false),
        ];
        let listed = requests(&events);
        let flags: Vec<(u32, &str, bool)> =
            listed.iter().map(|r| (r.number, r.prompt.as_str(), r.rewound)).collect();
        assert_eq!(
            flags,
            [(1, "one", false), (2, "two", true), (3, "three", true), (4, "four", false)]
        );
        let rebuilt = crate::rebuild(&events, "a1").unwrap();
        let ids: Vec<&str> = rebuilt.segments.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["s1", "s4"], "a files-only rewind keeps the conversation");
    }
}
