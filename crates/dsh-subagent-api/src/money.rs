//! Money, as every crate reads and shows it: an amount of the unit the
//! models' prices are given in (`dsh` never names a currency), held as
//! whole billionths of that unit, so sums over a tree are exact and never
//! drift. This module is the one conversion between an amount (`2.5`) and
//! billionths, both ways: cost budgets read theirs with it, and a cost
//! (`dsh_llm::Cost`, which counts billionths) is shown with it.
//!
//! ```
//! use dsh_subagent_api::money;
//! assert_eq!(money::nanos_of_amount(2.5), Some(2_500_000_000));
//! assert_eq!(money::amount_text(2_500_000_000), "2.5");
//! assert_eq!(money::amount_of_nanos(27_000), 0.000027);
//! assert_eq!(money::nanos_of_amount(-1.0), None);
//! ```

/// Billionths in one unit.
pub const NANOS_PER_UNIT: u64 = 1_000_000_000;

/// `amount` units in billionths, to the nearest; `None` when that is no
/// count of billionths a `u64` holds (a negative amount, not a number, or
/// more than about 18 billion units).
pub fn nanos_of_amount(amount: f64) -> Option<u64> {
    let nanos = (amount * NANOS_PER_UNIT as f64).round();
    // The bounds are checked on the float (a NaN fails them), so `as`
    // never clamps a value into range.
    (nanos >= 0.0 && nanos < u64::MAX as f64).then_some(nanos as u64)
}

/// `nanos` billionths as an amount of the unit, for machine output (JSON,
/// a span's attribute).
pub fn amount_of_nanos(nanos: u64) -> f64 {
    nanos as f64 / NANOS_PER_UNIT as f64
}

/// `nanos` billionths written as an amount of the unit, with as many
/// decimals as it needs (at most nine, none trailing): `0.82`, `0.000027`,
/// `3`.
pub fn amount_text(nanos: u64) -> String {
    let (units, fraction) = (nanos / NANOS_PER_UNIT, nanos % NANOS_PER_UNIT);
    if fraction == 0 {
        return units.to_string();
    }
    let digits = format!("{fraction:09}");
    format!("{units}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_convert_exactly_to_billionths_and_print_without_trailing_zeros() {
        assert_eq!(nanos_of_amount(2.5), Some(2_500_000_000));
        assert_eq!(nanos_of_amount(0.000_000_001), Some(1));
        assert_eq!(nanos_of_amount(-1.0), None);
        assert_eq!(nanos_of_amount(f64::NAN), None);
        assert_eq!(nanos_of_amount(1e30), None);
        let print = |amount: f64| nanos_of_amount(amount).map(amount_text);
        assert_eq!(print(2.5).as_deref(), Some("2.5"));
        assert_eq!(print(3.0).as_deref(), Some("3"));
        assert_eq!(print(0.000_027).as_deref(), Some("0.000027"));
        assert_eq!(amount_of_nanos(820_000_000), 0.82);
    }
}
