//! An agent's context: the pool holds it; this mirror holds each segment's text, label, pinned
//! flag and the token count the pool gave back. Every change goes to the pool, then its counts
//! come back, then a `segment` event is written.

use aerix_session::{Event, SegmentOp};
use aerix_turn::schemas::ContextIds;
use caldrix_client::Counts;
use caldrix_proto::{self as proto, ContextId, Role};

use crate::runtime::connection::Connection;
use crate::runtime::error::CoreError;
use crate::runtime::sink::Sink;

pub use aerix_session::Label;

#[derive(Clone, Debug)]
pub struct Segment {
    pub id: String,
    pub role: Role,
    pub label: Label,
    pub text: String,
    pub pinned: bool,
    pub tokens: u32,
}

/// The mirror of one pool context.
#[derive(Debug)]
pub struct Context {
    pub id: ContextId,
    pub agent: String,
    pub segments: Vec<Segment>,
    pub total_tokens: u32,
}

impl Context {
    /// A new pool context holding `segments`; each is logged unless `log` is false (a resumed
    /// context whose segments the log already holds).
    pub async fn create(
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        agent: &str,
        member: &str,
        segments: Vec<Segment>,
        log: bool,
    ) -> Result<Context, CoreError> {
        let wire = segments.iter().map(to_wire).collect();
        let counts = client.create_context(member, wire).await?;
        let mut context =
            Context { id: counts.context, agent: agent.to_owned(), segments, total_tokens: 0 };
        context.take_counts(&counts);
        if log {
            for segment in &context.segments {
                sink.event(append_event(agent, segment, None));
            }
        }
        Ok(context)
    }

    fn take_counts(&mut self, counts: &Counts) {
        self.take(&counts.segments, counts.total_tokens);
    }

    fn take(&mut self, counts: &[proto::SegmentCount], total_tokens: u32) {
        for count in counts {
            if let Some(segment) = self.segments.iter_mut().find(|s| s.id == count.id) {
                segment.tokens = count.tokens;
            }
        }
        self.total_tokens = total_tokens;
    }

    pub fn get(&self, id: &str) -> Option<&Segment> {
        self.segments.iter().find(|s| s.id == id)
    }

    /// `{prefix}{n}` for the first n from 1 that no segment holds.
    pub fn fresh_id(&self, prefix: &str) -> String {
        (1..).map(|n| format!("{prefix}{n}")).find(|id| self.get(id).is_none()).unwrap_or_default()
    }

    /// A user segment the runtime adds (a note, a job's output).
    pub async fn add_note(
        &mut self,
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        label: Label,
        text: String,
    ) -> Result<(), CoreError> {
        let id = self.fresh_id(if label == Label::Job { "job" } else { "n" });
        let segment = Segment { id, role: Role::User, label, text, pinned: false, tokens: 0 };
        self.append(client, sink, segment).await
    }

    /// The ids a `context` call may name now, per op, as the tool checks them (`calls.rs`).
    /// Results of the same turn's earlier calls are appended before its `context` call runs
    /// and the tool takes their ids too; the schema does not offer them: a model learns an id
    /// from a result's header, after its turn.
    pub(crate) fn ids(&self) -> ContextIds {
        let ids = |keep: fn(&Segment) -> bool| {
            self.segments.iter().filter(|s| keep(s)).map(|s| s.id.clone()).collect()
        };
        ContextIds { all: ids(|_| true), droppable: ids(|s| !s.label.is_protected()) }
    }

    pub async fn append(
        &mut self,
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        segment: Segment,
    ) -> Result<(), CoreError> {
        self.append_all(client, sink, vec![segment]).await
    }

    /// Appends several segments in one request (one round trip, one count of the new text).
    pub async fn append_all(
        &mut self,
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        segments: Vec<Segment>,
    ) -> Result<(), CoreError> {
        if segments.is_empty() {
            return Ok(());
        }
        let edits = segments.iter().map(|s| proto::Edit::Append { segment: to_wire(s) }).collect();
        let counts = client.edit_context(self.id, edits).await?;
        let first = self.segments.len();
        self.segments.extend(segments);
        self.take_counts(&counts);
        for segment in &self.segments[first..] {
            sink.event(append_event(&self.agent, segment, None));
        }
        Ok(())
    }

    /// A segment the pool appended itself (a generated turn): its count from the generation's
    /// `done` (asked for only when an older pool's `done` lacks it), logged.
    pub async fn appended_by_pool(
        &mut self,
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        segment: Segment,
        done: &proto::Done,
    ) -> Result<(), CoreError> {
        self.segments.push(segment);
        match &done.counts {
            Some(counts) => self.take(&counts.segments, counts.total_tokens),
            None => {
                let counts = client.context_counts(self.id).await?;
                self.take_counts(&counts);
            }
        }
        if let Some(segment) = self.segments.last() {
            sink.event(append_event(&self.agent, segment, Some(&done.usage)));
        }
        Ok(())
    }

