//! The agent runtime in process, on scripted fake members: the turn loop (`turn_loop`, `roots`,
//! on `fake`) and delegation (`delegate`, on `pool`). No daemon, no pool.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a failed unwrap is a failed test")]

mod contexts;
mod delegate;
mod fake;
mod pool;
mod roots;
mod turn_loop;
