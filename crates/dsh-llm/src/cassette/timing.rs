//! How fast a replay answers: at once, or with the recorded pacing.

/// How fast a replay answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Timing {
    /// As fast as it can: no waiting between recorded chunks or events,
    /// and no delay before a recorded retry.
    #[default]
    Fast,
    /// With the recorded pacing (each chunk or event when it came, after
    /// its request), to bring back races and timeouts.
    Recorded,
}
