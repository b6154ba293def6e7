//! What of the generated text may be sent yet. The pool knows no stop strings and sends a
//! tool call's raw text, so the front holds back text that could still be the start of a stop
//! string or of a call (`CALL_OPEN`), sends it once that is decided, and cuts the text at the
//! first stop string met.

use caldrix_proto::CALL_OPEN;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Tools offered and nothing but the start of a call (or blanks) so far.
    Undecided,
    Text,
    /// The reply is calls: none of it is content.
    Calls,
}

#[derive(Debug)]
pub struct Holdback {
    stops: Vec<String>,
    mode: Mode,
    all: String,
    /// Bytes of `all` sent as content.
    sent: usize,
    /// The stop string met, and where the text is cut.
    hit: Option<(String, usize)>,
}

impl Holdback {
    /// `may_call`: the reply may be a call, so its start is held until it is known not to be.
    pub fn new(stops: Vec<String>, may_call: bool) -> Holdback {
        let mode = if may_call { Mode::Undecided } else { Mode::Text };
        Holdback { stops, mode, all: String::new(), sent: 0, hit: None }
    }

    /// Takes a delta; returns the text that may be sent now (often empty).
    pub fn push(&mut self, delta: &str) -> String {
        if self.hit.is_some() {
            return String::new();
        }
        self.all.push_str(delta);
        if self.mode == Mode::Undecided {
            let start = self.all.trim_start();
            if start.starts_with(CALL_OPEN) {
                self.mode = Mode::Calls;
            } else if CALL_OPEN.starts_with(start) {
                return String::new();
            } else {
                self.mode = Mode::Text;
            }
        }
        if self.mode == Mode::Calls {
            return String::new();
        }
        let pending = &self.all[self.sent..];
        // The earliest stop string (the longest of those starting there).
        let found = self
            .stops
            .iter()
            .filter_map(|s| pending.find(s.as_str()).map(|at| (at, s)))
            .min_by_key(|(at, s)| (*at, usize::MAX - s.len()));
        if let Some((at, stop)) = found {
            let out = pending[..at].to_owned();
            let cut = self.sent + at;
            self.hit = Some((stop.clone(), cut));
            self.sent = cut;
            return out;
        }
        let held = self.held_len(pending);
        let out = pending[..pending.len() - held].to_owned();
        self.sent += out.len();
        out
    }

    /// The length of `pending`'s longest suffix that is a proper start of a stop string.
    fn held_len(&self, pending: &str) -> usize {
        pending
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| self.stops.iter().any(|s| s.starts_with(&pending[i..])))
            .map_or(0, |i| pending.len() - i)
    }

    /// The generation ended with `text` (the pool's whole text, which the deltas may not all
    /// have carried). Returns what is left to send: the held text, or the whole reply when it
    /// began like a call and was none (`is_calls` false).
    pub fn finish(&mut self, text: &str, is_calls: bool) -> String {
        if self.hit.is_some() {
            return String::new();
        }
        if let Some(rest) = text.strip_prefix(self.all.as_str())
            && !rest.is_empty()
        {
            let mut out = self.push(rest);
            if self.hit.is_some() {
                return out;
            }
            out.push_str(&self.rest(is_calls));
            return out;
        }
        self.rest(is_calls)
    }

    fn rest(&mut self, is_calls: bool) -> String {
        if is_calls {
            self.mode = Mode::Calls;
            return String::new();
        }
        self.mode = Mode::Text;
        let out = self.all[self.sent..].to_owned();
        self.sent = self.all.len();
        out
    }

    /// The answer's text: all of it, or up to the stop string; nothing for calls.
    pub fn content(&self) -> &str {
        match (&self.hit, self.mode) {
            (Some((_, cut)), _) => &self.all[..*cut],
            (None, Mode::Calls) => "",
            (None, _) => &self.all,
        }
    }

    /// The stop string met, if one was.
    pub fn hit(&self) -> Option<&str> {
        self.hit.as_ref().map(|(s, _)| s.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(h: &mut Holdback, deltas: &[&str]) -> Vec<String> {
        deltas.iter().map(|d| h.push(d)).collect()
    }

    #[test]
    fn a_possible_stop_string_is_held_then_sent_or_cut() {
        let mut h = Holdback::new(vec!["END".into()], false);
        assert_eq!(run(&mut h, &["Hello E", "N", "o", " world"]), ["Hello ", "", "ENo", " world"]);
        assert_eq!(h.finish("Hello ENo world", false), "");
        assert_eq!((h.content(), h.hit()), ("Hello ENo world", None));

        let mut h = Holdback::new(vec!["END".into()], false);
        assert_eq!(run(&mut h, &["abc E", "ND and more", "later"]), ["abc ", "", ""]);
        assert_eq!((h.content(), h.hit()), ("abc ", Some("END")));
        assert_eq!(h.finish("abc END and more", false), "");
    }

    #[test]
    fn a_stop_string_inside_one_delta_cuts_it_and_the_earliest_wins() {
        let mut h = Holdback::new(vec!["\n\n".into(), "b".into()], false);
        assert_eq!(h.push("a\n\nb"), "a");
        assert_eq!(h.hit(), Some("\n\n"));
        // A scripted member's whole reply in its `done` only.
        let mut h = Holdback::new(vec!["STOP".into()], false);
        assert_eq!(h.finish("one STOP two", false), "one ");
        assert_eq!(h.content(), "one ");
    }

    #[test]
    fn the_held_start_of_a_stop_string_is_sent_when_the_generation_ends() {
        let mut h = Holdback::new(vec!["</answer>".into()], false);
        assert_eq!(h.push("x </ans"), "x ");
        assert_eq!(h.finish("x </ans", false), "</ans");
        assert_eq!(h.content(), "x </ans");
    }

    #[test]
    fn multibyte_text_is_held_on_character_boundaries() {
        let mut h = Holdback::new(vec!["é!".into()], false);
        assert_eq!(h.push("café"), "caf");
        assert_eq!(h.push("?"), "é?");
    }

    #[test]
    fn a_call_is_never_content_and_plain_text_flows_once_it_diverges() {
        let mut h = Holdback::new(vec![], true);
        assert_eq!(run(&mut h, &["<tool", "_call>\n{\"name\"", ": 1}"]), ["", "", ""]);
        assert_eq!(h.finish("<tool_call>\n{\"name\": 1}", true), "");
        assert_eq!(h.content(), "");

        let mut h = Holdback::new(vec![], true);
        assert_eq!(run(&mut h, &["<to", "day is", " fine"]), ["", "<today is", " fine"]);
        assert_eq!(h.content(), "<today is fine");

        // It looked like a call and ended as none (max tokens inside it): sent at the end.
        let mut h = Holdback::new(vec![], true);
        assert_eq!(h.push("<tool_call>\n{\"na"), "");
        assert_eq!(h.finish("<tool_call>\n{\"na", false), "<tool_call>\n{\"na");
        assert_eq!(h.content(), "<tool_call>\n{\"na");
    }

    #[test]
    fn stop_strings_do_not_cut_a_call() {
        let mut h = Holdback::new(vec!["}".into()], true);
        assert_eq!(h.push("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"), "");
        assert_eq!(h.hit(), None);
    }
}
