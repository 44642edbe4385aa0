//! The size of a token budget, as one checked setting.

use std::num::NonZeroU64;

use crate::MAX_SAFE_INTEGER;
use crate::setting::{self, Bounded, Written};
use crate::wording;

/// The tokens a token budget allows: a whole number from 1 to
/// [`MAX_SAFE_INTEGER`] (what every JSON reader
/// holds exactly). One checked setting for every token budget, a tree's
/// and a tool's children's: it checks itself wherever it is read (`FromStr`
/// for a flag, `Deserialize` for a configuration file or JSON), so it
/// travels whole to the [`TokenBudget`](crate::TokenBudget) it sizes, and every refusal reads
/// as [`InvalidTokenLimit`] says.
///
/// ```
/// use dsh_subagent_api::TokenLimit;
/// assert_eq!(TokenLimit::new(200_000).map(TokenLimit::tokens), Ok(200_000));
/// assert!(TokenLimit::new(0).is_err());
/// assert!("lots".parse::<TokenLimit>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TokenLimit(NonZeroU64);

impl TokenLimit {
    /// A limit of `tokens` tokens; refused at zero and past
    /// [`MAX_SAFE_INTEGER`].
    pub fn new(tokens: u64) -> Result<Self, InvalidTokenLimit> {
        match NonZeroU64::new(tokens) {
            Some(tokens) if tokens.get() <= MAX_SAFE_INTEGER => Ok(Self(tokens)),
            _ => Err(InvalidTokenLimit(Written::as_is(tokens))),
        }
    }

    /// The limit in tokens.
    pub const fn tokens(self) -> u64 {
        self.0.get()
    }
}

/// A value that is no token budget: not a whole number of tokens from 1
/// to [`MAX_SAFE_INTEGER`]. Its text is the one
/// refusal of a token budget, however it was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::token_limit_refused(&self.0, MAX_SAFE_INTEGER))]
pub struct InvalidTokenLimit(Written);

impl Bounded for TokenLimit {
    type Error = InvalidTokenLimit;

    fn from_whole(value: u64) -> Result<Self, InvalidTokenLimit> {
        Self::new(value)
    }

    fn refuse(written: Written) -> InvalidTokenLimit {
        InvalidTokenLimit(written)
    }

    fn whole(&self) -> u64 {
        self.tokens()
    }
}

setting::bounded_setting!(TokenLimit);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_refuses_a_token_limit_in_one_wording() {
        let json = |value: serde_json::Value| serde_json::from_value::<TokenLimit>(value).unwrap_err().to_string();
        let refusals = [
            TokenLimit::new(0).unwrap_err().to_string(),
            TokenLimit::new(MAX_SAFE_INTEGER + 1).unwrap_err().to_string(),
            "200k".parse::<TokenLimit>().unwrap_err().to_string(),
            json(serde_json::json!(-5)),
            json(serde_json::json!("5000")),
        ];
        insta::assert_snapshot!("token_limit_refused", refusals.join("\n"));
        assert_eq!(" 5000 ".parse::<TokenLimit>().map(TokenLimit::tokens), Ok(5_000));
        assert_eq!(
            TokenLimit::new(MAX_SAFE_INTEGER).map(TokenLimit::tokens),
            Ok(MAX_SAFE_INTEGER)
        );
    }
}
