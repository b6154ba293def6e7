//! A remote member: generations run on an OpenAI-compatible engine (`caldrix-remote`), while
//! rendering and token counts stay the pool's: through a local tokenizer of the same model
//! (its vocabulary and chat template only: no weights, no session, no prefix store — the
//! engine caches prefixes itself), or, without one, through the engine's own template (served
//! by llama-server's `/props`, compiled here) and its `/tokenize`. The member's jobs run as
//! tasks on a runtime of its own, on a thread of its own, so the engine's batching sees them
//! all at once; a remote tokenizer's requests run there too (`vocab.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use caldrix_engine::{
    ChatTemplate, Constraint, Generation, GenerationPrompt, Message, Model, ModelParams,
    OneOfScores, Sampling, Special, StopReason, Timings, Token, TokenLogprob,
};
use caldrix_proto::{ErrorKind, RemoteInfo, Render};
use caldrix_remote::{Endpoint, Engine, Event, Finish, Options, Remote, RemoteError, Request};
use tokio::sync::mpsc;

use crate::PoolError;
use crate::member::{Finished, Job, MemberEvent};
use crate::vocab::{RemoteRender, RemoteVocab, Vocab, count_text};

/// What a remote member is loaded from: `openai:URL#MODEL` and its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSpec {
    pub base_url: String,
    pub model: String,
    /// The NAME of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// The local model whose vocabulary and template render and count (resolved).
    pub tokenizer: Option<PathBuf>,
    /// Who renders the contexts; `None`: the pool when it has a template, else the engine.
    pub render: Option<Render>,
}

/// The settings only a remote member takes, as given (a setting file, flags, `member_load`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoteSettings<'a> {
    pub api_key_env: Option<&'a str>,
    pub tokenizer: Option<&'a str>,
    pub render: Option<Render>,
}

/// The score a remote OneOf gives an option the engine's reply does not tell apart from the
/// chosen one (as a scripted member's unchosen options): finite, so that it serializes.
pub const UNSCORED_OPTION_LOGPROB: f64 = caldrix_engine::SCRIPTED_OTHER_OPTION_LOGPROB;

/// Alternatives asked for at each token of a remote OneOf, to score the unchosen options.
const ONE_OF_TOP: u8 = 10;

/// How often a running generation looks at its cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// `openai:URL#MODEL` with its settings; `None` when `reference` is another kind of member
/// (which then may not carry the remote settings).
pub fn parse_remote_ref(
    reference: &str,
    settings: &RemoteSettings<'_>,
) -> Result<Option<RemoteSpec>, PoolError> {
    let refused = |m: String| PoolError::new(ErrorKind::LoadRefused, m);
    let RemoteSettings { api_key_env, tokenizer, render } = *settings;
    let Some(rest) = reference.strip_prefix("openai:") else {
        if api_key_env.is_some() || tokenizer.is_some() || render.is_some() {
            return Err(refused(format!(
                "`{reference}`: api_key_env, tokenizer and render are settings of a remote \
                 member (openai:URL#MODEL)"
            )));
        }
        return Ok(None);
    };
    if tokenizer.is_some() && render == Some(Render::Engine) {
        return Err(refused(format!(
            "`{reference}`: a tokenizer renders and counts in the pool, render = engine has \
             the engine do both: give one or the other"
        )));
    }
    let shape = || refused(format!("`{reference}`: a remote member is openai:URL#MODEL"));
    let (base_url, model) = rest.split_once('#').ok_or_else(shape)?;
    if base_url.is_empty() || model.is_empty() {
        return Err(shape());
    }
    if let Some(var) = api_key_env {
        let mut chars = var.chars();
        let first = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !first || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(refused(format!(
                "api_key_env {var:?} is not an environment variable's name (letters, digits \
                 and _, not starting with a digit): it names the variable, it is not the key"
            )));
        }
    }
    let tokenizer = match tokenizer {
        None => None,
        Some(t) => Some(
            caldrix_hub::Hub::from_env()
                .resolve_str(t)
                .map_err(|e| refused(format!("the tokenizer {t}: {e}")))?,
        ),
    };
    Ok(Some(RemoteSpec {
        base_url: base_url.to_owned(),
        model: model.to_owned(),
        api_key_env: api_key_env.map(str::to_owned),
        tokenizer,
        render,
    }))
}

