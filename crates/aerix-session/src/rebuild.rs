//! An agent's context and plan, rebuilt from its events.

use crate::{Event, Label, Role, SegmentOp, SessionError};

/// A segment as the log last described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RebuiltSegment {
    pub id: String,
    pub role: Role,
    pub label: Label,
    pub text: String,
    pub pinned: bool,
    pub tokens: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rebuilt {
    pub segments: Vec<RebuiltSegment>,
    pub plan: Option<String>,
    /// Turns the agent took, over every request of the session.
    pub turns: u32,
    /// The highest call number used (`c7` → 7), so new calls continue the sequence.
    pub calls: u32,
}

/// Replays `agent`'s segment and plan events in order, leaving out the requests a `rewind`
/// left out (their turns and calls still count, so numbers are never reused). A segment
/// appended without its role or label is an error naming it.
pub fn rebuild(events: &[Event], agent: &str) -> Result<Rebuilt, SessionError> {
    let mut out = Rebuilt::default();
    let live = crate::live_mask(events);
    for (event, kept) in events.iter().zip(live).filter(|(e, _)| e.agent() == Some(agent)) {
        match event {
            Event::Segment { .. } | Event::Plan { .. } if !kept => {}
            Event::Segment { op, id, role, label, text, tokens, pinned, .. } => match op {
                SegmentOp::Append => {
                    let incomplete = |missing| SessionError::Incomplete {
                        agent: agent.to_owned(),
                        id: id.clone(),
                        missing,
                    };
                    let role = role.ok_or_else(|| incomplete("role"))?;
                    let label = label.ok_or_else(|| incomplete("label"))?;
                    out.segments.retain(|s| s.id != *id);
                    out.segments.push(RebuiltSegment {
                        id: id.clone(),
                        role,
                        label,
                        text: text.clone().unwrap_or_default(),
                        pinned: pinned.unwrap_or(false),
                        tokens: tokens.unwrap_or(0),
                    });
                }
                SegmentOp::Replace => {
                    if let Some(segment) = out.segments.iter_mut().find(|s| s.id == *id) {
                        if let Some(text) = text {
                            segment.text = text.clone();
                        }
                        if let Some(role) = role {
                            segment.role = *role;
                        }
                        if let Some(label) = label {
                            segment.label = *label;
                        }
                        if let Some(pinned) = pinned {
                            segment.pinned = *pinned;
                        }
                        if let Some(tokens) = tokens {
                            segment.tokens = *tokens;
                        }
                    }
                }
                SegmentOp::Remove => out.segments.retain(|s| s.id != *id),
            },
            Event::Plan { text, .. } => out.plan = Some(text.clone()),
            Event::Message { role: Role::Assistant, turn: Some(_), .. } => out.turns += 1,
            Event::Message { call: Some(call), .. } => {
                if let Some(n) = call.strip_prefix('c').and_then(|n| n.parse::<u32>().ok()) {
                    out.calls = out.calls.max(n);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}
