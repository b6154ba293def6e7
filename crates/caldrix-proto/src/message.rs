//! The messages. Every message is a map with a `type` key naming its kind; the other keys are
//! the kind's fields. Optional fields may be left out.

use serde::{Deserialize, Serialize};

use crate::tools::{Tool, ToolCall, ToolChoice};

/// A context's id, unique for the daemon's life.
pub type ContextId = u64;

/// What a client sends. (Kinds without fields are written `Kind {}` so that unknown keys are
/// refused for them too: serde ignores extra keys beside a unit variant's tag.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Request {
    /// The first frame of every connection.
    Hello {
        version: u32,
        client: String,
    },
    /// Load a model as a member named `alias`.
    MemberLoad {
        alias: String,
        model: String,
        #[serde(default)]
        flags: ServingFlags,
    },
    MemberUnload {
        alias: String,
    },
    MemberList {},
    ContextCreate {
        member: String,
        segments: Vec<Segment>,
        /// The tools the context offers: rendered through the chat template (its `tools`
        /// variable, or the pool's documented form) and callable under the `tools` constraint.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tools: Vec<Tool>,
    },
    ContextEdit {
        context: ContextId,
        edits: Vec<Edit>,
    },
    /// A new context with the same segments (and the same stored rows).
    ContextFork {
        context: ContextId,
    },
    ContextDrop {
        context: ContextId,
    },
    /// Each segment's token count.
    ContextCounts {
        context: ContextId,
    },
    Generate(Generate),
    /// Ends this connection's generation in progress (its final frame says `cancelled`).
    Cancel {},
    Status {},
    /// The daemon exits once this reply is sent.
    Stop {},
}

/// A piece of a context: text with an id, a role the model's chat template renders, and a
/// pinned flag (kept by the client's compaction; the daemon only stores it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Segment {
    pub id: String,
    pub role: Role,
    pub text: String,
    #[serde(default)]
    pub pinned: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool's result, answering the calls of the assistant segment before it.
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Edit {
    Append {
        segment: Segment,
    },
    /// New text (and optionally a new pinned flag) for an existing segment.
    Replace {
        id: String,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pinned: Option<bool>,
    },
    Remove {
        id: String,
    },
}

/// How a member is served (the flags of `caldrix run`); unset fields take the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServingFlags {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctx: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_layers: Option<u32>,
    /// Generations of the member decoded together, 1 to `MAX_BATCH` (absent: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<u32>,
    /// `max_batch` is a ceiling: the member takes the most generations up to it whose windows
    /// fit the memory limit (at least 1) instead of being refused (absent: false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_max_batch: Option<bool>,
    /// Tokens a constraint forces appended in one batch (absent: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_forward: Option<bool>,
    /// Prompt-lookup drafting (absent: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<bool>,
    /// A remote member (`openai:URL#MODEL`): the NAME of the environment variable (of the
    /// daemon's process) holding the engine's API key. The key itself never crosses the socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// A remote member: a local reference (GGUF path or Hugging Face reference) of the same
    /// model, loaded for its vocabulary and chat template only. Absent: the engine's own
    /// template and tokenizer, where it serves both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// A remote member: who applies the chat template. Absent: the pool when it has a
    /// template (the tokenizer's, or the one the engine serves), else the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<Render>,
}

/// Who renders a remote member's contexts through the chat template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Render {
    /// The pool renders and tokenizes, and sends the engine token ids (`/v1/completions`).
    Pool,
    /// The engine renders with its own template: the pool sends messages
    /// (`/v1/chat/completions`) and counts with the engine's tokens of them.
    Engine,
}

impl Render {
    pub fn as_str(self) -> &'static str {
        match self {
            Render::Pool => "pool",
            Render::Engine => "engine",
        }
    }
}

/// The most generations one member decodes together (`max_batch`, `--max-batch`): each holds a
/// window of KV cells of its own, and one decode step carries a token of each.
pub const MAX_BATCH: u32 = 16;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generate {
    pub context: ContextId,
    #[serde(default)]
    pub constraint: Constraint,
    pub max_new_tokens: u32,
    /// Absent: greedy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// Absent: no log-probabilities; `k`: each token's and its `k` best alternatives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<u32>,
    /// When set, the output is appended to the context as an assistant segment with this id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_as: Option<String>,
}

