//! `[data]`: the bounds on the transcripts kept in the data directory
//! ([`crate::retention`]). Unset keys take dsh's defaults (30 days, 1 GiB);
//! `"off"` lifts a bound.

use std::time::Duration;

use crate::retention::DataPolicy;
use crate::wording;

/// `[data] max_age`: how old a transcript may grow before a sweep removes
/// it, or `"off"` (`None`) for no bound. Checked as it is read, so a bad
/// value is refused at its key, line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MaxAge(pub(crate) Option<Duration>);

/// `[data] max_size`: how many bytes of transcripts are kept, or `"off"`
/// (`None`) for no bound. Checked as it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MaxSize(pub(crate) Option<u64>);

/// One `[data]` bound's reading: `"off"`, or a value `parse` reads, else
/// the refusal `bad` words.
struct BoundVisitor<T> {
    parse: fn(&str) -> Option<T>,
    bad: fn(&str) -> String,
}

impl<T> serde::de::Visitor<'_> for BoundVisitor<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(wording::CONFIG_EXPECTING_BOUND)
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Option<T>, E> {
        match text.trim() {
            "off" => Ok(None),
            trimmed => (self.parse)(trimmed)
                .map(Some)
                .ok_or_else(|| E::custom((self.bad)(text))),
        }
    }
}

impl<'de> serde::Deserialize<'de> for MaxAge {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let visitor = BoundVisitor {
            parse: parse_age,
            bad: wording::config_bad_age,
        };
        deserializer.deserialize_any(visitor).map(Self)
    }
}

impl<'de> serde::Deserialize<'de> for MaxSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let visitor = BoundVisitor {
            parse: parse_size,
            bad: wording::config_bad_size,
        };
        deserializer.deserialize_any(visitor).map(Self)
    }
}

/// The policy `[data]` sets (its `max_age` and `max_size`, when written),
/// over dsh's defaults.
pub(super) fn resolve_data(max_age: Option<MaxAge>, max_size: Option<MaxSize>) -> DataPolicy {
    let defaults = DataPolicy::default();
    DataPolicy {
        max_age: max_age.map_or(defaults.max_age, |age| age.0),
        max_size: max_size.map_or(defaults.max_size, |size| size.0),
    }
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
