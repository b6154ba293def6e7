//! A loaded GGUF model: vocabulary, tokenizer, chat template, and the constraint compiler.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;
use llguidance::ParserFactory;

use crate::error::EngineError;
use crate::gguf::{self, SUPPORTED_ARCHITECTURES};
pub use crate::session::SCRATCH_SEQUENCES;
use crate::session::Session;

/// llama.cpp's `LLAMA_MAX_SEQ`.
const MAX_SEQUENCES: u32 = 256;
use crate::template::{ChatTemplate, GenerationPrompt, Message, TemplateError};

/// A token id of the model's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(pub u32);

impl Token {
    pub(crate) fn llama(self) -> LlamaToken {
        LlamaToken(self.0 as i32)
    }
}

/// Whether special-token text (`<|im_start|>`) in the input becomes the special token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// Rendered prompts: markers written by the chat template are the model's control tokens.
    Parse,
    /// User text: a marker is just characters.
    Plain,
}

/// Flags that apply to the loaded weights.
#[derive(Debug, Clone, Default)]
pub struct ModelParams {
    /// Layers to offload to a GPU: `None` offloads as many as fit the device's free memory
    /// (none without a usable device); `Some(n)` on a build or machine with no usable device,
    /// or more than the device can hold, is refused (`EngineError::Place`), never run on the
    /// CPU and called a GPU's.
    pub gpu_layers: crate::device::GpuLayers,
    /// The window whose KV rows each offloaded layer holds on the device; `None`: the
    /// trained context up to [`DEFAULT_WINDOW`].
    pub window: Option<u32>,
    /// Generations decoded together, each holding a window (0 counts as 1).
    pub generations: u32,
    /// The vocabulary and chat template only, no weights (a remote member's tokenizer): the
    /// model renders, tokenizes and detokenizes, and opens no session.
    pub vocab_only: bool,
}

fn plan_from(
    header: &gguf::GgufHeader,
    params: &ModelParams,
) -> Result<crate::device::Placement, EngineError> {
    if params.vocab_only {
        return Ok(crate::device::place(&header.shape, Some(0), 0, &[])?);
    }
    // No device is looked for unless layers may go to one (listing devices starts the backends).
    let devices = if params.gpu_layers == Some(0) || !crate::device::may_have_gpu() {
        Vec::new()
    } else {
        crate::device::gpu_devices()
    };
    let trained =
        header.context_length.map_or(DEFAULT_WINDOW, |c| u32::try_from(c).unwrap_or(u32::MAX));
    let window = params.window.unwrap_or(DEFAULT_WINDOW.min(trained));
    let rows = window.saturating_mul(params.generations.max(1));
    Ok(crate::device::place(&header.shape, params.gpu_layers, rows, &devices)?)
}

/// A member's window when none is asked for, or the trained context when that is smaller.
pub const DEFAULT_WINDOW: u32 = 4096;

/// The threads a session uses when `--threads` is not given: every available core.
pub fn default_threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

/// Flags of one context (the serving flags `--ctx`, `--threads`, `--batch`).
#[derive(Debug, Clone)]
pub struct SessionParams {
    /// Context window in tokens (what one sequence may hold); `None` is the smaller of 4096 and
    /// the model's window.
    pub n_ctx: Option<u32>,
    /// KV cells shared by all sequences; `None` is the window. A pool keeping many prefixes
    /// asks for more cells than one window.
    pub cells: Option<u32>,
    /// CPU threads; `None` is every available core.
    pub threads: Option<u32>,
    /// Tokens per prefill batch.
    pub batch: u32,
    /// Sequences the caller may use (`0..sequences`); the session adds a few of its own for
    /// OneOf scoring and snapshots. All share the context's cells.
    pub sequences: u32,
    /// Flash attention where llama.cpp supports it on the device (its `AUTO` policy). On CPU its
    /// kernel skips the cells a sequence's mask hides, so attention costs a sequence's own rows
    /// rather than every row resident in the shared cells; measured faster for prefill and decode
    /// on both test models (docs/benchmarks.md). Resumed prefixes stay within the snapshot
    /// tests' tolerance of a cold prefill.
    pub flash_attention: bool,
}

impl Default for SessionParams {
    fn default() -> Self {
        SessionParams {
            n_ctx: None,
            cells: None,
            threads: None,
            batch: 512,
            sequences: 1,
            flash_attention: true,
        }
    }
}

