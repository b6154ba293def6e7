//! Nothing to use: this crate exists for its `Cargo.toml` (why: read it).
