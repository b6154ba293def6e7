//! A request's one connection to the pool: resolve the model, create the context, generate
//! (deltas through the `Holdback` to an event channel), drop the context. A stop string met or
//! the HTTP client gone sends `cancel`, so the member is free at its next step; the connection
//! then reads the generation's `done` and drops the context, in a task of its own that outlives
//! the HTTP request.

use std::time::Duration;

use caldrix_client::{Client, ClientError, FRAME_TIMEOUT};
use caldrix_proto::{
    ContextId, Done, ErrorKind, FrameFormat, Generate, MemberInfo, Reply, Request, StopReason,
};
use tokio::sync::mpsc::UnboundedSender;

use crate::error::{ApiError, Class};
use crate::holdback::Holdback;
use crate::translate::{Finish, Outcome, Spec, Started, Usage, cut_logprobs};

/// How long a cancelled generation's `done` is waited for before the connection is closed
/// (the pool then notices the closed socket and cancels it itself).
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// What a generation tells the HTTP side, in order: `Started`, then `Text` pieces, then
/// `Finished` or `Failed` (`Failed` may come first: before the context exists).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Started(Started),
    Text(String),
    Finished(Outcome),
    Failed(ApiError),
}

/// Where the pool is.
#[derive(Debug, Clone)]
pub struct PoolAddr {
    pub socket: std::path::PathBuf,
    pub frames: FrameFormat,
}

impl PoolAddr {
    pub async fn connect(&self) -> Result<Client, ApiError> {
        Ok(Client::connect(&self.socket, self.frames, "caldrix-http").await?)
    }
}

/// The member `model` names: an alias, or the reference it was loaded from; else a 404 listing
/// the loaded models.
pub fn resolve<'a>(members: &'a [MemberInfo], model: &str) -> Result<&'a MemberInfo, ApiError> {
    members
        .iter()
        .find(|m| m.alias == model)
        .or_else(|| members.iter().find(|m| !m.reference.is_empty() && m.reference == model))
        .ok_or_else(|| {
            let loaded: Vec<String> = members.iter().map(|m| format!("`{}`", m.alias)).collect();
            let listed = if loaded.is_empty() { "none".to_owned() } else { loaded.join(", ") };
            ApiError {
                param: Some("model".into()),
                ..ApiError::new(
                    Class::NotFound,
                    format!("the model `{model}` is not loaded in the pool (loaded: {listed})"),
                )
            }
            .with_code("model_not_found")
        })
}

/// `max_new_tokens` for a prompt of `prompt` tokens: the asked number, which must fit the
/// window (`clamp`: cut to fit instead), or the rest of the window.
pub fn max_new_tokens(
    asked: Option<u32>,
    prompt: u32,
    window: u32,
    clamp: bool,
    key: &str,
) -> Result<u32, ApiError> {
    let room = window.saturating_sub(prompt);
    if room == 0 {
        return Err(ApiError::bad(format!(
            "the prompt has {prompt} tokens but the model's window holds {window}"
        ))
        .with_code("context_length_exceeded"));
    }
    match asked {
        None => Ok(room),
        Some(0) => Err(ApiError::field(key, format!("`{key}` must be at least 1"))),
        Some(n) if n <= room => Ok(n),
        Some(_) if clamp => Ok(room),
        Some(n) => Err(ApiError::field(
            key,
            format!(
                "`{key}` is {n} but the prompt has {prompt} tokens and the model's window holds \
                 {window}: at most {room} can be generated"
            ),
        )
        .with_code("context_length_exceeded")),
    }
}

/// Options the generation needs besides the spec.
#[derive(Debug, Clone)]
pub struct Run {
    pub pool: PoolAddr,
    pub clamp_max_tokens: bool,
    /// The request field max tokens came from (named in its errors).
    pub max_tokens_key: &'static str,
}

/// Runs `spec` on the pool, telling `events` what happens. Returns when the generation is over
/// and its context dropped (or the pool failed).
pub async fn generate(run: Run, spec: Spec, events: UnboundedSender<Event>) {
    let mut client = match run.pool.connect().await {
        Ok(c) => c,
        Err(e) => {
            let _ = events.send(Event::Failed(e));
            return;
        }
    };
    let mut context = None;
    let result = generate_on(&mut client, &run, spec, &events, &mut context).await;
    match result {
        Ok(Closing::Clean) => {
            if let Some(id) = context {
                drop_context(&mut client, id, false).await;
            }
        }
        Ok(Closing::AfterCancel) => {
            if let Some(id) = context {
                drop_context(&mut client, id, true).await;
            }
        }
        Err(e) => {
            let _ = events.send(Event::Failed(e));
            // The connection may be out of step: a fresh one drops the context.
            drop(client);
            if let Some(id) = context
                && let Ok(mut fresh) = run.pool.connect().await
            {
                drop_context(&mut fresh, id, false).await;
            }
        }
    }
}

enum Closing {
    Clean,
    /// A `cancel` was sent: the pool may answer it with an error after the `done`.
    AfterCancel,
}

