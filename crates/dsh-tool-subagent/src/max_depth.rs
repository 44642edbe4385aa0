//! `maxDepth` (`max_depth` in `dsh.toml`): how deep delegation may nest
//! below a tool, as one setting that checks itself however it is written.

use std::fmt;

use dsh_subagent_api::DepthLimit;

use crate::config_error::ConfigError;
use crate::wording;

/// How deep delegation may nest below this tool.
///
/// One type from where it is written to where it is used: it reads itself
/// from JSON and `dsh.toml` (`Deserialize`: a whole number, an integral
/// float such as `2.0`, or `"provider-managed"`) and from a flag
/// (`FromStr`), and its cap is the [`DepthLimit`] the tool sends across the
/// provider seam. Absent (no `MaxDepth` at all) means no cap is sent.
///
/// ```
/// use dsh_tool_subagent::{MaxDepth, provider::DepthLimit};
/// assert_eq!("2".parse::<MaxDepth>(), Ok(MaxDepth::Limit(DepthLimit::new(2).unwrap())));
/// assert_eq!("provider-managed".parse::<MaxDepth>(), Ok(MaxDepth::ProviderManaged));
/// assert!("-1".parse::<MaxDepth>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxDepth {
    /// The child's depth (caller's depth + 1) must be at most this. `0` forbids delegation.
    Limit(DepthLimit),
    /// The provider keeps its own recursion budget; no cap is sent.
    ProviderManaged,
}

/// The word that leaves the recursion budget to the provider.
const PROVIDER_MANAGED: &str = "provider-managed";

impl MaxDepth {
    /// A cap of `depth`; refused past the safe-integer range.
    pub fn limit(depth: u64) -> Result<Self, ConfigError> {
        DepthLimit::new(depth)
            .map(Self::Limit)
            .map_err(|_| ConfigError::InvalidMaxDepth)
    }

    /// The cap sent to the provider with every child: none when the
    /// provider manages its own budget.
    pub fn cap(self) -> Option<DepthLimit> {
        match self {
            Self::Limit(limit) => Some(limit),
            Self::ProviderManaged => None,
        }
    }
}

impl std::str::FromStr for MaxDepth {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, ConfigError> {
        let text = text.trim();
        if text == PROVIDER_MANAGED {
            return Ok(Self::ProviderManaged);
        }
        text.parse::<u64>()
            .map_err(|_| ConfigError::InvalidMaxDepth)
            .and_then(Self::limit)
    }
}

impl<'de> serde::Deserialize<'de> for MaxDepth {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Visitor)
    }
}

impl serde::Serialize for MaxDepth {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Limit(limit) => serializer.serialize_u64(limit.depth()),
            Self::ProviderManaged => serializer.serialize_str(PROVIDER_MANAGED),
        }
    }
}

struct Visitor;

impl serde::de::Visitor<'_> for Visitor {
    type Value = MaxDepth;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(wording::EXPECTING_MAX_DEPTH)
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<MaxDepth, E> {
        MaxDepth::limit(value).map_err(|_| E::custom(wording::MAX_DEPTH_PAST_SAFE_INTEGER))
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<MaxDepth, E> {
        match u64::try_from(value) {
            Ok(value) => self.visit_u64(value),
            Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(value), &self)),
        }
    }

    /// An integral float within the safe range counts (`2.0`); `-0.0`,
    /// a fraction and anything past the range do not.
    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<MaxDepth, E> {
        let integral = value.is_finite() && value.fract() == 0.0 && value.is_sign_positive();
        if integral && value <= dsh_subagent_api::MAX_SAFE_INTEGER as f64 {
            // Exact: an integral float within the safe range converts losslessly.
            return self.visit_u64(value as u64);
        }
        Err(E::invalid_value(serde::de::Unexpected::Float(value), &self))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<MaxDepth, E> {
        match value {
            PROVIDER_MANAGED => Ok(MaxDepth::ProviderManaged),
            other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
        }
    }
}
