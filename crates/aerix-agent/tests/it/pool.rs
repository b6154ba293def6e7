//! A scripted pool: every connection's generations answered by one function of what the
//! context holds, and a sink that keeps the events.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use aerix_agent::runtime::{Connect, Connection, CoreError, Pending, Sink};
use aerix_session::Event;
use aerix_tools::Cancel;
use caldrix_client::Counts;
use caldrix_proto::{ContextId, Done, Edit, Generate, MemberInfo, Role, Segment, StopReason};

use crate::contexts::Contexts;

/// What a generation is answered from.
pub struct Reply<'a> {
    /// Sampled (an attempt after the first), not greedy.
    pub sampled: bool,
    /// The agent's own turns before this one in its context.
    pub turn: usize,
    /// Every user segment of the context, joined (the brief, a retry's reasons, results).
    pub context: &'a str,
}

type Script = dyn Fn(Reply<'_>) -> String + Send + Sync;

/// The pool; each connection shares its script and state.
#[derive(Clone)]
pub struct Pool {
    script: Arc<Script>,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    contexts: Contexts,
    /// Generations so far, by context.
    generated: HashMap<ContextId, usize>,
    /// Each agent's context as its first own turn saw it.
    briefs: Vec<String>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pool")
    }
}

impl Pool {
    pub fn new(script: impl Fn(Reply<'_>) -> String + Send + Sync + 'static) -> Arc<Pool> {
        Arc::new(Pool { script: Arc::new(script), state: Arc::default() })
    }

    pub fn client(&self) -> Client {
        Client { pool: self.clone() }
    }

    pub fn briefs(&self) -> Vec<String> {
        self.state().briefs.clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One connection to the pool.
pub struct Client {
    pool: Pool,
}

impl Connect for Pool {
    fn connect<'a>(&'a self, _: &'a Cancel) -> Pending<'a, Box<dyn Connection>> {
        let client = self.client();
        Box::pin(async move { Ok(Box::new(client) as Box<dyn Connection>) })
    }
}

impl Connection for Client {
    fn create_context(&mut self, _member: &str, segments: Vec<Segment>) -> Pending<'_, Counts> {
        let counts = self.pool.state().contexts.create(segments);
        Box::pin(async move { counts })
    }

    fn edit_context(&mut self, context: ContextId, edits: Vec<Edit>) -> Pending<'_, Counts> {
        let counts = self.pool.state().contexts.edit(context, edits);
        Box::pin(async move { counts })
    }

    fn context_counts(&mut self, context: ContextId) -> Pending<'_, Counts> {
        let counts = self.pool.state().contexts.counts(context);
        Box::pin(async move { counts })
    }

    fn drop_context(&mut self, context: ContextId) -> Pending<'_, ()> {
        self.pool.state().contexts.drop_context(context);
        Box::pin(async { Ok(()) })
    }

    fn members(&mut self) -> Pending<'_, Vec<MemberInfo>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn generate<'a>(
        &'a mut self,
        generate: Generate,
        cancel: &'a Cancel,
        _streamed: &'a mut (dyn FnMut() + Send),
    ) -> Pending<'a, Done> {
        if cancel.is_cancelled() {
            return Box::pin(async { Err(CoreError::Cancelled) });
        }
        let done = self.answer(generate);
        Box::pin(async move { done })
    }
}

impl Client {
    fn answer(&self, generate: Generate) -> Result<Done, CoreError> {
        let (context, turn) = {
            let mut state = self.pool.state();
            let segments = state.contexts.segments(generate.context)?;
            let users: Vec<&str> =
                segments.iter().filter(|s| s.role == Role::User).map(|s| s.text.as_str()).collect();
            let users = users.join("\n\n");
            let generated = state.generated.entry(generate.context).or_default();
            let turn = *generated;
            *generated += 1;
            (users, turn)
        };
        let text = (self.pool.script)(Reply {
            sampled: generate.sampling.is_some(),
            turn,
            context: &context,
        });
        let mut state = self.pool.state();
        if turn == 0 {
            state.briefs.push(context.clone());
        }
        state.contexts.reply(&generate, text, StopReason::EndOfTurn)
    }
}

/// Keeps every event.
#[derive(Default)]
pub struct Recorded {
    pub events: Vec<Event>,
}

impl Sink for Recorded {
    fn event(&mut self, event: Event) {
        self.events.push(event);
    }

    fn spool(&mut self, _: &str, _: &str) -> Option<PathBuf> {
        None
    }
}
