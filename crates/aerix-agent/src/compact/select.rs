//! Which segments a compaction pass replaces, as pure logic over the context's mirror: no pool,
//! no hooks, so every rule is unit-tested here.

use crate::runtime::{Label, Segment};

use crate::compact::Ratios;

/// Segments of this many tokens or fewer are not worth a marker.
pub const SKIP_TOKENS: u32 = 24;
/// What a marker is taken to cost when a pass plans (the pool's count decides after).
pub(crate) const MARKER_TOKENS: u32 = 20;
/// Every marker starts so; a marker is never compacted again.
const MARKER_PREFIX: &str = "[compacted ";

/// An agent's budget on a member with window `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    pub(crate) window: u32,
    /// `soft_ratio × W`: a context above it is compacted before the next turn.
    pub(crate) soft: u32,
    /// `target_ratio × W`: a pass stops at or under it.
    pub(crate) target: u32,
    /// What a turn asks for: `min(max_new_tokens, W / 4)`.
    pub(crate) turn: u32,
}

/// Why a pass runs, as the `compaction` event names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// Over the soft limit before a turn.
    SoftLimit,
    /// No room for the next turn (`tokens + turn` over the window).
    NoRoom,
    /// A result that did not fit the room left.
    Result,
}

impl Why {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Why::SoftLimit => "soft_limit",
            Why::NoRoom => "no_room",
            Why::Result => "result",
        }
    }
}

impl Budget {
    pub(crate) fn new(ratios: &Ratios, max_new_tokens: u32, window: u32) -> Budget {
        // The ratios are checked to lie in (0, 1): the products fit in u32.
        let share = |ratio: f64| (ratio * f64::from(window)).floor() as u32;
        Budget {
            window,
            soft: share(ratios.soft_ratio),
            target: share(ratios.target_ratio),
            turn: max_new_tokens.min(window / 4).max(1),
        }
    }

    /// Whether a context of `tokens` is compacted before a turn, and why.
    pub(crate) fn before_turn(&self, tokens: u32) -> Option<Why> {
        if tokens.saturating_add(self.turn) > self.window {
            Some(Why::NoRoom)
        } else if tokens > self.soft {
            Some(Why::SoftLimit)
        } else {
            None
        }
    }

    /// Tokens a result may take in a context of `tokens`, leaving the next turn its ask.
    pub(crate) fn room(&self, tokens: u32) -> u32 {
        self.window.saturating_sub(tokens).saturating_sub(self.turn)
    }
}

/// Every segment a pass may replace, in the order it replaces them: unpinned tool results
/// oldest first, then unpinned assistant turns oldest first. Everything else (system,
/// instructions, hook context, prompts and briefs, notes, jobs, summaries, the scratchpad) is
/// never compacted, nor a segment of `SKIP_TOKENS` or fewer, nor a marker.
pub(crate) fn order(segments: &[Segment]) -> Vec<usize> {
    let of = |label: Label| {
        segments.iter().enumerate().filter(move |(_, s)| {
            s.label == label
                && !s.pinned
                && s.tokens > SKIP_TOKENS
                && !s.text.starts_with(MARKER_PREFIX)
        })
    };
    of(Label::Result).chain(of(Label::Turn)).map(|(i, _)| i).collect()
}

/// The segments to replace so that a context of `total` tokens comes to `target` or under,
/// each marker taken at `MARKER_TOKENS`: a prefix of `order`, all of it when that is not
/// enough.
pub(crate) fn plan(segments: &[Segment], total: u32, target: u32) -> Vec<usize> {
    let mut left = total;
    let mut chosen = Vec::new();
    for i in order(segments) {
        if left <= target {
            break;
        }
        left = left.saturating_sub(segments[i].tokens.saturating_sub(MARKER_TOKENS));
        chosen.push(i);
    }
    chosen
}

/// The marker that replaces `segment`: `[compacted tool result of call c12 (read, 3210
/// tokens)]`, `[compacted assistant turn t4 (812 tokens)]`.
pub(crate) fn marker(segment: &Segment) -> String {
    match segment.label {
        Label::Turn => {
            format!("[compacted assistant turn {} ({} tokens)]", segment.id, segment.tokens)
        }
        _ => format!(
            "[compacted tool result of call {} ({}, {} tokens)]",
            segment.id,
            result_tool(&segment.text),
            segment.tokens
        ),
    }
}

