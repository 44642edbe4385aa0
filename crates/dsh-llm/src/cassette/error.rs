//! What can go wrong reading or writing a cassette.

use std::path::PathBuf;

use crate::wording;

/// A cassette that cannot be read, or a recording that cannot be written.
///
/// Every message names the file, and the line where there is one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CassetteError {
    /// The file could not be opened or read.
    #[error("{}", wording::cassette_unreadable(file, source))]
    Unreadable {
        /// The cassette.
        file: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The first line is not a cassette's header.
    #[error("{}", wording::cassette_not_a_cassette(file))]
    NotACassette {
        /// The file.
        file: PathBuf,
    },
    /// A cassette of a version this crate does not read.
    #[error("{}", wording::cassette_version(file, *found, super::VERSION))]
    Version {
        /// The cassette.
        file: PathBuf,
        /// The version its header names.
        found: u64,
    },
    /// The file ends in the middle of a line: it was cut while written.
    #[error("{}", wording::cassette_torn(file, *line))]
    Torn {
        /// The cassette.
        file: PathBuf,
        /// The torn line (1-based).
        line: usize,
    },
    /// A line that is not what a cassette holds there.
    #[error("{}", wording::cassette_corrupt(file, *line, message))]
    Corrupt {
        /// The cassette.
        file: PathBuf,
        /// The line (1-based).
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The recording never ended: replay refuses it.
    #[error("{}", wording::cassette_unfinished(file, reason))]
    Unfinished {
        /// The cassette (or its unfinished recording).
        file: PathBuf,
        /// Why it counts as unfinished.
        reason: String,
    },
    /// A part the cassette lists cannot be read with it.
    #[error("{}", wording::cassette_bad_part(file, reason))]
    BadPart {
        /// The cassette.
        file: PathBuf,
        /// What is wrong with the part.
        reason: String,
    },
    /// Another run is recording into this file.
    #[error("{}", wording::cassette_busy(file, partial))]
    Busy {
        /// The cassette.
        file: PathBuf,
        /// The recording in progress beside it.
        partial: PathBuf,
    },
    /// The recording could not be created, written or finished (a
    /// directory that does not exist or is not writable, a full disk).
    #[error("{}", wording::cassette_unwritable(file, source))]
    Unwritable {
        /// The file being written.
        file: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// A model of one level was recorded into a cassette of the other.
    #[error("{}", wording::cassette_mixed_levels(file, recorded.as_str(), asked.as_str()))]
    MixedLevels {
        /// The cassette.
        file: PathBuf,
        /// The level it already records.
        recorded: super::Level,
        /// The level asked for.
        asked: super::Level,
    },
}
