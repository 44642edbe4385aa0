//! Stable error codes.

use std::fmt;
use std::hash::Hash;

crate::error_codes! {
    /// The stable codes of subagent errors (the service's, the providers' and the
    /// control service's): importable, matchable, and what `code()` returns as
    /// text. The text of a code never changes; the table of every code is in
    /// `docs/errors.md`.
    pub enum ErrorCode {
        /// `NO_PROVIDER`: no provider is registered under the name.
        NoProvider => "NO_PROVIDER",
        /// `DUPLICATE_PROVIDER`: a provider of that name is already registered.
        DuplicateProvider => "DUPLICATE_PROVIDER",
        /// `UNSUPPORTED_CAPABILITY`: the request sets a field its provider cannot honour.
        UnsupportedCapability => "UNSUPPORTED_CAPABILITY",
        /// `INVALID_MAX_DEPTH`: `maxDepth` is not a non-negative safe integer.
        InvalidMaxDepth => "INVALID_MAX_DEPTH",
        /// `INVALID_OUTPUT_SCHEMA`: the output schema is not an object schema.
        InvalidOutputSchema => "INVALID_OUTPUT_SCHEMA",
        /// `INVALID_DEPTH`: the parent's depth is invalid, or the child's would overflow.
        InvalidDepth => "INVALID_DEPTH",
        /// `DEPTH_EXCEEDED`: the child would be deeper than `maxDepth`.
        DepthExceeded => "DEPTH_EXCEEDED",
        /// `ABORTED`: the start was cancelled before a child was published.
        Aborted => "ABORTED",
        /// `ROLLBACK_FAILED`: a failed start could not release what it had created.
        RollbackFailed => "ROLLBACK_FAILED",
        /// `FAILED`: the provider failed without a code of its own.
        Failed => "FAILED",
        /// `NOT_DELIVERED`: a message to a continuable child was refused.
        NotDelivered => "NOT_DELIVERED",
        /// `NOT_RESUMABLE`: the child cannot be continued (unknown, no descriptor, or its provider cannot resume).
        NotResumable => "NOT_RESUMABLE",
        /// `UNAUTHORIZED`: the child belongs to another agent.
        Unauthorized => "UNAUTHORIZED",
        /// `OWNERSHIP_CONFLICT`: the child is already owned by another activation or registry.
        OwnershipConflict => "OWNERSHIP_CONFLICT",
        /// `PERSISTENCE_UNAVAILABLE`: continuable children need a durable store, and none is configured.
        PersistenceUnavailable => "PERSISTENCE_UNAVAILABLE",
        /// `RELEASE_ABANDONED`: a run's release did not finish within the grace
        /// after a cancellation, and its holder stopped waiting.
        ReleaseAbandoned => "RELEASE_ABANDONED",
        /// `QUEUE_FULL`: the delegation tree's queue of calls waiting for a slot is full; nothing started.
        QueueFull => "QUEUE_FULL",
        /// `CHILD_LIMIT`: the delegation tree has started as many children as it may; nothing started.
        ChildLimit => "CHILD_LIMIT",
        /// `TOKEN_BUDGET_SPENT`: a token budget the child would spend from is spent; nothing started.
        TokenBudgetSpent => "TOKEN_BUDGET_SPENT",
        /// `COST_BUDGET_SPENT`: the delegation tree's money budget is spent; nothing started.
        CostBudgetSpent => "COST_BUDGET_SPENT",
    }
}

/// The stable code of a [`SubagentError`](crate::SubagentError), typed: one
/// of the seam's own, or the code a provider gave a failure of its own
/// ([`SubagentError::failed_with_code`](crate::SubagentError::failed_with_code)),
/// which the seam cannot list. Match on it to tell the seam's codes apart;
/// [`as_str`](Self::as_str) is its text, for the wire and the logs.
///
/// A failure given one of the seam's codes as text (as the control service
/// hands its refusals on) reads as that code; two codes are equal when their
/// texts are.
///
/// ```
/// use dsh_subagent_api::{ErrorCode, SubagentCode, SubagentError};
/// let refused = SubagentError::NoProvider { name: "acp".into() };
/// assert!(matches!(refused.code(), SubagentCode::Seam(ErrorCode::NoProvider)));
/// let own = SubagentError::failed_with_code("the child could not start", "ACP_SPAWN_FAILED");
/// assert_eq!(own.code(), SubagentCode::Provider("ACP_SPAWN_FAILED"));
/// assert_eq!(own.code(), "ACP_SPAWN_FAILED");
/// ```
#[derive(Clone, Copy, Debug)]
pub enum SubagentCode<'a> {
    /// One of the seam's codes.
    Seam(ErrorCode),
    /// A code a provider chose for a failure of its own, which is none of
    /// the seam's.
    Provider(&'a str),
}

