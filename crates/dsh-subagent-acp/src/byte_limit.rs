//! The bounds on what an ACP child sends, as one checked setting.

use std::num::NonZeroUsize;

use dsh_subagent_api::setting::{self, Bounded, Written};

use crate::wording;

/// A number of bytes an ACP child may send before the run fails: the
/// answer text collected ([`AcpConfig::max_output_bytes`](crate::AcpConfig::max_output_bytes))
/// or one protocol line ([`AcpConfig::max_line_bytes`](crate::AcpConfig::max_line_bytes)).
/// A whole number, at least 1, checked when made: it reads itself from a
/// flag (`FromStr`) or a configuration (`Deserialize`), and every refusal
/// reads as [`InvalidByteLimit`] says.
///
/// ```
/// use dsh_subagent_acp::ByteLimit;
/// assert_eq!(ByteLimit::new(65_536).map(ByteLimit::bytes), Ok(65_536));
/// assert!(ByteLimit::new(0).is_err());
/// assert_eq!("1024".parse::<ByteLimit>().map(ByteLimit::bytes), Ok(1024));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ByteLimit(NonZeroUsize);

impl ByteLimit {
    /// The default bound on an answer's text: 1 MiB.
    pub const DEFAULT_MAX_OUTPUT: Self = Self(NonZeroUsize::new(1 << 20).expect("1 MiB is not zero"));
    /// The default bound on one protocol line: 4 MiB.
    pub const DEFAULT_MAX_LINE: Self = Self(NonZeroUsize::new(4 << 20).expect("4 MiB is not zero"));

    /// A bound of `bytes`; refused at zero.
    pub fn new(bytes: usize) -> Result<Self, InvalidByteLimit> {
        NonZeroUsize::new(bytes)
            .map(Self)
            .ok_or_else(|| InvalidByteLimit(Written::as_is(bytes)))
    }

    /// The bound in bytes.
    pub const fn bytes(self) -> usize {
        self.0.get()
    }
}

/// A value that is no [`ByteLimit`]: not a whole number of bytes, at
/// least 1, that this machine can hold. Its text is the one refusal of a
/// byte bound, however it was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::byte_limit_refused(&self.0))]
pub struct InvalidByteLimit(Written);

impl Bounded for ByteLimit {
    type Error = InvalidByteLimit;

    fn from_whole(value: u64) -> Result<Self, InvalidByteLimit> {
        usize::try_from(value)
            .map_err(|_| InvalidByteLimit(Written::as_is(value)))
            .and_then(Self::new)
    }

    fn refuse(written: Written) -> InvalidByteLimit {
        InvalidByteLimit(written)
    }

    fn whole(&self) -> u64 {
        self.bytes() as u64
    }
}

impl std::str::FromStr for ByteLimit {
    type Err = InvalidByteLimit;

    fn from_str(text: &str) -> Result<Self, InvalidByteLimit> {
        setting::parse(text)
    }
}

impl<'de> serde::Deserialize<'de> for ByteLimit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        setting::deserialize(deserializer)
    }
}

impl serde::Serialize for ByteLimit {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        setting::serialize(self, serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_refuses_a_byte_limit_in_one_wording() {
        let json = |value: serde_json::Value| serde_json::from_value::<ByteLimit>(value).unwrap_err().to_string();
        let refusals = [
            ByteLimit::new(0).unwrap_err().to_string(),
            "1MiB".parse::<ByteLimit>().unwrap_err().to_string(),
            json(serde_json::json!(-5)),
        ];
        insta::assert_snapshot!("byte_limit_refused", refusals.join("\n"));
        assert_eq!(ByteLimit::DEFAULT_MAX_OUTPUT.bytes(), 1 << 20);
        assert_eq!(ByteLimit::DEFAULT_MAX_LINE.bytes(), 4 << 20);
    }
}
