//! The requests a connection answers without the engine thread: contexts and their counts,
//! tokenizing, rendering, the members and the status; and the bookkeeping of a generation's
//! context (its counts, its reply appended).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use caldrix_proto::{self as proto, ErrorKind, MemberStatus, PoolStatus, Reply, Request};

use crate::context::Context;
use crate::tools::Tools;
use crate::vocab::Vocab;
use crate::{MemberConfig, Pool, PoolError, poisoned};

/// Counts on context `id`, keeping what it counted for the next request. A local vocabulary
/// counts under the contexts' lock (in-process, quick); a remote engine's tokenizer counts on a
/// copy outside it, so that a slow engine holds up no other member's contexts, and the copy's
/// counts are kept when the context did not change meanwhile.
pub(super) fn on_context<T>(
    pool: &Pool,
    id: proto::ContextId,
    vocab: &Vocab,
    count: impl FnOnce(&mut Context) -> Result<T, PoolError>,
) -> Result<T, PoolError> {
    if vocab.local().is_some() {
        return count(pool.contexts.lock().map_err(poisoned)?.get_mut(id)?);
    }
    let mut copy = pool.contexts.lock().map_err(poisoned)?.get(id)?.clone();
    let counted = count(&mut copy)?;
    let mut contexts = pool.contexts.lock().map_err(poisoned)?;
    if let Ok(context) = contexts.get_mut(id)
        && context.segments == copy.segments
    {
        *context = copy;
    }
    Ok(counted)
}

/// A generation's reply appended to its context as an assistant segment.
pub(super) fn append(
    pool: &Pool,
    context: proto::ContextId,
    id: &str,
    text: &str,
) -> Result<(), PoolError> {
    let mut contexts = pool.contexts.lock().map_err(poisoned)?;
    let segment = proto::Segment {
        id: id.to_owned(),
        role: proto::Role::Assistant,
        text: text.to_owned(),
        pinned: false,
    };
    contexts.get_mut(context)?.apply(&[proto::Edit::Append { segment }])
}

/// Context `id`'s counts for a generation's `done`, off the runtime (a remote member's
/// tokenizer is a request of its own) and within `bound`. A count that fails or takes longer is
/// left out: the client then asks `context_counts`, whose error names what failed.
pub(super) async fn counts_for_done(
    pool: &Arc<Pool>,
    id: proto::ContextId,
    bound: Duration,
) -> Option<proto::SegmentCounts> {
    let pool = Arc::clone(pool);
    let task = tokio::task::spawn_blocking(move || counts(&pool, id));
    match tokio::time::timeout(bound, task).await {
        Ok(Ok(Ok(counts))) => Some(counts),
        _ => None,
    }
}

/// Context `id`'s counts.
fn counts(pool: &Pool, id: proto::ContextId) -> Result<proto::SegmentCounts, PoolError> {
    let name = pool.contexts.lock().map_err(poisoned)?.get(id)?.member.clone();
    let member = pool.member(&name)?;
    let (segments, total_tokens) =
        on_context(pool, id, &member.vocab, |c| c.counts(&member.vocab))?;
    Ok(proto::SegmentCounts { segments, total_tokens })
}

