//! What a cassette file holds once read and checked.

use super::exchange::Exchange;
use super::format::Level;

/// A whole cassette's contents.
pub(crate) struct Contents {
    pub(crate) level: Level,
    pub(crate) exchanges: Vec<Exchange>,
    /// Why its run was stopped before it ended, when it was
    /// ([`Recorder::interrupt`](super::Recorder::interrupt)).
    pub(crate) interrupted: Option<String>,
    /// The parts its closing line lists (file names beside it).
    pub(crate) parts: Vec<String>,
}
