//! Every text this provider shows a model or a person, in one place, by topic.
//!
//! The rule: errors, diagnostics, `Display` output and log messages are
//! written here, and the rest of the crate only calls these items (a
//! `Display` impl hands its parts to a function here). What stays beside the
//! code are names a program matches rather than sentences a reader reads:
//! ACP method names (which also name a diagnostic's stage), JSON keys, stop
//! reasons, error codes (`code.rs`) and config key names.

mod auth;
mod config;
mod diagnostic;
mod process;
mod run;
mod start;
mod subagents;

pub(crate) use auth::*;
pub(crate) use config::*;
pub(crate) use diagnostic::*;
pub(crate) use process::*;
pub(crate) use run::*;
pub(crate) use start::*;
pub(crate) use subagents::*;
