//! The turn loop on a scripted fake member: no daemon, no pool.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a failed unwrap is a failed test")]

mod fake;
mod roots;
mod turn_loop;