/// Requests answered without the engine thread (tokenizing and rendering use the shared model).
pub(super) fn control(pool: &Pool, request: Request) -> Result<Reply, PoolError> {
    match request {
        Request::MemberLoad { alias, model, flags } => {
            let settings = crate::RemoteSettings {
                api_key_env: flags.api_key_env.as_deref(),
                tokenizer: flags.tokenizer.as_deref(),
                render: flags.render,
            };
            let (path, script, remote) = crate::member_source(&model, &settings)?;
            pool.load(MemberConfig {
                alias,
                reference: model,
                model: path,
                script,
                remote,
                window: flags.ctx,
                threads: flags.threads,
                batch: flags.batch,
                gpu_layers: flags.gpu_layers,
                max_batch: flags.max_batch.unwrap_or(1),
                fit_max_batch: flags.fit_max_batch.unwrap_or(false),
                fast_forward: flags.fast_forward.unwrap_or(false),
                draft: flags.draft.unwrap_or(false),
                budget_bytes: pool.config.context_budget,
            })?;
            Ok(Reply::Ok)
        }
        Request::MemberUnload { alias } => pool.unload(&alias).map(|()| Reply::Ok),
        Request::MemberList {} => Ok(Reply::Members { members: pool.member_infos()? }),
        // A new context is counted before it gets an id: one the template refuses is never made.
        Request::ContextCreate { member, segments, tools } => {
            let vocab = &pool.member(&member)?.vocab;
            if !tools.is_empty() && vocab.engine_renders().is_some() {
                return Err(PoolError::new(
                    ErrorKind::BadRequest,
                    format!(
                        "member `{member}` is remote and its engine renders: it offers no tools"
                    ),
                ));
            }
            let tools = Tools::check(tools, vocab.local())?;
            let mut context = Context::with_tools(member, tools);
            let edits: Vec<_> =
                segments.into_iter().map(|segment| proto::Edit::Append { segment }).collect();
            context.apply(&edits)?;
            let (segments, total_tokens) = context.counts(vocab)?;
            let id = pool.contexts.lock().map_err(poisoned)?.insert(context);
            Ok(Reply::Context { context: id, segments, total_tokens })
        }
        Request::ContextEdit { context, edits } => edit(pool, context, &edits),
        Request::ContextFork { context } => {
            let mut copy = pool.contexts.lock().map_err(poisoned)?.get(context)?.clone();
            let (segments, total_tokens) = copy.counts(&pool.member(&copy.member)?.vocab)?;
            let id = pool.contexts.lock().map_err(poisoned)?.insert(copy);
            Ok(Reply::Context { context: id, segments, total_tokens })
        }
        Request::ContextDrop { context } => {
            pool.contexts.lock().map_err(poisoned)?.remove(context)?;
            Ok(Reply::Ok)
        }
        Request::ContextCounts { context } => {
            let proto::SegmentCounts { segments, total_tokens } = counts(pool, context)?;
            Ok(Reply::Context { context, segments, total_tokens })
        }
        Request::Status {} => status(pool),
        Request::Hello { .. } => {
            Err(PoolError::new(ErrorKind::BadRequest, "hello was already exchanged"))
        }
        Request::Cancel {} => Err(PoolError::new(
            ErrorKind::BadRequest,
            "no generation is in progress on this connection",
        )),
        _ => Err(PoolError::new(ErrorKind::BadRequest, "unexpected request")),
    }
}

/// Applies `edits` to context `id` and counts the result. All or nothing: the context changes
/// only when every edit applies and the member's template takes the conversation they make.
fn edit(pool: &Pool, id: proto::ContextId, edits: &[proto::Edit]) -> Result<Reply, PoolError> {
    let name = pool.contexts.lock().map_err(poisoned)?.get(id)?.member.clone();
    let member = pool.member(&name)?;
    let vocab = &member.vocab;
    let edited = |context: &Context| {
        let mut next = context.clone();
        next.apply(edits)?;
        let (segments, total_tokens) = next.counts(vocab)?;
        Ok::<_, PoolError>((next, Reply::Context { context: id, segments, total_tokens }))
    };
    if vocab.local().is_some() {
        // In-process counting: under the lock, as `on_context` does.
        let mut contexts = pool.contexts.lock().map_err(poisoned)?;
        let context = contexts.get_mut(id)?;
        let (next, reply) = edited(context)?;
        *context = next;
        return Ok(reply);
    }
    // A remote engine counts outside the lock; the result is kept when no other edit came in
    // meanwhile, else the edits are applied again to what that edit made.
    for _ in 0..EDIT_ATTEMPTS {
        let before = pool.contexts.lock().map_err(poisoned)?.get(id)?.clone();
        let (next, reply) = edited(&before)?;
        let mut contexts = pool.contexts.lock().map_err(poisoned)?;
        let context = contexts.get_mut(id)?;
        if context.segments == before.segments {
            *context = next;
            return Ok(reply);
        }
    }
    Err(PoolError::new(
        ErrorKind::Internal,
        format!(
            "context {id} changed under {EDIT_ATTEMPTS} edits from other connections: nothing applied"
        ),
    ))
}

/// How often an edit on a remote member's context is tried again when another connection
/// edited the context while its engine counted.
const EDIT_ATTEMPTS: usize = 8;

fn status(pool: &Pool) -> Result<Reply, PoolError> {
    let infos = pool.member_infos()?;
    let contexts = pool.contexts.lock().map_err(poisoned)?;
    let mut members = Vec::new();
    for info in infos {
        let member = pool.member(&info.alias)?;
        let store = member.figures.lock().map_err(poisoned)?.clone();
        members.push(MemberStatus {
            contexts: contexts.count_on(&info.alias),
            running: Some(member.running()),
            info,
            store,
        });
    }
    Ok(Reply::Status(PoolStatus {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        connections: pool.active.load(Ordering::SeqCst),
        members,
    }))
}