impl<'a> SubagentCode<'a> {
    /// The code as text, e.g. `NO_PROVIDER`.
    pub fn as_str(&self) -> &'a str {
        match *self {
            Self::Seam(code) => code.as_str(),
            Self::Provider(code) => code,
        }
    }
}

impl From<ErrorCode> for SubagentCode<'_> {
    fn from(code: ErrorCode) -> Self {
        Self::Seam(code)
    }
}

crate::code_text!(SubagentCode; ErrorCode);

/// One shape for every crate's error codes. Each crate that raises codes
/// keeps its own enum of them (`ErrorCode`; `dsh-harness`'s
/// `BuildErrorCode`), declared with [`error_codes!`](crate::error_codes!), and every such enum
/// is a `StableCode`: a `Copy`, `#[non_exhaustive]` enum whose variants each
/// have one text that never changes, listed in [`StableCode::ALL`], read
/// back from text with [`StableCode::from_text`], and compared equal to
/// that text (see [`error_code_text!`](crate::error_code_text!)).
pub trait StableCode: Copy + fmt::Debug + fmt::Display + Eq + Hash + Send + Sync + 'static {
    /// Every code of this enum, in the order declared.
    const ALL: &'static [Self];

    /// The code as text, e.g. `NO_PROVIDER`.
    fn as_str(self) -> &'static str;

    /// The code whose text is `text`, if this enum has one.
    fn from_text(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|code| code.as_str() == text)
    }
}

