//! What model calls cost: a model's price per million tokens, and the cost
//! of a [`Usage`] at that price.
//!
//! The arithmetic lives here, in one small type, so every view of cost (the
//! `dsh` lines, `dsh tree`, spans) and every money budget agree on it. A
//! cost counts billionths of its unit; `dsh_subagent_api::money` is the
//! one conversion between those and an amount (`0.82`), both ways.

use serde::{Deserialize, Serialize};

use crate::{Counted, Usage};

/// A model's price per million tokens, in whatever currency it is given in
/// (`dsh` never names one). Built only from prices that are numbers and not
/// negative, so every [`Cost`] it gives is one too.
///
/// ```
/// use dsh_llm::{Price, Usage};
/// let price = Price::new(0.27, 1.10).unwrap();
/// let cost = price.cost(&Usage::reported(1_000_000, 500_000));
/// assert_eq!(cost.nanos(), 820_000_000); // 0.82
/// assert!(!cost.is_estimated());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    input: f64,
    output: f64,
    cached_input: Option<f64>,
}

/// Which of a [`Price`]'s three prices a [`PriceError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriceKey {
    /// The price of a million input (prompt) tokens.
    Input,
    /// The price of a million output (completion) tokens.
    Output,
    /// The price of a million input tokens the server read from its cache.
    CachedInput,
}

impl PriceKey {
    /// The key's name as `dsh.toml` writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Output => "output",
            Self::CachedInput => "cached_input",
        }
    }
}

/// A price that cannot be one: not a number (NaN, an infinity), or negative.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("{}", crate::wording::bad_price(self.key.as_str(), self.value))]
pub struct PriceError {
    /// Which price was wrong.
    pub key: PriceKey,
    /// The value given.
    pub value: f64,
}

/// A price must be a finite number, zero or more.
fn checked(key: PriceKey, value: f64) -> Result<f64, PriceError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(PriceError { key, value })
    }
}

impl Price {
    /// A price of `input` and `output` per million tokens; cached input
    /// tokens, when a server reports them, cost what input tokens do
    /// unless [`Price::with_cached_input`] says otherwise.
    pub fn new(input: f64, output: f64) -> Result<Self, PriceError> {
        Ok(Self {
            input: checked(PriceKey::Input, input)?,
            output: checked(PriceKey::Output, output)?,
            cached_input: None,
        })
    }

    /// Sets the price per million input tokens read from the server's cache.
    pub fn with_cached_input(mut self, cached_input: f64) -> Result<Self, PriceError> {
        self.cached_input = Some(checked(PriceKey::CachedInput, cached_input)?);
        Ok(self)
    }

    /// The price per million input tokens.
    pub const fn input(&self) -> f64 {
        self.input
    }

    /// The price per million output tokens.
    pub const fn output(&self) -> f64 {
        self.output
    }

    /// The price per million cached input tokens, when set.
    pub const fn cached_input(&self) -> Option<f64> {
        self.cached_input
    }

    /// What `usage` costs at this price: its prompt tokens at the input
    /// price (those the server read from its cache at the cached input
    /// price, when both the count and that price are known), its completion
    /// tokens at the output price, marked estimated when its counts are.
    ///
    /// ```
    /// use dsh_llm::{Price, Usage};
    /// let price = Price::new(1.0, 4.0).unwrap().with_cached_input(0.1).unwrap();
    /// // (200 × 1 + 800 × 0.1 + 100 × 4) per million
    /// let cost = price.cost(&Usage::reported(1000, 100).with_cached(800));
    /// assert_eq!(cost.nanos(), 680_000); // 0.00068
    /// ```
    pub fn cost(&self, usage: &Usage) -> Cost {
        let cached = match self.cached_input {
            Some(_) => usage.cached_tokens.unwrap_or(0).min(usage.prompt_tokens),
            None => 0,
        };
        let amount = self.input * (usage.prompt_tokens - cached) as f64
            + self.cached_input.unwrap_or(self.input) * cached as f64
            + self.output * usage.completion_tokens as f64;
        Cost::from_per_million(amount, usage.counted)
    }
}

/// What model calls cost: an amount of money in billionths of its
/// currency's unit (so sums over a tree are exact and never drift), and
/// whether it was priced from estimated token counts. The one cost type:
/// the agent loop, its transcripts, budgets and the tree all hold this one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cost {
    nanos: u64,
    #[serde(default, skip_serializing_if = "Counted::is_reported")]
    counted: Counted,
}

