//! Stable error codes.

/// The stable codes of subagent errors (the service's, the providers' and the
/// control service's): importable, matchable, and what `code()` returns as
/// text. The text of a code never changes; the table of every code is in
/// `docs/errors.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `NO_PROVIDER`: no provider is registered under the name.
    NoProvider,
    /// `DUPLICATE_PROVIDER`: a provider of that name is already registered.
    DuplicateProvider,
    /// `UNSUPPORTED_CAPABILITY`: the request sets a field its provider cannot honour.
    UnsupportedCapability,
    /// `INVALID_MAX_DEPTH`: `maxDepth` is not a non-negative safe integer.
    InvalidMaxDepth,
    /// `INVALID_OUTPUT_SCHEMA`: the output schema is not an object schema.
    InvalidOutputSchema,
    /// `INVALID_DEPTH`: the parent's depth is invalid, or the child's would overflow.
    InvalidDepth,
    /// `DEPTH_EXCEEDED`: the child would be deeper than `maxDepth`.
    DepthExceeded,
    /// `ABORTED`: the start was cancelled before a child was published.
    Aborted,
    /// `ROLLBACK_FAILED`: a failed start could not release what it had created.
    RollbackFailed,
    /// `FAILED`: the provider failed without a code of its own.
    Failed,
    /// `NOT_DELIVERED`: a message to a continuable child was refused.
    NotDelivered,
    /// `NOT_RESUMABLE`: the child cannot be continued (unknown, no descriptor, or its provider cannot resume).
    NotResumable,
    /// `UNAUTHORIZED`: the child belongs to another agent.
    Unauthorized,
    /// `OWNERSHIP_CONFLICT`: the child is already owned by another activation or registry.
    OwnershipConflict,
    /// `PERSISTENCE_UNAVAILABLE`: continuable children need a durable store, and none is configured.
    PersistenceUnavailable,
    /// `RELEASE_ABANDONED`: a run's release did not finish within the grace
    /// after a cancellation, and its holder stopped waiting.
    ReleaseAbandoned,
    /// `QUEUE_FULL`: the delegation tree's queue of calls waiting for a slot is full; nothing started.
    QueueFull,
    /// `CHILD_LIMIT`: the delegation tree has started as many children as it may; nothing started.
    ChildLimit,
    /// `TOKEN_BUDGET_SPENT`: a token budget the child would spend from is spent; nothing started.
    TokenBudgetSpent,
}

impl ErrorCode {
    /// The code as text, e.g. `NO_PROVIDER`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NoProvider => "NO_PROVIDER",
            Self::DuplicateProvider => "DUPLICATE_PROVIDER",
            Self::UnsupportedCapability => "UNSUPPORTED_CAPABILITY",
            Self::InvalidMaxDepth => "INVALID_MAX_DEPTH",
            Self::InvalidOutputSchema => "INVALID_OUTPUT_SCHEMA",
            Self::InvalidDepth => "INVALID_DEPTH",
            Self::DepthExceeded => "DEPTH_EXCEEDED",
            Self::Aborted => "ABORTED",
            Self::RollbackFailed => "ROLLBACK_FAILED",
            Self::Failed => "FAILED",
            Self::NotDelivered => "NOT_DELIVERED",
            Self::NotResumable => "NOT_RESUMABLE",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::OwnershipConflict => "OWNERSHIP_CONFLICT",
            Self::PersistenceUnavailable => "PERSISTENCE_UNAVAILABLE",
            Self::ReleaseAbandoned => "RELEASE_ABANDONED",
            Self::QueueFull => "QUEUE_FULL",
            Self::ChildLimit => "CHILD_LIMIT",
            Self::TokenBudgetSpent => "TOKEN_BUDGET_SPENT",
        }
    }
}

crate::error_code_text!(ErrorCode);

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