/// Open on the wire: a later protocol may add kinds, so a match outside this crate has an arm
/// for the ones it does not know.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "ConstraintRepr", into = "ConstraintRepr")]
#[non_exhaustive]
pub enum Constraint {
    #[default]
    None,
    /// `schema` is the JSON Schema as JSON text.
    Json {
        schema: String,
    },
    OneOf {
        options: Vec<String>,
    },
    /// A plain answer or calls of the context's tools (as `choice` admits), each call's
    /// arguments valid against its tool's schema; several calls in one reply when `parallel`.
    Tools {
        choice: ToolChoice,
        parallel: bool,
    },
}

/// `Constraint` on the wire: `none` as a struct variant, because serde ignores extra keys
/// beside a unit variant's tag (`{"kind": "none", "schema": ...}` would pass unnoticed).
#[derive(Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum ConstraintRepr {
    None {},
    Json { schema: String },
    OneOf { options: Vec<String> },
    Tools { choice: ToolChoice, parallel: bool },
}

impl From<ConstraintRepr> for Constraint {
    fn from(r: ConstraintRepr) -> Self {
        match r {
            ConstraintRepr::None {} => Constraint::None,
            ConstraintRepr::Json { schema } => Constraint::Json { schema },
            ConstraintRepr::OneOf { options } => Constraint::OneOf { options },
            ConstraintRepr::Tools { choice, parallel } => Constraint::Tools { choice, parallel },
        }
    }
}

impl From<Constraint> for ConstraintRepr {
    fn from(c: Constraint) -> Self {
        match c {
            Constraint::None => ConstraintRepr::None {},
            Constraint::Json { schema } => ConstraintRepr::Json { schema },
            Constraint::OneOf { options } => ConstraintRepr::OneOf { options },
            Constraint::Tools { choice, parallel } => ConstraintRepr::Tools { choice, parallel },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    pub temperature: f32,
    #[serde(default = "one")]
    pub top_p: f32,
    #[serde(default)]
    pub seed: u64,
}

fn one() -> f32 {
    1.0
}

/// What the daemon sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reply {
    Hello {
        version: u32,
        server: String,
    },
    /// A request without other output succeeded.
    Ok,
    Members {
        members: Vec<MemberInfo>,
    },
    /// A context after creation, an edit or a fork, and the answer to `context_counts`.
    Context {
        context: ContextId,
        segments: Vec<SegmentCount>,
        total_tokens: u32,
    },
    /// Before the first token of a long prefill: rows computed so far of `total`.
    Progress {
        done: u32,
        total: u32,
    },
    /// Generated text as it comes (UTF-8 complete: bytes of a split character wait).
    Delta {
        text: String,
    },
    Done(Done),
    Status(PoolStatus),
    Error {
        kind: ErrorKind,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentCount {
    pub id: String,
    pub tokens: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberInfo {
    pub alias: String,
    /// The model reference as it was loaded (`--load` or `member_load`).
    #[serde(default)]
    pub reference: String,
    /// The GGUF file the member serves.
    pub model: String,
    pub architecture: String,
    pub context_window: u32,
    pub footprint_bytes: u64,
    pub queue_depth: u32,
    /// Whether generations may use the `json` constraint (false only for a scripted member
    /// declared without it).
    #[serde(default = "yes")]
    pub json_constraint: bool,
    /// Where the member's layers run: `gpu` only when at least one layer is on a device (see
    /// `gpu`), never for the flag alone. Absent from an older pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<Lane>,
    /// The engine threads its session uses (the number the pool gave llama.cpp); absent for a
    /// scripted member, which runs none, and from an older pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Generations the member decodes together, as loaded; absent for a remote member (its
    /// engine batches) and from an older pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<u32>,
    /// A remote member's engine; absent for a local member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteInfo>,
    /// Where its layers went when some are on a GPU (`lane` is then `gpu`); absent on the CPU
    /// and from an older pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuInfo>,
}

/// The device a member's offloaded layers live on, as the load found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// ggml's name (`Vulkan0`, `CUDA0`).
    pub device: String,
    /// The driver's name for it.
    pub description: String,
    pub total_bytes: u64,
    /// Free when the member loaded, before its layers were placed.
    pub free_bytes: u64,
    /// Layers offloaded, of `total_layers` (the model's layers and its output layer).
    pub layers: u32,
    pub total_layers: u32,
    /// What the member holds there: its offloaded layers' weights and their KV rows.
    #[serde(default)]
    pub member_bytes: u64,
}

/// Where a remote member's generations run. It keeps no prefix store (the engine caches
/// prefixes itself): its store figures are all 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteInfo {
    /// The base URL, as loaded.
    pub url: String,
    /// The model name the engine serves.
    pub model: String,
    /// The engine as its endpoints told: `llama-server`, `vllm` (with its version), `sglang`,
    /// or `openai-compatible`.
    pub engine: String,
    /// Who renders its contexts (absent from daemons before it was said: the pool).
    #[serde(default = "render_pool")]
    pub render: Render,
}

fn render_pool() -> Render {
    Render::Pool
}

fn yes() -> bool {
    true
}

/// A member's lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    Cpu,
    Gpu,
}

impl Lane {
    pub fn name(self) -> &'static str {
        match self {
            Lane::Cpu => "cpu",
            Lane::Gpu => "gpu",
        }
    }
}

