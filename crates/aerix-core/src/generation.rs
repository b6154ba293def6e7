//! One generation on the pool that the cancel flag can end: a `cancel` frame, then the pool's
//! `done` read back, so the pool stops decoding and the connection stays in step.

use std::time::Duration;

use aerix_tools::Cancel;
use caldrix_client::{Client, ClientError, FRAME_TIMEOUT};
use caldrix_proto::{Done, Generate, Reply, Request};

use crate::CoreError;

/// How often a generation in flight looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);
/// How long a cancelled generation's `done` is waited for: the user is waiting to get out.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Runs `generate` to its `done`, or until `cancel` is set (then `CoreError::Cancelled`).
pub(crate) async fn run(
    client: &mut Client,
    generate: Generate,
    cancel: &Cancel,
    streamed: &mut (dyn FnMut() + Send),
) -> Result<Done, CoreError> {
    if cancel.is_cancelled() {
        return Err(CoreError::Cancelled);
    }
    client.send(&Request::Generate(generate)).await?;
    loop {
        // `Client::recv` awaits only a read into its own buffer, so dropping it when the
        // flag wins loses no frame. Biased: a frame already there is taken first.
        let reply = tokio::select! {
            biased;
            reply = client.recv(FRAME_TIMEOUT) => reply?,
            () = cancelled(cancel) => return stop(client).await,
        };
        match reply {
            Reply::Done(done) => return Ok(done),
            Reply::Delta { .. } => streamed(),
            Reply::Progress { .. } => {}
            other => return Err(ClientError::Unexpected(format!("{other:?}")).into()),
        }
    }
}

async fn cancelled(cancel: &Cancel) {
    while !cancel.is_cancelled() {
        tokio::time::sleep(CANCEL_POLL).await;
    }
}

/// Sends `cancel` and reads up to the generation's `done`. The run is cancelled whatever the
/// pool answers; a pool that has not answered within `CANCEL_WAIT` is left behind.
async fn stop(client: &mut Client) -> Result<Done, CoreError> {
    if client.send(&Request::Cancel {}).await.is_ok() {
        let _ = tokio::time::timeout(CANCEL_WAIT, async {
            while let Ok(Reply::Progress { .. } | Reply::Delta { .. }) =
                client.recv(CANCEL_WAIT).await
            {}
        })
        .await;
    }
    Err(CoreError::Cancelled)
}
