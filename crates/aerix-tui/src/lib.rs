//! The interactive screen: a state model fed by the session's events and the startup's
//! figures, drawn with ratatui, and the terminal it is drawn on.
//!
//! **Architecture Invariant.** This crate knows no pool and no session store: everything it
//! shows arrives as a [`Feed`] (the same `Event`s the session log gets, plus the live progress
//! of generations and what the binary measured: the diff, the startup). What the user asks
//! for leaves as an [`Action`] for the binary to carry out. Every figure on screen comes from
//! one of those, never from an estimate made here.

mod editor;
mod feed;
mod keys;
mod launch;
mod screen;
mod startup;
pub mod terminal;
mod view;

#[cfg(test)]
mod snapshots;

pub use editor::Editor;
pub use feed::{DiffStat, Feed, RequestEnd};
pub use keys::{Action, AskAnswer, HELP_COMMANDS, HELP_KEYS, PlanAnswer};
pub use launch::{peak_mark, wordmark};
pub use screen::{Gate, Screen, Verifier};
pub use startup::{Launch, Level, Note, PoolRow, ProfileRow, Startup};
pub use view::draw;