/// The final frame of a generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Done {
    pub text: String,
    pub stop: StopReason,
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<OneOfScores>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<TokenLogprob>>,
    /// Under the `tools` constraint, the calls the reply made (`text` holds them in their text
    /// form); empty for a plain answer and without the constraint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// With `append_as`: the context's counts once the reply was appended, as `context_counts`
    /// answers them, so a client needs no second request. Absent without `append_as`, from an
    /// older daemon, and when counting failed (then `context_counts` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<SegmentCounts>,
}

/// A context's counts: each segment's tokens and the rendered conversation's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentCounts {
    pub segments: Vec<SegmentCount>,
    pub total_tokens: u32,
}

/// Why a generation ended. Open on the wire like [`Constraint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    EndOfTurn,
    Complete,
    MaxTokens,
    ContextFull,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// The first prompt row computed by this generation: rows before it were stored (for a
    /// remote member: the prompt tokens the engine found in its own cache). Absent when a
    /// remote engine reports no cached tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recomputed_from: Option<u32>,
    pub prefill_ms: f64,
    pub decode_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneOfScores {
    pub chosen: u32,
    /// In the order of the request's options.
    pub logprobs: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub token: u32,
    pub text: String,
    pub logprob: f32,
    /// Always sent, `[]` for `logprobs: 0` (absent from older daemons: read as `[]`).
    #[serde(default)]
    pub top: Vec<TopLogprob>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    pub token: u32,
    pub text: String,
    pub logprob: f32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolStatus {
    pub version: String,
    pub connections: u32,
    pub members: Vec<MemberStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberStatus {
    pub info: MemberInfo,
    pub contexts: u32,
    pub store: StoreStatus,
    /// Generations the member runs now (not those queued: `info.queue_depth`). Absent from an
    /// older pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<u32>,
}

/// A member's prefix store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreStatus {
    pub budget_bytes: u64,
    pub bytes: u64,
    pub entries: u32,
    /// Distinct token rows held (rows shared by several entries count once).
    pub rows: u64,
    pub bytes_per_row: u64,
    pub hits: u64,
    pub misses: u64,
    /// Of `rows`, those parked in host memory: rows only an entry a generation did not use
    /// holds, moved out of the model's cells so attention does not run over them.
    #[serde(default)]
    pub parked_rows: u64,
}

/// What went wrong, as a client would branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The bytes were not a frame of this connection's format.
    BadFrame,
    /// A frame that is not a request this daemon knows, or a request out of place.
    BadRequest,
    /// The handshake's version is not this daemon's.
    Version,
    /// `max_connections` connections are open.
    TooManyConnections,
    UnknownMember,
    UnknownContext,
    UnknownSegment,
    /// A member load that does not fit the memory limit, or a reference that cannot be had.
    LoadRefused,
    /// The prompt does not fit the member's context window.
    TooLong,
    /// A constraint that does not compile, or an empty OneOf.
    BadConstraint,
    /// The engine failed (a decode error, a template that does not render).
    Engine,
    /// A control request the daemon could not answer within its 30 s bound.
    Timeout,
    /// A scripted member's reply does not satisfy the request's constraint, or the script ran
    /// out of replies.
    Script,
    Internal,
}