/// Declares a crate's error codes in the one shape they all share
/// ([`StableCode`]): a `Copy`, `#[non_exhaustive]` enum, each variant given
/// with its text, with `as_str` as a `const fn` and the text conversions of
/// [`error_code_text!`](crate::error_code_text!).
///
/// ```
/// use dsh_subagent_api::StableCode;
///
/// dsh_subagent_api::error_codes! {
///     /// My provider's codes.
///     pub enum MyCode {
///         /// `MY_BUSY`: the provider is busy.
///         Busy => "MY_BUSY",
///     }
/// }
/// assert_eq!(MyCode::Busy.as_str(), "MY_BUSY");
/// assert_eq!(MyCode::from_text("MY_BUSY"), Some(MyCode::Busy));
/// assert_eq!(MyCode::ALL, [MyCode::Busy]);
/// assert_eq!(MyCode::Busy, "MY_BUSY");
/// ```
#[macro_export]
macro_rules! error_codes {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident => $text:literal
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        $vis enum $name {
            $(
                $(#[$variant_meta])*
                $variant,
            )+
        }

        impl $name {
            /// The code as text; it never changes.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }

        impl $crate::StableCode for $name {
            const ALL: &'static [Self] = &[$(Self::$variant,)+];

            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
        }

        $crate::error_code_text!($name);
    };
}

/// Implements the text conversions every error-code enum shares, for a
/// `Copy` enum with a `const fn as_str(self) -> &'static str`: `Display`,
/// `AsRef<str>`, `Into<Cow<'static, str>>` (what `SubagentError::failed_with_code`
/// and `ToolError::with_code` take), and `==` with `str` / `&str` both ways,
/// so a caller can compare a code they received as text with the symbol.
///
/// Each crate that raises codes declares its own `ErrorCode` enum and calls
/// this once; a provider author can do the same for codes of their own.
///
/// ```
/// #[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// enum MyCode { Busy }
/// impl MyCode {
///     const fn as_str(self) -> &'static str { match self { Self::Busy => "MY_BUSY" } }
/// }
/// dsh_subagent_api::error_code_text!(MyCode);
/// assert_eq!(MyCode::Busy.to_string(), "MY_BUSY");
/// assert_eq!(MyCode::Busy, "MY_BUSY");
/// assert_eq!("MY_BUSY", MyCode::Busy);
/// ```
#[macro_export]
macro_rules! error_code_text {
    ($code:ty) => {
        impl ::std::fmt::Display for $code {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::convert::AsRef<str> for $code {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl ::std::convert::From<$code> for ::std::borrow::Cow<'static, str> {
            fn from(code: $code) -> Self {
                ::std::borrow::Cow::Borrowed(code.as_str())
            }
        }

        impl ::std::cmp::PartialEq<str> for $code {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl ::std::cmp::PartialEq<&str> for $code {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl ::std::cmp::PartialEq<$code> for str {
            fn eq(&self, other: &$code) -> bool {
                self == other.as_str()
            }
        }

        impl ::std::cmp::PartialEq<$code> for &str {
            fn eq(&self, other: &$code) -> bool {
                *self == other.as_str()
            }
        }
    };
}

/// Implements the text conversions of a typed code that may borrow its text
/// (a code with a lifetime, such as [`SubagentCode`], whose variants wrap
/// `ErrorCode` enums and a code given as text), for a type `Code<'a>` with
/// `fn as_str(&self) -> &'a str`: `Display`, equality by text (with itself,
/// with `str` and `&str` both ways, and with each `ErrorCode` enum listed
/// after the `;`), a hash that agrees with it, and `Into<Cow<'static, str>>`
/// (the text, copied), so a typed code reads and compares exactly as its
/// text.
#[macro_export]
macro_rules! code_text {
    ($code:ident $(; $($other:ty),+)?) => {
        impl ::std::fmt::Display for $code<'_> {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::cmp::PartialEq for $code<'_> {
            fn eq(&self, other: &Self) -> bool {
                self.as_str() == other.as_str()
            }
        }

        impl ::std::cmp::Eq for $code<'_> {}

        impl ::std::hash::Hash for $code<'_> {
            fn hash<H: ::std::hash::Hasher>(&self, state: &mut H) {
                self.as_str().hash(state);
            }
        }

        impl ::std::convert::From<$code<'_>> for ::std::borrow::Cow<'static, str> {
            fn from(code: $code<'_>) -> Self {
                ::std::borrow::Cow::Owned(code.as_str().to_owned())
            }
        }

        impl ::std::cmp::PartialEq<str> for $code<'_> {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl ::std::cmp::PartialEq<&str> for $code<'_> {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl ::std::cmp::PartialEq<$code<'_>> for str {
            fn eq(&self, other: &$code<'_>) -> bool {
                self == other.as_str()
            }
        }

        impl ::std::cmp::PartialEq<$code<'_>> for &str {
            fn eq(&self, other: &$code<'_>) -> bool {
                *self == other.as_str()
            }
        }

        $($(
            impl ::std::cmp::PartialEq<$other> for $code<'_> {
                fn eq(&self, other: &$other) -> bool {
                    self.as_str() == other.as_str()
                }
            }
        )+)?
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SubagentError;

    #[test]
    fn every_seam_code_reads_back_from_its_text_and_no_two_share_one() {
        let mut texts = std::collections::HashSet::new();
        for &code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_text(code.as_str()), Some(code));
            assert!(texts.insert(code.as_str()), "{code} twice");
        }
        assert_eq!(ErrorCode::from_text("ACP_SPAWN_FAILED"), None);
    }

    #[test]
    fn a_failure_given_a_seam_code_as_text_reads_as_that_code_and_any_other_as_the_provider_s() {
        // The control service hands its refusals on as failures with text codes.
        let handed_on = SubagentError::failed_with_code("not delivered", "NOT_DELIVERED");
        assert!(matches!(handed_on.code(), SubagentCode::Seam(ErrorCode::NotDelivered)));
        let own = SubagentError::failed_with_code("could not spawn", "ACP_SPAWN_FAILED");
        assert!(matches!(own.code(), SubagentCode::Provider("ACP_SPAWN_FAILED")));
        assert!(matches!(
            SubagentError::failed("no code").code(),
            SubagentCode::Seam(ErrorCode::Failed)
        ));
        // Equal by text, in every direction the text conversions offer.
        assert_eq!(SubagentCode::Provider("NOT_DELIVERED"), handed_on.code());
        assert_eq!(own.code(), "ACP_SPAWN_FAILED");
        assert_eq!("ACP_SPAWN_FAILED", own.code());
        assert_eq!(handed_on.code(), ErrorCode::NotDelivered);
        assert_eq!(own.code().to_string(), "ACP_SPAWN_FAILED");
        assert_eq!(std::borrow::Cow::from(own.code()), "ACP_SPAWN_FAILED");
    }
}
