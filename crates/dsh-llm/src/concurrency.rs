//! How many requests an endpoint is sent at once, as one checked setting.

use std::fmt;
use std::num::NonZeroU32;

use crate::wording;

/// The most requests to one model of an endpoint that are in flight at
/// once: at least 1.
///
/// An endpoint without one is sent as many requests as its callers make.
/// One is set from the start by configuration
/// ([`OpenAiConfig::with_max_concurrent`](crate::OpenAiConfig::with_max_concurrent),
/// `max_concurrent` in `dsh.toml`), learned when the server cuts a stream
/// while another request to it is in flight (llama-cpp-python's default
/// `interrupt_requests`), or kept from an earlier run.
///
/// It checks itself wherever it is read (`FromStr` for a flag or a
/// variable, `Deserialize` for a configuration file or JSON), so a zero
/// never reaches the client; every refusal reads as [`InvalidConcurrency`]
/// says.
///
/// ```
/// use dsh_llm::Concurrency;
/// assert_eq!(Concurrency::new(4).map(Concurrency::requests), Ok(4));
/// assert!(Concurrency::new(0).is_err());
/// assert!("four".parse::<Concurrency>().is_err());
/// let read: Concurrency = serde_json::from_value(serde_json::json!(2)).unwrap();
/// assert_eq!(serde_json::to_value(read).unwrap(), serde_json::json!(2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Concurrency(NonZeroU32);

impl Concurrency {
    /// One request at a time.
    pub const ONE: Self = Self(NonZeroU32::MIN);

    /// At most `requests` at once; refused at zero (an endpoint that may be
    /// sent nothing could only fail) and above `u32::MAX`.
    pub fn new(requests: u64) -> Result<Self, InvalidConcurrency> {
        u32::try_from(requests)
            .ok()
            .and_then(NonZeroU32::new)
            .map(Self)
            .ok_or_else(|| InvalidConcurrency(requests.to_string()))
    }

    /// How many requests at once.
    pub const fn requests(self) -> u32 {
        self.0.get()
    }

    /// As a count of requests in flight.
    #[cfg(feature = "http")]
    pub(crate) fn count(self) -> usize {
        usize::try_from(self.requests()).unwrap_or(usize::MAX)
    }
}

impl fmt::Display for Concurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A value that is no concurrency: not a whole number, or zero. Its text is
/// the one refusal of a concurrency, however it was written, and quotes
/// what was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::concurrency_refused(&self.0))]
pub struct InvalidConcurrency(String);

impl std::str::FromStr for Concurrency {
    type Err = InvalidConcurrency;

    fn from_str(text: &str) -> Result<Self, InvalidConcurrency> {
        let number = text.trim();
        match number.parse::<u64>() {
            Ok(requests) => Self::new(requests),
            Err(_) if number.parse::<f64>().is_ok_and(f64::is_finite) => Err(InvalidConcurrency(number.to_owned())),
            Err(_) => Err(InvalidConcurrency(format!("{text:?}"))),
        }
    }
}

impl serde::Serialize for Concurrency {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u32(self.requests())
    }
}

impl<'de> serde::Deserialize<'de> for Concurrency {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Visitor)
    }
}

struct Visitor;

impl Visitor {
    fn refuse<E: serde::de::Error>(written: String) -> E {
        E::custom(InvalidConcurrency(written))
    }
}

impl serde::de::Visitor<'_> for Visitor {
    type Value = Concurrency;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(wording::EXPECTING_CONCURRENCY)
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Concurrency, E> {
        Concurrency::new(value).map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Concurrency, E> {
        match u64::try_from(value) {
            Ok(value) => self.visit_u64(value),
            Err(_) => Err(Self::refuse(value.to_string())),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Concurrency, E> {
        Err(Self::refuse(value.to_string()))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Concurrency, E> {
        Err(Self::refuse(format!("{value:?}")))
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Concurrency, E> {
        Err(Self::refuse(value.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_refuses_in_one_wording() {
        let refusals = [
            Concurrency::new(0).unwrap_err().to_string(),
            "0".parse::<Concurrency>().unwrap_err().to_string(),
            "2.5".parse::<Concurrency>().unwrap_err().to_string(),
            "two".parse::<Concurrency>().unwrap_err().to_string(),
            serde_json::from_value::<Concurrency>(serde_json::json!(-1))
                .unwrap_err()
                .to_string(),
            serde_json::from_value::<Concurrency>(serde_json::json!("2"))
                .unwrap_err()
                .to_string(),
            Concurrency::new(u64::from(u32::MAX) + 1).unwrap_err().to_string(),
        ];
        insta::assert_snapshot!(refusals.join("\n"));
        assert_eq!(" 3 ".parse::<Concurrency>().map(Concurrency::requests), Ok(3));
        assert_eq!(Concurrency::ONE.to_string(), "1");
    }
}