async fn generate_on(
    client: &mut Client,
    run: &Run,
    spec: Spec,
    events: &UnboundedSender<Event>,
    context: &mut Option<ContextId>,
) -> Result<Closing, ApiError> {
    let members = client.members().await?;
    let member = resolve(&members, &spec.model)?;
    let create = Request::ContextCreate {
        member: member.alias.clone(),
        segments: spec.segments.clone(),
        tools: spec.tools.clone(),
    };
    let total_tokens = match client.request(&create).await? {
        Reply::Context { context: id, total_tokens, .. } => {
            *context = Some(id);
            total_tokens
        }
        other => return Err(ClientError::Unexpected(format!("{other:?}")).into()),
    };
    let max_new_tokens = max_new_tokens(
        spec.max_tokens,
        total_tokens,
        member.context_window,
        run.clamp_max_tokens,
        run.max_tokens_key,
    )?;
    if events.send(Event::Started(Started { prompt_tokens: total_tokens })).is_err() {
        return Ok(Closing::Clean);
    }
    let generate = Generate {
        context: context.unwrap_or_default(),
        constraint: spec.constraint.clone(),
        max_new_tokens,
        sampling: Some(spec.sampling),
        logprobs: spec.logprobs,
        append_as: None,
    };
    client.send(&Request::Generate(generate)).await?;
    let mut holdback = Holdback::new(spec.stop.clone(), spec.may_call());
    let mut cancelled = false;
    let mut gone = false;
    let done = loop {
        tokio::select! {
            reply = client.recv(if cancelled { CANCEL_GRACE } else { FRAME_TIMEOUT }) => match reply? {
                Reply::Delta { text } => {
                    let out = holdback.push(&text);
                    if !out.is_empty() && !gone && events.send(Event::Text(out)).is_err() {
                        gone = true;
                    }
                    if (holdback.hit().is_some() || gone) && !cancelled {
                        client.send(&Request::Cancel {}).await?;
                        cancelled = true;
                    }
                }
                Reply::Progress { .. } => {}
                Reply::Done(done) => break done,
                other => return Err(ClientError::Unexpected(format!("{other:?}")).into()),
            },
            () = events.closed(), if !gone => {
                // The HTTP client left: its generation is cancelled, the member freed at its
                // next step.
                gone = true;
                if !cancelled {
                    client.send(&Request::Cancel {}).await?;
                    cancelled = true;
                }
            }
        }
    };
    if !gone {
        let outcome = outcome(&mut holdback, done, events);
        let _ = events.send(Event::Finished(outcome));
    }
    Ok(if cancelled { Closing::AfterCancel } else { Closing::Clean })
}

/// The outcome of `done`; sends the text the holdback still held.
fn outcome(holdback: &mut Holdback, done: Done, events: &UnboundedSender<Event>) -> Outcome {
    let is_calls = !done.tool_calls.is_empty();
    let rest = holdback.finish(&done.text, is_calls);
    if !rest.is_empty() {
        let _ = events.send(Event::Text(rest));
    }
    let text = holdback.content().to_owned();
    let finish = match (holdback.hit(), is_calls, done.stop) {
        (Some(stop), _, _) => Finish::Stop(stop.to_owned()),
        (None, true, _) => Finish::ToolCalls,
        (None, false, StopReason::MaxTokens | StopReason::ContextFull) => Finish::Length,
        (None, false, _) => Finish::EndTurn,
    };
    let logprobs = done.logprobs.map(|lps| match holdback.hit() {
        Some(_) => cut_logprobs(lps, text.len()),
        None => lps,
    });
    Outcome {
        text,
        tool_calls: done.tool_calls,
        finish,
        usage: Usage {
            prompt: done.usage.prompt_tokens,
            completion: done.usage.completion_tokens,
            cached: done.usage.recomputed_from.unwrap_or(0),
        },
        logprobs,
    }
}

/// Drops the context. After a `cancel` the pool may first answer that cancel with an error
/// (it arrived once the generation was over): that one answer is skipped.
async fn drop_context(client: &mut Client, id: ContextId, after_cancel: bool) {
    if let Err(e) = client.send(&Request::ContextDrop { context: id }).await {
        tracing::debug!("could not drop context {id}: {e}");
        return;
    }
    for _ in 0..2 {
        match client.recv(CANCEL_GRACE).await {
            Ok(_) => return,
            Err(ClientError::Pool { kind: ErrorKind::BadRequest, .. }) if after_cancel => continue,
            Err(e) => {
                tracing::debug!("could not drop context {id}: {e}");
                return;
            }
        }
    }
}

/// The members and the pool's status, for `/v1/models` and the status page.
pub async fn members(pool: &PoolAddr) -> Result<Vec<MemberInfo>, ApiError> {
    Ok(pool.connect().await?.members().await?)
}

pub async fn status(pool: &PoolAddr) -> Result<caldrix_proto::PoolStatus, ApiError> {
    Ok(pool.connect().await?.status().await?)
}

