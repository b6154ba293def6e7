//! The bounds of one generation's request, enforced before any row is computed and documented
//! in `docs/protocol.md`: by `GenerateParams::check`, except `MAX_SCHEMA_BYTES`, which the pool
//! checks on the schema's text before parsing it (`caldrix run` reads a file the user chose).

/// Most alternatives per token a caller may ask for: what the common APIs allow.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Most options of a OneOf constraint: each is scored on a sequence of its own.
pub const MAX_ONE_OF_OPTIONS: usize = 64;

/// Longest OneOf option, in bytes.
pub const MAX_OPTION_BYTES: usize = 4096;

/// Largest JSON schema, in bytes of its JSON text (llguidance's own grammar limits apply
/// after it: `max_grammar_size` and the lexer's fuel).
pub const MAX_SCHEMA_BYTES: usize = 256 << 10;
