//! Stable error codes.

/// The stable codes of dsh-tools' errors (the tool registry's and every tool's
/// shared ones): importable, matchable, and what `code()` returns as text. The
/// text of a code never changes; the table of every code is in
/// `docs/errors.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `INVALID_ARGUMENTS`: the call's arguments are malformed; the message names the field.
    InvalidArguments,
    /// `NO_CALLING_AGENT`: the tool acts for its caller, and the call named none.
    NoCallingAgent,
    /// `UNKNOWN_TOOL`: no tool of that name is registered.
    UnknownTool,
    /// `ABORTED_BEFORE_DISPATCH`: the call was cancelled before the tool ran.
    AbortedBeforeDispatch,
    /// `TOOL_PANICKED`: the tool panicked; the panic became this error.
    ToolPanicked,
}

impl ErrorCode {
    /// The code as text, e.g. `INVALID_ARGUMENTS`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArguments => "INVALID_ARGUMENTS",
            Self::NoCallingAgent => "NO_CALLING_AGENT",
            Self::UnknownTool => "UNKNOWN_TOOL",
            Self::AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH",
            Self::ToolPanicked => "TOOL_PANICKED",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for ErrorCode {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<ErrorCode> for std::borrow::Cow<'static, str> {
    fn from(code: ErrorCode) -> Self {
        std::borrow::Cow::Borrowed(code.as_str())
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ErrorCode> for str {
    fn eq(&self, other: &ErrorCode) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<ErrorCode> for &str {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.as_str()
    }
}