pub struct Model {
    pub(crate) inner: LlamaModel,
    path: PathBuf,
    architecture: String,
    template: Result<ChatTemplate, String>,
    eog: Token,
    bos: Option<Token>,
    vocab_only: bool,
    constraints: OnceLock<Result<Arc<ParserFactory>, String>>,
    placement: crate::device::Placement,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("path", &self.path)
            .field("architecture", &self.architecture)
            .finish_non_exhaustive()
    }
}

/// llama.cpp's `LLAMA_FLASH_ATTN_TYPE_DISABLED` and `_AUTO` (llama-cpp-2 takes the raw C enum).
const FLASH_ATTN_DISABLED: i32 = 0;
const FLASH_ATTN_AUTO: i32 = -1;

/// The template used when a GGUF carries none: the family's published turn format, for the
/// families whose format is fixed by the architecture. Anything else is an error at render.
fn fallback_template(architecture: &str) -> Option<&'static str> {
    match architecture {
        "gemma" | "gemma2" | "gemma3" => Some(include_str!("templates/gemma.jinja")),
        _ => None,
    }
}

pub(crate) fn backend() -> &'static LlamaBackend {
    static BACKEND: OnceLock<LlamaBackend> = OnceLock::new();
    BACKEND.get_or_init(|| {
        llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
        #[cfg(feature = "dynamic-backends")]
        crate::device::load_backends();
        #[allow(
            clippy::expect_used,
            reason = "init fails only when called twice, which the OnceLock prevents"
        )]
        LlamaBackend::init().expect("llama.cpp backend initialised once")
    })
}

impl Model {
    /// Loads a GGUF file, naming what is wrong with it when it cannot be loaded.
    pub fn load(path: &Path, params: &ModelParams) -> Result<Model, EngineError> {
        if !path.is_file() {
            return Err(EngineError::ModelNotFound { path: path.to_owned() });
        }
        let header = gguf::read_header(path)
            .map_err(|error| EngineError::BadGguf { path: path.to_owned(), error })?;
        if header.file_len < header.min_file_len {
            return Err(EngineError::Truncated {
                path: path.to_owned(),
                needed: header.min_file_len,
                actual: header.file_len,
            });
        }
        let architecture = header.architecture.clone().unwrap_or_else(|| "(none)".to_owned());
        if !SUPPORTED_ARCHITECTURES.contains(&architecture.as_str()) {
            return Err(EngineError::UnsupportedArchitecture {
                path: path.to_owned(),
                architecture,
            });
        }
        // Where the layers go is decided from the header, before the weights are read: a GPU
        // asked for and none usable, or one too small, is the load's error.
        let placement = plan_from(&header, params)?;
        let mut llama_params = LlamaModelParams::default()
            .with_n_gpu_layers(placement.layers)
            .with_vocab_only(params.vocab_only);
        if let Some(device) = &placement.device {
            // Pinned to the device the placement counted, not split over every one found.
            llama_params = llama_params.with_devices(&[device.index]).map_err(|_| {
                EngineError::LoadFailed {
                    path: path.to_owned(),
                    architecture: architecture.clone(),
                }
            })?;
        }
        let inner = LlamaModel::load_from_file(backend(), path, &llama_params).map_err(|_| {
            EngineError::LoadFailed { path: path.to_owned(), architecture: architecture.clone() }
        })?;
        let (bos, template) = {
            let vocab = inner.vocab();
            let bos =
                (vocab.should_add_bos() && vocab.bos().0 >= 0).then(|| Token(vocab.bos().0 as u32));
            let piece = |t: LlamaToken| {
                if t.0 < 0 {
                    String::new()
                } else {
                    String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned()
                }
            };
            let source = header.chat_template.as_deref().or(fallback_template(&architecture));
            let template = match source {
                None => Err(TemplateError::Missing.to_string()),
                Some(source) => ChatTemplate::new(source, piece(vocab.bos()), piece(vocab.eos()))
                    .map_err(|e| e.to_string()),
            };
            (bos, template)
        };
        tracing::info!(
            path = %path.display(), %architecture, on = %placement.describe(), "model loaded"
        );
        let mut model = Model {
            path: path.to_owned(),
            architecture,
            template,
            eog: Token(0),
            bos,
            vocab_only: params.vocab_only,
            constraints: OnceLock::new(),
            placement,
            inner,
        };
        model.eog = model.find_end_of_turn();
        Ok(model)
    }

