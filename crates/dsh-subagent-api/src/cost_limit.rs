//! The size of a money budget, as one checked setting.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

use crate::money::{NANOS_PER_UNIT, amount_text, nanos_of_amount};
use crate::setting::Written;
use crate::wording;

/// The money a [`CostBudget`](crate::CostBudget) allows: an amount greater
/// than zero in the unit the models' prices are given in, held in
/// billionths of that unit (the unit of `dsh_llm::Cost::nanos`), from
/// [`CostLimit::MIN_NANOS`] to [`CostLimit::MAX_NANOS`].
///
/// Written as an amount (`2.5`, `10`), it checks itself wherever it is read
/// (`FromStr` for a flag, `Deserialize` for a configuration file or JSON),
/// so it travels whole to the budget it sizes; every refusal reads as
/// [`InvalidCostLimit`] says.
///
/// ```
/// use dsh_subagent_api::CostLimit;
/// assert_eq!("2.5".parse::<CostLimit>().map(CostLimit::nanos), Ok(2_500_000_000));
/// assert_eq!(CostLimit::from_nanos(250_000_000).map(|limit| limit.to_string()), Ok("0.25".to_owned()));
/// assert!("0".parse::<CostLimit>().is_err());
/// assert!(CostLimit::from_amount(f64::NAN).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CostLimit(NonZeroU64);

impl CostLimit {
    /// The smallest budget: one billionth of a unit.
    pub const MIN_NANOS: u64 = 1;

    /// The largest budget: 18,446,744,073 units, about the most billionths
    /// a `u64` holds.
    pub const MAX_NANOS: u64 = 18_446_744_073 * NANOS_PER_UNIT;

    /// A budget of `nanos` billionths of a unit; refused at zero and past
    /// [`CostLimit::MAX_NANOS`].
    pub fn from_nanos(nanos: u64) -> Result<Self, InvalidCostLimit> {
        match NonZeroU64::new(nanos) {
            Some(nanos) if nanos.get() <= Self::MAX_NANOS => Ok(Self(nanos)),
            _ => Err(InvalidCostLimit(Written::as_is(amount_text(nanos)))),
        }
    }

    /// A budget of `amount` units, to the nearest billionth; refused when
    /// that is not from [`CostLimit::MIN_NANOS`] to
    /// [`CostLimit::MAX_NANOS`] (zero, negative, too large, not a number).
    pub fn from_amount(amount: f64) -> Result<Self, InvalidCostLimit> {
        Self::of_amount(amount, || Written::as_is(amount))
    }

    fn of_amount(amount: f64, written: impl FnOnce() -> Written) -> Result<Self, InvalidCostLimit> {
        nanos_of_amount(amount)
            .and_then(|nanos| Self::from_nanos(nanos).ok())
            .ok_or_else(|| InvalidCostLimit(written()))
    }

    /// The budget in billionths of a unit.
    pub const fn nanos(self) -> u64 {
        self.0.get()
    }
}

/// The budget as an amount in its unit: `2.5`, `10`.
impl fmt::Display for CostLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&amount_text(self.nanos()))
    }
}

/// A value that is no cost budget: not an amount from one billionth of a
/// unit to [`CostLimit::MAX_NANOS`] billionths. Its text is the one refusal
/// of a cost budget, however it was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::cost_limit_refused(&self.0, &amount_text(CostLimit::MIN_NANOS), &amount_text(CostLimit::MAX_NANOS)))]
pub struct InvalidCostLimit(Written);

/// A command-line amount: a number, spaces around it allowed.
impl FromStr for CostLimit {
    type Err = InvalidCostLimit;

    fn from_str(text: &str) -> Result<Self, InvalidCostLimit> {
        match text.trim().parse::<f64>() {
            Ok(amount) => Self::of_amount(amount, || Written::as_is(text.trim())),
            Err(_) => Err(InvalidCostLimit(Written::text(text))),
        }
    }
}

/// An amount from a configuration file or JSON: a number; anything else
/// is refused with the setting's error.
impl<'de> Deserialize<'de> for CostLimit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Visitor)
    }
}

struct Visitor;

fn refuse<E: serde::de::Error>(written: Written) -> E {
    E::custom(InvalidCostLimit(written))
}

impl<'de> serde::de::Visitor<'de> for Visitor {
    type Value = CostLimit;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(wording::EXPECTING_AMOUNT)
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<CostLimit, E> {
        match value.checked_mul(NANOS_PER_UNIT) {
            Some(nanos) => CostLimit::from_nanos(nanos).map_err(|_| refuse(Written::as_is(value))),
            None => Err(refuse(Written::as_is(value))),
        }
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<CostLimit, E> {
        match u64::try_from(value) {
            Ok(value) => self.visit_u64(value),
            Err(_) => Err(refuse(Written::as_is(value))),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<CostLimit, E> {
        CostLimit::from_amount(value).map_err(E::custom)
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<CostLimit, E> {
        Err(refuse(Written::text(value)))
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<CostLimit, E> {
        Err(refuse(Written::as_is(value)))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<CostLimit, E> {
        Err(refuse(Written::as_is("null")))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<CostLimit, A::Error> {
        Err(refuse(Written::as_is(wording::WRITTEN_LIST)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<CostLimit, A::Error> {
        Err(refuse(Written::as_is(wording::WRITTEN_TABLE)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_refuses_a_cost_limit_in_one_wording() {
        let json = |value: serde_json::Value| serde_json::from_value::<CostLimit>(value).unwrap_err().to_string();
        let refusals = [
            CostLimit::from_nanos(0).unwrap_err().to_string(),
            CostLimit::from_amount(-3.0).unwrap_err().to_string(),
            CostLimit::from_amount(f64::NAN).unwrap_err().to_string(),
            "0".parse::<CostLimit>().unwrap_err().to_string(),
            "0.0000000001".parse::<CostLimit>().unwrap_err().to_string(),
            "5 dollars".parse::<CostLimit>().unwrap_err().to_string(),
            json(serde_json::json!(-3)),
            json(serde_json::json!(18_446_744_074_u64)),
            json(serde_json::json!(1e12)),
            json(serde_json::json!("2.5")),
        ];
        insta::assert_snapshot!("cost_limit_refused", refusals.join("\n"));
    }

    #[test]
    fn an_amount_is_taken_to_the_billionth_however_it_is_written() {
        assert_eq!(" 2.5 ".parse::<CostLimit>().map(CostLimit::nanos), Ok(2_500_000_000));
        assert_eq!("0.000000001".parse::<CostLimit>().map(CostLimit::nanos), Ok(1));
        let json = |value: serde_json::Value| serde_json::from_value::<CostLimit>(value).ok().map(CostLimit::nanos);
        assert_eq!(json(serde_json::json!(3)), Some(3_000_000_000));
        assert_eq!(json(serde_json::json!(0.1)), Some(100_000_000));
        assert_eq!(json(serde_json::json!(18_446_744_073_u64)), Some(CostLimit::MAX_NANOS));
        assert_eq!(CostLimit::from_nanos(CostLimit::MAX_NANOS + 1).ok(), None);
        assert_eq!(
            CostLimit::from_nanos(2_500_000_000).map(|limit| limit.to_string()),
            Ok("2.5".to_owned())
        );
    }
}
