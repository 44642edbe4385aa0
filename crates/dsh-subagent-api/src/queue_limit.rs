//! The bound of a tree's queue, as one checked setting.

use crate::setting::{self, Bounded, Written};
use crate::wording;

/// The most calls of a delegation tree that may wait for a slot to run
/// (`max_queued`), 0 or more: at 0, a call that finds no free slot is
/// refused at once.
///
/// It checks itself wherever it is read (`FromStr` for a flag,
/// `Deserialize` for a configuration file or JSON), so it travels whole to
/// the limits it sets; every refusal reads as [`InvalidQueueLimit`] says.
///
/// ```
/// use dsh_subagent_api::QueueLimit;
/// assert_eq!(QueueLimit::new(64).calls(), 64);
/// assert_eq!("0".parse::<QueueLimit>().map(QueueLimit::calls), Ok(0));
/// assert!("-1".parse::<QueueLimit>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueLimit(usize);

impl QueueLimit {
    /// At most `calls` waiting calls.
    pub const fn new(calls: usize) -> Self {
        Self(calls)
    }

    /// The most calls that may wait.
    pub const fn calls(self) -> usize {
        self.0
    }
}

/// A value that is no queue limit: not a whole number of calls, 0 or more.
/// Its text is the one refusal of a queue limit, however it was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::queue_limit_refused(&self.0))]
pub struct InvalidQueueLimit(Written);

impl Bounded for QueueLimit {
    type Error = InvalidQueueLimit;

    fn from_whole(value: u64) -> Result<Self, InvalidQueueLimit> {
        usize::try_from(value)
            .map(Self)
            .map_err(|_| InvalidQueueLimit(Written::as_is(value)))
    }

    fn refuse(written: Written) -> InvalidQueueLimit {
        InvalidQueueLimit(written)
    }

    fn whole(&self) -> u64 {
        self.calls() as u64
    }
}

setting::bounded_setting!(QueueLimit);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_refuses_a_queue_limit_in_one_wording() {
        let json = |value: serde_json::Value| serde_json::from_value::<QueueLimit>(value).unwrap_err().to_string();
        let refusals = [
            "-1".parse::<QueueLimit>().unwrap_err().to_string(),
            "64 calls".parse::<QueueLimit>().unwrap_err().to_string(),
            json(serde_json::json!(-1)),
            json(serde_json::json!(0.5)),
            json(serde_json::json!("64")),
        ];
        insta::assert_snapshot!("queue_limit_refused", refusals.join("\n"));
        assert_eq!(" 0 ".parse::<QueueLimit>(), Ok(QueueLimit::new(0)));
        assert_eq!(
            serde_json::from_value::<QueueLimit>(serde_json::json!(64)).ok(),
            Some(QueueLimit::new(64))
        );
    }
}
