//! Bounded settings: a whole number with a lower bound (a context window,
//! a result budget, a limit of a delegation tree), each one type that checks
//! itself however it is written.
//!
//! A setting type implements [`Bounded`] and gets its readers from here: a
//! command-line flag through [`parse`] (its `FromStr`), a configuration
//! file or JSON through [`deserialize`] (its `Deserialize`). Every reader
//! refuses every value that is not the setting (a number below its bound, a
//! negative or fractional number, a word) with the one error of the type,
//! whose text names [what was written](Written). So the checked value
//! travels whole from where it is read to where it is used, and one refusal
//! reads the same from a flag, `dsh.toml` or a tool's JSON configuration.

use std::fmt;

/// A setting that is a whole number with a lower bound, checked when made.
pub trait Bounded: Sized {
    /// The refusal of a value that is not the setting; its text is the
    /// setting's one wording and names what was written.
    type Error: fmt::Display;

    /// The setting of `value`, or its refusal.
    fn from_whole(value: u64) -> Result<Self, Self::Error>;

    /// The refusal of something written that is no whole number.
    fn refuse(written: Written) -> Self::Error;

    /// The value as a whole number, as it is written back.
    fn whole(&self) -> u64;
}

/// A refused value as it was written, to quote in the refusal: a number
/// as is (`12`, `-1`, `2.5`), a text in quotes (`"8k"`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Written(String);

impl Written {
    /// A number (or `true`, `null`, or the kind of a value such as a
    /// list), written as is.
    pub fn as_is(value: impl fmt::Display) -> Self {
        Self(value.to_string())
    }

    /// A text, quoted.
    pub fn text(value: &str) -> Self {
        Self(format!("{value:?}"))
    }
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A setting from a command-line value: a whole number, spaces around it
/// allowed. A refused number is quoted as is (`-1`, `2.5`), as a
/// configuration file's would be, and any other text in quotes.
///
/// ```
/// use dsh_subagent_api::ContextWindow;
/// assert_eq!("32000".parse::<ContextWindow>().map(|w| w.tokens()), Ok(32_000));
/// assert!("32k".parse::<ContextWindow>().unwrap_err().to_string().ends_with(r#"got "32k""#));
/// ```
pub fn parse<T: Bounded>(text: &str) -> Result<T, T::Error> {
    let number = text.trim();
    match number.parse::<u64>() {
        Ok(value) => T::from_whole(value),
        Err(_) if number.parse::<f64>().is_ok_and(f64::is_finite) => Err(T::refuse(Written::as_is(number))),
        Err(_) => Err(T::refuse(Written::text(text))),
    }
}

/// A setting from a configuration file or JSON: a whole number; anything
/// else is refused with the setting's error.
pub fn deserialize<'de, T: Bounded, D: serde::Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    deserializer.deserialize_any(Visitor(std::marker::PhantomData))
}

/// A setting written back as its whole number.
pub fn serialize<T: Bounded, S: serde::Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(value.whole())
}

/// The reading and writing of a [`Bounded`] setting, the same for every
/// one: `FromStr` for a flag ([`parse`]), serde for a file or JSON
/// ([`deserialize`], [`serialize`]).
macro_rules! bounded_setting {
    ($setting:ty) => {
        impl ::std::str::FromStr for $setting {
            type Err = <$setting as $crate::setting::Bounded>::Error;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                $crate::setting::parse(text)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $setting {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $crate::setting::deserialize(deserializer)
            }
        }

        impl ::serde::Serialize for $setting {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                $crate::setting::serialize(self, serializer)
            }
        }
    };
}
pub(crate) use bounded_setting;

struct Visitor<T>(std::marker::PhantomData<T>);

impl<T: Bounded> Visitor<T> {
    fn refuse<E: serde::de::Error>(written: Written) -> E {
        E::custom(T::refuse(written))
    }
}

impl<'de, T: Bounded> serde::de::Visitor<'de> for Visitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(crate::wording::EXPECTING_WHOLE_NUMBER)
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<T, E> {
        T::from_whole(value).map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<T, E> {
        match u64::try_from(value) {
            Ok(value) => self.visit_u64(value),
            Err(_) => Err(Self::refuse(Written::as_is(value))),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<T, E> {
        Err(Self::refuse(Written::as_is(value)))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<T, E> {
        Err(Self::refuse(Written::text(value)))
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<T, E> {
        Err(Self::refuse(Written::as_is(value)))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<T, E> {
        Err(Self::refuse(Written::as_is("null")))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<T, A::Error> {
        Err(Self::refuse(Written::as_is(crate::wording::WRITTEN_LIST)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<T, A::Error> {
        Err(Self::refuse(Written::as_is(crate::wording::WRITTEN_TABLE)))
    }
}