/// The member's side of its runtime thread.
pub(crate) struct Handle {
    jobs: Option<mpsc::UnboundedSender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Handle {
    /// Queues a generation; false once the runtime has stopped.
    pub(crate) fn submit(&self, job: Job) -> bool {
        self.jobs.as_ref().is_some_and(|jobs| jobs.send(job).is_ok())
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Closing the queue ends the runtime, dropping (so cancelling) its generations.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) struct Started {
    pub vocab: Vocab,
    /// The window when `ctx` is not given: the engine's, else the tokenizer's trained one,
    /// at most 4,096 (a local member's default).
    pub window: u32,
    pub info: RemoteInfo,
    pub handle: Handle,
}

/// Loads the tokenizer, probes the engine (unreachable, 401, a model it does not serve are
/// refused by name) and checks that it tokenizes as the tokenizer does, or takes the engine's
/// own template and tokenizer, or has the engine render; then serves jobs.
pub(crate) fn start(alias: &str, spec: &RemoteSpec) -> Result<Started, PoolError> {
    let refused = |m: String| PoolError::new(ErrorKind::LoadRefused, m);
    let endpoint = Endpoint {
        base_url: spec.base_url.clone(),
        model: spec.model.clone(),
        api_key_env: spec.api_key_env.clone(),
    };
    let mut remote =
        Remote::new(&endpoint, Options::default()).map_err(|e| refused(e.to_string()))?;
    let model = match &spec.tokenizer {
        Some(path) => {
            let params =
                ModelParams { gpu_layers: Some(0), window: None, generations: 1, vocab_only: true };
            Some(Arc::new(Model::load(path, &params).map_err(|e| refused(e.to_string()))?))
        }
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| refused(format!("cannot start the remote member's runtime: {e}")))?;
    let (jobs, mut rx) = mpsc::unbounded_channel::<Job>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (url, reference) = (spec.base_url.clone(), format!("{}#{}", spec.base_url, spec.model));
    let render = spec.render;
    let thread = std::thread::Builder::new()
        .name(format!("remote-{alias}"))
        .spawn(move || {
            runtime.block_on(async move {
                let probed = load(&mut remote, model.as_ref(), render, &reference).await;
                let vocab = match probed {
                    Ok(loaded) => {
                        let vocab = loaded.0.clone();
                        let _ = ready_tx.send(Ok((loaded, remote.engine().clone())));
                        vocab
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                while let Some(job) = rx.recv().await {
                    // Withdrawn by its connection (the client left): nobody waits for it.
                    if !job.place.take() {
                        continue;
                    }
                    tokio::spawn(generate(remote.clone(), vocab.clone(), job));
                }
            });
        })
        .map_err(|e| refused(format!("cannot start a thread: {e}")))?;
    let handle = Handle { jobs: Some(jobs), thread: Some(thread) };
    let ((vocab, window), engine) = match ready_rx.recv() {
        Ok(Ok(ready)) => ready,
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(refused("the remote member's thread died".to_owned())),
    };
    let (counted, render) = match &vocab {
        Vocab::Local(_) => ("the tokenizer", Render::Pool),
        _ if vocab.engine_renders().is_some() => ("the engine's chat tokenizer", Render::Engine),
        Vocab::Remote(_) => ("the engine's tokenizer", Render::Pool),
    };
    let engine = engine_name(&engine);
    tracing::info!(%alias, %url, %engine, counted, render = render.as_str(), "remote member loaded");
    let info = RemoteInfo { url, model: spec.model.clone(), engine, render };
    Ok(Started { vocab, window, info, handle })
}

fn engine_name(engine: &Engine) -> String {
    match engine {
        Engine::LlamaServer => "llama-server".to_owned(),
        Engine::Sglang => "sglang".to_owned(),
        Engine::Vllm { version: Some(v) } => format!("vllm {v}"),
        Engine::Vllm { version: None } => "vllm".to_owned(),
        _ => "openai-compatible".to_owned(),
    }
}

/// The probe, then what renders and counts: the tokenizer, checked against the engine's
/// tokens when the engine tokenizes; else the engine's own template, compiled here, and its
/// tokenizer; else the engine rendering and counting conversations itself. And the window when
/// none is given.
async fn load(
    remote: &mut Remote,
    tokenizer: Option<&Arc<Model>>,
    render: Option<Render>,
    reference: &str,
) -> Result<(Vocab, u32), PoolError> {
    let refused = |m: String| PoolError::new(ErrorKind::LoadRefused, m);
    let probe = remote.probe().await.map_err(|e| refused(e.to_string()))?;
    let window = probe.window;
    let Some(model) = tokenizer else {
        let vocab = match render {
            Some(Render::Engine) => engine_renders(remote, &probe, reference).await?,
            Some(Render::Pool) => served_template(remote, &probe, reference).await?,
            None => match served_template(remote, &probe, reference).await {
                Ok(vocab) => vocab,
                Err(e) if probe.tokenize_chat => {
                    tracing::info!(%reference, reason = %e.message, "the engine renders");
                    engine_renders(remote, &probe, reference).await?
                }
                Err(e) => return Err(e),
            },
        };
        return Ok((vocab, window.unwrap_or(caldrix_engine::DEFAULT_WINDOW)));
    };
    if probe.tokenize {
        let text = probe_text(&Vocab::Local(Arc::clone(model)));
        let local: Vec<u32> = model.tokenize_prompt(&text).iter().map(|t| t.0).collect();
        let theirs = remote.tokenize(&text, true).await.map_err(|e| refused(e.to_string()))?;
        if local != theirs {
            let at = local.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
            return Err(refused(format!(
                "{reference} is not the same model as the tokenizer {}: a probe text is {} \
                 tokens there and {} here, first different at token {at}",
                model.path().display(),
                theirs.len(),
                local.len()
            )));
        }
    }
    let window = window.unwrap_or(caldrix_engine::DEFAULT_WINDOW.min(model.trained_context()));
    Ok((Vocab::Local(Arc::clone(model)), window))
}

const GIVE_TOKENIZER: &str =
    "give tokenizer = a GGUF path or Hugging Face reference of the same model";

/// The engine's own template and tokenizer, when it serves both (llama-server: `/props` and
/// `/tokenize`); refused naming what is missing otherwise, since the pool never estimates.
async fn served_template(
    remote: &Remote,
    probe: &caldrix_remote::Probe,
    reference: &str,
) -> Result<Vocab, PoolError> {
    let refused = |m: String| PoolError::new(ErrorKind::LoadRefused, m);
    let give = GIVE_TOKENIZER;
    if !probe.tokenize {
        return Err(refused(format!(
            "a remote member needs a tokenizer: the engine at {reference} has no /tokenize and \
             no tokenizer = ... was given; {give}"
        )));
    }
    let Some(source) = &probe.template else {
        let engine = if probe.tokenize_chat {
            "; or render = engine, as it can render and count conversations itself"
        } else {
            ""
        };
        return Err(refused(format!(
            "a remote member needs its chat template: the engine at {reference} tokenizes but \
             does not serve its template (llama-server's /props does, under \
             {} KiB); {give}{engine}",
            caldrix_remote::MAX_TEMPLATE_BYTES >> 10
        )));
    };
    let Some(vocab_size) = probe.vocab_size else {
        return Err(refused(format!(
            "the engine at {reference} does not say its vocabulary's size (/v1/models' \
             meta.n_vocab), so its token ids cannot be checked; {give}"
        )));
    };
    let template =
        ChatTemplate::new(&source.source, source.bos_token.clone(), source.eos_token.clone())
            .map_err(|e| refused(format!("the chat template {reference} serves: {e}")))?;
    // What the model puts before a prompt: the engine's tokens of nothing, specials added.
    let added = remote.tokenize("", true).await.map_err(|e| refused(e.to_string()))?;
    let bos = match added[..] {
        [] => None,
        [id] if (id as usize) < vocab_size => Some(Token(id)),
        _ => {
            return Err(refused(format!(
                "the engine at {reference} adds {added:?} before a prompt: more than one BOS \
                 token, or one outside its vocabulary of {vocab_size}"
            )));
        }
    };
    let vocab = Vocab::Remote(Arc::new(RemoteVocab {
        render: RemoteRender::Pool { template: Box::new(template), bos },
        remote: remote.clone(),
        runtime: tokio::runtime::Handle::current(),
        vocab_size: Some(vocab_size),
        reference: reference.to_owned(),
    }));
    // The template must render the shape every context has, before any client finds out.
    let messages = [Message::new("system", "s"), Message::new("user", "u")];
    vocab.render(&messages, &[], GenerationPrompt::Add).map_err(|e| {
        refused(format!("{reference} cannot serve aerix's contexts: {}", e.message))
    })?;
    Ok(vocab)
}

/// The engine renders conversations with its own template and counts them (vLLM's
/// `/tokenize` of messages, llama-server's `/apply-template`); refused when it cannot, or when
/// it cannot render what aerix's contexts hold (a system message, then two user messages).
async fn engine_renders(
    remote: &Remote,
    probe: &caldrix_remote::Probe,
    reference: &str,
) -> Result<Vocab, PoolError> {
    let refused = |m: String| PoolError::new(ErrorKind::LoadRefused, m);
    if !probe.tokenize_chat {
        return Err(refused(format!(
            "the engine at {reference} cannot count a conversation (vLLM's /tokenize of \
             messages, llama-server's /apply-template), so it cannot render for the pool; {}",
            GIVE_TOKENIZER
        )));
    }
    let shape = [Message::new("system", "s"), Message::new("user", "u"), Message::new("user", "v")];
    let mut engine = RemoteVocab {
        render: RemoteRender::Engine { joins_runs: false },
        remote: remote.clone(),
        runtime: tokio::runtime::Handle::current(),
        vocab_size: probe.vocab_size,
        reference: reference.to_owned(),
    };
    // A template that refuses a run of one role (Gemma's) gets runs joined, if it takes them so.
    if let Err(apart) = remote.tokenize_chat(&engine.chat_messages(&shape), true).await {
        engine.render = RemoteRender::Engine { joins_runs: true };
        remote
            .tokenize_chat(&engine.chat_messages(&shape), true)
            .await
            .map_err(|_| refused(format!("{reference} cannot serve aerix's contexts: {apart}")))?;
    }
    Ok(Vocab::Remote(Arc::new(engine)))
}

/// A rendered conversation (the template's markers, words, digits, accents, whitespace), or
/// plain text when the model has no template.
fn probe_text(vocab: &Vocab) -> String {
    let messages = [
        Message::new("system", "You check tokenizers."),
        Message::new("user", "Hello, world! 1234 caf\u{e9} na\u{ef}ve \u{2014}  tabs\tand\nlines"),
    ];
    vocab.render(&messages, &[], GenerationPrompt::Add).unwrap_or_else(|_| {
        "Hello, world! 1234 caf\u{e9} na\u{ef}ve \u{2014}  tabs\tand\nlines".to_owned()
    })
}

/// The protocol's error for a failure of the engine: what the caller can fix is a request
/// error, the rest the engine's.
fn remote_error(e: RemoteError) -> PoolError {
    let kind = match &e {
        RemoteError::BadConstraint { .. } | RemoteError::Unsupported { .. } => {
            ErrorKind::BadConstraint
        }
        RemoteError::BadRequest { .. } => ErrorKind::BadRequest,
        _ => ErrorKind::Engine,
    };
    PoolError::new(kind, e.to_string())
}

/// What the stream said so far.
#[derive(Default)]
struct Heard {
    text: String,
    tokens: Vec<caldrix_remote::TokenLogprob>,
    first_text: Option<Instant>,
}

/// One generation on the engine, its events on the job's channel; the cancel flag drops the
/// request (closing the connection stops the engine's generation).
async fn generate(remote: Remote, vocab: Vocab, job: Job) {
    let result = run(&remote, &vocab, &job).await;
    let _ = job.events.send(MemberEvent::Done(result));
}

async fn run(remote: &Remote, vocab: &Vocab, job: &Job) -> Result<Finished, PoolError> {
    let params = &job.params;
    let prompt: Vec<u32> = job.prompt.iter().map(|t| t.0).collect();
    let schema;
    let constraint = match &params.constraint {
        Constraint::None => caldrix_remote::Constraint::None,
        Constraint::Json(value) => {
            schema = value.to_string();
            caldrix_remote::Constraint::Json(&schema)
        }
        Constraint::OneOf(options) => caldrix_remote::Constraint::Choice(options),
        Constraint::Grammar(_) => {
            return Err(PoolError::new(
                ErrorKind::BadConstraint,
                format!(
                    "{} is a remote member: it cannot take the tools constraint",
                    remote_url(remote)
                ),
            ));
        }
    };
    let one_of = matches!(params.constraint, Constraint::OneOf(_));
    // Each token's logprob needs at least one alternative asked for on some engines; a OneOf
    // asks for more to score the options it did not choose. Trimmed to what was asked below.
    let asked = params.logprobs.map(|k| u8::try_from(k).unwrap_or(u8::MAX).max(1));
    let logprobs = if one_of { Some(asked.unwrap_or(0).max(ONE_OF_TOP)) } else { asked };
    let sampling = match params.sampling {
        Sampling::Greedy => caldrix_remote::Sampling::default(),
        Sampling::Random { temperature, top_p, seed } => caldrix_remote::Sampling {
            temperature,
            top_p: Some(top_p),
            seed: Some(seed),
            ..caldrix_remote::Sampling::default()
        },
    };
    let prompt_of = match &job.chat {
        Some(messages) => caldrix_remote::Prompt::Chat(messages),
        None => caldrix_remote::Prompt::Tokens(&prompt),
    };
    let request = Request {
        prompt: prompt_of,
        max_tokens: params.max_new_tokens,
        sampling,
        logprobs,
        constraint,
    };
    let started = Instant::now();
    let mut heard = Heard::default();
    let outcome = {
        let events = &job.events;
        let total = prompt.len();
        let heard = &mut heard;
        let mut on_event = move |event: Event| match event {
            Event::Waiting { .. } => {
                if heard.first_text.is_none() {
                    let _ = events.send(MemberEvent::Progress { done: 0, total });
                }
            }
            Event::Text(delta) => {
                heard.first_text.get_or_insert_with(Instant::now);
                heard.tokens.extend(delta.tokens);
                if !delta.text.is_empty() {
                    heard.text.push_str(&delta.text);
                    let _ = events.send(MemberEvent::Delta(delta.text));
                }
            }
        };
        tokio::select! {
            finished = remote.complete(&request, &mut on_event) => Some(finished),
            () = cancelled(&job.cancel) => None,
        }
    };
    let ended = Instant::now();
    let first = heard.first_text.unwrap_or(ended);
    let timings = Timings { prefill: first - started, decode: ended - first };
    let Some(finished) = outcome else {
        let heard_tokens = heard.tokens.len();
        let completion_tokens =
            count_text(vocab, remote, &heard.text).await.unwrap_or(heard_tokens);
        let generation = Generation {
            text: heard.text,
            tokens: Vec::new(),
            stop: StopReason::Cancelled,
            logprobs: None,
            one_of: None,
            prompt_tokens: prompt.len(),
            reused_tokens: 0,
            timings,
        };
        return Ok(Finished { generation, completion_tokens, recomputed_from: None });
    };
    let finished = finished.map_err(remote_error)?;
    let url = remote_url(remote);
    let engine_failed = |what: String| PoolError::new(ErrorKind::Engine, format!("{url} {what}"));
    let text = finished.text;
    let constrained = !matches!(params.constraint, Constraint::None);
    let stop = match finished.finish {
        Finish::Length => StopReason::MaxTokens,
        _ if constrained => StopReason::Complete,
        _ => StopReason::EndOfTurn,
    };
    if matches!(params.constraint, Constraint::Json(_))
        && stop == StopReason::Complete
        && serde_json::from_str::<serde_json::Value>(&text).is_err()
    {
        return Err(engine_failed(format!(
            "answered text that is not JSON under the json constraint: {:?}",
            excerpt(&text)
        )));
    }
    let one_of = match &params.constraint {
        Constraint::OneOf(options) => {
            Some(score(options, &text, &heard.tokens).ok_or_else(|| {
                engine_failed(format!(
                    "answered {:?}, none of the {} options of the choice",
                    excerpt(&text),
                    options.len()
                ))
            })?)
        }
        _ => None,
    };
    let mut logprobs = None;
    if let Some(k) = params.logprobs {
        let mut out = Vec::with_capacity(heard.tokens.len());
        for t in &heard.tokens {
            let token = token_of(vocab, remote, t.token, t.text.as_deref()).await?;
            let mut top = Vec::new();
            for a in t.top.iter().take(k) {
                let alt = token_of(vocab, remote, a.token, a.text.as_deref()).await?;
                let bytes =
                    bytes_of(vocab, remote, alt, (a.bytes.as_deref(), a.text.as_deref())).await;
                top.push((alt, bytes, a.logprob as f32));
            }
            let bytes =
                bytes_of(vocab, remote, token, (t.bytes.as_deref(), t.text.as_deref())).await;
            out.push(TokenLogprob { token, bytes, logprob: t.logprob as f32, top });
        }
        logprobs = Some(out);
    }
    let tokens: Vec<Token> =
        logprobs.iter().flatten().map(|t: &TokenLogprob| t.token).collect::<Vec<_>>();
    // The engine's count of generated tokens where it gives one (bounded by the request),
    // else the tokens it listed, else the tokenizer's count of the text.
    let max = params.max_new_tokens as usize;
    let completion_tokens = match finished.usage.completion_tokens {
        Some(n) => usize::try_from(n).unwrap_or(max).min(max),
        None if logprobs.is_some() => tokens.len(),
        None => match count_text(vocab, remote, &text).await {
            Some(n) => n.min(max),
            None => {
                return Err(engine_failed("reported no token count and did not tokenize".into()));
            }
        },
    };
    let recomputed_from =
        finished.usage.cached_tokens.map(|c| usize::try_from(c).unwrap_or(0).min(prompt.len()));
    let generation = Generation {
        text,
        tokens,
        stop,
        logprobs,
        one_of,
        prompt_tokens: prompt.len(),
        reused_tokens: recomputed_from.unwrap_or(0),
        timings,
    };
    Ok(Finished { generation, completion_tokens, recomputed_from })
}

fn remote_url(remote: &Remote) -> String {
    remote.base_url().to_owned()
}

/// A token's bytes: the engine's, else its text, else the vocabulary's (the engine's
/// `/detokenize` of it for a member without a tokenizer; empty when that fails).
async fn bytes_of(
    vocab: &Vocab,
    remote: &Remote,
    token: Token,
    (bytes, text): (Option<&[u8]>, Option<&str>),
) -> Vec<u8> {
    match (bytes, text, vocab) {
        (Some(b), _, _) => b.to_vec(),
        (None, Some(t), _) => t.as_bytes().to_vec(),
        (None, None, Vocab::Local(model)) => model.token_bytes(token),
        (None, None, Vocab::Remote(_)) => {
            remote.detokenize(&[token.0]).await.map(String::into_bytes).unwrap_or_default()
        }
    }
}

/// A token the engine listed: its id, checked against the vocabulary; else its text, which
/// must be one token of it.
async fn token_of(
    vocab: &Vocab,
    remote: &Remote,
    id: Option<u32>,
    text: Option<&str>,
) -> Result<Token, PoolError> {
    let failed =
        |what: String| PoolError::new(ErrorKind::Engine, format!("{} {what}", remote_url(remote)));
    let size = vocab.vocab_size().unwrap_or(u32::MAX as usize);
    match (id, text) {
        (Some(id), _) if (id as usize) < size => Ok(Token(id)),
        (Some(id), _) => {
            Err(failed(format!("sent token id {id}, outside the vocabulary of {size}")))
        }
        (None, Some(text)) => {
            let ids = match vocab {
                Vocab::Local(model) => {
                    model.tokenize(text, Special::Parse).iter().map(|t| t.0).collect()
                }
                Vocab::Remote(_) => remote.tokenize(text, false).await.unwrap_or_default(),
            };
            match ids[..] {
                [id] if (id as usize) < size => Ok(Token(id)),
                _ => Err(failed(format!("sent a token {text:?} without its id"))),
            }
        }
        (None, None) => Err(failed("sent a token with neither id nor text".into())),
    }
}

/// The OneOf's scores: the chosen option's is the sum of its tokens' logprobs as the engine
/// reported them under its choice constraint; another option's is the logprob the engine gave,
/// at the first generated token, to an alternative that starts that option and not the chosen
/// one (its first token's logprob, an upper bound of the option's), else
/// [`UNSCORED_OPTION_LOGPROB`]. `None` when the text is none of the options.
fn score(
    options: &[String],
    text: &str,
    tokens: &[caldrix_remote::TokenLogprob],
) -> Option<OneOfScores> {
    let chosen = options.iter().position(|o| o == text)?;
    let first = tokens.first().map(|t| t.top.as_slice()).unwrap_or_default();
    let logprobs = options
        .iter()
        .enumerate()
        .map(|(i, option)| {
            if i == chosen {
                return tokens.iter().map(|t| t.logprob).sum();
            }
            first
                .iter()
                // Its text, else its bytes (vLLM asked for ids sends those alone).
                .filter_map(|a| {
                    let bytes = a.bytes.as_deref().map(std::str::from_utf8);
                    Some((a.text.as_deref().or(bytes.and_then(Result::ok))?, a.logprob))
                })
                .filter(|(t, _)| !t.is_empty() && option.starts_with(t) && !text.starts_with(t))
                .map(|(_, lp)| lp)
                .reduce(f64::max)
                .unwrap_or(UNSCORED_OPTION_LOGPROB)
        })
        .collect();
    Some(OneOfScores { chosen, logprobs })
}

fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(caldrix_remote::MESSAGE_CHARS).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out
}

/// Resolves once the flag is set.
async fn cancelled(flag: &AtomicBool) {
    while !flag.load(Ordering::Relaxed) {
        tokio::time::sleep(CANCEL_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldrix_remote::TopLogprob;

    fn top(text: &str, logprob: f64) -> TopLogprob {
        TopLogprob { token: None, text: Some(text.into()), bytes: None, logprob }
    }

    #[test]
    fn remote_references_are_parsed_or_refused_by_name() {
        let key = RemoteSettings { api_key_env: Some("TEAM_KEY"), ..RemoteSettings::default() };
        let spec = parse_remote_ref("openai:http://h:8080/v1#qwen", &key).unwrap().unwrap();
        assert_eq!((spec.base_url.as_str(), spec.model.as_str()), ("http://h:8080/v1", "qwen"));
        assert_eq!(spec.api_key_env.as_deref(), Some("TEAM_KEY"));
        assert_eq!(parse_remote_ref("m.gguf", &RemoteSettings::default()).unwrap(), None);
        let engine = Some(Render::Engine);
        for (reference, key, said) in [
            ("openai:http://h", None, "openai:URL#MODEL"),
            ("openai:#m", None, "openai:URL#MODEL"),
            ("openai:http://h#", None, "openai:URL#MODEL"),
            ("openai:http://h#m", Some("sk-live-123 x"), "not an environment variable's name"),
            ("m.gguf", Some("KEY"), "settings of a remote member"),
            ("m.gguf", None, "settings of a remote member"),
        ] {
            let render = if key.is_none() { engine } else { None };
            let settings = RemoteSettings { api_key_env: key, tokenizer: None, render };
            let e = parse_remote_ref(reference, &settings).unwrap_err();
            assert_eq!(e.kind, ErrorKind::LoadRefused);
            assert!(e.message.contains(said), "{reference}: {e}");
        }
        let both = RemoteSettings { tokenizer: Some("t.gguf"), render: engine, api_key_env: None };
        let e = parse_remote_ref("openai:http://h#m", &both).unwrap_err();
        assert!(e.message.contains("give one or the other"), "{e}");
    }

    #[test]
    fn engine_failures_map_onto_the_protocol_s_kinds() {
        let url = || "http://h/v1/completions".to_owned();
        let kind = |e| remote_error(e).kind;
        let schema = RemoteError::BadConstraint { url: url(), message: "bad schema".into() };
        assert_eq!(kind(schema), ErrorKind::BadConstraint);
        let status = 400;
        let bad = RemoteError::BadRequest { url: url(), status, message: "n_ctx".into() };
        assert_eq!(kind(bad), ErrorKind::BadRequest);
        let status = 503;
        assert_eq!(
            kind(RemoteError::Server { url: url(), status, message: "".into() }),
            ErrorKind::Engine
        );
        assert_eq!(kind(RemoteError::StreamCut { url: url(), events: 3 }), ErrorKind::Engine);
        let gone = RemoteError::Unreachable { url: url(), reason: "refused".into() };
        assert_eq!(kind(gone), ErrorKind::Engine);
    }

    #[test]
    fn a_remote_one_of_scores_the_chosen_option_and_what_the_alternatives_tell() {
        let options = ["edit".to_owned(), "plan".to_owned(), "explain".to_owned()];
        let tokens = vec![
            caldrix_remote::TokenLogprob {
                token: None,
                text: Some("pl".into()),
                bytes: None,
                logprob: -0.25,
                top: vec![top("pl", -0.25), top("ed", -2.0), top("e", -1.5)],
            },
            caldrix_remote::TokenLogprob {
                token: None,
                text: Some("an".into()),
                bytes: None,
                logprob: -0.5,
                top: Vec::new(),
            },
        ];
        let scores = score(&options, "plan", &tokens).unwrap();
        assert_eq!(scores.chosen, 1);
        assert_eq!(scores.logprobs, vec![-1.5, -0.75, -1.5]);
        let lone = score(&options, "plan", &tokens[1..]).unwrap();
        assert_eq!(lone.logprobs[0], UNSCORED_OPTION_LOGPROB);
        assert!(score(&options, "neither", &tokens).is_none());
    }
}
