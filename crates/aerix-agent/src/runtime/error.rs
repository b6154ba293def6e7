//! The runtime's errors.

use caldrix_client::ClientError;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("the pool: {0}")]
    Pool(ClientError),
    /// The pool's end of the connection went away (the daemon died or was killed).
    #[error("pool gone: {0}")]
    PoolGone(ClientError),
    /// A named failure of the agent.
    #[error("{0}")]
    Failed(String),
    /// Ended by a bound.
    #[error("{0}")]
    Killed(String),
    #[error("cancelled")]
    Cancelled,
}

impl From<ClientError> for CoreError {
    fn from(e: ClientError) -> CoreError {
        if pool_gone(&e) { CoreError::PoolGone(e) } else { CoreError::Pool(e) }
    }
}

/// Whether `e` says the pool's end of the connection is gone, rather than a refusal.
pub fn pool_gone(e: &ClientError) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    match e {
        ClientError::Closed => true,
        ClientError::Io(io) => {
            matches!(io.kind(), BrokenPipe | ConnectionReset | ConnectionAborted | UnexpectedEof)
        }
        _ => false,
    }
}
