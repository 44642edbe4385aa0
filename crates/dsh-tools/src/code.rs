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

dsh_subagent_api::error_code_text!(ErrorCode);
