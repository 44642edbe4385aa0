//! `[data]`: the bounds on the transcripts kept in the data directory
//! ([`crate::retention`]). Unset keys take dsh's defaults (30 days, 1 GiB);
//! `"off"` lifts a bound.

use std::time::Duration;

use toml::Spanned;

use super::file::{RawBound, RawData};
use super::{At, ConfigFileError};
use crate::retention::DataPolicy;
use crate::wording;

/// What a `[data]` key says: a bound, or `"off"` for none.
enum Bound<T> {
    Off,
    At(T),
}

impl<T> Bound<T> {
    /// `"off"`, or what `parse` reads; `None` when it reads nothing.
    fn read(text: &str, parse: impl Fn(&str) -> Option<T>) -> Option<Self> {
        match text.trim() {
            "off" => Some(Self::Off),
            text => parse(text).map(Self::At),
        }
    }

    fn into_option(self) -> Option<T> {
        match self {
            Self::Off => None,
            Self::At(value) => Some(value),
        }
    }
}

/// The policy `[data]` sets, over dsh's defaults.
pub(super) fn resolve_data(raw: RawData, at: &At<'_>) -> Result<DataPolicy, ConfigFileError> {
    let defaults = DataPolicy::default();
    let max_age = match raw.max_age {
        None => defaults.max_age,
        Some(value) => read(&value, "max_age", parse_age, wording::config_bad_age, at)?,
    };
    let max_size = match raw.max_size {
        None => defaults.max_size,
        Some(value) => read(&value, "max_size", parse_size, wording::config_bad_size, at)?,
    };
    Ok(DataPolicy { max_age, max_size })
}

/// One key's bound, or the error that names it.
fn read<T>(
    value: &Spanned<RawBound>,
    key: &str,
    parse: fn(&str) -> Option<T>,
    bad: fn(&str) -> String,
    at: &At<'_>,
) -> Result<Option<T>, ConfigFileError> {
    let text = &value.get_ref().0;
    Bound::read(text, parse)
        .map(Bound::into_option)
        .ok_or_else(|| at(Some(value.span()), format!("data.{key}"), bad(text)))
}

/// An age: a positive whole number and a unit, `d` (days) or any unit a
/// tool's `timeout` takes (`h`, `min`, `s`); at least a second.
fn parse_age(text: &str) -> Option<Duration> {
    let age = match text.strip_suffix('d') {
        Some(days) => {
            let days: u64 = days.trim_end().parse().ok()?;
            Duration::from_secs(days.checked_mul(24 * 3600)?)
        }
        None => text.parse::<dsh_subagent_api::DurationSetting>().ok()?.get(),
    };
    (age.as_secs() > 0).then_some(age)
}

/// A size: a positive whole number and a unit, `B`, `KB`/`MB`/`GB`
/// (powers of 1000) or `KiB`/`MiB`/`GiB` (powers of 1024).
fn parse_size(text: &str) -> Option<u64> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let scale: u64 = match unit.trim_start() {
        "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(scale).filter(|bytes| *bytes > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_sizes_read_with_their_units() {
        assert_eq!(parse_age("30d"), Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("12h"), Some(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("90min"), Some(Duration::from_secs(5400)));
        for bad in ["0d", "d", "30", "-1d", "1.5d", "500ms", "30 days"] {
            assert_eq!(parse_age(bad), None, "{bad}");
        }
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_size("500MB"), Some(500_000_000));
        assert_eq!(parse_size("800 KiB"), Some(800 << 10));
        assert_eq!(parse_size("12B"), Some(12));
        for bad in ["0MB", "1", "1gb", "1.5GiB", "GiB", "99999999999999999999GiB"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }
}
