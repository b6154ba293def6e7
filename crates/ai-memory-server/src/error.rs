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
    Store(#[from] ai_memory_store::StoreError),
    #[error("index: {0}")]
    Index(ai_memory_index::IndexError),
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
