use ai_memory_core::NameError;

/// What went wrong, as every entry point reports it (MCP tool error, HTTP status, CLI message).
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// Bad arguments: a name, a path, a page, a scope. Nothing was stored.
    #[error("{0}")]
    Invalid(String),
    /// No such page or project, or one the caller may not read (the same answer, on purpose).
    #[error("{0}")]
    NotFound(String),
    /// The caller may read but not do this.
    #[error("{0}")]
    Denied(String),
    /// No valid token.
    #[error("a valid API key is required (Authorization: Bearer …)")]
    Unauthorized,
    #[error("store: {0}")]
    Store(ai_memory_store::StoreError),
    #[error("index: {0}")]
    Index(ai_memory_index::IndexError),
}

// By hand, not `#[from]`: the message holds the cause, so it is not a `source` too (a printed
// chain would say it twice; ARCHITECTURE.md, errors).
impl From<ai_memory_store::StoreError> for MemoryError {
    fn from(e: ai_memory_store::StoreError) -> Self {
        MemoryError::Store(e)
    }
}

impl From<NameError> for MemoryError {
    fn from(e: NameError) -> Self {
        MemoryError::Invalid(e.to_string())
    }
}

impl From<ai_memory_index::IndexError> for MemoryError {
    fn from(e: ai_memory_index::IndexError) -> Self {
        use ai_memory_index::IndexError as E;
        match e {
            E::Denied(m) => MemoryError::Denied(m),
            E::NotFound(m) => MemoryError::NotFound(m),
            E::Invalid(m) => MemoryError::Invalid(m),
            other => MemoryError::Index(other),
        }
    }
}

impl MemoryError {
    /// The HTTP status a client sees.
    pub fn status(&self) -> u16 {
        match self {
            MemoryError::Invalid(_) => 400,
            MemoryError::Unauthorized => 401,
            MemoryError::Denied(_) => 403,
            MemoryError::NotFound(_) => 404,
            MemoryError::Store(_) | MemoryError::Index(_) => 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ai_memory_store::StoreError;

    fn printed<E: std::error::Error + Send + Sync + 'static>(e: E) -> (String, String) {
        (e.to_string(), format!("{:#}", anyhow::Error::new(e)))
    }

    /// Errors wrapped across crates (the store's in this crate's, the git store's in the
    /// store's, the pool client's in the classifier's) print their cause once, as `{}` and as
    /// the binary's `{:#}`.
    #[test]
    fn a_wrapped_error_s_cause_is_printed_once() {
        let cause = "no space left on device";
        let io = || std::io::Error::other(cause);
        let store = StoreError::Io { path: "/wiki/a.md".into(), error: io() };
        let git = StoreError::from(gitstore::bare::BareError::Lock {
            path: "/wiki/.lock".into(),
            error: io(),
        });
        let pool = crate::profile::llm::LlmError::from(caldrix_client::ClientError::from(io()));
        for (plain, chain) in
            [printed(MemoryError::from(store)), printed(MemoryError::from(git)), printed(pool)]
        {
            assert_eq!(plain.matches(cause).count(), 1, "{plain}");
            assert_eq!(chain.matches(cause).count(), 1, "{chain}");
        }
    }
}
