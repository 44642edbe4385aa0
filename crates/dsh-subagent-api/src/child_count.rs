//! A count of a tree's children, as one checked setting.

use std::num::NonZeroUsize;

use crate::setting::{self, Bounded, Written};
use crate::wording;

/// A count of a delegation tree's children, at least 1: how many run at
/// once (`max_concurrent`), or how many the tree may start over its life
/// (`max_children`). A tree that may run or start no child could only
/// refuse, so there is no zero.
///
/// It checks itself wherever it is read (`FromStr` for a flag,
/// `Deserialize` for a configuration file or JSON), so it travels whole to
/// the limits it sets; every refusal reads as [`InvalidChildCount`] says.
///
/// ```
/// use dsh_subagent_api::ChildCount;
/// assert_eq!(ChildCount::new(8).map(ChildCount::children), Ok(8));
/// assert!(ChildCount::new(0).is_err());
/// assert!("eight".parse::<ChildCount>().is_err());
/// assert_eq!(ChildCount::MIN.children(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChildCount(NonZeroUsize);

impl ChildCount {
    /// One child.
    pub const MIN: Self = Self(NonZeroUsize::MIN);

    /// As many children as this machine can count: in effect, no bound.
    pub const MAX: Self = Self(NonZeroUsize::MAX);

    /// A count of `children`; refused at zero.
    pub fn new(children: usize) -> Result<Self, InvalidChildCount> {
        NonZeroUsize::new(children)
            .map(Self)
            .ok_or_else(|| InvalidChildCount(Written::as_is(children)))
    }

    /// A count of `children`, which cannot be zero.
    pub const fn from_non_zero(children: NonZeroUsize) -> Self {
        Self(children)
    }

    /// The count.
    pub const fn children(self) -> usize {
        self.0.get()
    }
}

/// A value that is no count of children: not a whole number, or zero. Its
/// text is the one refusal of a count of children, however it was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::child_count_refused(&self.0))]
pub struct InvalidChildCount(Written);

impl Bounded for ChildCount {
    type Error = InvalidChildCount;

    fn from_whole(value: u64) -> Result<Self, InvalidChildCount> {
        usize::try_from(value)
            .ok()
            .and_then(NonZeroUsize::new)
            .map(Self)
            .ok_or_else(|| InvalidChildCount(Written::as_is(value)))
    }

    fn refuse(written: Written) -> InvalidChildCount {
        InvalidChildCount(written)
    }

    fn whole(&self) -> u64 {
        self.children() as u64
    }
}

setting::bounded_setting!(ChildCount);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_refuses_a_child_count_in_one_wording() {
        let json = |value: serde_json::Value| serde_json::from_value::<ChildCount>(value).unwrap_err().to_string();
        let refusals = [
            ChildCount::new(0).unwrap_err().to_string(),
            "0".parse::<ChildCount>().unwrap_err().to_string(),
            "8 children".parse::<ChildCount>().unwrap_err().to_string(),
            json(serde_json::json!(-1)),
            json(serde_json::json!(2.5)),
            json(serde_json::json!("8")),
        ];
        insta::assert_snapshot!("child_count_refused", refusals.join("\n"));
        assert_eq!(" 8 ".parse::<ChildCount>().map(ChildCount::children), Ok(8));
        assert_eq!(
            serde_json::from_value::<ChildCount>(serde_json::json!(1)).ok(),
            Some(ChildCount::MIN)
        );
    }
}