    pub async fn replace(
        &mut self,
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        id: &str,
        text: String,
        pinned: Option<bool>,
        label: Option<Label>,
    ) -> Result<(), CoreError> {
        self.replace_each(client, sink, vec![(id.to_owned(), text)], pinned, label).await
    }

    /// Replaces the text of several segments in one request (a compaction pass: one round
    /// trip, one count).
    pub async fn replace_all(
        &mut self,
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        texts: Vec<(String, String)>,
    ) -> Result<(), CoreError> {
        self.replace_each(client, sink, texts, None, None).await
    }

    /// `texts` in one request, each segment given `pinned` and `label` when set.
    async fn replace_each(
        &mut self,
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        texts: Vec<(String, String)>,
        pinned: Option<bool>,
        label: Option<Label>,
    ) -> Result<(), CoreError> {
        if texts.is_empty() {
            return Ok(());
        }
        let edits = texts
            .iter()
            .map(|(id, text)| proto::Edit::Replace { id: id.clone(), text: text.clone(), pinned })
            .collect();
        let counts = client.edit_context(self.id, edits).await?;
        for (id, text) in &texts {
            if let Some(segment) = self.segments.iter_mut().find(|s| &s.id == id) {
                segment.text = text.clone();
                segment.pinned = pinned.unwrap_or(segment.pinned);
                segment.label = label.unwrap_or(segment.label);
            }
        }
        self.take_counts(&counts);
        for (id, text) in texts {
            let tokens = self.get(&id).map(|s| s.tokens);
            sink.event(Event::Segment {
                agent: self.agent.clone(),
                op: SegmentOp::Replace,
                id,
                role: None,
                label,
                text: Some(text),
                tokens,
                pinned,
                recomputed_from: None,
                prompt_tokens: None,
            });
        }
        Ok(())
    }

    pub async fn remove(
        &mut self,
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        id: &str,
    ) -> Result<(), CoreError> {
        self.remove_all(client, sink, &[id.to_owned()]).await
    }

    /// Removes several segments in one request.
    pub async fn remove_all(
        &mut self,
        client: &mut dyn Connection,
        sink: &mut dyn Sink,
        ids: &[String],
    ) -> Result<(), CoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let edits = ids.iter().map(|id| proto::Edit::Remove { id: id.clone() }).collect();
        let counts = client.edit_context(self.id, edits).await?;
        self.segments.retain(|s| !ids.contains(&s.id));
        self.take_counts(&counts);
        for id in ids {
            sink.event(Event::Segment {
                agent: self.agent.clone(),
                op: SegmentOp::Remove,
                id: id.clone(),
                role: None,
                label: None,
                text: None,
                tokens: None,
                pinned: None,
                recomputed_from: None,
                prompt_tokens: None,
            });
        }
        Ok(())
    }
}

fn to_wire(segment: &Segment) -> proto::Segment {
    proto::Segment {
        id: segment.id.clone(),
        role: segment.role,
        text: segment.text.clone(),
        pinned: segment.pinned,
    }
}

fn append_event(agent: &str, segment: &Segment, usage: Option<&proto::Usage>) -> Event {
    Event::Segment {
        agent: agent.to_owned(),
        op: SegmentOp::Append,
        id: segment.id.clone(),
        role: Some(segment.role),
        label: Some(segment.label),
        text: Some(segment.text.clone()),
        tokens: Some(segment.tokens),
        pinned: Some(segment.pinned),
        recomputed_from: usage.and_then(|u| u.recomputed_from),
        prompt_tokens: usage.map(|u| u.prompt_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ids_a_context_call_may_name_are_the_segments_and_drop_leaves_out_the_protected() {
        let segment = |id: &str, label: Label| Segment {
            id: id.to_owned(),
            role: Role::User,
            label,
            text: String::new(),
            pinned: false,
            tokens: 0,
        };
        let labels = [
            ("system", Label::System),
            ("instructions", Label::Instructions),
            ("hooks", Label::Hook),
            ("p1", Label::Prompt),
            ("t1", Label::Turn),
            ("c1", Label::Result),
            ("n1", Label::Note),
            ("job1", Label::Job),
            ("scratchpad", Label::Scratchpad),
            ("c2", Label::Summary),
        ];
        let context = Context {
            id: 1,
            agent: "a1".into(),
            segments: labels.iter().map(|(id, label)| segment(id, *label)).collect(),
            total_tokens: 0,
        };
        let ids = context.ids();
        assert_eq!(ids.all, labels.map(|(id, _)| id.to_owned()));
        assert_eq!(ids.droppable, ["hooks", "t1", "c1", "n1", "job1", "c2"]);
    }
}