/// The tool of a result segment, from its `[<tool> <id>]` header.
fn result_tool(text: &str) -> &str {
    text.lines()
        .next()
        .and_then(|line| line.strip_prefix('['))
        .and_then(|line| line.split_whitespace().next())
        .unwrap_or("tool")
}

#[cfg(test)]
mod tests {
    use caldrix_proto::Role;

    use crate::runtime::{Label, Segment};

    use super::{Budget, SKIP_TOKENS, Why, marker, order, plan};
    use crate::compact::Ratios;

    fn seg(id: &str, label: Label, tokens: u32) -> Segment {
        let text = match label {
            Label::Result => format!("[read {id}]\nfile text"),
            _ => "text".to_owned(),
        };
        let role = if label == Label::Turn { Role::Assistant } else { Role::User };
        Segment { id: id.to_owned(), role, label, text, pinned: false, tokens }
    }

    fn ids(segments: &[Segment], picked: &[usize]) -> Vec<String> {
        picked.iter().map(|&i| segments[i].id.clone()).collect()
    }

    /// A context with every kind of segment, each large.
    fn context() -> Vec<Segment> {
        vec![
            seg("system", Label::System, 900),
            seg("instructions", Label::Instructions, 300),
            seg("hooks", Label::Hook, 100),
            seg("prompt", Label::Prompt, 200),
            seg("t1", Label::Turn, 100),
            seg("c1", Label::Result, 400),
            seg("t2", Label::Turn, 120),
            seg("c2", Label::Result, 500),
            seg("n1", Label::Note, 60),
            seg("job1", Label::Job, 80),
            seg("scratchpad", Label::Scratchpad, 90),
            seg("c3", Label::Summary, 200),
            seg("t3", Label::Turn, 110),
            seg("c4", Label::Result, 300),
        ]
    }

    #[test]
    fn results_oldest_first_then_turns_and_nothing_else() {
        let segments = context();
        assert_eq!(ids(&segments, &order(&segments)), ["c1", "c2", "c4", "t1", "t2", "t3"]);
    }

    #[test]
    fn pinned_small_and_compacted_segments_are_skipped() {
        let mut segments = context();
        segments[5].pinned = true; // c1
        segments[7].tokens = SKIP_TOKENS; // c2: 24 tokens, skipped
        segments[13].tokens = SKIP_TOKENS + 1; // c4: 25, kept
        segments[4].text = marker(&segments[4]); // t1 already a marker
        assert_eq!(ids(&segments, &order(&segments)), ["c4", "t2", "t3"]);
    }

    #[test]
    fn a_pass_stops_at_the_target() {
        let segments = context();
        let total: u32 = segments.iter().map(|s| s.tokens).sum(); // 3460
        // c1 frees 380: 3080, still over; c2 frees 480: 2600.
        assert_eq!(ids(&segments, &plan(&segments, total, 3000)), ["c1", "c2"]);
        assert_eq!(ids(&segments, &plan(&segments, total, 3100)), ["c1"]);
        assert!(plan(&segments, total, total).is_empty());
        // Not enough: everything that may go.
        assert_eq!(plan(&segments, total, 0).len(), 6);
    }

    #[test]
    fn markers_name_the_call_tool_turn_and_tokens() {
        let mut result = seg("c12", Label::Result, 3210);
        result.text = "[read c12]\n     1\tfn main() {}".to_owned();
        assert_eq!(marker(&result), "[compacted tool result of call c12 (read, 3210 tokens)]");
        assert_eq!(
            marker(&seg("t4", Label::Turn, 812)),
            "[compacted assistant turn t4 (812 tokens)]"
        );
    }

    #[test]
    fn budgets_of_a_window() {
        // The settings' defaults.
        let ratios = Ratios { soft_ratio: 0.7, target_ratio: 0.5 };
        let budget = Budget::new(&ratios, 1024, 4096);
        assert_eq!((budget.soft, budget.target, budget.turn), (2867, 2048, 1024));
        assert_eq!(Budget::new(&ratios, 1024, 2048).turn, 512);
        assert_eq!(budget.before_turn(2867), None);
        assert_eq!(budget.before_turn(2868), Some(Why::SoftLimit));
        assert_eq!(budget.before_turn(3072), Some(Why::SoftLimit));
        assert_eq!(budget.before_turn(3073), Some(Why::NoRoom));
        assert_eq!(budget.room(3000), 72);
        assert_eq!(budget.room(4000), 0);
    }
}