impl Cost {
    /// Nothing, from the server's counts.
    pub const ZERO: Self = Self {
        nanos: 0,
        counted: Counted::Reported,
    };

    /// A cost from an amount per million tokens times tokens.
    fn from_per_million(amount: f64, counted: Counted) -> Self {
        // Per million tokens to billionths of a unit: × 1e-6 × 1e9. `as`
        // saturates, and the price arithmetic never gives NaN.
        Self {
            nanos: (amount * 1e3).round() as u64,
            counted,
        }
    }

    /// A cost of `nanos` billionths of a unit, from the server's counts.
    pub const fn from_nanos(nanos: u64) -> Self {
        Self {
            nanos,
            counted: Counted::Reported,
        }
    }

    /// The same cost, marked as `counted`.
    #[must_use]
    pub const fn with_counted(mut self, counted: Counted) -> Self {
        self.counted = counted;
        self
    }

    /// The cost in billionths of its unit.
    pub const fn nanos(&self) -> u64 {
        self.nanos
    }

    /// Whether the tokens it was priced from are the server's counts or
    /// some are an estimate.
    pub const fn counted(&self) -> Counted {
        self.counted
    }

    /// Whether it was priced from estimated token counts.
    pub const fn is_estimated(&self) -> bool {
        matches!(self.counted, Counted::Estimated)
    }

    /// The sum of two costs either of which may be unknown: `None` only
    /// when both are.
    pub fn add_known(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a + b),
            (one, None) | (None, one) => one,
        }
    }
}

/// The sum of two costs (saturating), estimated when either was.
impl std::ops::Add for Cost {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            nanos: self.nanos.saturating_add(other.nanos),
            counted: self.counted.and(other.counted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimated(prompt: u64, completion: u64) -> Usage {
        Usage {
            counted: Counted::Estimated,
            ..Usage::reported(prompt, completion)
        }
    }

    #[test]
    fn a_usage_costs_its_tokens_at_their_prices_per_million() {
        let price = Price::new(0.27, 1.10).unwrap();
        assert_eq!(price.cost(&Usage::reported(0, 0)), Cost::ZERO);
        let cost = price.cost(&Usage::reported(1000, 100));
        // 1000 × 0.27 / 1e6 + 100 × 1.10 / 1e6 = 0.00027 + 0.00011
        assert_eq!(cost.nanos(), 380_000);
        assert_eq!(
            price.cost(&Usage::reported(3, 0)).nanos(),
            810,
            "a few tokens still cost something"
        );
        let free = Price::new(0.0, 0.0).unwrap();
        assert_eq!(free.cost(&Usage::reported(1_000_000, 1_000_000)), Cost::ZERO);
    }

    #[test]
    fn an_estimated_usage_gives_an_estimated_cost_and_sums_keep_the_mark() {
        let price = Price::new(2.0, 8.0).unwrap();
        let guess = price.cost(&estimated(500_000, 0));
        assert!(guess.is_estimated());
        assert_eq!(guess.nanos(), 1_000_000_000);
        let known = price.cost(&Usage::reported(0, 250_000));
        assert!(!known.is_estimated());
        let sum = guess + known;
        assert_eq!((sum.nanos(), sum.is_estimated()), (3_000_000_000, true));
        assert_eq!(Cost::add_known(None, Some(known)), Some(known));
        assert_eq!(Cost::add_known(None, None), None);
    }

    #[test]
    fn a_price_that_is_not_a_number_or_negative_is_refused_naming_its_key() {
        for (input, output, key) in [
            (f64::NAN, 1.0, PriceKey::Input),
            (1.0, -0.5, PriceKey::Output),
            (f64::INFINITY, 1.0, PriceKey::Input),
            (1.0, f64::NEG_INFINITY, PriceKey::Output),
        ] {
            let error = Price::new(input, output).unwrap_err();
            assert_eq!(error.key, key);
            assert!(error.to_string().contains(key.as_str()), "{error}");
        }
        let error = Price::new(1.0, 1.0).unwrap().with_cached_input(-1.0).unwrap_err();
        assert_eq!(error.key, PriceKey::CachedInput);
        insta::assert_snapshot!(error.to_string());
        let price = Price::new(1.0, 2.0).unwrap().with_cached_input(0.1).unwrap();
        assert_eq!(price.cached_input(), Some(0.1));
    }
}
