//! A span of time as a configuration writes it (`"90s"`, `"500ms"`), as
//! one checked setting.

use std::fmt;
use std::time::Duration;

use crate::wording;

/// A positive span of time, written as a whole number and a unit: `ms`,
/// `s`, `min` (or `m`) or `h` (`"500ms"`, `"90s"`, `"10min"`, `"2h"`; a
/// space before the unit is allowed). One checked setting for every
/// duration of a configuration (a tool's `timeout`, an ACP child's
/// `turn_timeout` and graces): it reads itself from a flag (`FromStr`) and
/// from a configuration file or JSON (`Deserialize`, text only), and every
/// refusal reads as [`InvalidDuration`] says.
///
/// ```
/// use std::time::Duration;
/// use dsh_subagent_api::DurationSetting;
/// assert_eq!("90s".parse::<DurationSetting>().map(Duration::from), Ok(Duration::from_secs(90)));
/// assert_eq!("10 min".parse::<DurationSetting>().map(Duration::from), Ok(Duration::from_secs(600)));
/// assert!("0s".parse::<DurationSetting>().is_err());
/// assert!("90".parse::<DurationSetting>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DurationSetting(Duration);

impl DurationSetting {
    /// The span as a [`Duration`].
    pub const fn get(self) -> Duration {
        self.0
    }

    /// `text` read as a span, or `None`: a whole number, then a unit.
    fn read(text: &str) -> Option<Self> {
        let text = text.trim();
        let split = text.find(|c: char| !c.is_ascii_digit())?;
        let (number, unit) = text.split_at(split);
        let number: u64 = number.parse().ok()?;
        let duration = match unit.trim_start() {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" | "min" => Duration::from_secs(number.checked_mul(60)?),
            "h" => Duration::from_secs(number.checked_mul(3600)?),
            _ => return None,
        };
        (!duration.is_zero()).then_some(Self(duration))
    }
}

impl From<DurationSetting> for Duration {
    fn from(setting: DurationSetting) -> Self {
        setting.0
    }
}

/// Text that is no [`DurationSetting`]; its text is the one refusal of a
/// duration and quotes what was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::duration_refused(.0))]
pub struct InvalidDuration(String);

impl InvalidDuration {
    /// What was written, as it was written.
    pub fn written(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for DurationSetting {
    type Err = InvalidDuration;

    fn from_str(text: &str) -> Result<Self, InvalidDuration> {
        Self::read(text).ok_or_else(|| InvalidDuration(text.to_owned()))
    }
}

impl<'de> serde::Deserialize<'de> for DurationSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Visitor)
    }
}

impl serde::Serialize for DurationSetting {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{}ms", self.0.as_millis()))
    }
}

struct Visitor;

impl serde::de::Visitor<'_> for Visitor {
    type Value = DurationSetting;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(wording::EXPECTING_DURATION)
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<DurationSetting, E> {
        value.parse().map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_refuses_a_duration_in_one_wording() {
        let json =
            |text: &str| serde_json::from_value::<DurationSetting>(serde_json::json!(text)).map_err(|e| e.to_string());
        assert_eq!(json("500ms").map(Duration::from), Ok(Duration::from_millis(500)));
        assert_eq!(json("2h").map(Duration::from), Ok(Duration::from_secs(7200)));
        for bad in [
            "0s",
            "90",
            "ten minutes",
            "1.5s",
            "-1s",
            "90 seconds",
            "99999999999999999999h",
        ] {
            let refusal = bad.parse::<DurationSetting>().unwrap_err().to_string();
            assert_eq!(json(bad), Err(refusal), "{bad}");
        }
        let number = serde_json::from_value::<DurationSetting>(serde_json::json!(600)).unwrap_err();
        insta::assert_snapshot!(
            "duration_refused",
            [
                "ten minutes".parse::<DurationSetting>().unwrap_err().to_string(),
                number.to_string()
            ]
            .join("\n")
        );
    }
}