    /// Where the load put the layers.
    pub fn placement(&self) -> &crate::device::Placement {
        &self.placement
    }

    /// Where a load of `path` with `params` would put the layers, from the file's header and
    /// the devices' free memory now, reading no weights (the pool's memory fit counts the
    /// layers a device takes against the device, the rest against system memory).
    pub fn plan(
        path: &Path,
        params: &ModelParams,
    ) -> Result<crate::device::Placement, EngineError> {
        let header = gguf::read_header(path)
            .map_err(|error| EngineError::BadGguf { path: path.to_owned(), error })?;
        plan_from(&header, params)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn architecture(&self) -> &str {
        &self.architecture
    }

    /// The context window the model was trained with.
    pub fn trained_context(&self) -> u32 {
        self.inner.n_ctx_train()
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.n_vocab().max(0) as usize
    }

    /// Bytes of the model's weights.
    pub fn size_bytes(&self) -> u64 {
        self.inner.size()
    }

    /// The token the chat template writes after an assistant message (`<|im_end|>`,
    /// `<end_of_turn>`): the vocabulary's own end-of-text token is often another one.
    fn find_end_of_turn(&self) -> Token {
        let vocab = self.inner.vocab();
        let fallback = if vocab.eot().0 >= 0 { vocab.eot() } else { vocab.eos() };
        let fallback = Token(fallback.0.max(0) as u32);
        const MARK: &str = "\u{1}caldrix-end\u{1}";
        let messages = [Message::new("user", "hi"), Message::new("assistant", MARK)];
        let Ok(text) = self.render(&messages, GenerationPrompt::Omit) else { return fallback };
        let Some(at) = text.find(MARK) else { return fallback };
        let after = &text[at + MARK.len()..];
        match self.tokenize(after, Special::Parse).first() {
            Some(&t) if self.is_end_of_generation(t) || vocab.is_control(t.llama()) => t,
            _ => fallback,
        }
    }

    /// The token that ends an assistant turn.
    pub fn end_of_turn(&self) -> Token {
        self.eog
    }

    pub fn is_end_of_generation(&self, token: Token) -> bool {
        self.inner.vocab().is_eog(token.llama())
    }

    pub fn tokenize(&self, text: &str, special: Special) -> Vec<Token> {
        self.inner
            .vocab()
            .tokenize(text.as_bytes(), false, special == Special::Parse)
            .into_iter()
            .map(|t| Token(t.0 as u32))
            .collect()
    }

    /// Tokens of a rendered prompt: special markers parsed, and the BOS token prepended when
    /// the model wants one and the template did not write it.
    pub fn tokenize_prompt(&self, rendered: &str) -> Vec<Token> {
        let mut tokens = self.tokenize(rendered, Special::Parse);
        if let Some(bos) = self.bos
            && tokens.first() != Some(&bos)
        {
            tokens.insert(0, bos);
        }
        tokens
    }

    /// The exact bytes of a token (special tokens as their text; a piece may be part of a
    /// UTF-8 character).
    pub fn token_bytes(&self, token: Token) -> Vec<u8> {
        self.inner.vocab().token_to_piece(token.llama(), true, None)
    }

    /// The bytes of a token sequence: the concatenation of the pieces.
    pub fn detokenize(&self, tokens: &[Token]) -> Vec<u8> {
        let vocab = self.inner.vocab();
        let mut out = Vec::new();
        for t in tokens {
            vocab.token_to_piece_into(t.llama(), &mut out, true, None);
        }
        out
    }

    /// Every token's bytes, indexed by token id.
    pub fn vocabulary(&self) -> Vec<Vec<u8>> {
        (0..self.vocab_size() as u32).map(|id| self.token_bytes(Token(id))).collect()
    }

    /// The model's chat template, when it has a usable one.
    pub fn chat_template(&self) -> Result<&ChatTemplate, EngineError> {
        self.template.as_ref().map_err(|e| TemplateError::Unusable(e.clone()).into())
    }

    /// Renders messages through the model's own chat template.
    pub fn render(
        &self,
        messages: &[Message],
        prompt: GenerationPrompt,
    ) -> Result<String, EngineError> {
        match &self.template {
            Ok(t) => Ok(t.render(messages, prompt)?),
            Err(e) => Err(TemplateError::Unusable(e.clone()).into()),
        }
    }

    /// Builds the constraint machinery now (the llguidance parser factory walks the whole
    /// vocabulary: seconds on a loaded machine), so no generation pays for it: a generation's
    /// cancel is not looked at while it is built.
    pub fn prepare_constraints(&self) -> Result<(), EngineError> {
        self.parser_factory().map(|_| ())
    }

    /// The llguidance parser factory over this vocabulary, built on first use (it walks the
    /// whole vocabulary, hundreds of milliseconds) and shared by every constraint after.
    pub(crate) fn parser_factory(&self) -> Result<Arc<ParserFactory>, EngineError> {
        self.constraints
            .get_or_init(|| {
                let env = llama_cpp_2::sampling::LlamaSampler::llguidance_tok_env(&self.inner);
                let mut factory = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
                factory.quiet();
                // llguidance's own compile and mask limits stay at their defaults (grammar
                // size, lexer fuel: a schema past them is refused, never a hang); its errors
                // leave out the parser state and grammar, which are pages long.
                factory.limits_mut().verbose_errors = false;
                Ok(Arc::new(factory))
            })
            .clone()
            .map_err(EngineError::Constraint)
    }

    /// Opens a context on this model.
    pub fn session(&self, params: &SessionParams) -> Result<Session<'_>, EngineError> {
        if self.vocab_only {
            // llama.cpp would open a context over weights that were never read.
            return Err(EngineError::BadParams(format!(
                "{} was loaded for its vocabulary only: it opens no session",
                self.path.display()
            )));
        }
        let trained = self.trained_context();
        let n_ctx = params.n_ctx.unwrap_or(4096.min(trained));
        if n_ctx > trained {
            return Err(EngineError::ContextTooLarge { requested: n_ctx, trained });
        }
        let Some(n_ctx_nz) = NonZeroU32::new(n_ctx) else {
            return Err(EngineError::BadParams("--ctx must be at least 1".into()));
        };
        if params.batch == 0 {
            return Err(EngineError::BadParams("--batch must be at least 1".into()));
        }
        if params.sequences == 0 || params.sequences + SCRATCH_SEQUENCES > MAX_SEQUENCES {
            return Err(EngineError::BadParams(format!(
                "a session has 1 to {} sequences",
                MAX_SEQUENCES - SCRATCH_SEQUENCES
            )));
        }
        let threads = params.threads.unwrap_or_else(default_threads);
        if threads == 0 {
            return Err(EngineError::BadParams("--threads must be at least 1".into()));
        }
        let batch = params.batch.min(n_ctx);
        let sequences = params.sequences + SCRATCH_SEQUENCES;
        // llama.cpp sizes its output buffer by the batch, and reserves one output per
        // sequence: fewer would abort the process inside llama.cpp.
        if batch < sequences {
            return Err(EngineError::BadParams(format!(
                "a batch of {batch} tokens is smaller than the session's {sequences} sequences \
                 ({} asked for and {SCRATCH_SEQUENCES} of the engine's own)",
                params.sequences
            )));
        }
        let cells = params.cells.unwrap_or(n_ctx).max(n_ctx);
        let cells = NonZeroU32::new(cells).unwrap_or(n_ctx_nz);
        let ctx_params = LlamaContextParams::default()
            .with_n_ctx(Some(cells))
            .with_n_batch(batch)
            .with_n_ubatch(batch)
            .with_n_seq_max(sequences)
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32)
            // One cell pool for every sequence: a fork (`seq_cp`) shares cells instead of copying.
            .with_kv_unified(true)
            // Keep the whole window of sliding-window layers so that any prefix can be kept.
            .with_swa_full(true)
            .with_flash_attention_policy(if params.flash_attention {
                FLASH_ATTN_AUTO
            } else {
                FLASH_ATTN_DISABLED
            });
        let ctx = self
            .inner
            .new_context(backend(), ctx_params)
            .map_err(|_| EngineError::ContextCreate { n_ctx: cells.get() })?;
        Ok(Session::new(self, ctx, n_ctx, batch, params.sequences))
    }
}