/// Counts a conversation's prompt tokens (Anthropic's `count_tokens`): a context made and
/// dropped.
pub async fn count(pool: &PoolAddr, spec: &Spec) -> Result<u32, ApiError> {
    let mut client = pool.connect().await?;
    let members = client.members().await?;
    let member = resolve(&members, &spec.model)?;
    let create = Request::ContextCreate {
        member: member.alias.clone(),
        segments: spec.segments.clone(),
        tools: spec.tools.clone(),
    };
    match client.request(&create).await? {
        Reply::Context { context, total_tokens, .. } => {
            drop_context(&mut client, context, false).await;
            Ok(total_tokens)
        }
        other => Err(ClientError::Unexpected(format!("{other:?}")).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldrix_proto::ToolCall;

    fn member(alias: &str, reference: &str) -> MemberInfo {
        MemberInfo {
            alias: alias.into(),
            reference: reference.into(),
            model: "/m/model.gguf".into(),
            architecture: "llama".into(),
            context_window: 2048,
            footprint_bytes: 0,
            queue_depth: 0,
            json_constraint: true,
            lane: None,
            threads: None,
            max_batch: None,
            remote: None,
            gpu: None,
        }
    }

    #[test]
    fn a_model_is_an_alias_or_a_reference_else_a_404_listing_them() {
        let members = [member("smol", "HuggingFaceTB/SmolLM2:Q4"), member("big", "")];
        assert_eq!(resolve(&members, "smol").unwrap().alias, "smol");
        assert_eq!(resolve(&members, "HuggingFaceTB/SmolLM2:Q4").unwrap().alias, "smol");
        let e = resolve(&members, "gpt-4").unwrap_err();
        assert_eq!(e.class, Class::NotFound);
        assert_eq!(e.code, Some("model_not_found"));
        assert!(
            e.message.contains("`gpt-4`") && e.message.contains("`smol`, `big`"),
            "{}",
            e.message
        );
        assert!(resolve(&[], "x").unwrap_err().message.contains("loaded: none"));
        assert!(resolve(&members, "").is_err(), "an empty reference matches nothing");
    }

    #[test]
    fn max_tokens_must_fit_the_window() {
        assert_eq!(max_new_tokens(None, 100, 2048, false, "max_tokens").unwrap(), 1948);
        assert_eq!(max_new_tokens(Some(10), 100, 2048, false, "max_tokens").unwrap(), 10);
        let e = max_new_tokens(Some(4000), 100, 2048, false, "max_tokens").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_tokens"));
        for n in ["4000", "100 tokens", "2048", "at most 1948"] {
            assert!(e.message.contains(n), "{}", e.message);
        }
        assert_eq!(max_new_tokens(Some(4000), 100, 2048, true, "max_tokens").unwrap(), 1948);
        let full = max_new_tokens(None, 2048, 2048, false, "max_tokens").unwrap_err();
        assert_eq!(full.code, Some("context_length_exceeded"));
        assert!(max_new_tokens(Some(0), 1, 2048, false, "max_tokens").is_err());
    }

    fn done(text: &str, stop: StopReason, calls: Vec<ToolCall>) -> Done {
        Done {
            text: text.into(),
            stop,
            usage: caldrix_proto::Usage {
                prompt_tokens: 30,
                completion_tokens: 5,
                recomputed_from: Some(12),
                prefill_ms: 1.0,
                decode_ms: 1.0,
            },
            one_of: None,
            logprobs: None,
            tool_calls: calls,
            counts: None,
        }
    }

    #[test]
    fn a_done_becomes_an_outcome() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut h = Holdback::new(vec![], false);
        let o = outcome(&mut h, done("Hi", StopReason::EndOfTurn, vec![]), &tx);
        assert_eq!((o.text.as_str(), o.finish.clone()), ("Hi", Finish::EndTurn));
        assert_eq!(o.usage, Usage { prompt: 30, completion: 5, cached: 12 });
        assert_eq!(rx.try_recv().unwrap(), Event::Text("Hi".into()));

        let mut h = Holdback::new(vec![], false);
        let o = outcome(&mut h, done("Hi", StopReason::MaxTokens, vec![]), &tx);
        assert_eq!(o.finish, Finish::Length);

        let call = ToolCall { name: "read".into(), arguments: "{}".into() };
        let text = caldrix_proto::write_tool_calls(std::slice::from_ref(&call));
        let mut h = Holdback::new(vec![], true);
        let _ = h.push(&text);
        let o = outcome(&mut h, done(&text, StopReason::EndOfTurn, vec![call.clone()]), &tx);
        assert_eq!((o.text.as_str(), o.finish, o.tool_calls), ("", Finish::ToolCalls, vec![call]));

        let mut h = Holdback::new(vec!["lo".into()], false);
        let o = outcome(&mut h, done("Hello", StopReason::Cancelled, vec![]), &tx);
        assert_eq!((o.text.as_str(), o.finish), ("Hel", Finish::Stop("lo".into())));
    }
}
