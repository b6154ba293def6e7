//! The aerix session every front end drives (`aerix -p`, the screen, `aerix acp`): the
//! startup (`startup`, `session::open`), the requests on it (`session::Session::run`: operations
//! in, typed outputs out), a request end to end (`request`: its route, its root, the turn loop
//! it runs on), and the parts they are made of: the pool's members (`pool`), the
//! session's profile (`attach`), plugins and skills (`extensions`), the hooks as the session
//! fires them (`hooks`), the runtime joined to its crates (`bridge`), the checkpoints
//! (`checkpoint`) and the exit statuses a request and a refusal ask for (`exit`). The binary
//! parses the command line and shows the outputs; nothing here reads a terminal.

pub mod attach;
pub mod bridge;
pub mod checkpoint;
pub mod compact;
pub mod delegate;
pub mod exit;
pub mod extensions;
pub mod hooks;
pub mod pool;
pub mod request;
pub mod runtime;
pub mod session;
pub mod startup;
